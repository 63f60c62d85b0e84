/*
 * fake_plugin.c - small plugins for the discovery tests, one source built
 * once per variant (tests/tests.mk passes -DFAKE_VARIANT_<NAME>):
 *
 *   VULKAN       "fakevk": a third-party backend of kind VULKAN with one
 *                hardware device; memory ops and fill on malloc'ed memory.
 *   SOFTWARE     "fakesw": the same, but its device is a software device,
 *                and built for ABI 2.1 (before rope's inv_freq).
 *   NODEVICE     "fakenodev": probes fine and finds no device.
 *   WRONGABI     "fakeabi": built for the next ABI major version.
 *   ABIV1        "fakev1": a plugin of ABI 1.0 (before recordings).
 *   NEWERMINOR   "fakenewer": built for a minor version this core lacks.
 *   NOENTRY      exports no gllmk_plugin_entry.
 *   SMALLSTRUCT  "fakesmall": a descriptor with a too-small struct_size.
 *
 * Every variant that loads runs two ops, fill on f32 and i32 only and rope
 * on f32 with rotary_dim 2 and theta's frequencies only, declares those
 * limits through supports(), and compiles recordings of fills into a native
 * form of its own (the captured fills), so the core's ABI v2 paths for those
 * run in `make check` without a GPU. It has no timestamps: timing is
 * host-timed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gllmk/gllmk_plugin.h"

#define FAKE_ABI GLLMK_PLUGIN_ABI_VERSION
#define FAKE_STRUCT_SIZE sizeof(gllmk_plugin)
#define FAKE_DEVICE_FLAGS 0u
#define FAKE_KIND GLLMK_BACKEND_VULKAN

#if defined(FAKE_VARIANT_VULKAN)
#define FAKE_NAME "fakevk"
#elif defined(FAKE_VARIANT_SOFTWARE)
#define FAKE_NAME "fakesw"
#undef FAKE_DEVICE_FLAGS
#define FAKE_DEVICE_FLAGS GLLMK_DEVICE_SOFTWARE
#undef FAKE_ABI
#define FAKE_ABI ((GLLMK_PLUGIN_ABI_MAJOR << 16) | 1u) /* 2.1 */
#elif defined(FAKE_VARIANT_NODEVICE)
#define FAKE_NAME "fakenodev"
#define FAKE_NO_DEVICE_REASON "fake: this test machine has no such device"
#undef FAKE_KIND
#define FAKE_KIND GLLMK_BACKEND_CUDA
#elif defined(FAKE_VARIANT_WRONGABI)
#define FAKE_NAME "fakeabi"
#undef FAKE_ABI
#define FAKE_ABI ((GLLMK_PLUGIN_ABI_MAJOR + 1) << 16)
#elif defined(FAKE_VARIANT_ABIV1)
#define FAKE_NAME "fakev1"
#undef FAKE_ABI
#define FAKE_ABI (1u << 16)
#elif defined(FAKE_VARIANT_NEWERMINOR)
#define FAKE_NAME "fakenewer"
#undef FAKE_ABI
#define FAKE_ABI (GLLMK_PLUGIN_ABI_VERSION + 1)
#elif defined(FAKE_VARIANT_NOENTRY)
#define FAKE_NAME "fakenoentry"
#elif defined(FAKE_VARIANT_SMALLSTRUCT)
#define FAKE_NAME "fakesmall"
#undef FAKE_STRUCT_SIZE
#define FAKE_STRUCT_SIZE 16u
#else
#error "define one FAKE_VARIANT_*"
#endif

static const gllmk_plugin_host *host;

#define FAKE_MAX_CAPTURED 64

/* A native recording: the fill calls captured between record_begin/end. */
struct gllmk_plugin_recording {
  int count;
  gllmk_fill_args calls[FAKE_MAX_CAPTURED];
  gllmk_tensor outs[FAKE_MAX_CAPTURED];
};

struct gllmk_plugin_device {
  int open;
  gllmk_plugin_recording *capture; /* non-NULL while recording */
};

static gllmk_status fake_probe(const gllmk_plugin_host *h, uint32_t *out_count, char *reason,
                               size_t reason_size) {
  host = h;
#ifdef FAKE_NO_DEVICE_REASON
  *out_count = 0;
  snprintf(reason, reason_size, "%s", FAKE_NO_DEVICE_REASON);
#else
  (void)reason;
  (void)reason_size;
  *out_count = 1;
#endif
  return GLLMK_OK;
}

