/*
 * validate.c - complete argument checks for every op, then dispatch to the
 * context's plugin. A plugin sees only calls that passed these checks, so
 * the rules here are the contract documented in gllmk.h and docs/api.md.
 */
#include <math.h>
#include <string.h>

#include "internal.h"

/* The call being checked: names the op in messages, holds the context. */
typedef struct op_call {
  const char *fn;
  const core_context *context;
} op_call;

#define INVALID(...) core_fail(GLLMK_ERR_INVALID_ARGUMENT, __VA_ARGS__)

static bool is_float(int32_t dtype) {
  return dtype == GLLMK_F32 || dtype == GLLMK_F16 || dtype == GLLMK_BF16;
}

/* ------------------------------------------------------- single tensors */

/* A required tensor: valid, inside its buffer, on the call's context. */
static gllmk_status tensor(const op_call *c, const char *arg, const gllmk_tensor *t) {
  core_tensor_span span;
  CORE_TRY(core_tensor_check(c->fn, arg, t, &span));
  if (span.buffer->context != c->context)
    return INVALID("%s: %s.buffer belongs to another context", c->fn, arg);
  return GLLMK_OK;
}

static gllmk_status float_tensor(const op_call *c, const char *arg, const gllmk_tensor *t) {
  CORE_TRY(tensor(c, arg, t));
  if (!is_float(t->dtype))
    return INVALID("%s: %s.dtype=%s, expected f32, f16 or bf16", c->fn, arg,
                   gllmk_dtype_name((gllmk_dtype)t->dtype));
  return GLLMK_OK;
}

/* A tensor of exactly `dtype` (I32 indices, F32 lse and rope frequencies). */
static gllmk_status dtype_tensor(const op_call *c, const char *arg, const gllmk_tensor *t,
                                 gllmk_dtype dtype) {
  CORE_TRY(tensor(c, arg, t));
  if (t->dtype != (int32_t)dtype)
    return INVALID("%s: %s.dtype=%s, expected %s", c->fn, arg,
                   gllmk_dtype_name((gllmk_dtype)t->dtype), gllmk_dtype_name(dtype));
  return GLLMK_OK;
}

static gllmk_status i32_tensor(const op_call *c, const char *arg, const gllmk_tensor *t) {
  return dtype_tensor(c, arg, t, GLLMK_I32);
}

static gllmk_status ndim_is(const op_call *c, const char *arg, const gllmk_tensor *t, int32_t n) {
  if (t->ndim != n)
    return INVALID("%s: %s.ndim=%d, expected %d", c->fn, arg, t->ndim, n);
  return GLLMK_OK;
}

static gllmk_status dim_is(const op_call *c, const char *arg, const gllmk_tensor *t, int32_t i,
                           int64_t expected, const char *what) {
  if (t->shape[i] != expected)
    return INVALID("%s: %s.shape[%d]=%lld but %s=%lld", c->fn, arg, i,
                   (long long)t->shape[i], what, (long long)expected);
  return GLLMK_OK;
}

/* Dims [first, last) with extent > 1 nest like a dense block. */
static bool dims_flatten(const gllmk_tensor *t, int32_t first, int32_t last) {
  int32_t inner = -1;
  for (int32_t i = last - 1; i >= first; i--) {
    if (t->shape[i] == 1) continue;
    if (inner >= 0 && t->strides[i] != t->strides[inner] * t->shape[inner]) return false;
    inner = i;
  }
  return true;
}

static gllmk_status unit_last_stride(const op_call *c, const char *arg, const gllmk_tensor *t) {
  int32_t last = t->ndim - 1;
  if (t->shape[last] > 1 && t->strides[last] != 1)
    return INVALID("%s: %s.strides[%d]=%lld, the last dimension must have stride 1", c->fn,
                   arg, last, (long long)t->strides[last]);
  return GLLMK_OK;
}

/* Unit last stride and leading dims that flatten into rows (gllmk_plugin_as_rows). */
static gllmk_status row_strided(const op_call *c, const char *arg, const gllmk_tensor *t) {
  CORE_TRY(unit_last_stride(c, arg, t));
  if (!dims_flatten(t, 0, t->ndim - 1))
    return INVALID("%s: %s's leading dimensions do not flatten into rows with one stride",
                   c->fn, arg);
  return GLLMK_OK;
}

static gllmk_status contiguous(const op_call *c, const char *arg, const gllmk_tensor *t) {
  if (!gllmk_tensor_is_contiguous(t))
    return INVALID("%s: %s must be contiguous", c->fn, arg);
  return GLLMK_OK;
}

/* An output may not write one address twice: sorted by stride, each
 * dimension's stride must exceed the span of the dimensions inside it. */
static gllmk_status no_self_overlap(const op_call *c, const char *arg, const gllmk_tensor *t) {
  int32_t order[GLLMK_MAX_DIMS], n = 0;
  for (int32_t i = 0; i < t->ndim; i++)
    if (t->shape[i] > 1) order[n++] = i;
  for (int32_t i = 1; i < n; i++) /* insertion sort by stride */
    for (int32_t j = i; j > 0 && t->strides[order[j]] < t->strides[order[j - 1]]; j--) {
      int32_t tmp = order[j]; order[j] = order[j - 1]; order[j - 1] = tmp;
    }
  int64_t span = 0; /* largest element offset reachable by the inner dims */
  for (int32_t i = 0; i < n; i++) {
    int64_t stride = t->strides[order[i]];
    if (stride <= span)
      return INVALID("%s: %s is an output whose elements overlap (strides[%d]=%lld)", c->fn,
                     arg, order[i], (long long)stride);
    span += stride * (t->shape[order[i]] - 1);
  }
  return GLLMK_OK;
}

