/*
 * gllmk-generate - runs a model on the device from prompt token ids: loads a
 * Hugging Face model directory (or random weights of a known shape made on
 * the device), prefills a batch of identical prompts, decodes the batch
 * together, prints the generated ids and reports load, prefill, time to
 * first token and decode speed against the weight-bytes bandwidth limit
 * measured in the same run. `--json` for scripts.
 */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gllmk/gllmk.h"
#include "gllmk/gllmk_model.h"
#include "bench/trace.h"

/* --logits-out writes host floats as they are: the file format is little-endian. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "--logits-out needs a little-endian host");

#define PROGRAM "gllmk-generate"
#define MIB (1024.0 * 1024.0)

enum {
  DEFAULT_PROMPT_LEN = 16,
  DEFAULT_MAX_NEW = 32,
  /* Cache blocks are asked for explicitly so that the per-sequence rounding
   * below matches what the session allocates. */
  CACHE_BLOCK_TOKENS = 16,
  COPY_REPS = 5,
  PROGRESS_WIDTH = 30,
  MAX_BATCH = 1 << 16,
  MAX_TOKENS = 1 << 24, /* --prompt-len, --max-new, --max-batch-tokens */
};

/* The copy that measures bandwidth: far larger than any cache, and at most
 * a sixteenth of device memory in between (two buffers of it are needed). */
#define COPY_MIN_BYTES (64ull << 20)
#define COPY_MAX_BYTES (1ull << 30)
/* An idle GPU drops its clock and takes up to a second of work to climb
 * back (tools/bench/gllmk-bench.c); a cpu is up to speed far sooner. */
#define COPY_WARM_UP_SECONDS 1.0
#define COPY_WARM_UP_SECONDS_CPU 0.3
/* Fixed, so that a default prompt is the same on every run and backend. */
#define PROMPT_SEED 0x9e3779b97f4a7c15ull

#define MAX_TP 16 /* gllmk_model_load_parallel's limit */

typedef struct options {
  const char *model_dir, *synthetic, *backend, *logits_out, *trace;
  int32_t dtype; /* -1: the checkpoint's */
  uint64_t seed_weights;
  int32_t *prompt_ids; /* NULL: prompt_len ids drawn from a fixed PRNG */
  uint32_t prompt_len, batch, max_new;
  gllmk_sampling sampling; /* seed is the first sequence's */
  uint64_t cache_tokens;
  uint32_t max_batch_tokens; /* 0: the session's default */
  uint32_t tp;               /* tensor-parallel ranks, one device each */
  int json, quiet;
} options;

/* Everything one run owns; generator_free releases it on every path. */
typedef struct generator {
  const options *o;
  gllmk_context *ctx;          /* rank 0's */
  gllmk_context *ranks[MAX_TP]; /* --tp: every rank's (ranks[0] = ctx) */
  uint32_t devices;            /* distinct devices the ranks run on */
  gllmk_trace *trace;          /* --trace: every op of the run */
  gllmk_model *model;
  gllmk_session *session;
  gllmk_device_info device;
  gllmk_model_info info;
  uint32_t batch, prompt_len, max_new, max_batch_tokens;
  int32_t *prompt;             /* [prompt_len] */
  uint32_t *seqs;              /* [batch] session sequence ids */
  gllmk_sampling *sampling;    /* [batch] */
  gllmk_seq_input *inputs;     /* [batch] one forward's inputs */
  int32_t *generated;          /* [max_new][batch], the layout of --logits-out */
  /* --logits-out: one step's logits as f32 on the device and on the host. */
  FILE *logits_file;
  gllmk_buffer *logits_buffer;
  gllmk_tensor logits_f32;     /* [batch, vocab] */
  float *logits_host;
  /* Measured. */
  uint64_t copy_bytes;
  double copy_gbps, prefill_seconds, decode_seconds;
  double all_reduce_us; /* --tp: one all-reduce of a decode step's [batch, hidden] */
  double step_all_reduce_ms; /* --tp: a step's 2 x layers of them, recorded (NAN: not native) */
  uint32_t recordings;  /* decode recordings the session made (0: call by call) */
} generator;

/* The figures reported, derived once from what was measured (NAN when
 * there is nothing to divide by, e.g. no decode step with --max-new 1). */
typedef struct figures {
  double load_gbps, prefill_tokens, prefill_tokens_per_s, ttft_ms;
  double decode_tokens, decode_tokens_per_s, limit_tokens_per_s, pct_of_limit;
} figures;

/* ------------------------------------------------------------ errors */

static void report_failure(const char *reason, const char *format, va_list args) {
  fputs(PROGRAM ": ", stderr);
  vfprintf(stderr, format, args);
  fprintf(stderr, ": %s\n", reason);
}

/* Prints "gllmk-generate: <what>: <gllmk_last_error()>" and returns -1. */
static int __attribute__((format(printf, 1, 2))) fail(const char *format, ...) {
  const char *reason = gllmk_last_error(); /* before anything else can change it */
  va_list args;
  va_start(args, format);
  report_failure(reason, format, args);
  va_end(args);
  return -1;
}

/* The same for failures outside gllmk (files, host memory). */
static int __attribute__((format(printf, 2, 3)))
fail_host(const char *reason, const char *format, ...) {
  va_list args;
  va_start(args, format);
  report_failure(reason, format, args);
  va_end(args);
  return -1;
}

/* ----------------------------------------------------------- options */

