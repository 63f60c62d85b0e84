/*
 * bench.h - internals of gllmk-bench, shared by the files in tools/bench/.
 *
 * A benchmark row is a bench_case (one line of the table in bench_cases.c):
 * an op, a dtype and sizes. Its bench_op builds a workload: the host copy of
 * every tensor the call uses, the minimal byte and flop counts, and the
 * functions that run the op and compute float64 reference rows.
 */
#ifndef GLLMK_BENCH_H_
#define GLLMK_BENCH_H_

#include <stddef.h>
#include <stdint.h>

#include <gllmk/gllmk.h>

/* Llama-3-8B, the model the shapes come from. */
enum {
  MODEL_HIDDEN = 4096,
  MODEL_INTERMEDIATE = 14336,
  MODEL_HEADS = 32,
  MODEL_KV_HEADS = 8,
  MODEL_HEAD_DIM = 128,
  MODEL_VOCAB = 128256,
  KV_BLOCK_SIZE = 16,
};

#define MIB (1024.0 * 1024.0)

/* Every tensor that a bandwidth row streams is at least this large: twice
 * the 32 MiB L3 of the reference machine and above a GPU's L2, so the row
 * measures DRAM rather than cache. */
#define DRAM_TENSOR_BYTES (64.0 * MIB)

#define BENCH_MAX_TENSORS 8

typedef enum bench_role {
  ROLE_IN,    /* read by the op: has host contents */
  ROLE_OUT,   /* written by the op */
  ROLE_INOUT, /* read and written (residual, kv cache): has host contents */
} bench_role;

/* How an output is checked. */
typedef enum bench_check {
  CHECK_NONE,
  CHECK_FLOAT,    /* relative norm of the difference, tolerance by dtype */
  CHECK_EXACT,    /* integers: every element equal */
  CHECK_VALIDATE, /* the op's own validity test (sampled tokens) */
} bench_check;

/* What "fraction of ceiling" compares a row with. */
typedef enum bench_ceiling {
  CEILING_NONE,
  CEILING_COPY, /* bandwidth vs gllmk_buffer_copy on the same backend */
  CEILING_PEER, /* speed vs a peer library (OpenBLAS for matmul on cpu) */
} bench_ceiling;

typedef struct bench_tensor {
  const char *name;
  gllmk_dtype dtype;
  int32_t ndim;
  int64_t shape[GLLMK_MAX_DIMS];
  bench_role role;
  bench_check check;
  uint64_t bytes;
  void *host; /* initial contents, raw in `dtype`; NULL for ROLE_OUT */
} bench_tensor;

typedef struct bench_case bench_case;

typedef struct workload {
  const bench_case *bcase;
  uint64_t seed;
  int tensor_count;
  bench_tensor tensors[BENCH_MAX_TENSORS];
  char shape[96];       /* for the table: "[8192, 4096]", "M=1 N=14336 K=4096" */
  double bytes;         /* minimal traffic: inputs read once, outputs written once */
  double flops;         /* 0 when the op has no meaningful flop count */
  bench_ceiling ceiling;
  int sample_rows;      /* rows per output the float64 check computes */
  int32_t *aux;         /* op-specific host data (e.g. an inverse map), or NULL */
} workload;

typedef struct bench_op {
  gllmk_op op;
  /* Fills w (tensors, host data, bytes, flops, shape text); 0 or -1 when
   * host memory ran out. */
  int (*setup)(workload *w);
  gllmk_status (*run)(gllmk_context *ctx, const workload *w, const gllmk_tensor *t);
  /* float64 values of row `row` of output `tensor` (rows = leading dims
   * flattened, row length = last dim); 0 or -1 when host memory ran out. */
  int (*ref_row)(const workload *w, int tensor, int64_t row, double *expect);
  /* For CHECK_VALIDATE outputs: the fraction of bad elements of `raw`. */
  double (*validate)(const workload *w, int tensor, const void *raw);
  /* The shape text of case c without building its workload, for --list and
   * a skipped row; may be NULL (--list then prints m, n, k, and a skipped
   * row's shape reads "-"): needed only by ops with CASE_DEVICE rows. */
  void (*describe)(const bench_case *c, char *text, size_t size);
} bench_op;

/* bench_case.flags */
enum {
  CASE_QUICK = 1,  /* part of --quick */
  /* A device row: too heavy for a cpu (minutes a call on two cores), so the
   * cpu backend skips it, and other backends check it against the float64
   * reference on sampled rows rather than by running it on the cpu backend. */
  CASE_DEVICE = 2,
};