static gllmk_status fake_device_info(uint32_t index, gllmk_device_info *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "Fake device %u", index);
  snprintf(out->arch, sizeof out->arch, "fake");
  out->memory_bytes = 1u << 30;
  out->compute_units = 1;
  out->flags = FAKE_DEVICE_FLAGS;
  return GLLMK_OK;
}

static gllmk_status fake_open(const gllmk_plugin_open_options *options,
                              gllmk_plugin_device **out_device) {
  (void)options;
  gllmk_plugin_device *device = calloc(1, sizeof *device);
  if (device == NULL) return host->fail(GLLMK_ERR_OUT_OF_MEMORY, "fake: out of memory");
  device->open = 1;
  *out_device = device;
  return GLLMK_OK;
}

static void fake_close(gllmk_plugin_device *device) {
  free(device->capture);
  free(device);
}

static gllmk_status fake_synchronize(gllmk_plugin_device *device) {
  (void)device;
  return GLLMK_OK;
}

static gllmk_status fake_alloc(gllmk_plugin_device *device, uint64_t size,
                               gllmk_plugin_memory **out_memory) {
  (void)device;
  void *p = malloc(size);
  if (p == NULL) return host->fail(GLLMK_ERR_OUT_OF_MEMORY, "fake: malloc(%llu) failed",
                                   (unsigned long long)size);
  *out_memory = p;
  return GLLMK_OK;
}

static void fake_free(gllmk_plugin_device *device, gllmk_plugin_memory *memory) {
  (void)device;
  free(memory);
}

static gllmk_status fake_write(gllmk_plugin_device *device, gllmk_plugin_memory *dst,
                               uint64_t offset, const void *src, uint64_t size) {
  (void)device;
  memcpy((char *)dst + offset, src, size);
  return GLLMK_OK;
}

static gllmk_status fake_read(gllmk_plugin_device *device, gllmk_plugin_memory *src,
                              uint64_t offset, void *dst, uint64_t size) {
  (void)device;
  memcpy(dst, (const char *)src + offset, size);
  return GLLMK_OK;
}

static gllmk_status fake_copy(gllmk_plugin_device *device, gllmk_plugin_memory *dst,
                              uint64_t dst_offset, gllmk_plugin_memory *src, uint64_t src_offset,
                              uint64_t size) {
  (void)device;
  memcpy((char *)dst + dst_offset, (const char *)src + src_offset, size);
  return GLLMK_OK;
}

static gllmk_status fake_fill_bytes(gllmk_plugin_device *device, gllmk_plugin_memory *dst,
                                    uint64_t offset, uint64_t size, uint8_t value) {
  (void)device;
  memset((char *)dst + offset, value, size);
  return GLLMK_OK;
}

static gllmk_status fake_supports(gllmk_plugin_device *device, gllmk_op op, const void *args) {
  (void)device;
  const gllmk_fill_args *fill = args;
  if (op == GLLMK_OP_fill && fill->out->dtype != GLLMK_F32 && fill->out->dtype != GLLMK_I32)
    return host->fail(GLLMK_ERR_UNSUPPORTED, "the fake plugin fills f32 and i32 only");
  const gllmk_rope_args *rope = args;
  if (op == GLLMK_OP_rope &&
      (rope->out->dtype != GLLMK_F32 || rope->rotary_dim != 2 || rope->inv_freq != NULL))
    return host->fail(GLLMK_ERR_UNSUPPORTED,
                      "the fake plugin turns f32 with rotary_dim 2 by theta only");
  return GLLMK_OK;
}

/* Element `index` (in elements of 4 bytes) of a tensor's data. */
static void *fake_at(const gllmk_tensor *t, int64_t index) {
  return (char *)gllmk_plugin_tensor_memory(t) + t->offset + (size_t)index * 4u;
}

/* rope on f32 with rotary_dim 2 (declared in fake_supports): the one pair
 * (0, 1) turns by position * theta^0 = position radians, cos and sin by
 * Taylor series after reduction to [-pi, pi] (this file links no libm). */
static gllmk_status fake_rope(gllmk_plugin_device *device, const gllmk_rope_args *args) {
  if (device->capture) return host->fail(GLLMK_ERR_UNSUPPORTED, "fake: rope is not captured");
  const gllmk_tensor *x = args->x, *out = args->out;
  for (int64_t t = 0; t < x->shape[0]; t++) {
    const double two_pi = 6.283185307179586;
    double a = *(const int32_t *)fake_at(args->positions, t * args->positions->strides[0]);
    a -= two_pi * (double)(long long)(a / two_pi + (a < 0 ? -0.5 : 0.5));
    double s = 0.0, c = 0.0, term = 1.0; /* term = a^n / n! */
    for (int n = 0; n < 24; n++, term *= a / n) {
      if (n % 2) s += n % 4 == 1 ? term : -term;
      else c += n % 4 == 0 ? term : -term;
    }
    for (int64_t h = 0; h < x->shape[1]; h++) {
      const float *xr = fake_at(x, t * x->strides[0] + h * x->strides[1]);
      float *o = fake_at(out, t * out->strides[0] + h * out->strides[1]);
      float x0 = xr[0], x1 = xr[1];
      o[0] = (float)(x0 * c - x1 * s);
      o[1] = (float)(x1 * c + x0 * s);
      for (int64_t i = 2; i < x->shape[2]; i++) o[i] = xr[i];
    }
  }
  return GLLMK_OK;
}