static void usage(FILE *out) {
  fputs("usage: " PROGRAM " (--model DIR | --synthetic tiny|llama3.2-1b|llama3-8b|qwen2.5-7b)\n"
        "   [--backend NAME] [--dtype f32|f16|bf16] [--seed-weights N]\n"
        "   [--prompt-ids 1,2,3 | --prompt-len N] [--batch B] [--max-new N]\n"
        "   [--temperature T] [--top-k K] [--top-p P] [--min-p M] [--seed S]\n"
        "   [--cache-tokens N] [--max-batch-tokens N] [--tp N]\n"
        "   [--json] [--logits-out FILE] [--trace FILE] [--quiet] [--help]\n"
        "\n"
        "Generates --max-new tokens for each of B copies of one prompt (default: 16\n"
        "fixed pseudo-random ids) and reports load, prefill, time to first token and\n"
        "decode speed, the last against the weight-bytes limit: copy bandwidth\n"
        "measured in the same run over the bytes of weights one decode step reads.\n"
        "Temperature 0 (the default) is greedy; sequence i samples with seed S + i.\n"
        "--dtype defaults to the checkpoint's (bf16 for --synthetic). --logits-out\n"
        "writes little-endian float32 [max_new, batch, vocab]: the logits each\n"
        "generated token came from. --trace writes a Chrome trace (Perfetto,\n"
        "chrome://tracing) of every op with its device time, by phase (load,\n"
        "prefill, decode step N).\n"
        "--max-batch-tokens defaults to the whole prompt (up to 8192 tokens; a batch's\n"
        "prompts packed up to 4096), at least 512.\n"
        "--tp N splits the model over N devices of the backend (tensor parallelism:\n"
        "cuda through NCCL, one GPU each; cpu: N contexts through a loopback); the\n"
        "limit then counts every device's copy bandwidth, and one all-reduce of a\n"
        "decode step is timed.\n"
        "Exit status: 0 on success, 1 on an error, 2 on bad usage.\n",
        out);
}

/* An unsigned decimal integer no larger than `max`; 0, or -1 if it is not one. */
static int parse_uint(const char *text, uint64_t max, uint64_t *out) {
  char *end;
  if (!isdigit((unsigned char)*text)) return -1; /* strtoull takes "-1" and " 1" */
  errno = 0;
  unsigned long long value = strtoull(text, &end, 10);
  if (errno || *end || value > max) return -1;
  *out = value;
  return 0;
}

static int parse_u32(const char *text, uint32_t min, uint32_t max, uint32_t *out) {
  uint64_t value;
  if (parse_uint(text, max, &value) || value < min) return -1;
  *out = (uint32_t)value;
  return 0;
}

/* A finite number in [lo, hi]; 0, or -1 if it is not one. */
static int parse_float(const char *text, double lo, double hi, float *out) {
  char *end;
  errno = 0;
  double value = strtod(text, &end);
  if (end == text || *end || errno || !(value >= lo && value <= hi)) return -1;
  *out = (float)value;
  return 0;
}

static int parse_dtype(const char *text, int32_t *out) {
  static const gllmk_dtype floats[] = {GLLMK_F32, GLLMK_F16, GLLMK_BF16};
  for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++)
    if (strcmp(text, gllmk_dtype_name(floats[i])) == 0) {
      *out = (int32_t)floats[i];
      return 0;
    }
  return -1;
}

/* "1,2,3" into a new array; ids are checked against the vocabulary by the
 * library, here only that they are non-negative int32. 0, or -1. */
static int parse_prompt_ids(const char *text, options *o) {
  size_t count = 1;
  for (const char *p = text; *p; p++) count += *p == ',';
  if (count > MAX_TOKENS) return -1;
  free(o->prompt_ids);
  o->prompt_ids = malloc(count * sizeof *o->prompt_ids);
  if (!o->prompt_ids) return -1;
  const char *p = text;
  for (size_t i = 0; i < count; i++) {
    char id[16];
    size_t length = strcspn(p, ",");
    uint64_t value;
    if (length == 0 || length >= sizeof id) return -1;
    memcpy(id, p, length);
    id[length] = '\0';
    if (parse_uint(id, INT32_MAX, &value)) return -1;
    o->prompt_ids[i] = (int32_t)value;
    p += length + 1;
  }
  o->prompt_len = (uint32_t)count;
  return 0;
}

enum {
  OPT_MODEL = 256, OPT_SYNTHETIC, OPT_BACKEND, OPT_DTYPE, OPT_SEED_WEIGHTS, OPT_PROMPT_IDS,
  OPT_PROMPT_LEN, OPT_BATCH, OPT_MAX_NEW, OPT_TEMPERATURE, OPT_TOP_K, OPT_TOP_P, OPT_MIN_P,
  OPT_SEED, OPT_CACHE_TOKENS, OPT_MAX_BATCH_TOKENS, OPT_JSON, OPT_LOGITS_OUT, OPT_QUIET, OPT_HELP,
  OPT_TRACE, OPT_TP,
};

/* Applies one option with a value; 0, or -1 if the value is bad. */
static int set_option(options *o, int opt, const char *value) {
  uint64_t top_k;
  switch (opt) {
  case OPT_MODEL: o->model_dir = value; return 0;
  case OPT_SYNTHETIC: o->synthetic = value; return 0;
  case OPT_BACKEND: o->backend = value; return 0;
  case OPT_LOGITS_OUT: o->logits_out = value; return 0;
  case OPT_TRACE: o->trace = value; return 0;
  case OPT_DTYPE: return parse_dtype(value, &o->dtype);
  case OPT_SEED_WEIGHTS: return parse_uint(value, UINT64_MAX, &o->seed_weights);
  case OPT_PROMPT_IDS: return parse_prompt_ids(value, o);
  case OPT_PROMPT_LEN: return parse_u32(value, 1, MAX_TOKENS, &o->prompt_len);
  case OPT_BATCH: return parse_u32(value, 1, MAX_BATCH, &o->batch);
  case OPT_MAX_NEW: return parse_u32(value, 1, MAX_TOKENS, &o->max_new);
  case OPT_TEMPERATURE: return parse_float(value, 0, FLT_MAX, &o->sampling.temperature);
  case OPT_TOP_P: return parse_float(value, 0, 1, &o->sampling.top_p);
  case OPT_MIN_P: return parse_float(value, 0, 1, &o->sampling.min_p);
  case OPT_SEED: return parse_uint(value, UINT64_MAX, &o->sampling.seed);
  case OPT_CACHE_TOKENS: return parse_uint(value, UINT64_MAX / 2, &o->cache_tokens);
  case OPT_MAX_BATCH_TOKENS: return parse_u32(value, 1, MAX_TOKENS, &o->max_batch_tokens);
  case OPT_TP: return parse_u32(value, 1, MAX_TP, &o->tp);
  case OPT_TOP_K:
    if (parse_uint(value, INT32_MAX, &top_k)) return -1;
    o->sampling.top_k = (int32_t)top_k;
    return 0;
  default: return -1;
  }
}