/* ---------------------------------------------------------- pairs */

static gllmk_status same_dtype(const op_call *c, const char *arg, const gllmk_tensor *t,
                               const char *ref_arg, const gllmk_tensor *ref) {
  if (t->dtype != ref->dtype)
    return INVALID("%s: %s.dtype=%s but %s.dtype=%s (one float dtype per call)", c->fn, arg,
                   gllmk_dtype_name((gllmk_dtype)t->dtype), ref_arg,
                   gllmk_dtype_name((gllmk_dtype)ref->dtype));
  return GLLMK_OK;
}

static gllmk_status same_shape(const op_call *c, const char *arg, const gllmk_tensor *t,
                               const char *ref_arg, const gllmk_tensor *ref) {
  if (t->ndim != ref->ndim)
    return INVALID("%s: %s.ndim=%d but %s.ndim=%d", c->fn, arg, t->ndim, ref_arg, ref->ndim);
  for (int32_t i = 0; i < t->ndim; i++)
    if (t->shape[i] != ref->shape[i])
      return INVALID("%s: %s.shape[%d]=%lld but %s.shape[%d]=%lld", c->fn, arg, i,
                     (long long)t->shape[i], ref_arg, i, (long long)ref->shape[i]);
  return GLLMK_OK;
}

static bool same_view(const gllmk_tensor *a, const gllmk_tensor *b) {
  if (a->buffer != b->buffer || a->offset != b->offset || a->dtype != b->dtype ||
      a->ndim != b->ndim)
    return false;
  for (int32_t i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i] || (a->shape[i] > 1 && a->strides[i] != b->strides[i]))
      return false;
  return true;
}

/* An output must not touch the bytes of another tensor of the call, except
 * being exactly the same view where the op computes in place. The check is
 * on byte ranges, so interleaved views of one buffer count as overlapping. */
static gllmk_status no_overlap(const op_call *c, const char *out_arg, const gllmk_tensor *out,
                               const char *arg, const gllmk_tensor *t, bool identical_ok) {
  if (t == NULL || out->buffer != t->buffer) return GLLMK_OK;
  if (identical_ok && same_view(out, t)) return GLLMK_OK;
  core_tensor_span a, b;
  (void)core_tensor_check(c->fn, out_arg, out, &a);
  (void)core_tensor_check(c->fn, arg, t, &b);
  if (a.begin < b.end && b.begin < a.end)
    return INVALID("%s: output %s overlaps %s%s", c->fn, out_arg, arg,
                   identical_ok ? " (only an identical view is allowed)" : "");
  return GLLMK_OK;
}

static gllmk_status finite_value(const op_call *c, const char *arg, float value) {
  if (!isfinite(value)) return INVALID("%s: %s=%g is not finite", c->fn, arg, (double)value);
  return GLLMK_OK;
}

/* ------------------------------------------------- shared op shapes */

/* An output that is row-strided and writes each element once. */
static gllmk_status float_output(const op_call *c, const char *arg, const gllmk_tensor *t) {
  CORE_TRY(float_tensor(c, arg, t));
  CORE_TRY(row_strided(c, arg, t));
  return no_self_overlap(c, arg, t);
}

/* A row-strided float input of out's dtype and shape. */
static gllmk_status like_out(const op_call *c, const char *arg, const gllmk_tensor *t,
                             const gllmk_tensor *out) {
  CORE_TRY(float_tensor(c, arg, t));
  CORE_TRY(same_dtype(c, arg, t, "out", out));
  CORE_TRY(same_shape(c, arg, t, "out", out));
  return row_strided(c, arg, t);
}

/* A float 1-D vector as long as ref's last dim, of ref's dtype. */
static gllmk_status row_vector(const op_call *c, const char *arg, const gllmk_tensor *t,
                               const char *ref_arg, const gllmk_tensor *ref) {
  CORE_TRY(float_tensor(c, arg, t));
  CORE_TRY(same_dtype(c, arg, t, ref_arg, ref));
  CORE_TRY(ndim_is(c, arg, t, 1));
  CORE_TRY(dim_is(c, arg, t, 0, ref->shape[ref->ndim - 1], "the last dim of out"));
  return unit_last_stride(c, arg, t);
}

/* Same shape as out, or a 1-D row broadcast over out's rows. */
static gllmk_status operand(const op_call *c, const char *arg, const gllmk_tensor *t,
                            const gllmk_tensor *out) {
  CORE_TRY(float_tensor(c, arg, t));
  if (t->ndim == 1 && out->ndim > 1) return row_vector(c, arg, t, "out", out);
  return like_out(c, arg, t, out);
}

/* Elementwise: the first input has out's shape, the others out's shape or a
 * broadcast row; in place on any input allowed. */