/* f32 and i32 only (declared in fake_supports): enough for the tests that
 * run an op on a fake. */
static gllmk_status fake_fill(gllmk_plugin_device *device, const gllmk_fill_args *args) {
  gllmk_plugin_recording *capture = device->capture;
  if (capture) {
    if (capture->count == FAKE_MAX_CAPTURED)
      return host->fail(GLLMK_ERR_UNSUPPORTED, "fake: recording is full");
    capture->outs[capture->count] = *args->out;
    capture->calls[capture->count] = *args;
    capture->calls[capture->count].out = &capture->outs[capture->count];
    capture->count++;
    return GLLMK_OK;
  }
  const gllmk_tensor *out = args->out;
  gllmk_plugin_rows rows = gllmk_plugin_as_rows(out);
  char *base = (char *)gllmk_plugin_tensor_memory(out) + out->offset;
  for (int64_t r = 0; r < rows.rows; r++)
    for (int64_t c = 0; c < rows.cols; c++) {
      void *at = base + (size_t)(r * rows.row_stride + c) * 4u;
      if (out->dtype == GLLMK_F32) {
        memcpy(at, &args->value, 4);
      } else {
        int32_t v = (int32_t)args->value;
        memcpy(at, &v, 4);
      }
    }
  return GLLMK_OK;
}

static gllmk_status fake_record_begin(gllmk_plugin_device *device) {
  device->capture = calloc(1, sizeof *device->capture);
  return device->capture ? GLLMK_OK : host->fail(GLLMK_ERR_OUT_OF_MEMORY, "fake: out of memory");
}

static gllmk_status fake_record_end(gllmk_plugin_device *device, gllmk_plugin_recording **out) {
  *out = device->capture;
  device->capture = NULL;
  return GLLMK_OK;
}

static gllmk_status fake_record_replay(gllmk_plugin_device *device,
                                       gllmk_plugin_recording *recording) {
  for (int i = 0; i < recording->count; i++) {
    gllmk_status status = fake_fill(device, &recording->calls[i]);
    if (status != GLLMK_OK) return status;
  }
  return GLLMK_OK;
}

static void fake_record_free(gllmk_plugin_device *device, gllmk_plugin_recording *recording) {
  (void)device;
  free(recording);
}

static const gllmk_plugin_ops fake_ops = {.fill = fake_fill, .rope = fake_rope};

static const gllmk_plugin fake_plugin = {
    .struct_size = FAKE_STRUCT_SIZE,
    .abi_version = FAKE_ABI,
    .name = FAKE_NAME,
    .kind = FAKE_KIND,
    .version = "9.9.9-fake",
    .probe = fake_probe,
    .device_info = fake_device_info,
    .open = fake_open,
    .close = fake_close,
    .synchronize = fake_synchronize,
    .mem_alloc = fake_alloc,
    .mem_free = fake_free,
    .mem_write = fake_write,
    .mem_read = fake_read,
    .mem_copy = fake_copy,
    .mem_fill = fake_fill_bytes,
    .ops = &fake_ops,
    .ops_size = sizeof fake_ops,
    .supports = fake_supports,
    .record_begin = fake_record_begin,
    .record_end = fake_record_end,
    .record_replay = fake_record_replay,
    .record_free = fake_record_free,
};

#ifdef FAKE_VARIANT_NOENTRY
/* Looks like a plugin but lacks the entry symbol. */
GLLMK_PLUGIN_EXPORT const gllmk_plugin *gllmk_plugin_entry_v2(void);
GLLMK_PLUGIN_EXPORT const gllmk_plugin *gllmk_plugin_entry_v2(void) { return &fake_plugin; }
#else
GLLMK_PLUGIN_EXPORT const gllmk_plugin *gllmk_plugin_entry(void);
GLLMK_PLUGIN_EXPORT const gllmk_plugin *gllmk_plugin_entry(void) { return &fake_plugin; }
#endif
