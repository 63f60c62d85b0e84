/*
 * cpu_plugin.c - the cpu backend's descriptor and entry point
 * (gllmk_plugin_entry): probe, device, host memory, device-raised errors,
 * timing, and the op table of the family files' entry points (ops.h).
 *
 * Ops run synchronously on the calling thread and the device's worker pool,
 * so "queued work" is always finished when an entry point returns.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
#elif defined(__aarch64__)
#include <sys/auxv.h>
#endif

#include "cpu_internal.h"
#include "cpu_kernels.h"
#include "cpu_pool.h"
#include "cpu_rows.h"
#include "ops.h"

#define CPU_PLUGIN_VERSION "0.1.0"
#define CPU_ALIGNMENT 64

/* Set once, by the first probe, and read-only afterwards (see cpu_probe). */
const gllmk_plugin_host *cpu_host;
cpu_features cpu_has;

/* ------------------------------------------------------------ features */

/* Test builds only (plugins/cpu/tests.mk): the plugin again under another
 * name, using no instruction set above GLLMK_CPU_TEST_ISA (x86_64 2:
 * AVX-512 without BF16, 1: AVX2, 0: none; aarch64 1: NEON without BF16,
 * 0: none; 3: all the machine has), so that a machine with AVX-512 BF16 (or
 * an Arm CPU with BF16) also runs the conformance suite on the kernels other
 * machines get. */
#ifdef GLLMK_CPU_TEST_ISA
#define CPU_PLUGIN_NAME GLLMK_CPU_TEST_NAME
static void cap_features(cpu_features *has) {
  if (GLLMK_CPU_TEST_ISA < 2) has->avx512f = has->avx512bw = has->avx512vl = 0;
  if (GLLMK_CPU_TEST_ISA < 1) has->avx2 = has->fma = has->f16c = has->neon = 0;
  if (GLLMK_CPU_TEST_ISA < 3) has->avx512bf16 = has->bf16 = 0;
}
#else
#define CPU_PLUGIN_NAME "cpu"
static void cap_features(cpu_features *has) { (void)has; }
#endif

#if defined(__x86_64__)
static uint64_t read_xcr0(void) {
  uint32_t low, high;
  __asm__ volatile("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
  return ((uint64_t)high << 32) | low;
}

static void detect_features(cpu_features *has) {
  memset(has, 0, sizeof *has);
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return;
  int osxsave = (ecx >> 27) & 1, avx = (ecx >> 28) & 1;
  if (!osxsave || !avx) return;
  /* The OS must save the YMM state (XCR0 bits 1-2), and for AVX-512 also
   * the opmask and ZMM state (bits 5-7). */
  uint64_t xcr0 = read_xcr0();
  int os_avx = (xcr0 & 0x6) == 0x6;
  int os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;
  if (!os_avx) return;
  has->fma = (ecx >> 12) & 1;
  has->f16c = (ecx >> 29) & 1;
  if (__get_cpuid_max(0, NULL) < 7) return;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  has->avx2 = (ebx >> 5) & 1;
  if (os_avx512) {
    has->avx512f = (ebx >> 16) & 1;
    has->avx512bw = (ebx >> 30) & 1;
    has->avx512vl = (ebx >> 31) & 1;
    uint32_t max_subleaf = eax;
    if (has->avx512f && max_subleaf >= 1) {
      __cpuid_count(7, 1, eax, ebx, ecx, edx);
      has->avx512bf16 = (eax >> 5) & 1;
    }
  }
}
#elif defined(__aarch64__)
/* The kernel's hwcaps say what the CPU has and the kernel enables. */
static void detect_features(cpu_features *has) {
  memset(has, 0, sizeof *has);
  unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
  has->neon = (hwcap & HWCAP_ASIMD) != 0;
  has->asimdhp = (hwcap & HWCAP_ASIMDHP) != 0;
  has->asimddp = (hwcap & HWCAP_ASIMDDP) != 0;
  has->bf16 = has->neon && (hwcap2 & HWCAP2_BF16) != 0;
}
#else
static void detect_features(cpu_features *has) { memset(has, 0, sizeof *has); }
#endif

/* "x86_64 avx512 avx512bf16 avx2 fma f16c", "aarch64 asimd asimdhp asimddp bf16"
 * (the names of /proc/cpuinfo) */
static void format_arch(char *text, size_t size) {
#if defined(__x86_64__)
  snprintf(text, size, "x86_64%s%s%s%s%s",
           cpu_has.avx512f && cpu_has.avx512bw && cpu_has.avx512vl ? " avx512" : "",
           cpu_has.avx512bf16 ? " avx512bf16" : "", cpu_has.avx2 ? " avx2" : "",
           cpu_has.fma ? " fma" : "", cpu_has.f16c ? " f16c" : "");
#elif defined(__aarch64__)
  snprintf(text, size, "aarch64%s%s%s%s", cpu_has.neon ? " asimd" : "",
           cpu_has.asimdhp ? " asimdhp" : "", cpu_has.asimddp ? " asimddp" : "",
           cpu_has.bf16 ? " bf16" : "");
#else
  snprintf(text, size, "unknown");
#endif
}

static int online_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}