/* 0 to run, 1 to exit successfully (--help), 2 on bad usage. */
static int parse_options(int argc, char **argv, options *o) {
  static const struct option long_options[] = {
      {"model", required_argument, NULL, OPT_MODEL},
      {"synthetic", required_argument, NULL, OPT_SYNTHETIC},
      {"backend", required_argument, NULL, OPT_BACKEND},
      {"dtype", required_argument, NULL, OPT_DTYPE},
      {"seed-weights", required_argument, NULL, OPT_SEED_WEIGHTS},
      {"prompt-ids", required_argument, NULL, OPT_PROMPT_IDS},
      {"prompt-len", required_argument, NULL, OPT_PROMPT_LEN},
      {"batch", required_argument, NULL, OPT_BATCH},
      {"max-new", required_argument, NULL, OPT_MAX_NEW},
      {"temperature", required_argument, NULL, OPT_TEMPERATURE},
      {"top-k", required_argument, NULL, OPT_TOP_K},
      {"top-p", required_argument, NULL, OPT_TOP_P},
      {"min-p", required_argument, NULL, OPT_MIN_P},
      {"seed", required_argument, NULL, OPT_SEED},
      {"cache-tokens", required_argument, NULL, OPT_CACHE_TOKENS},
      {"max-batch-tokens", required_argument, NULL, OPT_MAX_BATCH_TOKENS},
      {"json", no_argument, NULL, OPT_JSON},
      {"logits-out", required_argument, NULL, OPT_LOGITS_OUT},
      {"trace", required_argument, NULL, OPT_TRACE},
      {"tp", required_argument, NULL, OPT_TP},
      {"quiet", no_argument, NULL, OPT_QUIET},
      {"help", no_argument, NULL, OPT_HELP},
      {NULL, 0, NULL, 0},
  };
  int opt, index, prompt_flags = 0;
  while ((opt = getopt_long(argc, argv, "", long_options, &index)) != -1) {
    if (opt == '?') { /* getopt_long has said what was wrong */
      usage(stderr);
      return 2;
    }
    if (opt == OPT_HELP) {
      usage(stdout);
      return 1;
    }
    if (opt == OPT_JSON) o->json = 1;
    else if (opt == OPT_QUIET) o->quiet = 1;
    else if (set_option(o, opt, optarg)) {
      fprintf(stderr, PROGRAM ": invalid value '%s' for --%s\n", optarg, long_options[index].name);
      usage(stderr);
      return 2;
    }
    prompt_flags |= opt == OPT_PROMPT_IDS ? 1 : opt == OPT_PROMPT_LEN ? 2 : 0;
  }
  const char *wrong = NULL;
  if (optind < argc) wrong = "unexpected arguments after the options";
  else if (!o->model_dir == !o->synthetic) wrong = "give exactly one of --model and --synthetic";
  else if (prompt_flags == 3) wrong = "give --prompt-ids or --prompt-len, not both";
  if (wrong) {
    fprintf(stderr, PROGRAM ": %s\n", wrong);
    usage(stderr);
    return 2;
  }
  if (o->dtype < 0 && o->synthetic) o->dtype = GLLMK_BF16;
  return 0;
}

/* ----------------------------------------------------------- helpers */

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* a / b, or NAN when b is not positive (nothing was measured). */
static double ratio(double a, double b) { return b > 0 ? a / b : NAN; }

static uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* ---------------------------------------------------------- progress */

typedef struct progress_bar {
  int drawn;
  int last_permille;
} progress_bar;

/* gllmk_model_progress: one line on stderr, redrawn when a tenth of a
 * percent more has been uploaded (not on every chunk). */
static void progress_draw(void *data, uint64_t done, uint64_t total) {
  progress_bar *bar = data;
  int permille = total ? (int)(1000.0 * (double)done / (double)total) : 1000;
  if (bar->drawn && permille == bar->last_permille) return;
  char cells[PROGRESS_WIDTH + 1];
  int filled = permille * PROGRESS_WIDTH / 1000;
  for (int i = 0; i < PROGRESS_WIDTH; i++) cells[i] = i < filled ? '#' : '.';
  cells[PROGRESS_WIDTH] = '\0';
  fprintf(stderr, "\r\033[Kloading [%s] %5.1f%%  %.2f / %.2f GB", cells, permille / 10.0,
          (double)done / 1e9, (double)total / 1e9);
  bar->drawn = 1;
  bar->last_permille = permille;
}

static void progress_clear(const progress_bar *bar) {
  if (bar->drawn) fputs("\r\033[K", stderr);
}

/* ------------------------------------------------------------- setup */

/* Rank r on device r of the backend; where it has fewer devices (the cpu),
 * on device 0 beside the others. */