struct bench_case {
  const char *label;      /* first column; --filter matches "label dtype" */
  const bench_op *op;
  gllmk_dtype dtype;      /* the op's float dtype (copy: source) */
  gllmk_dtype dtype2;     /* copy only: destination dtype */
  int64_t m, n, k;        /* sizes, meaning per op (see bench_cases.c) */
  int flags;              /* CASE_QUICK, CASE_DEVICE */
};

/* The matmul tensors, shared with the OpenBLAS peer. */
enum { MATMUL_OUT, MATMUL_A, MATMUL_B };

extern const bench_case bench_cases[];
extern const int bench_case_count;

/* bench_ops_rows.c */
extern const bench_op op_copy, op_add, op_mul_add, op_rmsnorm, op_add_rmsnorm, op_layernorm,
    op_softmax, op_silu, op_gelu, op_add_gelu, op_swiglu, op_rope, op_embedding, op_argmax,
    op_sample;
/* bench_ops_matmul.c */
/* op_attention is causal, op_attention_full the same rows without the mask. */
extern const bench_op op_matmul, op_attention, op_attention_full, op_kv_append,
    op_paged_attention;

/* ------------------------------------------------------ bench_data.c */

double dtype_get(gllmk_dtype dtype, const void *raw, int64_t index);
void dtype_set(gllmk_dtype dtype, void *raw, int64_t index, double value);
/* raw[start .. start+count) as doubles. */
void dtype_get_run(gllmk_dtype dtype, const void *raw, int64_t start, int64_t count,
                   double *out);
const char *dtype_label(gllmk_dtype dtype);
/* Relative-norm tolerance of a check on a tensor of this dtype. */
double dtype_tolerance(gllmk_dtype dtype);
/* `value` rounded to what a tensor of this dtype stores. */
double dtype_round(gllmk_dtype dtype, double value);

int64_t tensor_numel(const bench_tensor *t);
int64_t tensor_cols(const bench_tensor *t);
int64_t tensor_rows(const bench_tensor *t);

/* Declares tensor `index` of w; allocates host memory for IN/INOUT (zeroed).
 * 0, or -1 when host memory ran out. */
int wl_tensor(workload *w, int index, const char *name, gllmk_dtype dtype, bench_role role,
              bench_check check, int32_t ndim, const int64_t *shape);
/* A float input of the case's dtype, uniform in [lo, hi). 0 or -1. */
int wl_input(workload *w, int index, const char *name, int32_t ndim, const int64_t *shape,
             double lo, double hi);
/* A checked float output "out" of the case's dtype. 0 or -1. */
int wl_output(workload *w, int index, int32_t ndim, const int64_t *shape);
/* Uniform random values in [lo, hi), deterministic per workload and tensor. */
void wl_fill_uniform(workload *w, int index, double lo, double hi);
/* A random permutation of 0..count-1 (deterministic per workload and salt). */
void wl_permutation(const workload *w, uint64_t salt, int32_t *perm, int64_t count);
/* Row `row` (last-dim length) of a host tensor as doubles. */
void wl_row(const workload *w, int index, int64_t row, double *out);
/* "[d0, d1, ...]" of tensor `index` into w->shape. */
void wl_shape_text(workload *w, int index);
/* Inputs read once plus outputs written once (INOUT both). */
double wl_default_bytes(const workload *w);
void wl_free(workload *w);
/* Rows of a tensor of `cols` elements so that it is at least
 * DRAM_TENSOR_BYTES, and never fewer than min_rows. */
int64_t dram_rows(int64_t cols, gllmk_dtype dtype, int64_t min_rows);

/* ---------------------------------------------------- bench_timer.c */

#define BENCH_MAX_REPS 1000

typedef struct bench_timing_config {
  double budget_s;  /* aim for this much timed work per row */
  double warm_up_s; /* back-to-back calls before the first timed one */
  int min_reps, max_reps;
} bench_timing_config;

/* Something to time: `call` enqueues (or runs) one repetition on input set
 * `set`, `wait` blocks until everything enqueued has finished. Both return
 * 0 or -1 (with the reason left where the caller can find it). */
typedef struct timer_target {
  int (*call)(void *self, int set);
  int (*wait)(void *self);
  void *self;
  int sets;
} timer_target;

typedef struct timing {
  double median_s;
  int reps, batch;
} timing;