static gllmk_status elementwise(const op_call *c, const gllmk_tensor *out,
                                const char *const *names, const gllmk_tensor *const *inputs,
                                int count) {
  CORE_TRY(float_output(c, "out", out));
  CORE_TRY(like_out(c, names[0], inputs[0], out));
  for (int i = 1; i < count; i++) CORE_TRY(operand(c, names[i], inputs[i], out));
  for (int i = 0; i < count; i++) CORE_TRY(no_overlap(c, "out", out, names[i], inputs[i], true));
  return GLLMK_OK;
}

static gllmk_status gelu_kind(const op_call *c, int32_t kind) {
  if (kind != GLLMK_GELU_ERF && kind != GLLMK_GELU_TANH)
    return INVALID("%s: kind=%d is not a gllmk_gelu_kind", c->fn, kind);
  return GLLMK_OK;
}

static gllmk_status eps_value(const op_call *c, float eps) {
  CORE_TRY(finite_value(c, "eps", eps));
  if (eps < 0) return INVALID("%s: eps=%g is negative", c->fn, (double)eps);
  return GLLMK_OK;
}

/* --------------------------------------------------------- validators */

static gllmk_status validate_copy(const op_call *c, const gllmk_copy_args *a) {
  CORE_TRY(tensor(c, "out", a->out));
  CORE_TRY(tensor(c, "src", a->src));
  if ((a->out->dtype == GLLMK_I32) != (a->src->dtype == GLLMK_I32))
    return INVALID("%s: cannot convert between %s and %s", c->fn,
                   gllmk_dtype_name((gllmk_dtype)a->src->dtype),
                   gllmk_dtype_name((gllmk_dtype)a->out->dtype));
  CORE_TRY(same_shape(c, "src", a->src, "out", a->out));
  CORE_TRY(row_strided(c, "out", a->out));
  CORE_TRY(no_self_overlap(c, "out", a->out));
  return no_overlap(c, "out", a->out, "src", a->src, false);
}

static gllmk_status validate_fill(const op_call *c, const gllmk_fill_args *a) {
  CORE_TRY(tensor(c, "out", a->out));
  CORE_TRY(row_strided(c, "out", a->out));
  CORE_TRY(no_self_overlap(c, "out", a->out));
  return finite_value(c, "value", a->value);
}

static gllmk_status validate_binary(const op_call *c, const gllmk_binary_args *a) {
  const char *const names[] = {"a", "b"};
  const gllmk_tensor *const inputs[] = {a->a, a->b};
  return elementwise(c, a->out, names, inputs, 2);
}
static gllmk_status validate_add(const op_call *c, const gllmk_add_args *a) { return validate_binary(c, a); }
static gllmk_status validate_mul(const op_call *c, const gllmk_mul_args *a) { return validate_binary(c, a); }

static gllmk_status validate_mul_add(const op_call *c, const gllmk_mul_add_args *a) {
  const char *const names[] = {"a", "b", "c"};
  const gllmk_tensor *const inputs[] = {a->a, a->b, a->c};
  return elementwise(c, a->out, names, inputs, 3);
}

static gllmk_status unary(const op_call *c, const gllmk_tensor *out, const gllmk_tensor *x) {
  const char *const names[] = {"x"};
  const gllmk_tensor *const inputs[] = {x};
  return elementwise(c, out, names, inputs, 1);
}

static gllmk_status validate_silu(const op_call *c, const gllmk_silu_args *a) {
  return unary(c, a->out, a->x);
}

static gllmk_status validate_gelu(const op_call *c, const gllmk_gelu_args *a) {
  CORE_TRY(unary(c, a->out, a->x));
  return gelu_kind(c, a->kind);
}

static gllmk_status validate_add_gelu(const op_call *c, const gllmk_add_gelu_args *a) {
  CORE_TRY(unary(c, a->out, a->x));
  CORE_TRY(row_vector(c, "bias", a->bias, "out", a->out));
  CORE_TRY(no_overlap(c, "out", a->out, "bias", a->bias, false));
  return gelu_kind(c, a->kind);
}

static gllmk_status validate_swiglu(const op_call *c, const gllmk_swiglu_args *a) {
  const char *const names[] = {"gate", "up"};
  const gllmk_tensor *const inputs[] = {a->gate, a->up};
  CORE_TRY(float_output(c, "out", a->out));
  for (int i = 0; i < 2; i++) CORE_TRY(like_out(c, names[i], inputs[i], a->out));
  for (int i = 0; i < 2; i++) CORE_TRY(no_overlap(c, "out", a->out, names[i], inputs[i], true));
  return GLLMK_OK;
}

/* out = norm(x) with a weight row and maybe a bias row; in place allowed. */
static gllmk_status norm(const op_call *c, const gllmk_tensor *out, const gllmk_tensor *x,
                         const gllmk_tensor *weight, const gllmk_tensor *bias, float eps) {
  CORE_TRY(unary(c, out, x));
  CORE_TRY(row_vector(c, "weight", weight, "out", out));
  CORE_TRY(no_overlap(c, "out", out, "weight", weight, false));
  if (bias) {
    CORE_TRY(row_vector(c, "bias", bias, "out", out));
    CORE_TRY(no_overlap(c, "out", out, "bias", bias, false));
  }
  return eps_value(c, eps);
}

