/*
 * gllmk.h - public API of gllmk, a library of GPU kernels for LLM inference.
 *
 * Conventions
 *  - Every fallible call returns a gllmk_status. On failure nothing was
 *    written to any output, and gllmk_last_error() (per thread) says which
 *    call, which argument and what was wrong.
 *  - Results come back through `out_` parameters.
 *  - The library never prints, never aborts and reads no environment
 *    variable. The backend is chosen automatically (CUDA > ROCm > Metal >
 *    Vulkan > CPU) unless gllmk_context_options says otherwise.
 *  - Work is enqueued in order on the context's queue. gllmk_synchronize()
 *    waits for it and reports errors the device raised since the last call.
 *    gllmk_buffer_read() synchronizes.
 *
 *  - Contexts, buffers and recordings are handles, checked on every use: a
 *    freed or destroyed one gives GLLMK_ERR_INVALID_ARGUMENT, never a crash.
 *  - Argument structs grow at their end between minor versions. The inline
 *    functions below pass the struct's size as the caller was compiled, so a
 *    program built against an older header keeps working (new fields take
 *    their zero default).
 *
 * Thread safety: one context (with its buffers and recordings) may be used
 * from one thread at a time. Different contexts are independent and may be
 * created, used and destroyed from any number of threads at once; creating
 * or destroying one never changes another's results.
 */
#ifndef GLLMK_GLLMK_H_
#define GLLMK_GLLMK_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(GLLMK_BUILDING_CORE)
#define GLLMK_API __attribute__((visibility("default")))
#else
#define GLLMK_API
#endif

#define GLLMK_VERSION_MAJOR 0
#define GLLMK_VERSION_MINOR 2
#define GLLMK_VERSION_PATCH 0

/* ---------------------------------------------------------------- status */

/* Values are pinned: they are part of the ABI. */
typedef enum gllmk_status {
  GLLMK_OK = 0,
  GLLMK_ERR_INVALID_ARGUMENT = 1, /* NULL, wrong dtype/shape/stride, overlap */
  GLLMK_ERR_UNSUPPORTED = 2,      /* the backend does not implement the op */
  GLLMK_ERR_OUT_OF_MEMORY = 3,    /* host or device allocation failed */
  GLLMK_ERR_OUT_OF_RANGE = 4,     /* an index in device data was out of range */
  GLLMK_ERR_NO_BACKEND = 5,       /* no plugin could provide a device */
  GLLMK_ERR_BACKEND = 6,          /* the driver reported an error */
  GLLMK_ERR_OVERFLOW = 7,         /* a size or offset does not fit 64 bits */
  GLLMK_ERR_INTERNAL = 8,         /* a bug in gllmk or a plugin */
} gllmk_status;

/* A static string naming the status ("GLLMK_ERR_INVALID_ARGUMENT"). */
GLLMK_API const char *gllmk_status_string(gllmk_status status);

/* The message of the last failed call on this thread ("" if none). The text
 * stays valid until the next gllmk call on this thread. */
GLLMK_API const char *gllmk_last_error(void);
/* For libraries built on gllmk (libgllmk-model): sets this thread's last
 * error message (printf format) and returns `status`. */