static int open_rank(generator *g, uint32_t r) {
  gllmk_context_options rank_options = {.backend = r ? gllmk_context_backend(g->ctx) : g->o->backend,
                                   .device_index = r};
  if (gllmk_context_create(&rank_options, &g->ranks[r]) == GLLMK_OK) {
    g->devices++;
    return 0;
  }
  rank_options.device_index = 0;
  if (gllmk_context_create(&rank_options, &g->ranks[r])) return fail("cannot create rank %u's context", r);
  return 0;
}

static int open_context(generator *g) {
  for (uint32_t r = 0; r < g->o->tp; r++) {
    if (open_rank(g, r)) return -1;
    g->ctx = g->ranks[0];
  }
  if (gllmk_context_device_info(g->ctx, &g->device)) return fail("cannot read the device's info");
  if (g->o->trace && !(g->trace = gllmk_trace_open(g->ctx, g->o->trace, PROGRAM)))
    return -1; /* gllmk_trace_open said why */
  return 0;
}

/* Best of COPY_REPS synchronized device-to-device copies after a warm-up,
 * counting the bytes read and written. */
static gllmk_status time_copy(generator *g, gllmk_buffer *dst, gllmk_buffer *src) {
  int cpu = strcmp(gllmk_context_backend(g->ctx), "cpu") == 0;
  double warm_up = cpu ? COPY_WARM_UP_SECONDS_CPU : COPY_WARM_UP_SECONDS;
  double start = now_seconds(), best = INFINITY;
  gllmk_status status;
  do {
    if ((status = gllmk_buffer_copy(dst, 0, src, 0, g->copy_bytes)) ||
        (status = gllmk_synchronize(g->ctx)))
      return status;
  } while (now_seconds() - start < warm_up);
  for (int rep = 0; rep < COPY_REPS; rep++) {
    double t0 = now_seconds();
    if ((status = gllmk_buffer_copy(dst, 0, src, 0, g->copy_bytes)) ||
        (status = gllmk_synchronize(g->ctx)))
      return status;
    best = fmin(best, now_seconds() - t0);
  }
  g->copy_gbps = ratio(2.0 * (double)g->copy_bytes, best) / 1e9;
  return GLLMK_OK;
}

/* Measured before the weights are loaded, so that its two buffers never
 * compete with them for device memory. */
static int measure_copy(generator *g) {
  uint64_t size = g->device.memory_bytes / 16;
  g->copy_bytes = size < COPY_MIN_BYTES   ? COPY_MIN_BYTES
                  : size > COPY_MAX_BYTES ? COPY_MAX_BYTES
                                          : size;
  gllmk_buffer *src = NULL, *dst = NULL;
  /* Both written first so that no page is first touched while timed. */
  gllmk_status status = gllmk_buffer_alloc(g->ctx, g->copy_bytes, &src);
  if (!status) status = gllmk_buffer_alloc(g->ctx, g->copy_bytes, &dst);
  if (!status) status = gllmk_buffer_fill(src, 0, g->copy_bytes, 0x3c);
  if (!status) status = gllmk_buffer_fill(dst, 0, g->copy_bytes, 0);
  if (!status) status = time_copy(g, dst, src);
  int rc = status ? fail("cannot measure the copy bandwidth (%.0f MiB)",
                         (double)g->copy_bytes / MIB)
                  : 0;
  gllmk_buffer_free(src);
  gllmk_buffer_free(dst);
  return rc;
}

static int load_model(generator *g) {
  const options *o = g->o;
  progress_bar bar = {0};
  gllmk_trace_phase(g->trace, "load");
  gllmk_model_load_options load = {
      .struct_size = sizeof load,
      .path = o->model_dir,
      .synthetic = o->synthetic,
      .seed = o->seed_weights,
      .dtype = o->dtype,
      .progress = !o->quiet && isatty(STDERR_FILENO) ? progress_draw : NULL,
      .progress_data = &bar,
  };
  gllmk_status status = gllmk_model_load_parallel(g->ranks, o->tp, &load, &g->model);
  progress_clear(&bar);
  if (status) return fail("cannot load the model");
  if (gllmk_model_get_info(g->model, &g->info)) return fail("cannot read the model's info");
  return 0;
}

/* The prompt: --prompt-ids, or prompt_len ids drawn from [1, vocab) by a
 * fixed PRNG (0 is left out: it is often a special token). */
static int make_prompt(generator *g) {
  g->prompt = malloc((size_t)g->prompt_len * sizeof *g->prompt);
  if (!g->prompt) return fail_host("out of host memory", "cannot hold the prompt");
  if (g->o->prompt_ids) {
    memcpy(g->prompt, g->o->prompt_ids, (size_t)g->prompt_len * sizeof *g->prompt);
    return 0;
  }
  uint64_t state = PROMPT_SEED, range = g->info.vocab > 1 ? g->info.vocab - 1 : 1;
  for (uint32_t i = 0; i < g->prompt_len; i++)
    g->prompt[i] = (int32_t)(1 + splitmix64(&state) % range);
  return 0;
}

/* A cache for every sequence's prompt and generated tokens, each sequence
 * rounded up to whole blocks (or --cache-tokens if larger). */
/* --max-batch-tokens when not given: a whole prompt per forward up to 8192
 * tokens (prefill's attention then needs no cache, and its matmuls have
 * rows enough for the tensor cores), prompts of a batch packed up to 4096,
 * never fewer than 512. */
static uint32_t default_batch_tokens(uint32_t prompt_len, uint32_t batch) {
  uint64_t all = (uint64_t)prompt_len * batch, cap = prompt_len > 4096 ? prompt_len : 4096;
  if (cap > 8192) cap = 8192;
  uint64_t tokens = all < cap ? all : cap;
  return tokens < 512 ? 512 : (uint32_t)tokens;
}