static gllmk_status validate_rmsnorm(const op_call *c, const gllmk_rmsnorm_args *a) {
  return norm(c, a->out, a->x, a->weight, NULL, a->eps);
}

static gllmk_status validate_add_rmsnorm(const op_call *c, const gllmk_add_rmsnorm_args *a) {
  CORE_TRY(norm(c, a->out, a->x, a->weight, NULL, a->eps));
  CORE_TRY(float_output(c, "residual", a->residual));
  CORE_TRY(like_out(c, "residual", a->residual, a->out));
  CORE_TRY(no_overlap(c, "out", a->out, "residual", a->residual, false));
  CORE_TRY(no_overlap(c, "out", a->out, "x", a->x, false)); /* not in place: see gllmk.h */
  CORE_TRY(no_overlap(c, "residual", a->residual, "x", a->x, false));
  return no_overlap(c, "residual", a->residual, "weight", a->weight, false);
}

static gllmk_status validate_layernorm(const op_call *c, const gllmk_layernorm_args *a) {
  return norm(c, a->out, a->x, a->weight, a->bias, a->eps);
}

static gllmk_status validate_softmax(const op_call *c, const gllmk_softmax_args *a) {
  CORE_TRY(unary(c, a->out, a->x));
  return finite_value(c, "scale", a->scale);
}

/* The frequencies of a rotary embedding: inv_freq (F32 [rotary_dim / 2]) or,
 * without it, theta > 1. */
static gllmk_status rope_frequencies(const op_call *c, const char *inv_freq_arg,
                                     const gllmk_tensor *inv_freq, int32_t rotary_dim,
                                     const char *theta_arg, float theta, const gllmk_tensor *out) {
  if (inv_freq) {
    CORE_TRY(dtype_tensor(c, inv_freq_arg, inv_freq, GLLMK_F32));
    CORE_TRY(ndim_is(c, inv_freq_arg, inv_freq, 1));
    CORE_TRY(dim_is(c, inv_freq_arg, inv_freq, 0, rotary_dim / 2, "rotary_dim/2"));
    CORE_TRY(contiguous(c, inv_freq_arg, inv_freq));
    return no_overlap(c, "out", out, inv_freq_arg, inv_freq, false);
  }
  CORE_TRY(finite_value(c, theta_arg, theta));
  if (theta <= 1.0f) return INVALID("%s: %s=%g must be > 1", c->fn, theta_arg, (double)theta);
  return GLLMK_OK;
}

static gllmk_status validate_rope(const op_call *c, const gllmk_rope_args *a) {
  CORE_TRY(float_tensor(c, "out", a->out));
  CORE_TRY(ndim_is(c, "out", a->out, 3));
  CORE_TRY(unit_last_stride(c, "out", a->out));
  CORE_TRY(no_self_overlap(c, "out", a->out));
  CORE_TRY(float_tensor(c, "x", a->x));
  CORE_TRY(same_dtype(c, "x", a->x, "out", a->out));
  CORE_TRY(same_shape(c, "x", a->x, "out", a->out));
  CORE_TRY(unit_last_stride(c, "x", a->x));
  CORE_TRY(i32_tensor(c, "positions", a->positions));
  CORE_TRY(ndim_is(c, "positions", a->positions, 1));
  CORE_TRY(dim_is(c, "positions", a->positions, 0, a->out->shape[0], "tokens"));
  CORE_TRY(contiguous(c, "positions", a->positions));
  CORE_TRY(no_overlap(c, "out", a->out, "x", a->x, true));
  CORE_TRY(no_overlap(c, "out", a->out, "positions", a->positions, false));
  int64_t head_dim = a->out->shape[2];
  if (a->rotary_dim < 2 || a->rotary_dim % 2 != 0 || a->rotary_dim > head_dim)
    return INVALID("%s: rotary_dim=%d must be even and in [2, head_dim=%lld]", c->fn,
                   a->rotary_dim, (long long)head_dim);
  if (a->style != GLLMK_ROPE_NEOX && a->style != GLLMK_ROPE_GPTJ)
    return INVALID("%s: style=%d is not a gllmk_rope_style", c->fn, a->style);
  return rope_frequencies(c, "inv_freq", a->inv_freq, a->rotary_dim, "theta", a->theta, a->out);
}

static gllmk_status validate_embedding(const op_call *c, const gllmk_embedding_args *a) {
  CORE_TRY(float_output(c, "out", a->out));
  CORE_TRY(float_tensor(c, "table", a->table));
  CORE_TRY(same_dtype(c, "table", a->table, "out", a->out));
  CORE_TRY(ndim_is(c, "table", a->table, 2));
  CORE_TRY(row_strided(c, "table", a->table));
  CORE_TRY(i32_tensor(c, "ids", a->ids));
  CORE_TRY(contiguous(c, "ids", a->ids));
  if (a->out->ndim != a->ids->ndim + 1)
    return INVALID("%s: out.ndim=%d but ids.ndim + 1=%d", c->fn, a->out->ndim, a->ids->ndim + 1);
  for (int32_t i = 0; i < a->ids->ndim; i++)
    CORE_TRY(dim_is(c, "out", a->out, i, a->ids->shape[i], "the matching ids dim"));
  CORE_TRY(dim_is(c, "out", a->out, a->out->ndim - 1, a->table->shape[1], "table.shape[1]"));
  CORE_TRY(no_overlap(c, "out", a->out, "table", a->table, false));
  return no_overlap(c, "out", a->out, "ids", a->ids, false);
}