GLLMK_API gllmk_status gllmk_set_error(gllmk_status status, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------------ types */

typedef enum gllmk_dtype {
  GLLMK_F32 = 0,
  GLLMK_F16 = 1,
  GLLMK_BF16 = 2,
  GLLMK_I32 = 3,
} gllmk_dtype;
#define GLLMK_DTYPE_COUNT 4

/* Bytes per element (0 for an unknown dtype). */
GLLMK_API size_t gllmk_dtype_size(gllmk_dtype dtype);
/* "f32", "f16", "bf16", "i32" (NULL for an unknown dtype). */
GLLMK_API const char *gllmk_dtype_name(gllmk_dtype dtype);

typedef enum gllmk_backend_kind {
  GLLMK_BACKEND_CUDA = 0,
  GLLMK_BACKEND_ROCM = 1,
  GLLMK_BACKEND_METAL = 2,
  GLLMK_BACKEND_VULKAN = 3,
  GLLMK_BACKEND_CPU = 4,
  GLLMK_BACKEND_OTHER = 5,
} gllmk_backend_kind;
#define GLLMK_BACKEND_KIND_COUNT 6

/* "cuda", "rocm", "metal", "vulkan", "cpu", "other". */
GLLMK_API const char *gllmk_backend_kind_name(gllmk_backend_kind kind);

typedef struct gllmk_context gllmk_context;
typedef struct gllmk_buffer gllmk_buffer;
typedef struct gllmk_recording gllmk_recording;

/* ------------------------------------------------------------------ context */

typedef struct gllmk_context_options {
  /* Plugin name to use instead of the automatic choice ("cuda", "vulkan",
   * "cpu", ...), or NULL. A forced backend may use a software device. */
  const char *backend;
  /* Device index within the chosen plugin (0 = first). */
  uint32_t device_index;
  /* Threads for host-side work (the cpu backend's pool); 0 = one per core. */
  uint32_t num_threads;
  /* Plugin names never to load. */
  const char *const *exclude;
  uint32_t exclude_count;
  /* Directory to search instead of <libdir>/gllmk. For embedders that ship
   * their own plugins and for tests; applications leave it NULL ("" is
   * refused). */
  const char *plugin_dir;
  /* ABI 2.0: run on the caller's queue instead of the context's own (a
   * CUstream for cuda), so gllmk's work orders with the caller's kernels.
   * NULL = the context's own. A backend without queues it can share fails
   * with GLLMK_ERR_UNSUPPORTED. The caller keeps the queue alive. */
  void *queue;
} gllmk_context_options;

/* Creates a context on the best backend (options may be NULL). */
GLLMK_API gllmk_status gllmk_context_create_ex(const gllmk_context_options *options,
                                               size_t options_size,
                                               gllmk_context **out_context);
static inline gllmk_status gllmk_context_create(const gllmk_context_options *options,
                                                gllmk_context **out_context) {
  return gllmk_context_create_ex(options, sizeof *options, out_context);
}
/* Waits for queued work and frees the context and every buffer and
 * recording still alive on it. */
GLLMK_API void gllmk_context_destroy(gllmk_context *context);
/* Waits for queued work; returns the first error the device raised since the
 * previous synchronize (e.g. GLLMK_ERR_OUT_OF_RANGE from gllmk_embedding). */
GLLMK_API gllmk_status gllmk_synchronize(gllmk_context *context);

typedef enum gllmk_device_flags {
  GLLMK_DEVICE_SOFTWARE = 1u << 0, /* an emulated device (lavapipe): never chosen automatically */
  GLLMK_DEVICE_UNIFIED_MEMORY = 1u << 1,
} gllmk_device_flags;

typedef struct gllmk_device_info {
  char name[128];   /* "NVIDIA H100 80GB HBM3", "AMD EPYC ..." */
  char arch[64];    /* "sm_90", "gfx1100", "llvmpipe", "x86_64 avx2 fma f16c" */
  char driver[64];  /* driver name and version, if known */
  char uuid[48];    /* textual UUID, if the driver has one */
  uint64_t memory_bytes;  /* device memory (host memory for cpu) */
  uint32_t compute_units; /* SMs, CUs, cores */
  uint32_t flags;         /* gllmk_device_flags */
} gllmk_device_info;

/* The name of the plugin the context runs on ("cpu", "cuda", ...). */
GLLMK_API const char *gllmk_context_backend(const gllmk_context *context);
GLLMK_API gllmk_status gllmk_context_device_info(const gllmk_context *context,
                                                 gllmk_device_info *out_info);

/* ---------------------------------------------------------------- discovery */

typedef enum gllmk_plugin_state {
  GLLMK_PLUGIN_SELECTED = 0,  /* the plugin a context with these options uses */
  GLLMK_PLUGIN_AVAILABLE = 1, /* loaded, has devices, not selected */
  GLLMK_PLUGIN_NO_DEVICE = 2, /* loaded, but its probe found no usable device */
  GLLMK_PLUGIN_REJECTED = 3,  /* not loaded: bad file, bad ABI, duplicate name */
  GLLMK_PLUGIN_EXCLUDED = 4,  /* skipped because the options exclude it */
} gllmk_plugin_state;

/* "selected", "available", "no device", "rejected", "excluded". */
GLLMK_API const char *gllmk_plugin_state_name(gllmk_plugin_state state);

typedef struct gllmk_plugin_record {
  char path[4096];
  char name[64];        /* from the plugin's descriptor; "" if rejected early */
  char version[32];
  uint32_t kind;        /* gllmk_backend_kind */
  uint32_t rank;        /* 0 is best: cuda 0, rocm 1, metal 2, vulkan 3, cpu 4, other 5 */
  uint32_t abi_version; /* (major << 16) | minor, 0 if unknown */
  uint32_t state;       /* gllmk_plugin_state */
  uint32_t device_count;
  char reason[512];     /* why rejected / no device / not selected */
  char details[1024];   /* the plugin's own description (kernel targets, caveats) */
} gllmk_plugin_record;

typedef struct gllmk_discovery gllmk_discovery;

/* Scans the plugin directory as gllmk_context_create would with the same
 * options, without opening a device. Every file is listed, good or bad. */
GLLMK_API gllmk_status gllmk_discover_ex(const gllmk_context_options *options,
                                         size_t options_size, gllmk_discovery **out_discovery);
static inline gllmk_status gllmk_discover(const gllmk_context_options *options,
                                          gllmk_discovery **out_discovery) {
  return gllmk_discover_ex(options, sizeof *options, out_discovery);
}
GLLMK_API void gllmk_discovery_free(gllmk_discovery *discovery);
/* The directory that was scanned. */
GLLMK_API const char *gllmk_discovery_plugin_dir(const gllmk_discovery *discovery);
GLLMK_API uint32_t gllmk_discovery_plugin_count(const gllmk_discovery *discovery);
/* NULL if index is out of range. */
GLLMK_API const gllmk_plugin_record *gllmk_discovery_plugin(const gllmk_discovery *discovery,
                                                           uint32_t index);
GLLMK_API gllmk_status gllmk_discovery_device(const gllmk_discovery *discovery,
                                              uint32_t plugin_index, uint32_t device_index,
                                              gllmk_device_info *out_info);

/* -------------------------------------------------------------------- ops */

typedef enum gllmk_op {
#define GLLMK_OP(name) GLLMK_OP_##name,
#include "gllmk_ops.def"
  GLLMK_OP_COUNT
} gllmk_op;

/* "matmul", ... (NULL for an unknown op). */
GLLMK_API const char *gllmk_op_name(gllmk_op op);
/* Whether the plugin implements the op (0 or 1). */
GLLMK_API int gllmk_discovery_plugin_supports(const gllmk_discovery *discovery,
                                              uint32_t plugin_index, gllmk_op op);

/* ------------------------------------------------------------------ buffers */

/* Device memory of `size` bytes (> 0), owned by the context. Contents are
 * unspecified until written. */
GLLMK_API gllmk_status gllmk_buffer_alloc(gllmk_context *context, uint64_t size,
                                          gllmk_buffer **out_buffer);
/* Waits for queued work, then frees. NULL is ignored. */
GLLMK_API void gllmk_buffer_free(gllmk_buffer *buffer);
GLLMK_API uint64_t gllmk_buffer_size(const gllmk_buffer *buffer);
GLLMK_API gllmk_context *gllmk_buffer_context(const gllmk_buffer *buffer);
/* Host -> device, ordered after queued work; returns when `src` may be reused. */
GLLMK_API gllmk_status gllmk_buffer_write(gllmk_buffer *buffer, uint64_t offset,
                                          const void *src, uint64_t size);
/* Device -> host; synchronizes first (and returns a device-raised error). */
GLLMK_API gllmk_status gllmk_buffer_read(gllmk_buffer *buffer, uint64_t offset,
                                         void *dst, uint64_t size);
/* Device -> device within one context; ranges may not overlap within a buffer. */
GLLMK_API gllmk_status gllmk_buffer_copy(gllmk_buffer *dst, uint64_t dst_offset,
                                         gllmk_buffer *src, uint64_t src_offset,
                                         uint64_t size);
/* Sets `size` bytes to `value`, enqueued. */
GLLMK_API gllmk_status gllmk_buffer_fill(gllmk_buffer *buffer, uint64_t offset,
                                         uint64_t size, uint8_t value);

/* Where memory lives, for wrapping and DLPack. */
typedef enum gllmk_memory_kind {
  GLLMK_MEMORY_HOST = 0,        /* a host pointer (the cpu backend's memory) */
  GLLMK_MEMORY_CUDA_DEVICE = 1, /* a CUdeviceptr on the context's device */
} gllmk_memory_kind;

/* Memory the caller owns, to be used as a gllmk buffer without a copy. */
typedef struct gllmk_external_memory {
  uint32_t kind;    /* gllmk_memory_kind */
  uint64_t address; /* host pointer or device address of the first byte */
  uint64_t size;    /* bytes, > 0 */
  /* Called once when the gllmk buffer is freed (also by
   * gllmk_context_destroy); may be NULL. */
  void (*release)(void *release_data);
  void *release_data;
} gllmk_external_memory;

/* Wraps external memory as a buffer of `context`. The caller keeps it alive
 * until `release` is called (or the buffer is freed). A backend that cannot
 * use that kind of memory returns GLLMK_ERR_UNSUPPORTED with the reason. */
GLLMK_API gllmk_status gllmk_buffer_wrap(gllmk_context *context,
                                         const gllmk_external_memory *memory,
                                         gllmk_buffer **out_buffer);
/* The kind and address of a buffer's first byte (for handing it to other
 * libraries); GLLMK_ERR_UNSUPPORTED where the backend has no such address. */
GLLMK_API gllmk_status gllmk_buffer_address(const gllmk_buffer *buffer, uint32_t *out_kind,
                                            uint64_t *out_address);

/* ------------------------------------------------------------------ tensors */

#define GLLMK_MAX_DIMS 8

/* A view of a buffer: plain data, freely copied. Strides are in elements
 * and may be zero (broadcast) but not negative. */
typedef struct gllmk_tensor {
  gllmk_buffer *buffer;
  uint64_t offset; /* bytes from the buffer's start to element [0,...,0] */
  int32_t dtype;   /* gllmk_dtype */
  int32_t ndim;    /* 1..GLLMK_MAX_DIMS */
  int64_t shape[GLLMK_MAX_DIMS];
  int64_t strides[GLLMK_MAX_DIMS];
} gllmk_tensor;

/* A dense row-major tensor at `offset` in `buffer` (checked to fit). */
GLLMK_API gllmk_status gllmk_tensor_make(gllmk_buffer *buffer, uint64_t offset,
                                         gllmk_dtype dtype, int32_t ndim,
                                         const int64_t *shape, gllmk_tensor *out_tensor);
/* Elements `start`, `start + step`, ... (`length` of them) of dimension `dim`. */
GLLMK_API gllmk_status gllmk_tensor_slice(const gllmk_tensor *tensor, int32_t dim,
                                          int64_t start, int64_t length, int64_t step,
                                          gllmk_tensor *out_tensor);
/* Dimensions reordered: out.shape[i] = tensor.shape[order[i]]. */
GLLMK_API gllmk_status gllmk_tensor_permute(const gllmk_tensor *tensor, const int32_t *order,
                                            gllmk_tensor *out_tensor);
/* A new shape over the same elements; the tensor must be dense. */
GLLMK_API gllmk_status gllmk_tensor_reshape(const gllmk_tensor *tensor, int32_t ndim,
                                            const int64_t *shape, gllmk_tensor *out_tensor);
/* Product of the shape (0 if invalid). */
GLLMK_API int64_t gllmk_tensor_numel(const gllmk_tensor *tensor);
/* 1 if the tensor is dense row-major, else 0. */
GLLMK_API int gllmk_tensor_is_contiguous(const gllmk_tensor *tensor);
/* Bytes from `offset` to one past the last element (0 if invalid). */
GLLMK_API uint64_t gllmk_tensor_extent_bytes(const gllmk_tensor *tensor);

/* ---------------------------------------------------------------- op args
 *
 * Shared rules (checked by the core before any plugin runs):
 *  - Float tensors of one call share one dtype (F32, F16 or BF16) and the
 *    math runs in F32; only copy converts between dtypes.
 *  - Unless an op says otherwise, tensors have unit stride in the last
 *    dimension and their leading dimensions flatten into "rows" with one row
 *    stride (so a column slice of a wider matrix is accepted).
 *  - Every dimension is >= 1.
 *  - An output may be exactly the same view as an input where the op says
 *    "in place allowed"; any other overlap between an output and another
 *    tensor is an error.
 */

/* out = src converted to out's dtype. src may have any strides; shapes equal. */
typedef struct gllmk_copy_args {
  const gllmk_tensor *out, *src;
} gllmk_copy_args;

/* out = value (rounded to out's dtype; I32 takes the value truncated). */
typedef struct gllmk_fill_args {
  const gllmk_tensor *out;
  float value;
} gllmk_fill_args;

/* out = a op b; b has a's shape or is 1-D of a's last dim (broadcast over
 * rows). In place allowed (out = a or out = b of the same shape). */
typedef struct gllmk_binary_args {
  const gllmk_tensor *out, *a, *b;
} gllmk_binary_args;
typedef gllmk_binary_args gllmk_add_args;
typedef gllmk_binary_args gllmk_mul_args;

/* out = a * b + c; b and c each a's shape or 1-D (broadcast). In place allowed. */
typedef struct gllmk_mul_add_args {
  const gllmk_tensor *out, *a, *b, *c;
} gllmk_mul_add_args;

/* out = x * sigmoid(x). In place allowed. */
typedef struct gllmk_silu_args {
  const gllmk_tensor *out, *x;
} gllmk_silu_args;

typedef enum gllmk_gelu_kind {
  GLLMK_GELU_ERF = 0,  /* exact: 0.5 x (1 + erf(x / sqrt 2)) */
  GLLMK_GELU_TANH = 1, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
} gllmk_gelu_kind;

/* out = gelu(x). In place allowed. */
typedef struct gllmk_gelu_args {
  const gllmk_tensor *out, *x;
  int32_t kind; /* gllmk_gelu_kind */
} gllmk_gelu_args;

/* out = gelu(x + bias), bias 1-D of x's last dim. In place allowed (out = x). */
typedef struct gllmk_add_gelu_args {
  const gllmk_tensor *out, *x, *bias;
  int32_t kind; /* gllmk_gelu_kind */
} gllmk_add_gelu_args;

/* out = silu(gate) * up; gate and up may be column slices of one buffer.
 * In place allowed (out = gate or out = up). */
typedef struct gllmk_swiglu_args {
  const gllmk_tensor *out, *gate, *up;
} gllmk_swiglu_args;

/* out = x / sqrt(mean(x^2) + eps) * weight over the last dim; weight 1-D.
 * In place allowed (out = x). */
typedef struct gllmk_rmsnorm_args {
  const gllmk_tensor *out, *x, *weight;
  float eps;
} gllmk_rmsnorm_args;

/* residual += x; out = rmsnorm(residual). residual is updated in place; out
 * may not overlap residual or x. In 16-bit dtypes the norm is taken of the
 * residual as stored (rounded). */
typedef struct gllmk_add_rmsnorm_args {
  const gllmk_tensor *out, *residual, *x, *weight;
  float eps;
} gllmk_add_rmsnorm_args;

/* out = (x - mean) / sqrt(var + eps) * weight (+ bias); bias may be NULL.
 * In place allowed (out = x). */
typedef struct gllmk_layernorm_args {
  const gllmk_tensor *out, *x, *weight, *bias;
  float eps;
} gllmk_layernorm_args;

/* out = softmax(scale * x) over the last dim. In place allowed. */
typedef struct gllmk_softmax_args {
  const gllmk_tensor *out, *x;
  float scale;
} gllmk_softmax_args;

typedef enum gllmk_rope_style {
  GLLMK_ROPE_NEOX = 0, /* pairs (i, i + rotary_dim/2): half split */
  GLLMK_ROPE_GPTJ = 1, /* pairs (2i, 2i + 1): interleaved */
} gllmk_rope_style;

/* Rotary embedding on x [tokens, heads, head_dim] with positions [tokens]
 * (I32). Pair j of the first rotary_dim features turns by the angle
 * position * theta^(-2j / rotary_dim), or position * inv_freq[j] when
 * inv_freq is given (Llama 3 "llama3" or "linear" rope scaling: frequencies
 * computed by the caller); the rest is copied. rotary_dim is even and
 * <= head_dim. In place allowed (out = x). */
typedef struct gllmk_rope_args {
  const gllmk_tensor *out, *x, *positions;
  float theta;
  int32_t rotary_dim;
  int32_t style; /* gllmk_rope_style */
  /* ABI 2.2: F32 [rotary_dim/2], contiguous, or NULL. When set, pair j turns
   * by position * inv_freq[j] and theta is ignored (it may be 0). */
  const gllmk_tensor *inv_freq;
} gllmk_rope_args;

/* out[i, :] = table[ids[i], :]; ids I32 of any shape, out = ids.shape + [dim].
 * An id outside [0, vocab) writes zeros and the next gllmk_synchronize
 * returns GLLMK_ERR_OUT_OF_RANGE. */
typedef struct gllmk_embedding_args {
  const gllmk_tensor *out, *table, *ids;
} gllmk_embedding_args;

typedef enum gllmk_matmul_layout {
  GLLMK_B_NK = 0, /* b is [N, K]: a PyTorch Linear weight, out = a b^T */
  GLLMK_B_KN = 1, /* b is [K, N]: out = a b */
} gllmk_matmul_layout;

typedef enum gllmk_matmul_flags {
  /* F32 inputs may be rounded to TF32 (10-bit mantissa) on tensor cores.
   * Without it, F32 matmul keeps F32 inputs: no backend uses TF32 unasked. */
  GLLMK_MATMUL_ALLOW_TF32 = 1u << 0,
} gllmk_matmul_flags;

/* What happens to each row of a before the product (ABI 2.4). */
typedef enum gllmk_matmul_a_norm {
  GLLMK_A_NORM_NONE = 0,
  /* a[m, :] / sqrt(mean(a[m, :]^2) + a_norm_eps): an RMSNorm without a
   * weight, computed in F32 on the unrounded row; an RMSNorm's weight goes
   * into b (b[n, k] * weight[k]). A backend may support it for some shapes
   * only (gllmk_op_supported tells). */
  GLLMK_A_NORM_RMS = 1,
} gllmk_matmul_a_norm;

/* A gated linear unit on the product (ABI 2.6): what joins its two halves. */
typedef enum gllmk_matmul_glu {
  GLLMK_GLU_NONE = 0,
  /* out[m, j] = silu(P[m, j]) * P[m, j + N / 2], P the product (alpha * a
   * op(b) (+ bias[N])) in F32, rounded once when stored: b's N rows (or
   * columns) are gate's then up's, as a fused gate/up projection holds them,
   * and out is [M, N / 2]. gllmk_swiglu of P's two halves, without P (a
   * backend may round P to out's dtype first, as those two calls would: the
   * cpu does; silu amplifies that rounding where the gate is negative). */
  GLLMK_GLU_SWIGLU = 1,
} gllmk_matmul_glu;

/* out[..., M, N] = alpha * a[..., M, K] op(b) + beta * out (+ bias[N]).
 * b is 2-D (shared by every batch) or has a's leading dims; bias may be NULL.
 * With beta = 0, out is not read (NaN in it does not propagate).
 *
 * ABI 2.5, rope on the output (rope_dim > 0): the product's first
 * rope_columns columns, in groups of rope_head_dim (a head), are turned as
 * gllmk_rope turns a head in GLLMK_ROPE_GPTJ style: pair j < rope_dim / 2
 * of a group, columns 2j and 2j + 1, by rope_positions[m] * inv_freq[j]
 * (rope_inv_freq, F32 [rope_dim / 2], or rope_theta^(-2j / rope_dim)); the
 * rest is as computed. The rotation is applied in F32 to alpha * a op(b)
 * (+ bias) before the result is stored. It needs a 2-D a ([M, K]), beta = 0,
 * rope_positions I32 [M]; rope_head_dim even and at least rope_dim (even),
 * rope_columns a multiple of it, at most N. A NeoX-style model turns pairs
 * (j, j + rope_dim / 2) instead: it permutes its q and k weight rows so that
 * those pairs sit side by side (q . k does not change when both are
 * permuted alike), which is what the generator does. A backend may support
 * it for some shapes only (gllmk_op_supported tells).
 *
 * ABI 2.6, glu (gllmk_matmul_glu): the product's halves joined, out [M,
 * N / 2] (above). It needs a 2-D a, beta = 0, N even and no rope; bias, if
 * any, is the product's ([N]). A backend may support it for some shapes
 * only (gllmk_op_supported tells).
 *
 * ABI 2.6, k and v into paged caches as well (kv_k_cache not NULL): with
 * W = Hkv * D of kv_k_cache ([blocks, block_size, Hkv, D], as
 * gllmk_kv_append takes it), out's columns [kv_first, kv_first + W) of row
 * m are also written to kv_k_cache at slot kv_slots[m] (I32 [M]) as
 * gllmk_kv_append writes k, and the W columns after them to kv_v_cache as
 * v: the values out receives (after a rope). Slots behave as in
 * gllmk_kv_append (negative: skipped; past the cache: skipped, and the next
 * gllmk_synchronize returns GLLMK_ERR_OUT_OF_RANGE). It needs a 2-D a, no
 * glu, caches of out's dtype and kv_first + 2 W <= N. What a fused q/k/v
 * projection of a decode step does with kv_append in one call. A backend
 * may support it for some shapes only (gllmk_op_supported tells). */
typedef struct gllmk_matmul_args {
  const gllmk_tensor *out, *a, *b, *bias;
  float alpha, beta;
  int32_t b_layout; /* gllmk_matmul_layout */
  uint32_t flags;   /* ABI 2.1: gllmk_matmul_flags; 0 = none */
  int32_t a_norm;   /* ABI 2.4: gllmk_matmul_a_norm; 0 = none */
  float a_norm_eps; /* ABI 2.4: GLLMK_A_NORM_RMS's eps (finite, >= 0) */
  int32_t rope_dim; /* ABI 2.5: rope on the output (above); 0 = none */
  int32_t rope_head_dim, rope_columns; /* ABI 2.5 */
  float rope_theta;                    /* ABI 2.5: > 1 unless rope_inv_freq */
  const gllmk_tensor *rope_positions, *rope_inv_freq; /* ABI 2.5 */
  int32_t glu; /* ABI 2.6: gllmk_matmul_glu; 0 = none */
  int32_t kv_first; /* ABI 2.6: out's first column of k (kv_k_cache set) */
  const gllmk_tensor *kv_k_cache, *kv_v_cache, *kv_slots; /* ABI 2.6; NULL = none */
} gllmk_matmul_args;

/* Flash attention. q [B, Sq, Hq, D], k and v [B, Skv, Hkv, D], out like q;
 * Hq % Hkv == 0; D a multiple of 8, at most 256. kv_lens (I32 [B], may be
 * NULL) limits each sequence's keys to its first kv_lens[b]; with causal,
 * query i of a sequence with L keys sees keys j <= i + L - Sq. lse (F32
 * [B, Hq, Sq], may be NULL) receives the natural log-sum-exp of the scaled
 * scores; a query row that sees no key gets out = 0 and lse = -inf. */
typedef struct gllmk_attention_args {
  const gllmk_tensor *out, *q, *k, *v, *kv_lens, *lse;
  float scale;
  int32_t causal;
} gllmk_attention_args;

/* Writes k, v [T, Hkv, D] into k_cache, v_cache [blocks, block_size, Hkv, D]
 * at slots [T] (I32, slot = block * block_size + offset). A negative slot is
 * skipped (padding); a slot >= blocks * block_size is skipped and the next
 * gllmk_synchronize returns GLLMK_ERR_OUT_OF_RANGE. */
typedef struct gllmk_kv_append_args {
  const gllmk_tensor *k_cache, *v_cache, *k, *v, *slots;
} gllmk_kv_append_args;

/* Attention over a paged cache for B sequences at once. q and out [T, Hq, D]
 * hold the new tokens of every sequence back to back: sequence b owns rows
 * q_starts[b] .. q_starts[b+1]-1 (q_starts I32 [B+1], q_starts[0] = 0,
 * q_starts[B] = T). seq_lens (I32 [B]) is each sequence's total length,
 * new tokens included, already in the cache; block_table (I32 [B, max_blocks])
 * maps a sequence's logical block to a cache block. Query i of a sequence
 * with q_len new tokens sits at position seq_len - q_len + i and attends to
 * positions <= its own. Decode is q_len = 1; prefill is q_len = seq_len. */
typedef struct gllmk_paged_attention_args {
  const gllmk_tensor *out, *q, *k_cache, *v_cache, *block_table, *q_starts, *seq_lens;
  float scale;
} gllmk_paged_attention_args;

/* out[r] = index of the largest logit of row r (lowest index on ties; NaN is
 * smaller than every number, so a row of NaN gives 0); out I32. */
typedef struct gllmk_argmax_args {
  const gllmk_tensor *out, *logits;
} gllmk_argmax_args;

/* One token per row of logits [rows, V] into out [rows] (I32). Logits are
 * divided by temperature, then filtered: top_k (0 = off), top_p (1 = off),
 * min_p (0 = off, relative to the most likely token); the token is drawn from
 * what is left with a counter-based generator keyed by (seed, offset, row):
 * the same inputs give the same tokens. temperature 0 or top_k 1 = argmax. */
typedef struct gllmk_sample_args {
  const gllmk_tensor *out, *logits;
  float temperature, top_p, min_p;
  int32_t top_k;
  uint64_t seed;
  uint64_t offset; /* e.g. the decode step, so successive calls differ */
} gllmk_sample_args;

/* Runs (enqueues) `op` with its argument struct of `args_size` bytes (the
 * size the caller was compiled with). Every gllmk_<op>() below is this call. */
GLLMK_API gllmk_status gllmk_op_run(gllmk_context *context, gllmk_op op, const void *args,
                                    size_t args_size);
/* Whether `op` with these arguments would run on the context's backend:
 * GLLMK_OK, GLLMK_ERR_UNSUPPORTED with the backend's reason in
 * gllmk_last_error(), or the validation error the call would return. Runs
 * and writes nothing. */
GLLMK_API gllmk_status gllmk_op_supported(gllmk_context *context, gllmk_op op,
                                          const void *args, size_t args_size);

#define GLLMK_OP(name)                                                              \
  static inline gllmk_status gllmk_##name(gllmk_context *context,                   \
                                          const gllmk_##name##_args *args) {        \
    return gllmk_op_run(context, GLLMK_OP_##name, args, sizeof *args);             \
  }
#include "gllmk_ops.def"

/* ------------------------------------------------------------- recordings
 *
 * gllmk_recording_begin(ctx) starts recording: from then until
 * gllmk_recording_end, op calls on the context are validated and recorded,
 * not run (buffer transfers and synchronize still run at once). Replay runs
 * the recorded calls in order on the same tensors, reading whatever the
 * buffers hold then; a backend may compile the recording into a native form
 * (cuda: a CUDA graph, vulkan: a reused command buffer), otherwise the core
 * replays it call by call. Replay fails with GLLMK_ERR_INVALID_ARGUMENT,
 * running nothing, if a buffer it uses was freed. */
GLLMK_API gllmk_status gllmk_recording_begin(gllmk_context *context);
/* Ends the recording (an empty one is allowed). */
GLLMK_API gllmk_status gllmk_recording_end(gllmk_context *context,
                                           gllmk_recording **out_recording);
/* Enqueues the recorded calls, like calling them again. */
GLLMK_API gllmk_status gllmk_recording_replay(gllmk_recording *recording);
/* Number of recorded calls (0 for an invalid handle). */
GLLMK_API uint32_t gllmk_recording_size(const gllmk_recording *recording);
/* 1 if the backend compiled it into a native form, else 0. */
GLLMK_API int gllmk_recording_is_native(const gllmk_recording *recording);
/* NULL is ignored. */
GLLMK_API void gllmk_recording_free(gllmk_recording *recording);

/* ------------------------------------------------------------ collectives
 *
 * A communicator joins contexts of one backend in this process, one rank
 * each (rank r = contexts[r]), for tensor parallelism: cuda through NCCL
 * (libnccl.so.2, loaded at run time; one context per GPU), cpu through a
 * loopback in host memory (any number of cpu contexts). A collective is one
 * call for all ranks, made by the thread that uses those contexts: it is
 * enqueued on every rank's queue, ordered after the work enqueued there
 * before it. Tensors are dense (contiguous), F32, F16, BF16 or I32 (sums:
 * float only), tensors[r] on contexts[r]. While the contexts are recording,
 * the call is recorded on each of them; such recordings are compiled
 * together once every rank's recording has ended, and need a backend with
 * native recordings (cuda): every rank's recording must then be replayed,
 * as every rank must make a collective call. */
typedef struct gllmk_communicator gllmk_communicator;

/* `count` distinct contexts of one backend. Fails with GLLMK_ERR_UNSUPPORTED
 * and the reason where the backend has no collectives ("NCCL not found:
 * ..."). The communicator must be freed before its contexts are destroyed
 * (destroying a context frees the communicators it belongs to). */
GLLMK_API gllmk_status gllmk_communicator_create(gllmk_context *const *contexts, uint32_t count,
                                                 gllmk_communicator **out_communicator);
/* Number of ranks (0 for an invalid handle). */
GLLMK_API uint32_t gllmk_communicator_size(const gllmk_communicator *communicator);
/* NULL is ignored. Recordings that hold its collectives keep what they need. */
GLLMK_API void gllmk_communicator_free(gllmk_communicator *communicator);

/* outs[r] = ins[0] + ... + ins[count - 1] (elementwise, F32 accumulation
 * where the backend can), the same bits for every rank r; outs[r] may be
 * ins[r] (in place), otherwise they must not overlap. Every tensor has one
 * shape and dtype. */
GLLMK_API gllmk_status gllmk_all_reduce(gllmk_communicator *communicator,
                                        const gllmk_tensor *outs, const gllmk_tensor *ins);
/* outs[r] = ins[0], ins[1], ... laid end to end: outs[r] has shape
 * [count, ins' shape...] (or any shape of count times the elements). */
GLLMK_API gllmk_status gllmk_all_gather(gllmk_communicator *communicator,
                                        const gllmk_tensor *outs, const gllmk_tensor *ins);

/* ------------------------------------------------------------- timing
 *
 * With a timing callback set, each op the context runs (also in replays) is
 * timed on the device, and at the next gllmk_synchronize (or buffer read)
 * the callback receives one record per op, in order. */
typedef struct gllmk_op_timing {
  gllmk_op op;
  /* The call's arguments as validated (tensor pointers valid only during
   * the callback); args_size is sizeof the op's argument struct. */
  const void *args;
  size_t args_size;
  uint64_t start_ns, end_ns; /* on one clock per context: the device's, or
                                CLOCK_MONOTONIC when host_timed; only
                                differences and order mean something */
  uint32_t host_timed;       /* 1 if the backend has no device timestamps and
                                the core timed the op on the host, syncing
                                around it */
} gllmk_op_timing;
/* The callback runs inside gllmk_synchronize (or the read) on the calling
 * thread, and must not call gllmk functions on the same context. */
typedef void (*gllmk_timing_callback)(void *user_data, const gllmk_op_timing *timing);
/* NULL callback turns timing off. */
GLLMK_API gllmk_status gllmk_context_set_timing(gllmk_context *context,
                                                gllmk_timing_callback callback,
                                                void *user_data);

#ifdef __cplusplus
}
#endif

#endif /* GLLMK_GLLMK_H_ */