static int create_session(generator *g) {
  uint64_t per_sequence = (uint64_t)g->prompt_len + g->max_new;
  per_sequence = (per_sequence + CACHE_BLOCK_TOKENS - 1) / CACHE_BLOCK_TOKENS * CACHE_BLOCK_TOKENS;
  uint64_t needed = per_sequence * g->batch;
  gllmk_session_options session = {
      .struct_size = sizeof session,
      .cache_tokens = g->o->cache_tokens > needed ? g->o->cache_tokens : needed,
      .block_size = CACHE_BLOCK_TOKENS,
      .max_sequences = g->batch,
      .max_batch_tokens = g->o->max_batch_tokens ? g->o->max_batch_tokens
                                                 : default_batch_tokens(g->prompt_len, g->batch),
  };
  gllmk_session_stats stats;
  if (gllmk_session_create(g->model, &session, &g->session))
    return fail("cannot create a session of %llu cache tokens",
                (unsigned long long)session.cache_tokens);
  if (gllmk_session_get_stats(g->session, &stats)) return fail("cannot read the session's stats");
  g->max_batch_tokens = stats.max_batch_tokens;
  for (uint32_t i = 0; i < g->batch; i++) {
    if (gllmk_session_seq_add(g->session, &g->seqs[i])) return fail("cannot add sequence %u", i);
    g->sampling[i] = g->o->sampling;
    g->sampling[i].seed = g->o->sampling.seed + i;
  }
  return 0;
}

/* The f32 buffer the logits of one step are converted into (--logits-out). */
static int prepare_logits(generator *g) {
  uint64_t count = (uint64_t)g->batch * g->info.vocab;
  int64_t shape[2] = {g->batch, g->info.vocab};
  g->logits_host = malloc(count * sizeof *g->logits_host);
  if (!g->logits_host) return fail_host("out of host memory", "cannot hold the logits");
  if (gllmk_buffer_alloc(g->ctx, count * sizeof(float), &g->logits_buffer))
    return fail("cannot allocate the logits buffer");
  if (gllmk_tensor_make(g->logits_buffer, 0, GLLMK_F32, 2, shape, &g->logits_f32))
    return fail("cannot make the logits tensor");
  return 0;
}

static int host_arrays(generator *g) {
  g->seqs = calloc(g->batch, sizeof *g->seqs);
  g->sampling = calloc(g->batch, sizeof *g->sampling);
  g->inputs = calloc(g->batch, sizeof *g->inputs);
  g->generated = calloc((size_t)g->batch * g->max_new, sizeof *g->generated);
  if (!g->seqs || !g->sampling || !g->inputs || !g->generated)
    return fail_host("out of host memory", "cannot hold the tokens");
  return 0;
}

static int setup(generator *g) {
  const options *o = g->o;
  g->batch = o->batch;
  g->max_new = o->max_new;
  g->prompt_len = o->prompt_len;
  if (o->logits_out && !(g->logits_file = fopen(o->logits_out, "wb")))
    return fail_host(strerror(errno), "cannot open %s", o->logits_out);
  if (host_arrays(g) || open_context(g) || measure_copy(g) || load_model(g) || make_prompt(g) ||
      create_session(g))
    return -1;
  return o->logits_out ? prepare_logits(g) : 0;
}

static void generator_free(generator *g) {
  if (g->trace) gllmk_trace_close(g->trace); /* a failed run: what was traced */
  gllmk_buffer_free(g->logits_buffer);
  gllmk_session_destroy(g->session);
  gllmk_model_free(g->model);
  for (uint32_t r = 0; r < MAX_TP; r++) gllmk_context_destroy(g->ranks[r]);
  if (g->logits_file) fclose(g->logits_file);
  free(g->logits_host);
  free(g->prompt);
  free(g->seqs);
  free(g->sampling);
  free(g->inputs);
  free(g->generated);
}

/* -------------------------------------------------------- generation */

/* One forward over g->inputs[0 .. count), which belong to sequences
 * first .. first + count - 1. `final`: every input ends its sequence's
 * tokens for this step, so the next tokens are sampled into row `step` of
 * g->generated (and the logits kept for --logits-out); a prefill chunk that
 * is not the prompt's last needs neither, so nothing crosses the bus. */
static int forward(generator *g, uint32_t first, uint32_t count, uint32_t step, int final) {
  gllmk_tensor logits;
  int keep_logits = final && g->logits_file;
  if (gllmk_session_forward(g->session, g->inputs, count, final ? &g->sampling[first] : NULL,
                            keep_logits ? &logits : NULL,
                            final ? &g->generated[(size_t)step * g->batch + first] : NULL))
    return step ? fail("decode step %u", step) : fail("prefill");
  if (!keep_logits) return 0;
  /* Converted on the device now: the tensor is valid until the next forward. */
  gllmk_tensor rows;
  if (gllmk_tensor_slice(&g->logits_f32, 0, first, count, 1, &rows) ||
      gllmk_copy(g->ctx, &(gllmk_copy_args){.out = &rows, .src = &logits}))
    return fail("cannot convert the logits of step %u to f32", step);
  return 0;
}

/* Appends one step's logits [batch, vocab] to the --logits-out file. */
static int write_logits(generator *g) {
  size_t count = (size_t)g->batch * g->info.vocab;
  if (!g->logits_file) return 0;
  if (gllmk_buffer_read(g->logits_buffer, 0, g->logits_host, count * sizeof(float)))
    return fail("cannot read the logits");
  if (fwrite(g->logits_host, sizeof(float), count, g->logits_file) != count)
    return fail_host(strerror(errno), "cannot write %s", g->o->logits_out);
  return 0;
}

/* Every sequence's prompt, in forwards of at most max_batch_tokens tokens:
 * whole prompts packed together while they fit; a longer prompt in chunks,
 * each a forward of its own. Samples generated token 0. */