/* A matrix operand: unit last stride, batch dims that flatten. */
static gllmk_status matrix(const op_call *c, const char *arg, const gllmk_tensor *t) {
  CORE_TRY(unit_last_stride(c, arg, t));
  if (!dims_flatten(t, 0, t->ndim - 2))
    return INVALID("%s: %s's batch dimensions do not flatten with one stride", c->fn, arg);
  return GLLMK_OK;
}

/* matmul's rope on the output (ABI 2.5), or none with every rope field 0. */
static gllmk_status matmul_rope(const op_call *c, const gllmk_matmul_args *a, int64_t m, int64_t n) {
  if (a->rope_dim == 0) {
    if (a->rope_positions || a->rope_inv_freq)
      return INVALID("%s: rope_positions or rope_inv_freq is set but rope_dim is 0", c->fn);
    return GLLMK_OK;
  }
  if (a->a->ndim != 2) return INVALID("%s: rope needs a 2-D a, not a.ndim=%d", c->fn, a->a->ndim);
  if (a->beta != 0.0f) return INVALID("%s: rope needs beta = 0, not %g", c->fn, (double)a->beta);
  if (a->rope_dim < 2 || a->rope_dim % 2 != 0 || a->rope_head_dim % 2 != 0 ||
      a->rope_dim > a->rope_head_dim)
    return INVALID("%s: rope_dim=%d and rope_head_dim=%d must be even with 2 <= rope_dim <= "
                   "rope_head_dim", c->fn, a->rope_dim, a->rope_head_dim);
  if (a->rope_columns <= 0 || a->rope_columns % a->rope_head_dim != 0 || a->rope_columns > n)
    return INVALID("%s: rope_columns=%d must be a positive multiple of rope_head_dim=%d, at most "
                   "N=%lld", c->fn, a->rope_columns, a->rope_head_dim, (long long)n);
  CORE_TRY(i32_tensor(c, "rope_positions", a->rope_positions));
  CORE_TRY(ndim_is(c, "rope_positions", a->rope_positions, 1));
  CORE_TRY(dim_is(c, "rope_positions", a->rope_positions, 0, m, "a.shape[0] (M)"));
  CORE_TRY(contiguous(c, "rope_positions", a->rope_positions));
  CORE_TRY(no_overlap(c, "out", a->out, "rope_positions", a->rope_positions, false));
  return rope_frequencies(c, "rope_inv_freq", a->rope_inv_freq, a->rope_dim, "rope_theta",
                          a->rope_theta, a->out);
}

/* q/out [.., H, D] family: unit last stride, D a multiple of 8 up to 256. */
static gllmk_status head_dim_ok(const op_call *c, const char *arg, const gllmk_tensor *t) {
  int64_t d = t->shape[t->ndim - 1];
  if (d % 8 != 0 || d > 256)
    return INVALID("%s: %s head_dim=%lld must be a multiple of 8 up to 256", c->fn, arg,
                   (long long)d);
  return GLLMK_OK;
}

/* An I32 vector of `length` entries. */
static gllmk_status i32_vector(const op_call *c, const char *arg, const gllmk_tensor *t,
                               int64_t length, const char *what) {
  CORE_TRY(i32_tensor(c, arg, t));
  CORE_TRY(ndim_is(c, arg, t, 1));
  CORE_TRY(dim_is(c, arg, t, 0, length, what));
  return contiguous(c, arg, t);
}

static gllmk_status kv_caches(const op_call *c, const gllmk_tensor *k_cache,
                              const gllmk_tensor *v_cache) {
  CORE_TRY(float_tensor(c, "k_cache", k_cache));
  CORE_TRY(ndim_is(c, "k_cache", k_cache, 4));
  CORE_TRY(contiguous(c, "k_cache", k_cache));
  CORE_TRY(head_dim_ok(c, "k_cache", k_cache));
  CORE_TRY(float_tensor(c, "v_cache", v_cache));
  CORE_TRY(same_dtype(c, "v_cache", v_cache, "k_cache", k_cache));
  CORE_TRY(same_shape(c, "v_cache", v_cache, "k_cache", k_cache));
  CORE_TRY(contiguous(c, "v_cache", v_cache));
  return no_overlap(c, "k_cache", k_cache, "v_cache", v_cache, false);
}

/* matmul's glu (ABI 2.6): before out's shape is checked, since it halves N. */
static gllmk_status matmul_glu(const op_call *c, const gllmk_matmul_args *a, int64_t n) {
  if (a->glu == GLLMK_GLU_NONE) return GLLMK_OK;
  if (a->glu != GLLMK_GLU_SWIGLU)
    return INVALID("%s: glu=%d is not a gllmk_matmul_glu", c->fn, a->glu);
  if (a->a->ndim != 2) return INVALID("%s: glu needs a 2-D a, not a.ndim=%d", c->fn, a->a->ndim);
  if (a->beta != 0.0f) return INVALID("%s: glu needs beta = 0, not %g", c->fn, (double)a->beta);
  if (a->rope_dim != 0) return INVALID("%s: glu and rope_dim=%d together", c->fn, a->rope_dim);
  if (n % 2 != 0) return INVALID("%s: glu needs an even N from b, not %lld", c->fn, (long long)n);
  return GLLMK_OK;
}