double now_seconds(void);
/* Warm-up, calibration, then reps of `batch` calls each; the median time of
 * one call. 0, or -1 when a call or wait failed. */
int time_target(const timer_target *target, const bench_timing_config *config, timing *out);

/* -------------------------------------------------- bench_openblas.c */

typedef struct openblas openblas;

/* dlopen("libopenblas.so.0") with `threads` threads; NULL with the reason
 * in `error` when it cannot be loaded. */
openblas *openblas_load(int threads, char *error, size_t error_size);
void openblas_unload(openblas *blas);
/* The library's own configuration string ("OpenBLAS 0.3.21 ..."). */
const char *openblas_config(const openblas *blas);
/* Times the f32 matmul of w (sgemm, sgemv for M = 1) over `sets` host copies
 * of its inputs. 0, or -1 when host memory ran out. */
int openblas_time_matmul(openblas *blas, const workload *w, int sets,
                         const bench_timing_config *config, timing *out);

/* ------------------------------------------------------ bench_run.c */

typedef enum row_status {
  ROW_OK,
  ROW_MISMATCH,
  ROW_UNCHECKED,   /* ran, but there was nothing to check it against */
  ROW_UNSUPPORTED, /* the backend does not implement the op: not a failure */
  ROW_SKIPPED,     /* not run on this backend (CASE_DEVICE on the cpu): not a failure */
  ROW_ERROR,
} row_status;

typedef struct bench_result {
  const char *label;
  char dtype[24];
  char shape[96];
  row_status status;
  char message[512]; /* the error, mismatch or why unchecked; "" if none */
  double time_s;     /* median of one call; NAN if not timed */
  int reps, batch, sets;
  double bytes, flops;
  double check_error, tolerance; /* worst output's error and its tolerance; NAN if unchecked */
  const char *ceiling;           /* "copy", "openblas" or NULL */
  double fraction;               /* of that ceiling; NAN if none */
  double peer_time_s;            /* OpenBLAS on the same matmul; NAN if not run */
  const char *peer_name;         /* "cblas_sgemm", "cblas_sgemv"; NULL if none */
  char peer_note[320];           /* "openblas: skipped: <why>" */
} bench_result;

typedef struct bench_env {
  gllmk_context *ctx;     /* the backend measured */
  int is_cpu;             /* checks then use the float64 reference */
  gllmk_context *ref_ctx; /* cpu context that checks another backend, or NULL */
  char ref_error[512];    /* why ref_ctx is NULL */
  double copy_gbps;       /* the copy ceiling; NAN until measured */
  openblas *blas;         /* cpu backend only */
  char blas_error[256];   /* why blas is NULL; "" when it was not wanted */
  int skip_peer;          /* --all-levels: OpenBLAS runs once per row, not per level */
  bench_timing_config timing;
} bench_env;

/* Times gllmk_buffer_copy of `size` bytes and sets env->copy_gbps. */
void bench_measure_copy(bench_env *env, uint64_t size, bench_result *r);
/* Sets up, checks and times one case; `seed` makes its inputs. */
void bench_run_case(bench_env *env, const bench_case *c, uint64_t seed, bench_result *r);
/* r takes the OpenBLAS time of `timed` (the same row on another level) and
 * its speed relative to it. */
void bench_reuse_peer(bench_result *r, const bench_result *timed);
/* "f32", or "f32>bf16" for a cast. */
void case_dtype_text(const bench_case *c, char *text, size_t size);

/* --------------------------------------------------- bench_report.c */

/* threads = 0 leaves the thread count out. */
void report_table_header(const char *backend, const gllmk_device_info *info, int threads,
                         const bench_env *env);
void report_table_row(const bench_result *r);
void report_table_footer(const int counts[ROW_ERROR + 1]);
void report_json_row(const bench_result *r, const char *backend, int first);

/* The recordings row (bench_recording.c): 200 small ops at decode size
 * one by one and replayed; prints its line (or JSON object, after a comma);
 * returns 0 when both ways gave the same bytes. */
int bench_recording(gllmk_context *ctx, int json);

/* --all-levels (bench_levels.c): the rows cases[0 .. case_count) on `best`
 * (the cpu plugin) and on each test variant of it found in variants_dir,
 * one column per level; 1 if a row failed. */
int bench_all_levels(bench_env *best, const gllmk_device_info *best_info, uint32_t threads,
                     const int *cases, int case_count, const char *variants_dir, int json);

#endif /* GLLMK_BENCH_H_ */