static int prefill(generator *g) {
  uint32_t length = g->prompt_len, limit = g->max_batch_tokens;
  if (length <= limit) {
    uint32_t per_forward = limit / length;
    for (uint32_t first = 0; first < g->batch; first += per_forward) {
      uint32_t count = min_u32(per_forward, g->batch - first);
      for (uint32_t i = 0; i < count; i++)
        g->inputs[i] = (gllmk_seq_input){g->seqs[first + i], length, g->prompt};
      if (forward(g, first, count, 0, 1)) return -1;
    }
    return 0;
  }
  for (uint32_t s = 0; s < g->batch; s++)
    for (uint32_t offset = 0; offset < length; offset += limit) {
      uint32_t chunk = min_u32(limit, length - offset);
      g->inputs[0] = (gllmk_seq_input){g->seqs[s], chunk, g->prompt + offset};
      if (forward(g, s, 1, 0, offset + chunk == length)) return -1;
    }
  return 0;
}

/* Generated token `step` of every sequence from token step - 1: all
 * sequences in one forward (in groups of max_batch_tokens if the batch is
 * larger). */
static int decode_step(generator *g, uint32_t step) {
  const int32_t *previous = &g->generated[(size_t)(step - 1) * g->batch];
  for (uint32_t first = 0; first < g->batch; first += g->max_batch_tokens) {
    uint32_t count = min_u32(g->max_batch_tokens, g->batch - first);
    for (uint32_t i = 0; i < count; i++)
      g->inputs[i] = (gllmk_seq_input){g->seqs[first + i], 1, &previous[first + i]};
    if (forward(g, first, count, step, 1)) return -1;
  }
  return 0;
}

/* --tp: the mean time of one all-reduce of a decode step's [batch, hidden]
 * (in place, as the model's), over back-to-back calls on every rank. */
#define ALL_REDUCE_REPS 200

static gllmk_status run_all_reduces(generator *g, gllmk_communicator *comm,
                                    const gllmk_tensor *x, int reps) {
  gllmk_status status = GLLMK_OK;
  for (int i = 0; i < reps && status == GLLMK_OK; i++) status = gllmk_all_reduce(comm, x, x);
  for (uint32_t r = 0; r < g->o->tp && status == GLLMK_OK; r++) status = gllmk_synchronize(g->ranks[r]);
  return status;
}

/* A decode step's all-reduces (two per layer) recorded on every rank and
 * replayed, as the step's own recordings hold them: their time without
 * host launches. Backends without native recordings leave it NAN. */
#define RECORDED_REPS 20

static gllmk_status replay_all(generator *g, gllmk_recording *const *recordings, int reps) {
  gllmk_status status = GLLMK_OK;
  for (int i = 0; i < reps; i++)
    for (uint32_t r = 0; r < g->o->tp && status == GLLMK_OK; r++)
      status = gllmk_recording_replay(recordings[r]);
  for (uint32_t r = 0; r < g->o->tp && status == GLLMK_OK; r++) status = gllmk_synchronize(g->ranks[r]);
  return status;
}

static gllmk_status time_recorded(generator *g, gllmk_communicator *comm, const gllmk_tensor *x) {
  uint32_t tp = g->o->tp, begun = 0;
  gllmk_recording *recordings[MAX_TP] = {NULL};
  gllmk_status status = GLLMK_OK;
  g->step_all_reduce_ms = NAN;
  while (begun < tp && (status = gllmk_recording_begin(g->ranks[begun])) == GLLMK_OK) begun++;
  for (uint32_t i = 0; i < 2 * g->info.layers && status == GLLMK_OK; i++)
    status = gllmk_all_reduce(comm, x, x);
  gllmk_status recorded = status;
  for (uint32_t r = 0; r < begun; r++) {
    status = gllmk_recording_end(g->ranks[r], &recordings[r]);
    if (recorded == GLLMK_OK) recorded = status;
  }
  bool native = recorded == GLLMK_OK;
  for (uint32_t r = 0; r < tp && native; r++) native = gllmk_recording_is_native(recordings[r]);
  status = native ? replay_all(g, recordings, 3) : GLLMK_OK; /* warm-up */
  double start = now_seconds();
  if (native && status == GLLMK_OK) status = replay_all(g, recordings, RECORDED_REPS);
  if (native && status == GLLMK_OK)
    g->step_all_reduce_ms = (now_seconds() - start) * 1e3 / RECORDED_REPS;
  for (uint32_t r = 0; r < tp; r++) gllmk_recording_free(recordings[r]);
  return status;
}

static int time_all_reduce(generator *g) {
  uint32_t tp = g->o->tp;
  const int64_t shape[2] = {g->batch, g->info.hidden};
  gllmk_buffer *buffers[MAX_TP] = {NULL};
  gllmk_tensor x[MAX_TP];
  gllmk_communicator *comm = NULL;
  uint64_t bytes = (uint64_t)g->batch * g->info.hidden * gllmk_dtype_size((gllmk_dtype)g->info.dtype);
  gllmk_status status = gllmk_communicator_create(g->ranks, tp, &comm);
  for (uint32_t r = 0; r < tp && status == GLLMK_OK; r++) {
    status = gllmk_buffer_alloc(g->ranks[r], bytes, &buffers[r]);
    if (status == GLLMK_OK) status = gllmk_buffer_fill(buffers[r], 0, bytes, 0);
    if (status == GLLMK_OK)
      status = gllmk_tensor_make(buffers[r], 0, (gllmk_dtype)g->info.dtype, 2, shape, &x[r]);
  }
  if (status == GLLMK_OK) status = run_all_reduces(g, comm, x, 20); /* warm-up */
  double start = now_seconds();
  if (status == GLLMK_OK) status = run_all_reduces(g, comm, x, ALL_REDUCE_REPS);
  g->all_reduce_us = (now_seconds() - start) * 1e6 / ALL_REDUCE_REPS;
  if (status == GLLMK_OK) status = time_recorded(g, comm, x);
  int rc = status ? fail("cannot time an all-reduce") : 0;
  for (uint32_t r = 0; r < tp; r++) gllmk_buffer_free(buffers[r]);
  gllmk_communicator_free(comm);
  return rc;
}