/* bias: 1-D of the product's N, in out's dtype. */
static gllmk_status matmul_bias(const op_call *c, const gllmk_matmul_args *a, int64_t n) {
  CORE_TRY(float_tensor(c, "bias", a->bias));
  CORE_TRY(same_dtype(c, "bias", a->bias, "out", a->out));
  CORE_TRY(ndim_is(c, "bias", a->bias, 1));
  CORE_TRY(dim_is(c, "bias", a->bias, 0, n, "N from b"));
  CORE_TRY(unit_last_stride(c, "bias", a->bias));
  return no_overlap(c, "out", a->out, "bias", a->bias, false);
}

/* matmul's k and v into paged caches (ABI 2.6), or none with every kv field
 * 0. */
static gllmk_status matmul_kv(const op_call *c, const gllmk_matmul_args *a, int64_t m, int64_t n) {
  if (a->kv_k_cache == NULL) {
    if (a->kv_v_cache || a->kv_slots || a->kv_first)
      return INVALID("%s: kv_v_cache, kv_slots or kv_first is set but kv_k_cache is NULL", c->fn);
    return GLLMK_OK;
  }
  if (a->a->ndim != 2) return INVALID("%s: kv needs a 2-D a, not a.ndim=%d", c->fn, a->a->ndim);
  if (a->glu != GLLMK_GLU_NONE) return INVALID("%s: kv and glu together", c->fn);
  CORE_TRY(kv_caches(c, a->kv_k_cache, a->kv_v_cache));
  CORE_TRY(same_dtype(c, "kv_k_cache", a->kv_k_cache, "out", a->out));
  const int64_t width = a->kv_k_cache->shape[2] * a->kv_k_cache->shape[3];
  if (a->kv_first < 0 || a->kv_first + 2 * width > n)
    return INVALID("%s: kv_first=%d and 2 * %lld columns of k and v do not fit in N=%lld", c->fn,
                   a->kv_first, (long long)width, (long long)n);
  CORE_TRY(i32_vector(c, "kv_slots", a->kv_slots, m, "a.shape[0] (M)"));
  const char *const names[] = {"out", "a", "b", "bias", "kv_slots", "rope_positions",
                               "rope_inv_freq"};
  const gllmk_tensor *const others[] = {a->out, a->a, a->b, a->bias, a->kv_slots,
                                        a->rope_positions, a->rope_inv_freq};
  for (int i = 0; i < 7; i++) {
    if (!others[i]) continue;
    CORE_TRY(no_overlap(c, "kv_k_cache", a->kv_k_cache, names[i], others[i], false));
    CORE_TRY(no_overlap(c, "kv_v_cache", a->kv_v_cache, names[i], others[i], false));
  }
  return GLLMK_OK;
}

static gllmk_status validate_matmul(const op_call *c, const gllmk_matmul_args *a) {
  CORE_TRY(float_tensor(c, "a", a->a));
  CORE_TRY(float_tensor(c, "b", a->b));
  CORE_TRY(float_tensor(c, "out", a->out));
  int32_t nd = a->a->ndim;
  if (nd < 2) return INVALID("%s: a.ndim=%d, expected [..., M, K]", c->fn, nd);
  if (a->b->ndim != 2 && a->b->ndim != nd)
    return INVALID("%s: b.ndim=%d, expected 2 or a.ndim=%d", c->fn, a->b->ndim, nd);
  if (a->b_layout != GLLMK_B_NK && a->b_layout != GLLMK_B_KN)
    return INVALID("%s: b_layout=%d is not a gllmk_matmul_layout", c->fn, a->b_layout);
  if (a->flags & ~(uint32_t)GLLMK_MATMUL_ALLOW_TF32)
    return INVALID("%s: flags=0x%x has bits that are not gllmk_matmul_flags", c->fn, a->flags);
  if (a->a_norm != GLLMK_A_NORM_NONE && a->a_norm != GLLMK_A_NORM_RMS)
    return INVALID("%s: a_norm=%d is not a gllmk_matmul_a_norm", c->fn, a->a_norm);
  if (a->a_norm == GLLMK_A_NORM_RMS) CORE_TRY(eps_value(c, a->a_norm_eps));
  CORE_TRY(same_dtype(c, "b", a->b, "a", a->a));
  CORE_TRY(same_dtype(c, "out", a->out, "a", a->a));
  int64_t m = a->a->shape[nd - 2], k = a->a->shape[nd - 1];
  int32_t bd = a->b->ndim;
  int32_t b_k_dim = a->b_layout == GLLMK_B_NK ? bd - 1 : bd - 2;
  int64_t n = a->b->shape[a->b_layout == GLLMK_B_NK ? bd - 2 : bd - 1];
  CORE_TRY(dim_is(c, "b", a->b, b_k_dim, k, "a.shape[-1] (K)"));
  CORE_TRY(ndim_is(c, "out", a->out, nd));
  for (int32_t i = 0; i < nd - 2; i++) {
    CORE_TRY(dim_is(c, "out", a->out, i, a->a->shape[i], "the matching a dim"));
    if (bd == nd) CORE_TRY(dim_is(c, "b", a->b, i, a->a->shape[i], "the matching a dim"));
  }
  CORE_TRY(dim_is(c, "out", a->out, nd - 2, m, "a.shape[-2] (M)"));
  CORE_TRY(matmul_glu(c, a, n));
  if (a->glu) CORE_TRY(dim_is(c, "out", a->out, nd - 1, n / 2, "N / 2 from b (glu)"));
  else CORE_TRY(dim_is(c, "out", a->out, nd - 1, n, "N from b"));
  CORE_TRY(matrix(c, "a", a->a));
  CORE_TRY(matrix(c, "b", a->b));
  CORE_TRY(matrix(c, "out", a->out));
  CORE_TRY(no_self_overlap(c, "out", a->out));
  if (a->bias) CORE_TRY(matmul_bias(c, a, n));
  CORE_TRY(no_overlap(c, "out", a->out, "a", a->a, false));
  CORE_TRY(no_overlap(c, "out", a->out, "b", a->b, false));
  CORE_TRY(finite_value(c, "alpha", a->alpha));
  CORE_TRY(finite_value(c, "beta", a->beta));
  CORE_TRY(matmul_rope(c, a, m, n));
  return matmul_kv(c, a, m, n);
}