/* The "model name" line of /proc/cpuinfo, or "cpu". */
static void read_cpu_name(char *name, size_t size) {
  snprintf(name, size, "cpu");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) != 0) continue;
    const char *value = strchr(line, ':');
    if (!value) break;
    value++;
    while (*value == ' ' || *value == '\t') value++;
    size_t length = strcspn(value, "\n");
    while (length > 0 && value[length - 1] == ' ') length--;
    if (length > 0) snprintf(name, size, "%.*s", (int)length, value);
    break;
  }
  fclose(f);
}

/* ------------------------------------------------------------ plugin */

/* The largest cache of cpu0 as sysfs lists it ("32768K"), or 0. sysfs is
 * read rather than sysconf(_SC_LEVEL3_CACHE_SIZE), which some virtual
 * machines report as the host's whole cache. */
static int64_t largest_cache_bytes(void) {
  int64_t largest = 0;
  for (int index = 0; index < 8; index++) {
    char path[64];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    long long size = 0;
    char unit = 0;
    if (fscanf(f, "%lld%c", &size, &unit) >= 1 && size > 0) {
      int64_t bytes = unit == 'K' ? size << 10 : unit == 'M' ? size << 20 : size;
      if (bytes > largest) largest = bytes;
    }
    fclose(f);
  }
  return largest;
}

/* Outputs larger than the last-level cache are streamed past it. The test
 * variant cpu-stream (GLLMK_CPU_TEST_STREAM_ALL) streams every output, so
 * that the conformance suite's small cases run those paths too. */
static void set_stream_threshold(void) {
  int64_t bytes = largest_cache_bytes();
  if (bytes > 0) cpu_stream_threshold = bytes;
#ifdef GLLMK_CPU_TEST_STREAM_ALL
  cpu_stream_threshold = 0;
#endif
}

/* Everything probe finds is found once per load of the plugin: the CPU does
 * not change, and a context's ops read these globals without a lock while
 * another thread creates a context, which probes again (issue 20: rewriting
 * them there made running contexts pick other kernels for a moment, so
 * their results were no longer bitwise reproducible). Only the first host
 * table is kept; every libgllmk passes its own constant one. Readers are
 * ordered after the writes: an op runs on a context, whose creation probed
 * through this lock first. */
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static int probed;

static gllmk_status cpu_probe(const gllmk_plugin_host *host, uint32_t *out_count, char *reason,
                              size_t reason_size) {
  pthread_mutex_lock(&probe_lock);
  if (!probed) {
    cpu_features has;
    detect_features(&has);
    cap_features(&has);
    cpu_has = has;
    cpu_host = host;
    cpu_select_kernels();
    set_stream_threshold();
    probed = 1;
  }
  pthread_mutex_unlock(&probe_lock);
  *out_count = 1;
  if (reason && reason_size) reason[0] = '\0';
  return GLLMK_OK;
}