/* Every decode step in one gllmk_session_decode: the device runs them back
 * to back, each step's tokens feeding the next there. Taken unless each
 * step's logits (--logits-out) or ops (--trace) are wanted, or the batch
 * takes more than one forward a step. */
static bool decodes_at_once(const generator *g) {
  return !g->logits_file && !g->trace && g->batch <= g->max_batch_tokens && g->max_new > 1;
}

static int decode_at_once(generator *g) {
  for (uint32_t i = 0; i < g->batch; i++) g->inputs[i] = (gllmk_seq_input){g->seqs[i], 1, &g->generated[i]};
  double start = now_seconds();
  if (gllmk_session_decode(g->session, g->inputs, g->batch, g->sampling, g->max_new - 1,
                           &g->generated[g->batch]))
    return fail("decode");
  g->decode_seconds = now_seconds() - start;
  return 0;
}

/* Prefill, then decode to max_new tokens per sequence (no EOS). Every
 * call that samples has synchronized when it returns, so the clock reads
 * bracket finished work; writing --logits-out is left out of the times. */
static int generate(generator *g) {
  double start = now_seconds();
  gllmk_trace_phase(g->trace, "prefill");
  if (prefill(g)) return -1;
  g->prefill_seconds = now_seconds() - start;
  if (write_logits(g)) return -1;
  if (decodes_at_once(g) && decode_at_once(g)) return -1;
  for (uint32_t step = 1; step < g->max_new && !decodes_at_once(g); step++) {
    char phase[32];
    snprintf(phase, sizeof phase, "decode step %u", step);
    gllmk_trace_phase(g->trace, phase);
    start = now_seconds();
    if (decode_step(g, step)) return -1;
    g->decode_seconds += now_seconds() - start;
    if (write_logits(g)) return -1;
  }
  if (g->logits_file) {
    int closed = fclose(g->logits_file);
    g->logits_file = NULL;
    if (closed) return fail_host(strerror(errno), "cannot write %s", g->o->logits_out);
  }
  gllmk_session_stats stats;
  if (gllmk_session_get_stats(g->session, &stats)) return fail("cannot read the session's stats");
  g->recordings = stats.recordings;
  return g->o->tp > 1 ? time_all_reduce(g) : 0;
}

/* ------------------------------------------------------------ report */

/* Decode is bound by reading the weights once per step for the whole
 * batch: at copy bandwidth, copy_gbps / step_weight_bytes steps per second,
 * each giving `batch` tokens. */
static void derive(const generator *g, figures *f) {
  f->load_gbps = ratio((double)g->info.weight_bytes, g->info.load_seconds) / 1e9;
  f->prefill_tokens = (double)g->batch * g->prompt_len;
  f->prefill_tokens_per_s = ratio(f->prefill_tokens, g->prefill_seconds);
  f->ttft_ms = g->prefill_seconds * 1e3;
  /* Token 0 of each sequence comes from the prefill. */
  f->decode_tokens = (double)g->batch * (g->max_new - 1);
  f->decode_tokens_per_s = ratio(f->decode_tokens, g->decode_seconds);
  /* Split over several devices, each reads its share from its own memory. */
  f->limit_tokens_per_s =
      ratio(g->copy_gbps * 1e9 * g->devices, (double)g->info.step_weight_bytes) * g->batch;
  f->pct_of_limit = 100.0 * ratio(f->decode_tokens_per_s, f->limit_tokens_per_s);
}

static void print_text(const generator *g, const figures *f) {
  const gllmk_model_info *info = &g->info;
  printf("backend: %s, device: %s\n", gllmk_context_backend(g->ctx), g->device.name);
  printf("model: %s%s, %s, vocab %u, %u layers, %.2f GB of weights "
         "(%.2f GB read per decode step)\n",
         info->model_type, g->o->synthetic ? " (synthetic)" : "",
         gllmk_dtype_name((gllmk_dtype)info->dtype), info->vocab, info->layers,
         (double)info->weight_bytes / 1e9, (double)info->step_weight_bytes / 1e9);
  printf("prompt: %u tokens, batch %u, %u new tokens per sequence\n", g->prompt_len, g->batch,
         g->max_new);
  for (uint32_t s = 0; s < g->batch; s++) {
    printf("seq %u:", s);
    for (uint32_t t = 0; t < g->max_new; t++) printf(" %d", g->generated[(size_t)t * g->batch + s]);
    putchar('\n');
  }
  printf("load: %.3f s, %.2f GB/s\n", info->load_seconds, f->load_gbps);
  printf("prefill: %.0f tokens in %.2f ms, %.1f tokens/s\n", f->prefill_tokens,
         g->prefill_seconds * 1e3, f->prefill_tokens_per_s);
  printf("time to first token: %.2f ms%s\n", f->ttft_ms,
         g->batch > 1 ? " (the whole batch's prefill: every sequence's first token)" : "");
  if (g->max_new > 1)
    printf("decode: %.0f tokens (%u steps x %u sequences) in %.2f ms, %.1f tokens/s, %s\n",
           f->decode_tokens, g->max_new - 1, g->batch, g->decode_seconds * 1e3,
           f->decode_tokens_per_s,
           g->recordings ? "steps replayed from a recording" : "steps run call by call");
  else
    printf("decode: none (--max-new 1: the only token comes from the prefill)\n");
  printf("copy bandwidth: %.1f GB/s (gllmk_buffer_copy, %.0f MiB device to device, "
         "read + write bytes, best of %d)\n",
         g->copy_gbps, (double)g->copy_bytes / MIB, COPY_REPS);
  printf("decode limit: %.1f tokens/s (copy bandwidth%s / step weight bytes x batch %u)",
         f->limit_tokens_per_s, g->devices > 1 ? " x devices" : "", g->batch);
  if (g->max_new > 1) printf(", decode at %.1f%% of it", f->pct_of_limit);
  putchar('\n');
  if (g->o->tp > 1) {
    printf("tensor parallel: %u ranks on %u device(s); all-reduce of [%u, %u] %s: %.1f us a call "
           "from the host",
           g->o->tp, g->devices, g->batch, info->hidden, gllmk_dtype_name((gllmk_dtype)info->dtype),
           g->all_reduce_us);
    if (isfinite(g->step_all_reduce_ms))
      printf("; a decode step's %u, recorded: %.3f ms (%.1f us each)", 2 * info->layers,
             g->step_all_reduce_ms, g->step_all_reduce_ms * 1e3 / (2 * info->layers));
    putchar('\n');
  }
}