static gllmk_status heads_divide(const op_call *c, int64_t hq, int64_t hkv) {
  if (hq % hkv != 0)
    return INVALID("%s: query heads %lld are not a multiple of kv heads %lld", c->fn,
                   (long long)hq, (long long)hkv);
  return GLLMK_OK;
}


static gllmk_status validate_attention(const op_call *c, const gllmk_attention_args *a) {
  const char *const names[] = {"q", "k", "v"};
  const gllmk_tensor *const qkv[] = {a->q, a->k, a->v};
  for (int i = 0; i < 3; i++) {
    CORE_TRY(float_tensor(c, names[i], qkv[i]));
    CORE_TRY(ndim_is(c, names[i], qkv[i], 4));
    CORE_TRY(same_dtype(c, names[i], qkv[i], "q", a->q));
    CORE_TRY(unit_last_stride(c, names[i], qkv[i]));
  }
  CORE_TRY(head_dim_ok(c, "q", a->q));
  CORE_TRY(same_shape(c, "v", a->v, "k", a->k));
  CORE_TRY(dim_is(c, "k", a->k, 0, a->q->shape[0], "q.shape[0] (batch)"));
  CORE_TRY(dim_is(c, "k", a->k, 3, a->q->shape[3], "q.shape[3] (head_dim)"));
  CORE_TRY(heads_divide(c, a->q->shape[2], a->k->shape[2]));
  CORE_TRY(float_tensor(c, "out", a->out));
  CORE_TRY(same_dtype(c, "out", a->out, "q", a->q));
  CORE_TRY(same_shape(c, "out", a->out, "q", a->q));
  CORE_TRY(unit_last_stride(c, "out", a->out));
  CORE_TRY(no_self_overlap(c, "out", a->out));
  for (int i = 0; i < 3; i++) CORE_TRY(no_overlap(c, "out", a->out, names[i], qkv[i], false));
  if (a->kv_lens) {
    CORE_TRY(i32_vector(c, "kv_lens", a->kv_lens, a->q->shape[0], "the batch"));
    CORE_TRY(no_overlap(c, "out", a->out, "kv_lens", a->kv_lens, false));
  }
  if (a->lse) {
    CORE_TRY(dtype_tensor(c, "lse", a->lse, GLLMK_F32));
    CORE_TRY(ndim_is(c, "lse", a->lse, 3));
    CORE_TRY(dim_is(c, "lse", a->lse, 0, a->q->shape[0], "the batch"));
    CORE_TRY(dim_is(c, "lse", a->lse, 1, a->q->shape[2], "q heads"));
    CORE_TRY(dim_is(c, "lse", a->lse, 2, a->q->shape[1], "Sq"));
    CORE_TRY(contiguous(c, "lse", a->lse));
    CORE_TRY(no_overlap(c, "lse", a->lse, "out", a->out, false));
    for (int i = 0; i < 3; i++) CORE_TRY(no_overlap(c, "lse", a->lse, names[i], qkv[i], false));
    CORE_TRY(no_overlap(c, "lse", a->lse, "kv_lens", a->kv_lens, false));
  }
  if (a->causal != 0 && a->causal != 1)
    return INVALID("%s: causal=%d must be 0 or 1", c->fn, a->causal);
  return finite_value(c, "scale", a->scale);
}