static gllmk_status cpu_device_info(uint32_t index, gllmk_device_info *info) {
  if (index != 0) return cpu_host->fail(GLLMK_ERR_INVALID_ARGUMENT, "cpu: no device %u", index);
  memset(info, 0, sizeof *info);
  read_cpu_name(info->name, sizeof info->name);
  format_arch(info->arch, sizeof info->arch);
  long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) info->memory_bytes = (uint64_t)pages * (uint64_t)page_size;
  info->compute_units = (uint32_t)online_cores();
  info->flags = GLLMK_DEVICE_UNIFIED_MEMORY;
  return GLLMK_OK;
}

static void cpu_describe(char *text, size_t text_size) {
  const char *isa = cpu_vec == &cpu_vec_portable ? "no SIMD extensions assumed"
#if defined(__x86_64__)
                    : cpu_vec == &cpu_vec_avx512 ? "AVX-512 F/BW/VL, FMA, F16C"
                    : cpu_vec == &cpu_vec_avx512bf16 ? "AVX-512 F/BW/VL/BF16, FMA, F16C"
                                                     : "AVX2, FMA, F16C";
#elif defined(__aarch64__)
                    : cpu_vec == &cpu_vec_neon_bf16 ? "ASIMD with FEAT_BF16"
                                                    : "ASIMD";
#else
                    : "";
#endif
#if defined(__x86_64__)
  snprintf(text, text_size,
           "kernels: %s (%s); outputs of %lld MiB or more are written with non-temporal "
           "stores; one worker pool per context",
           cpu_vec->name, isa, (long long)(cpu_stream_threshold >> 20));
#else
  snprintf(text, text_size, "kernels: %s (%s); one worker pool per context", cpu_vec->name, isa);
#endif
}

static gllmk_status cpu_open(const gllmk_plugin_open_options *options,
                             gllmk_plugin_device **out_device) {
  *out_device = NULL;
  gllmk_plugin_device *device = calloc(1, sizeof *device);
  if (!device) return cpu_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "cpu: out of host memory");
  int threads = options && options->num_threads
                    ? (int)(options->num_threads > 1024 ? 1024 : options->num_threads)
                    : online_cores();
  gllmk_status status = cpu_pool_create(threads, &device->pool);
  if (status != GLLMK_OK) {
    free(device);
    return status;
  }
  device->num_threads = threads;
  *out_device = device;
  return GLLMK_OK;
}

static void cpu_close(gllmk_plugin_device *device) {
  if (!device) return;
  cpu_pool_destroy(device->pool);
  free(device->marks);
  free(device);
}

/* Serializes cpu_raise between worker threads (rare: errors only). */
static pthread_mutex_t raise_mutex = PTHREAD_MUTEX_INITIALIZER;

void cpu_raise(gllmk_plugin_device *device, gllmk_status status, const char *format, ...) {
  pthread_mutex_lock(&raise_mutex);
  if (device->raised_status == GLLMK_OK) {
    device->raised_status = status;
    va_list args;
    va_start(args, format);
    vsnprintf(device->raised_message, sizeof device->raised_message, format, args);
    va_end(args);
  }
  pthread_mutex_unlock(&raise_mutex);
}

static gllmk_status cpu_synchronize(gllmk_plugin_device *device) {
  pthread_mutex_lock(&raise_mutex);
  gllmk_status status = device->raised_status;
  char message[sizeof device->raised_message];
  memcpy(message, device->raised_message, sizeof message);
  device->raised_status = GLLMK_OK;
  device->raised_message[0] = '\0';
  pthread_mutex_unlock(&raise_mutex);
  if (status == GLLMK_OK) return GLLMK_OK;
  return cpu_host->fail(status, "%s", message);
}

/* ------------------------------------------------------------ memory */