/* A JSON number, or null for NAN (nothing measured). */
static json_t *json_number(double value) {
  return isfinite(value) ? json_real(value) : json_null();
}

static json_t *json_ids(const int32_t *ids, size_t count, size_t stride) {
  json_t *array = json_array();
  for (size_t i = 0; array && i < count; i++)
    if (json_array_append_new(array, json_integer(ids[i * stride]))) {
      json_decref(array);
      return NULL;
    }
  return array;
}

static json_t *json_tokens(const generator *g) {
  json_t *array = json_array();
  for (uint32_t s = 0; array && s < g->batch; s++)
    if (json_array_append_new(array, json_ids(&g->generated[s], g->max_new, g->batch))) {
      json_decref(array);
      return NULL;
    }
  return array;
}

static int print_json(const generator *g, const figures *f) {
  const gllmk_model_info *info = &g->info;
  json_t *root = json_object();
  int failed = 0;
  if (!root) return fail_host("out of memory", "cannot write the JSON report");
  /* json_object_set_new takes the value even when it fails (NULL included). */
#define PUT(key, value) (failed |= json_object_set_new(root, key, value) != 0)
  PUT("backend", json_string(gllmk_context_backend(g->ctx)));
  PUT("device", json_string(g->device.name));
  PUT("model", json_string(info->model_type));
  PUT("dtype", json_string(gllmk_dtype_name((gllmk_dtype)info->dtype)));
  PUT("vocab", json_integer(info->vocab));
  PUT("prompt", json_ids(g->prompt, g->prompt_len, 1));
  PUT("batch", json_integer(g->batch));
  PUT("tokens", json_tokens(g));
  PUT("load_seconds", json_number(info->load_seconds));
  PUT("load_gbps", json_number(f->load_gbps));
  PUT("weight_bytes", json_integer((json_int_t)info->weight_bytes));
  PUT("step_weight_bytes", json_integer((json_int_t)info->step_weight_bytes));
  PUT("prefill_tokens", json_integer((json_int_t)f->prefill_tokens));
  PUT("prefill_tokens_per_s", json_number(f->prefill_tokens_per_s));
  PUT("ttft_ms", json_number(f->ttft_ms));
  PUT("ttft_scope", json_string(g->batch > 1 ? "whole batch prefill" : "sequence"));
  PUT("decode_tokens", json_integer((json_int_t)f->decode_tokens));
  PUT("decode_tokens_per_s", json_number(f->decode_tokens_per_s));
  PUT("copy_method", json_string("gllmk_buffer_copy"));
  PUT("copy_buffer_bytes", json_integer((json_int_t)g->copy_bytes));
  PUT("copy_gbps", json_number(g->copy_gbps));
  PUT("decode_limit_tokens_per_s", json_number(f->limit_tokens_per_s));
  PUT("decode_pct_of_limit", json_number(f->pct_of_limit));
  PUT("decode_recordings", json_integer(g->recordings));
  PUT("tensor_parallel", json_integer(g->o->tp));
  PUT("devices", json_integer(g->devices));
  PUT("all_reduce_us", json_number(g->o->tp > 1 ? g->all_reduce_us : NAN));
  PUT("step_all_reduce_ms", json_number(g->o->tp > 1 ? g->step_all_reduce_ms : NAN));
#undef PUT
  if (!failed) failed = json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(9)) != 0 ||
                        putchar('\n') == EOF;
  json_decref(root);
  return failed ? fail_host("out of memory or output error", "cannot write the JSON report") : 0;
}

int main(int argc, char **argv) {
  options o = {.dtype = -1, .prompt_len = DEFAULT_PROMPT_LEN, .batch = 1, .tp = 1,
               .max_new = DEFAULT_MAX_NEW, .sampling = {.top_p = 1}};
  int rc = parse_options(argc, argv, &o);
  if (rc) {
    free(o.prompt_ids);
    return rc == 1 ? 0 : rc;
  }
  generator g = {.o = &o};
  if (setup(&g) == 0 && generate(&g) == 0) {
    gllmk_trace *trace = g.trace;
    g.trace = NULL;
    if (gllmk_trace_close(trace)) {
      generator_free(&g);
      free(o.prompt_ids);
      return 1;
    }
    figures f;
    derive(&g, &f);
    rc = o.json ? print_json(&g, &f) : (print_text(&g, &f), 0);
  } else {
    rc = -1;
  }
  generator_free(&g);
  free(o.prompt_ids);
  return rc ? 1 : 0;
}