/* k_cache and v_cache [blocks, block_size, Hkv, D], contiguous, one dtype. */
static gllmk_status validate_kv_append(const op_call *c, const gllmk_kv_append_args *a) {
  CORE_TRY(kv_caches(c, a->k_cache, a->v_cache));
  const char *const names[] = {"k", "v"};
  const gllmk_tensor *const kv[] = {a->k, a->v};
  for (int i = 0; i < 2; i++) {
    CORE_TRY(float_tensor(c, names[i], kv[i]));
    CORE_TRY(same_dtype(c, names[i], kv[i], "k_cache", a->k_cache));
    CORE_TRY(ndim_is(c, names[i], kv[i], 3));
    CORE_TRY(unit_last_stride(c, names[i], kv[i]));
    CORE_TRY(dim_is(c, names[i], kv[i], 1, a->k_cache->shape[2], "k_cache.shape[2] (kv heads)"));
    CORE_TRY(dim_is(c, names[i], kv[i], 2, a->k_cache->shape[3], "k_cache.shape[3] (head_dim)"));
    CORE_TRY(no_overlap(c, "k_cache", a->k_cache, names[i], kv[i], false));
    CORE_TRY(no_overlap(c, "v_cache", a->v_cache, names[i], kv[i], false));
  }
  CORE_TRY(same_shape(c, "v", a->v, "k", a->k));
  CORE_TRY(i32_vector(c, "slots", a->slots, a->k->shape[0], "the token count"));
  CORE_TRY(no_overlap(c, "k_cache", a->k_cache, "slots", a->slots, false));
  return no_overlap(c, "v_cache", a->v_cache, "slots", a->slots, false);
}

static gllmk_status validate_paged_attention(const op_call *c, const gllmk_paged_attention_args *a) {
  CORE_TRY(kv_caches(c, a->k_cache, a->v_cache));
  CORE_TRY(float_tensor(c, "q", a->q));
  CORE_TRY(same_dtype(c, "q", a->q, "k_cache", a->k_cache));
  CORE_TRY(ndim_is(c, "q", a->q, 3));
  CORE_TRY(unit_last_stride(c, "q", a->q));
  CORE_TRY(dim_is(c, "q", a->q, 2, a->k_cache->shape[3], "k_cache.shape[3] (head_dim)"));
  CORE_TRY(heads_divide(c, a->q->shape[1], a->k_cache->shape[2]));
  CORE_TRY(float_tensor(c, "out", a->out));
  CORE_TRY(same_dtype(c, "out", a->out, "q", a->q));
  CORE_TRY(same_shape(c, "out", a->out, "q", a->q));
  CORE_TRY(unit_last_stride(c, "out", a->out));
  CORE_TRY(no_self_overlap(c, "out", a->out));
  CORE_TRY(i32_tensor(c, "block_table", a->block_table));
  CORE_TRY(ndim_is(c, "block_table", a->block_table, 2));
  CORE_TRY(contiguous(c, "block_table", a->block_table));
  int64_t batch = a->block_table->shape[0];
  CORE_TRY(i32_vector(c, "q_starts", a->q_starts, batch + 1, "block_table.shape[0] + 1"));
  CORE_TRY(i32_vector(c, "seq_lens", a->seq_lens, batch, "block_table.shape[0]"));
  const char *const names[] = {"q", "k_cache", "v_cache", "block_table", "q_starts", "seq_lens"};
  const gllmk_tensor *const inputs[] = {a->q, a->k_cache, a->v_cache, a->block_table,
                                        a->q_starts, a->seq_lens};
  for (int i = 0; i < 6; i++) CORE_TRY(no_overlap(c, "out", a->out, names[i], inputs[i], false));
  return finite_value(c, "scale", a->scale);
}

/* logits [..., V] and out I32 with one entry per row. */
static gllmk_status per_row_tokens(const op_call *c, const gllmk_tensor *out,
                                   const gllmk_tensor *logits) {
  CORE_TRY(float_tensor(c, "logits", logits));
  CORE_TRY(row_strided(c, "logits", logits));
  CORE_TRY(i32_tensor(c, "out", out));
  CORE_TRY(contiguous(c, "out", out));
  int64_t rows = gllmk_plugin_as_rows(logits).rows;
  if (gllmk_tensor_numel(out) != rows)
    return INVALID("%s: out has %lld elements but logits has %lld rows", c->fn,
                   (long long)gllmk_tensor_numel(out), (long long)rows);
  return no_overlap(c, "out", out, "logits", logits, false);
}

static gllmk_status validate_argmax(const op_call *c, const gllmk_argmax_args *a) {
  return per_row_tokens(c, a->out, a->logits);
}

static gllmk_status validate_sample(const op_call *c, const gllmk_sample_args *a) {
  CORE_TRY(per_row_tokens(c, a->out, a->logits));
  CORE_TRY(finite_value(c, "temperature", a->temperature));
  if (a->temperature < 0)
    return INVALID("%s: temperature=%g is negative", c->fn, (double)a->temperature);
  if (a->top_k < 0) return INVALID("%s: top_k=%d is negative", c->fn, a->top_k);
  if (!(a->top_p > 0 && a->top_p <= 1))
    return INVALID("%s: top_p=%g is outside (0, 1]", c->fn, (double)a->top_p);
  if (!(a->min_p >= 0 && a->min_p <= 1))
    return INVALID("%s: min_p=%g is outside [0, 1]", c->fn, (double)a->min_p);
  return GLLMK_OK;
}

/* ------------------------------------------------------------ entry */

gllmk_status core_validate(const char *fn, const core_context *context, gllmk_op op,
                           const core_args *args) {
  const op_call call = {fn, context};
  switch (op) {
#define GLLMK_OP(name) \
  case GLLMK_OP_##name: return validate_##name(&call, &args->name);
#include "gllmk/gllmk_ops.def"
    default: return INVALID("%s: op=%d is not a gllmk_op", fn, (int)op);
  }
}