static gllmk_status cpu_mem_alloc(gllmk_plugin_device *device, uint64_t size,
                                  gllmk_plugin_memory **out_memory) {
  (void)device;
  *out_memory = NULL;
  if (size > SIZE_MAX - CPU_ALIGNMENT)
    return cpu_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "cpu: cannot allocate %llu bytes",
                          (unsigned long long)size);
  size_t rounded = ((size_t)size + CPU_ALIGNMENT - 1) & ~(size_t)(CPU_ALIGNMENT - 1);
  if (rounded == 0) rounded = CPU_ALIGNMENT;
  gllmk_plugin_memory *memory = malloc(sizeof *memory);
  void *data = memory ? aligned_alloc(CPU_ALIGNMENT, rounded) : NULL;
  if (!data) {
    free(memory);
    return cpu_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "cpu: cannot allocate %llu bytes",
                          (unsigned long long)size);
  }
  *memory = (gllmk_plugin_memory){.data = data, .owned = 1};
  *out_memory = memory;
  return GLLMK_OK;
}

static gllmk_status cpu_mem_import(gllmk_plugin_device *device, uint32_t kind, uint64_t address,
                                   uint64_t size, gllmk_plugin_memory **out_memory) {
  (void)device;
  (void)size;
  if (kind != GLLMK_MEMORY_HOST)
    return cpu_host->fail(GLLMK_ERR_UNSUPPORTED, "cpu: only host memory can be wrapped");
  gllmk_plugin_memory *memory = malloc(sizeof *memory);
  if (!memory) return cpu_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "cpu: out of memory");
  *memory = (gllmk_plugin_memory){.data = (void *)(uintptr_t)address, .owned = 0};
  *out_memory = memory;
  return GLLMK_OK;
}

static gllmk_status cpu_mem_address(gllmk_plugin_device *device, gllmk_plugin_memory *memory,
                                    uint32_t *out_kind, uint64_t *out_address) {
  (void)device;
  *out_kind = GLLMK_MEMORY_HOST;
  *out_address = (uint64_t)(uintptr_t)memory->data;
  return GLLMK_OK;
}

static void cpu_mem_free(gllmk_plugin_device *device, gllmk_plugin_memory *memory) {
  (void)device;
  if (memory && memory->owned) free(memory->data);
  free(memory);
}

/* Byte copies of writes, reads and buffer copies: a large one between
 * ranges that do not overlap runs on every thread of the pool, written past
 * the cache, since one thread's memmove reaches only part of the memory
 * bandwidth (a 256 MiB copy on a 2-core Zen 5: 29-36 GB/s on one thread,
 * 44-56 on both); overlapping ranges keep memmove's order. */
enum { COPY_CHUNK_BYTES = 64 << 10 };

typedef struct bytes_job {
  char *dst;
  const char *src;
  uint64_t size;
  int stream;
} bytes_job;

static void copy_chunks(void *ctx, int64_t begin, int64_t end) {
  const bytes_job *job = ctx;
  const uint64_t from = (uint64_t)begin * COPY_CHUNK_BYTES;
  const uint64_t to = (uint64_t)end * COPY_CHUNK_BYTES < job->size ? (uint64_t)end * COPY_CHUNK_BYTES : job->size;
  cpu_copy_bytes(job->stream, job->dst + from, job->src + from, (size_t)(to - from));
  if (job->stream) cpu_convert->stream_fence();
}

static void copy_bytes(gllmk_plugin_device *device, void *dst, const void *src, uint64_t size) {
  const uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
  if (d < s + size && s < d + size) {
    memmove(dst, src, (size_t)size);
    return;
  }
  bytes_job job = {dst, src, size, cpu_streams((int64_t)size)};
  cpu_parallel_for(device, (int64_t)((size + COPY_CHUNK_BYTES - 1) / COPY_CHUNK_BYTES),
                   CPU_GRAIN_ELEMENTS * sizeof(float) / COPY_CHUNK_BYTES, copy_chunks, &job);
}

static gllmk_status cpu_mem_write(gllmk_plugin_device *device, gllmk_plugin_memory *dst,
                                  uint64_t offset, const void *src, uint64_t size) {
  copy_bytes(device, (char *)dst->data + offset, src, size);
  return GLLMK_OK;
}

static gllmk_status cpu_mem_read(gllmk_plugin_device *device, gllmk_plugin_memory *src,
                                 uint64_t offset, void *dst, uint64_t size) {
  copy_bytes(device, dst, (const char *)src->data + offset, size);
  return GLLMK_OK;
}

static gllmk_status cpu_mem_copy(gllmk_plugin_device *device, gllmk_plugin_memory *dst,
                                 uint64_t dst_offset, gllmk_plugin_memory *src, uint64_t src_offset,
                                 uint64_t size) {
  copy_bytes(device, (char *)dst->data + dst_offset, (const char *)src->data + src_offset, size);
  return GLLMK_OK;
}

static gllmk_status cpu_mem_fill(gllmk_plugin_device *device, gllmk_plugin_memory *dst,
                                 uint64_t offset, uint64_t size, uint8_t value) {
  (void)device;
  memset((char *)dst->data + offset, value, (size_t)size);
  return GLLMK_OK;
}

/* ------------------------------------------------------------ timing */

/* The cpu backend runs each op before its call returns, so a mark is the
 * host clock when it is enqueued. */
static gllmk_status cpu_mark(gllmk_plugin_device *device, uint32_t *out_id) {
  if (device->mark_count == device->mark_capacity) {
    uint32_t capacity = device->mark_capacity ? 2 * device->mark_capacity : 128;
    uint64_t *grown = realloc(device->marks, capacity * sizeof *grown);
    if (!grown) return cpu_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "cpu: out of memory for marks");
    device->marks = grown;
    device->mark_capacity = capacity;
  }
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  device->marks[device->mark_count] = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
  *out_id = device->mark_count++;
  return GLLMK_OK;
}

static gllmk_status cpu_marks_read(gllmk_plugin_device *device, uint32_t count, uint64_t *out_ns) {
  if (count > device->mark_count)
    return cpu_host->fail(GLLMK_ERR_INTERNAL, "cpu: %u marks asked for, %u made", count,
                          device->mark_count);
  memcpy(out_ns, device->marks, count * sizeof *out_ns);
  device->mark_count = 0;
  return GLLMK_OK;
}

/* ------------------------------------------------------------ entry */

static const gllmk_plugin_ops cpu_ops = {
#define GLLMK_OP(name) .name = cpu_##name,
#include "gllmk/gllmk_ops.def"
};

static const gllmk_plugin cpu_plugin = {
    .struct_size = sizeof(gllmk_plugin),
    .abi_version = GLLMK_PLUGIN_ABI_VERSION,
    .name = CPU_PLUGIN_NAME,
    .kind = GLLMK_BACKEND_CPU,
    .version = CPU_PLUGIN_VERSION,
    .probe = cpu_probe,
    .device_info = cpu_device_info,
    .describe = cpu_describe,
    .open = cpu_open,
    .close = cpu_close,
    .synchronize = cpu_synchronize,
    .mem_alloc = cpu_mem_alloc,
    .mem_free = cpu_mem_free,
    .mem_write = cpu_mem_write,
    .mem_read = cpu_mem_read,
    .mem_copy = cpu_mem_copy,
    .mem_fill = cpu_mem_fill,
    .mem_import = cpu_mem_import,
    .mem_address = cpu_mem_address,
    .mark = cpu_mark,
    .marks_read = cpu_marks_read,
    .comm_create = cpu_comm_create,
    .comm_free = cpu_comm_free,
    .all_reduce = cpu_all_reduce,
    .all_gather = cpu_all_gather,
    .ops = &cpu_ops,
    .ops_size = sizeof cpu_ops,
};

GLLMK_PLUGIN_EXPORT const gllmk_plugin *gllmk_plugin_entry(void);
GLLMK_PLUGIN_EXPORT const gllmk_plugin *gllmk_plugin_entry(void) { return &cpu_plugin; }
