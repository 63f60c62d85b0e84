/*
 * conformance.c - every op of gllmk_ops.def, on every backend that has a
 * device here, against the float64 references of reference.c, and one
 * decoder layer built from them (decoder_block.c).
 *
 * usage: conformance [--quick] [--seed N] [--backend NAME] [--skip-software]
 *                    [--plugin-dir DIR] [--record] [--exec-via PROGRAM]
 * Backends come from gllmk_discover(): each plugin whose state is selected
 * or available gets a context forced onto it and runs every case; the
 * others are printed as "skipped: <name>: <reason>". A software device
 * (lavapipe, PoCL) runs the --quick sizes; --skip-software leaves it out.
 *
 * Method: inputs are fresh random numbers (the seed is printed with every
 * failure; --seed reproduces a run), rounded to the dtype under test before
 * upload, and the reference is computed in double from those rounded
 * values. Outputs are poisoned with 0xFF bytes (NaN for every float dtype,
 * -1 for I32) before each op, and NaN never passes.
 *
 * Tolerance for a float output of dtype t, with tol = 1e-5 (f32), 1e-3 (f16)
 * or 1e-2 (bf16), which covers the rounding of the output itself:
 *   per element   |out - ref| <= tol * (|ref| + rms(ref)) + tiny
 *   whole tensor  ||out - ref||_2 <= tol * ||ref||_2 + tiny * sqrt(n)
 * The rms term is an absolute floor scaled to the tensor, so elements that
 * cancel to near zero are judged against the size of the result, not
 * against themselves; `tiny` is the dtype's smallest subnormal, for results
 * that underflow (gelu(-6) is 0 in f16). Where a result is a sum whose
 * terms may cancel, their size is added to |ref| in both bounds: |a b| for
 * mul_add (an unfused product is rounded once more), for the lse of
 * attention the softmax-weighted scale * sum_d |q_d k_d| of its scores, and
 * for attention's output sum_j w_j |v_j| (its softmax weights w_j are
 * rounded to the dtype where tensor cores multiply them by V, and a row of
 * a few keys can cancel to far less than that).
 * gelu's tanh form x sigmoid(2u) gets the same kind of widening in its left
 * tail, where e^(2u) turns the F32 rounding of u into a relative error of
 * up to |2u| times a few ulp (see gelu_tanh_slack).
 * Copies, casts, fills, gathers and indices must match exactly (casts round
 * to nearest even).
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conformance.h"
#include "decoder_block.h"
#include "reference.h"
#include "testlib.h"

/* ------------------------------------------------------------ state */

#define MAX_BACKENDS TEST_MAX_BACKENDS
static test_backend backends[MAX_BACKENDS];
static int backend_count;

/* ------------------------------------------------------ problem sizes */

/* Shapes for elementwise and row ops: one element, odd, non-power-of-two,
 * several leading dims, and the widths of Llama-style hidden and MLP rows. */
static int elementwise_shapes(shape *out) {
  int n = 0;
  out[n++] = SHAPE(1);
  out[n++] = SHAPE(7);
  out[n++] = SHAPE(3, 33);
  out[n++] = SHAPE(5, 100);
  out[n++] = SHAPE(2, 3, 17);
  out[n++] = SHAPE(S.quick ? 1 : 4, 4096);
  if (!S.quick) out[n++] = SHAPE(2, 14336);
  return n;
}
#define MAX_SHAPES 8

/* ================================================================ ops */

/* ------------------------------------------------------------- copy */

/* Copies `src` (a view of `base`) into a fresh tensor of out_dtype. */
static void copy_from_view(const char *what, gllmk_dtype out_dtype, const dev *base,
                           const gllmk_tensor *src) {
  dev out = dev_output(out_dtype, shape_of(src));
  double *expected = gather(base, src);
  for (int64_t i = 0; i < out.numel; i++) expected[i] = test_round(out_dtype, expected[i]);
  RUN_OP(gllmk_copy(S.ctx, &(gllmk_copy_args){&out.t, src}), what);
  dev_download(&out);
  expect_equal(what, out.numel, out.host, expected);
}

/* Copies into a column slice of a wider tensor: the columns outside it keep
 * their values. */
static void copy_into_view(gllmk_dtype out_dtype, gllmk_dtype src_dtype) {
  const char *what = label("copy %s->%s into a column slice", dname(src_dtype), dname(out_dtype));
  dev wide = dev_random(out_dtype, SHAPE(5, 16), -3, 3);
  gllmk_tensor view = slice(&wide.t, 1, 4, 9, 1);
  dev src = dev_random(src_dtype, SHAPE(5, 9), -3, 3);
  double *expected = host_copy(wide.host, wide.numel);
  int64_t *pos = view_positions(&wide, &view);
  for (int64_t i = 0; i < src.numel; i++) expected[pos[i]] = test_round(out_dtype, src.host[i]);
  RUN_OP(gllmk_copy(S.ctx, &(gllmk_copy_args){&view, &src.t}), what);
  dev_download(&wide);
  expect_equal(what, wide.numel, wide.host, expected);
}

static void copy_pair(gllmk_dtype out_dtype, gllmk_dtype src_dtype) {
  const char *pair = label("%s->%s", dname(src_dtype), dname(out_dtype));
  shape shapes[] = {SHAPE(1), SHAPE(3, 37), SHAPE(2, S.quick ? 1000 : 4096)};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    dev src = dev_random(src_dtype, shapes[i], -100, 100);
    copy_from_view(label("copy %s %s", pair, shape_text(shapes[i])), out_dtype, &src, &src.t);
  }
  dev mat = dev_random(src_dtype, SHAPE(37, 5), -3, 3);
  gllmk_tensor transposed = permute(&mat.t, (const int32_t[]){1, 0});
  copy_from_view(label("copy %s transposed [5x37]", pair), out_dtype, &mat, &transposed);

  dev cube = dev_random(src_dtype, SHAPE(4, 3, 6), -3, 3);
  gllmk_tensor permuted = permute(&cube.t, (const int32_t[]){2, 0, 1});
  copy_from_view(label("copy %s permuted (2,0,1)", pair), out_dtype, &cube, &permuted);

  dev wide = dev_random(src_dtype, SHAPE(9, 20), -3, 3);
  gllmk_tensor cols = slice(&wide.t, 1, 3, 7, 2);
  copy_from_view(label("copy %s columns 3:17:2", pair), out_dtype, &wide, &cols);
  gllmk_tensor rows = slice(&wide.t, 0, 1, 3, 3);
  copy_from_view(label("copy %s rows 1:9:3", pair), out_dtype, &wide, &rows);
  gllmk_tensor both = slice(&cols, 0, 2, 4, 2);
  copy_from_view(label("copy %s rows and columns", pair), out_dtype, &wide, &both);

  copy_into_view(out_dtype, src_dtype);
}

static void conf_copy(void) {
  for (int o = 0; o < FLOAT_DTYPE_COUNT; o++)
    for (int s = 0; s < FLOAT_DTYPE_COUNT; s++) copy_pair(float_dtypes[o], float_dtypes[s]);
  /* i32 -> i32, strided */
  dev ids = dev_new(GLLMK_I32, SHAPE(6, 11));
  for (int64_t i = 0; i < ids.numel; i++) ids.host[i] = (double)test_rng_int(&S.rng, -99999, 99999);
  dev_upload(&ids);
  gllmk_tensor transposed = permute(&ids.t, (const int32_t[]){1, 0});
  copy_from_view("copy i32->i32 transposed", GLLMK_I32, &ids, &transposed);
}

/* ------------------------------------------------------------- fill */

static void fill_case(gllmk_dtype dtype, shape s, float value) {
  const char *what = label("fill %s %s value %g", dname(dtype), shape_text(s), (double)value);
  dev out = dev_output(dtype, s);
  RUN_OP(gllmk_fill(S.ctx, &(gllmk_fill_args){&out.t, value}), what);
  dev_download(&out);
  double *expected = host_alloc((size_t)out.numel * sizeof *expected);
  for (int64_t i = 0; i < out.numel; i++) expected[i] = test_round(dtype, value);
  expect_equal(what, out.numel, out.host, expected);
}

static void fill_view_case(gllmk_dtype dtype) {
  const char *what = label("fill %s column slice", dname(dtype));
  dev wide = dev_random(dtype, SHAPE(6, 10), -50, 50);
  gllmk_tensor view = slice(&wide.t, 1, 2, 5, 1);
  double *expected = host_copy(wide.host, wide.numel);
  int64_t *pos = view_positions(&wide, &view);
  for (int64_t i = 0; i < 6 * 5; i++) expected[pos[i]] = test_round(dtype, 2.5);
  RUN_OP(gllmk_fill(S.ctx, &(gllmk_fill_args){&view, 2.5f}), what);
  dev_download(&wide);
  expect_equal(what, wide.numel, wide.host, expected);
}

static void conf_fill(void) {
  const gllmk_dtype dtypes[] = {GLLMK_F32, GLLMK_F16, GLLMK_BF16, GLLMK_I32};
  for (int d = 0; d < 4; d++) {
    fill_case(dtypes[d], SHAPE(1), 0.0f);
    fill_case(dtypes[d], SHAPE(3, 37), 1.2345678f);
    fill_case(dtypes[d], SHAPE(2, 3, 5), -7.75f);
    fill_case(dtypes[d], SHAPE(2, 4096), (float)test_rng_uniform(&S.rng, -1000, 1000));
    fill_view_case(dtypes[d]);
  }
}

/* ------------------------------------------------------ add, mul, mul_add */

typedef enum placement { FRESH_OUT, OUT_IS_A, OUT_IS_B, OUT_IS_C } placement;

static double broadcast_at(const dev *t, int64_t i) {
  return t->t.ndim == 1 ? t->host[i % t->numel] : t->host[i];
}

static gllmk_status run_binary(gllmk_op op, const gllmk_binary_args *args) {
  return op == GLLMK_OP_add ? gllmk_add(S.ctx, args) : gllmk_mul(S.ctx, args);
}

static void binary_case(gllmk_op op, gllmk_dtype dtype, shape s, bool broadcast, placement where) {
  const char *what = label("%s %s %s%s%s", gllmk_op_name(op), dname(dtype), shape_text(s),
                           broadcast ? " b broadcast" : "",
                           where == OUT_IS_A ? " out=a" : where == OUT_IS_B ? " out=b" : "");
  dev a = dev_random(dtype, s, -4, 4);
  dev b = dev_random(dtype, broadcast ? SHAPE(s.d[s.ndim - 1]) : s, -4, 4);
  double *ref = host_alloc((size_t)a.numel * sizeof *ref);
  for (int64_t i = 0; i < a.numel; i++)
    ref[i] = op == GLLMK_OP_add ? a.host[i] + broadcast_at(&b, i) : a.host[i] * broadcast_at(&b, i);
  dev out = where == OUT_IS_A ? a : where == OUT_IS_B ? b : dev_output(dtype, s);
  RUN_OP(run_binary(op, &(gllmk_binary_args){&out.t, &a.t, &b.t}), what);
  dev_download(&out);
  expect_close(what, dtype, out.numel, out.host, ref);
}

static void binary_op(gllmk_op op) {
  shape shapes[MAX_SHAPES];
  int count = elementwise_shapes(shapes);
  for (int d = 0; d < FLOAT_DTYPE_COUNT; d++)
    for (int i = 0; i < count; i++) {
      binary_case(op, float_dtypes[d], shapes[i], false, FRESH_OUT);
      binary_case(op, float_dtypes[d], shapes[i], true, FRESH_OUT);
      binary_case(op, float_dtypes[d], shapes[i], false, OUT_IS_A);
      binary_case(op, float_dtypes[d], shapes[i], false, OUT_IS_B);
      binary_case(op, float_dtypes[d], shapes[i], true, OUT_IS_A);
    }
}

static void conf_add(void) { binary_op(GLLMK_OP_add); }
static void conf_mul(void) { binary_op(GLLMK_OP_mul); }

static void mul_add_case(gllmk_dtype dtype, shape s, bool b_row, bool c_row, placement where) {
  const char *what = label("mul_add %s %s%s%s%s", dname(dtype), shape_text(s),
                           b_row ? " b broadcast" : "", c_row ? " c broadcast" : "",
                           where == OUT_IS_A ? " out=a" : where == OUT_IS_C ? " out=c" : "");
  shape row = SHAPE(s.d[s.ndim - 1]);
  dev a = dev_random(dtype, s, -3, 3);
  dev b = dev_random(dtype, b_row ? row : s, -3, 3);
  dev c = dev_random(dtype, c_row ? row : s, -3, 3);
  double *ref = host_alloc((size_t)a.numel * sizeof *ref);
  double *product = host_alloc((size_t)a.numel * sizeof *product);
  for (int64_t i = 0; i < a.numel; i++) {
    product[i] = a.host[i] * broadcast_at(&b, i);
    ref[i] = product[i] + broadcast_at(&c, i);
  }
  dev out = where == OUT_IS_A ? a : where == OUT_IS_C ? c : dev_output(dtype, s);
  RUN_OP(gllmk_mul_add(S.ctx, &(gllmk_mul_add_args){&out.t, &a.t, &b.t, &c.t}), what);
  dev_download(&out);
  /* Without a fused multiply-add the product is rounded once more: its
   * error is relative to |a b|, which c may cancel. */
  for (int64_t i = 0; i < a.numel; i++) product[i] = fabs(product[i]);
  expect_close_cond(what, dtype, out.numel, out.host, ref, product);
}

static void conf_mul_add(void) {
  shape shapes[MAX_SHAPES];
  int count = elementwise_shapes(shapes);
  for (int d = 0; d < FLOAT_DTYPE_COUNT; d++)
    for (int i = 0; i < count; i++) {
      gllmk_dtype dtype = float_dtypes[d];
      mul_add_case(dtype, shapes[i], false, false, FRESH_OUT);
      mul_add_case(dtype, shapes[i], true, false, FRESH_OUT);
      mul_add_case(dtype, shapes[i], false, true, FRESH_OUT);
      mul_add_case(dtype, shapes[i], true, true, OUT_IS_A);
      mul_add_case(dtype, shapes[i], true, false, OUT_IS_C);
    }
}

/* ------------------------------------------- silu, gelu, add_gelu */

typedef enum activation { ACT_SILU, ACT_GELU_ERF, ACT_GELU_TANH } activation;

static double activate(activation act, double x) {
  return act == ACT_SILU ? ref_silu(x)
                         : ref_gelu(x, act == ACT_GELU_ERF ? GLLMK_GELU_ERF : GLLMK_GELU_TANH);
}

static const char *activation_name(activation act) {
  return act == ACT_SILU ? "silu" : act == ACT_GELU_ERF ? "gelu(erf)" : "gelu(tanh)";
}

static gllmk_status run_activation(activation act, const gllmk_tensor *out, const gllmk_tensor *x,
                                   const gllmk_tensor *bias) {
  int32_t kind = act == ACT_GELU_TANH ? GLLMK_GELU_TANH : GLLMK_GELU_ERF;
  if (bias) return gllmk_add_gelu(S.ctx, &(gllmk_add_gelu_args){out, x, bias, kind});
  if (act == ACT_SILU) return gllmk_silu(S.ctx, &(gllmk_silu_args){out, x});
  return gllmk_gelu(S.ctx, &(gllmk_gelu_args){out, x, kind});
}

/* The slack (as expect_close_cond takes it) of gelu's tanh form at x < 0:
 * u = sqrt(2/pi) (x + 0.044715 x^3) computed in F32 is off by a few ulp of
 * |u|, and e^(2u) makes that a relative error of the result of up to about
 * |2u| * 4 * 2^-24 (1.7e-5 at x = -9, where gelu is 1e-29): more than F32's
 * tolerance, and what every backend's F32 arithmetic gives there. */
static double gelu_tanh_slack(gllmk_dtype dtype, double x, double ref) {
  double two_u = 2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x);
  return two_u < 0.0 ? fabs(ref) * -two_u * 4.0 * 0x1.0p-24 / dtype_tolerance(dtype) : 0.0;
}

/* act(x) or, with_bias, gelu(x + bias), for x uniform in [-range, range]. */
static void activation_case(activation act, bool with_bias, gllmk_dtype dtype, shape s,
                            bool in_place, double range) {
  const char *what = label("%s%s %s %s x in [-%g, %g]%s", with_bias ? "add_" : "",
                           activation_name(act), dname(dtype), shape_text(s), range, range,
                           in_place ? " in place" : "");
  dev x = dev_random(dtype, s, -range, range);
  dev bias = with_bias ? dev_random(dtype, SHAPE(s.d[s.ndim - 1]), -2, 2) : x;
  double *ref = host_alloc((size_t)x.numel * sizeof *ref);
  double *slack = host_alloc((size_t)x.numel * sizeof *slack);
  for (int64_t i = 0; i < x.numel; i++) {
    double v = x.host[i] + (with_bias ? broadcast_at(&bias, i) : 0.0);
    ref[i] = activate(act, v);
    slack[i] = act == ACT_GELU_TANH ? gelu_tanh_slack(dtype, v, ref[i]) : 0.0;
  }
  dev out = in_place ? x : dev_output(dtype, s);
  RUN_OP(run_activation(act, &out.t, &x.t, with_bias ? &bias.t : NULL), what);
  dev_download(&out);
  expect_close_cond(what, dtype, out.numel, out.host, ref, slack);
}

static void activation_op(const activation *acts, int act_count, bool with_bias) {
  shape shapes[MAX_SHAPES];
  int count = elementwise_shapes(shapes);
  for (int a = 0; a < act_count; a++)
    for (int d = 0; d < FLOAT_DTYPE_COUNT; d++) {
      for (int i = 0; i < count; i++) {
        activation_case(acts[a], with_bias, float_dtypes[d], shapes[i], false, 8.0);
        activation_case(acts[a], with_bias, float_dtypes[d], shapes[i], true, 8.0);
      }
      /* Far tails, where exponentials overflow and results underflow. */
      activation_case(acts[a], with_bias, float_dtypes[d], SHAPE(3, 1001), false, 60.0);
    }
}

static void conf_silu(void) { activation_op((const activation[]){ACT_SILU}, 1, false); }
static void conf_gelu(void) {
  activation_op((const activation[]){ACT_GELU_ERF, ACT_GELU_TANH}, 2, false);
}
static void conf_add_gelu(void) {
  activation_op((const activation[]){ACT_GELU_ERF, ACT_GELU_TANH}, 2, true);
}

/* ------------------------------------------------------------ swiglu */

/* gate and up are either column slices of one [T, 2I] buffer (the fused
 * gate_up projection) or separate tensors. */
static void swiglu_case(gllmk_dtype dtype, int64_t tokens, int64_t inter, bool fused) {
  const char *what = label("swiglu %s T=%lld I=%lld%s", dname(dtype), (long long)tokens,
                           (long long)inter, fused ? " gate/up slices of [T,2I]" : "");
  gllmk_tensor gate, up;
  double *gate_v, *up_v;
  if (fused) {
    dev gate_up = dev_random(dtype, SHAPE(tokens, 2 * inter), -8, 8);
    gate = slice(&gate_up.t, 1, 0, inter, 1);
    up = slice(&gate_up.t, 1, inter, inter, 1);
    gate_v = gather(&gate_up, &gate);
    up_v = gather(&gate_up, &up);
  } else {
    dev gate_d = dev_random(dtype, SHAPE(tokens, inter), -8, 8);
    dev up_d = dev_random(dtype, SHAPE(tokens, inter), -8, 8);
    gate = gate_d.t;
    up = up_d.t;
    gate_v = gate_d.host;
    up_v = up_d.host;
  }
  dev out = dev_output(dtype, SHAPE(tokens, inter));
  double *ref = host_alloc((size_t)out.numel * sizeof *ref);
  for (int64_t i = 0; i < out.numel; i++) ref[i] = ref_silu(gate_v[i]) * up_v[i];
  RUN_OP(gllmk_swiglu(S.ctx, &(gllmk_swiglu_args){&out.t, &gate, &up}), what);
  dev_download(&out);
  expect_close(what, dtype, out.numel, out.host, ref);
}

static void conf_swiglu(void) {
  for (int d = 0; d < FLOAT_DTYPE_COUNT; d++) {
    gllmk_dtype dtype = float_dtypes[d];
    swiglu_case(dtype, 1, 1, true);
    swiglu_case(dtype, 3, 11, true);
    swiglu_case(dtype, 3, 11, false);
    swiglu_case(dtype, 5, 100, true);
    swiglu_case(dtype, 2, S.quick ? 1000 : 14336, true);
    swiglu_case(dtype, 2, S.quick ? 1000 : 14336, false);
  }
}

/* ----------------------------------------------------- normalisation */

static void rows_cols(shape s, int64_t *rows, int64_t *cols) {
  *cols = s.d[s.ndim - 1];
  *rows = shape_numel(s) / *cols;
}

static void rmsnorm_case(gllmk_dtype dtype, shape s, float eps, bool in_place) {
  const char *what = label("rmsnorm %s %s eps=%g%s", dname(dtype), shape_text(s), (double)eps,
                           in_place ? " in place" : "");
  int64_t rows, cols;
  rows_cols(s, &rows, &cols);
  dev x = dev_random(dtype, s, -3, 3);
  dev w = dev_random(dtype, SHAPE(cols), -1.5, 1.5);
  double *ref = host_alloc((size_t)x.numel * sizeof *ref);
  ref_rmsnorm(rows, cols, x.host, w.host, eps, ref);
  dev out = in_place ? x : dev_output(dtype, s);
  RUN_OP(gllmk_rmsnorm(S.ctx, &(gllmk_rmsnorm_args){&out.t, &x.t, &w.t, eps}), what);
  dev_download(&out);
  expect_close(what, dtype, out.numel, out.host, ref);
}

static void conf_rmsnorm(void) {
  shape shapes[MAX_SHAPES];
  int count = elementwise_shapes(shapes);
  for (int d = 0; d < FLOAT_DTYPE_COUNT; d++)
    for (int i = 0; i < count; i++) {
      rmsnorm_case(float_dtypes[d], shapes[i], 1e-5f, false);
      rmsnorm_case(float_dtypes[d], shapes[i], 1e-6f, true);
    }
}

/* residual += x; out = rmsnorm(residual): both results are checked. */
static void add_rmsnorm_case(gllmk_dtype dtype, shape s, float eps) {
  const char *what = label("add_rmsnorm %s %s", dname(dtype), shape_text(s));
  int64_t rows, cols;
  rows_cols(s, &rows, &cols);
  dev residual = dev_random(dtype, s, -3, 3);
  dev x = dev_random(dtype, s, -3, 3);
  dev w = dev_random(dtype, SHAPE(cols), -1.5, 1.5);
  double *sum = host_alloc((size_t)x.numel * sizeof *sum);
  double *ref = host_alloc((size_t)x.numel * sizeof *ref);
  for (int64_t i = 0; i < x.numel; i++) sum[i] = residual.host[i] + x.host[i];
  ref_rmsnorm(rows, cols, sum, w.host, eps, ref);
  dev out = dev_output(dtype, s);
  RUN_OP(gllmk_add_rmsnorm(S.ctx, &(gllmk_add_rmsnorm_args){&out.t, &residual.t, &x.t, &w.t, eps}),
         what);
  dev_download(&out);
  dev_download(&residual);
  expect_close(label("%s: residual", what), dtype, x.numel, residual.host, sum);
  expect_close(label("%s: out", what), dtype, x.numel, out.host, ref);
}

static void conf_add_rmsnorm(void) {
  shape shapes[MAX_SHAPES];
  int count = elementwise_shapes(shapes);
  for (int d = 0; d < FLOAT_DTYPE_COUNT; d++)
    for (int i = 0; i < count; i++) add_rmsnorm_case(float_dtypes[d], shapes[i], 1e-5f);
}

static void layernorm_case(gllmk_dtype dtype, shape s, bool with_bias, bool in_place) {
  const char *what = label("layernorm %s %s%s%s", dname(dtype), shape_text(s),
                           with_bias ? " with bias" : " no bias", in_place ? " in place" : "");
  int64_t rows, cols;
  rows_cols(s, &rows, &cols);
  dev x = dev_random(dtype, s, -1, 3); /* a non-zero mean */
  dev w = dev_random(dtype, SHAPE(cols), -1.5, 1.5);
  dev b = dev_random(dtype, SHAPE(cols), -1, 1);
  double *ref = host_alloc((size_t)x.numel * sizeof *ref);
  ref_layernorm(rows, cols, x.host, w.host, with_bias ? b.host : NULL, 1e-5, ref);
  dev out = in_place ? x : dev_output(dtype, s);
  RUN_OP(gllmk_layernorm(S.ctx, &(gllmk_layernorm_args){&out.t, &x.t, &w.t,
                                                         with_bias ? &b.t : NULL, 1e-5f}),
         what);
  dev_download(&out);
  expect_close(what, dtype, out.numel, out.host, ref);
}

static void conf_layernorm(void) {
  shape shapes[MAX_SHAPES];
  int count = elementwise_shapes(shapes);
  for (int d = 0; d < FLOAT_DTYPE_COUNT; d++)
    for (int i = 0; i < count; i++) {
      /* Shape [1] is one column of zero variance: out = bias. */
      layernorm_case(float_dtypes[d], shapes[i], true, false);
      layernorm_case(float_dtypes[d], shapes[i], false, false);
      layernorm_case(float_dtypes[d], shapes[i], true, true);
    }
}

/* masked: a quarter of each row from its start and every 7th element are
 * -inf (masked logits), so whole 16-byte vectors and whole first units of
 * work hold nothing but -inf. */
static void softmax_case(gllmk_dtype dtype, shape s, float scale, bool in_place, bool masked) {
  const char *what = label("softmax %s %s scale=%g%s%s", dname(dtype), shape_text(s),
                           (double)scale, in_place ? " in place" : "", masked ? " masked" : "");
  int64_t rows, cols;
  rows_cols(s, &rows, &cols);
  dev x = dev_random(dtype, s, -6, 6);
  if (masked) {
    for (int64_t i = 0; i < x.numel; i++)
      if (i % cols < cols / 4 || i % cols % 7 == 3) x.host[i] = -INFINITY;
    dev_upload(&x);
  }
  double *ref = host_alloc((size_t)x.numel * sizeof *ref);
  ref_softmax(rows, cols, x.host, scale, ref);
  dev out = in_place ? x : dev_output(dtype, s);
  RUN_OP(gllmk_softmax(S.ctx, &(gllmk_softmax_args){&out.t, &x.t, scale}), what);
  dev_download(&out);
  expect_close(what, dtype, out.numel, out.host, ref);
}

static void conf_softmax(void) {
  shape shapes[MAX_SHAPES];
  int count = elementwise_shapes(shapes);
  for (int d = 0; d < FLOAT_DTYPE_COUNT; d++)
    for (int i = 0; i < count; i++) {
      softmax_case(float_dtypes[d], shapes[i], 1.0f, false, false);
      softmax_case(float_dtypes[d], shapes[i], 0.125f, false, false);
      softmax_case(float_dtypes[d], shapes[i], 3.5f, true, false);
      softmax_case(float_dtypes[d], shapes[i], 1.0f, false, true);
    }
  /* Vocabulary-long rows (a backend may split one row over several blocks),
   * also masked, one of them with a length that leaves a partial last block,
   * more long rows than a GPU has multiprocessors, and rows too long for one
   * multiprocessor to keep on chip, in place, again more of them than a GPU
   * has multiprocessors. */
  for (int d = 0; d < FLOAT_DTYPE_COUNT; d++) {
    softmax_case(float_dtypes[d], SHAPE(2, S.quick ? 20000 : 128256), 1.0f, false, false);
    softmax_case(float_dtypes[d], SHAPE(2, S.quick ? 20000 : 128256), 1.0f, false, true);
    softmax_case(float_dtypes[d], SHAPE(3, S.quick ? 16388 : 40004), 0.125f, true, false);
    softmax_case(float_dtypes[d], SHAPE(S.quick ? 150 : 300, 16392), 0.5f, false, false);
    softmax_case(float_dtypes[d], SHAPE(S.quick ? 3 : 134, 200008), 0.25f, true, false);
    softmax_case(float_dtypes[d], SHAPE(3, 200008), 0.25f, true, true);
  }
}

/* -------------------------------------------------------------- rope */

/* Where a rope case's frequencies come from: theta, or an inv_freq table. */
typedef enum rope_freq { FREQ_THETA, FREQ_LLAMA3, FREQ_RANDOM } rope_freq;

typedef struct rope_problem {
  int64_t tokens, heads, head_dim, rotary_dim;
  int32_t style;
  int32_t max_position;
  float theta; /* what the call passes (ignored with a table: 0 is valid then) */
  bool in_place;
  rope_freq freq;
} rope_problem;

/* The frequency table of a FREQ_LLAMA3 / FREQ_RANDOM case, F32 on the
 * device (host values rounded to F32, as the device reads them). */
static dev rope_inv_freq(rope_freq freq, int64_t rotary_dim) {
  int64_t half = rotary_dim / 2;
  dev d = dev_new(GLLMK_F32, SHAPE(half));
  if (freq == FREQ_LLAMA3) /* Llama 3.1's rope_scaling */
    ref_llama3_inv_freq(500000.0, rotary_dim, 8.0, 1.0, 4.0, 8192.0, d.host);
  else /* log-uniform in [1e-6, 8] radians per position: past a turn too */
    for (int64_t j = 0; j < half; j++)
      d.host[j] = exp(test_rng_uniform(&S.rng, log(1e-6), log(8.0)));
  dev_upload(&d);
  return d;
}

static const char *rope_freq_name(rope_freq freq) {
  return freq == FREQ_LLAMA3 ? " inv_freq=llama3" : freq == FREQ_RANDOM ? " inv_freq=random" : "";
}

static void rope_case(gllmk_dtype dtype, const rope_problem *p) {
  const char *what = label("rope %s %s T=%lld H=%lld D=%lld rotary=%lld theta=%g%s positions<=%d%s",
                           dname(dtype), p->style == GLLMK_ROPE_NEOX ? "neox" : "gptj",
                           (long long)p->tokens, (long long)p->heads, (long long)p->head_dim,
                           (long long)p->rotary_dim, (double)p->theta, rope_freq_name(p->freq),
                           p->max_position, p->in_place ? " in place" : "");
  shape s = SHAPE(p->tokens, p->heads, p->head_dim);
  dev x = dev_random(dtype, s, -2, 2);
  int32_t *positions = host_alloc((size_t)p->tokens * sizeof *positions);
  for (int64_t t = 0; t < p->tokens; t++)
    positions[t] = (int32_t)test_rng_int(&S.rng, 0, p->max_position);
  positions[0] = p->max_position;
  if (p->tokens > 1) positions[1] = 0;
  dev pos = dev_ints(SHAPE(p->tokens), positions);
  dev inv_freq = {0};
  if (p->freq != FREQ_THETA) inv_freq = rope_inv_freq(p->freq, p->rotary_dim);
  double *ref = host_alloc((size_t)x.numel * sizeof *ref);
  ref_rope_freq(p->tokens, p->heads, p->head_dim, x.host, positions, p->theta,
                p->freq != FREQ_THETA ? inv_freq.host : NULL, p->rotary_dim, p->style, ref);
  dev out = p->in_place ? x : dev_output(dtype, s);
  RUN_OP(gllmk_rope(S.ctx, &(gllmk_rope_args){&out.t, &x.t, &pos.t, p->theta,
                                               (int32_t)p->rotary_dim, p->style,
                                               p->freq != FREQ_THETA ? &inv_freq.t : NULL}),
         what);
  dev_download(&out);
  expect_close(what, dtype, out.numel, out.host, ref);
}

static void conf_rope(void) {
  const rope_problem problems[] = {
      {1, 1, 8, 8, GLLMK_ROPE_NEOX, 3, 10000.0f, false, FREQ_THETA},
      {5, 3, 64, 64, GLLMK_ROPE_NEOX, 4096, 10000.0f, false, FREQ_THETA},
      {5, 3, 64, 64, GLLMK_ROPE_GPTJ, 4096, 10000.0f, true, FREQ_THETA},
      {7, 4, 128, 32, GLLMK_ROPE_NEOX, 2048, 10000.0f, false, FREQ_THETA}, /* partial rotary */
      {7, 4, 80, 40, GLLMK_ROPE_GPTJ, 2048, 10000.0f, true, FREQ_THETA},
      {3, 2, 96, 96, GLLMK_ROPE_NEOX, 100000, 1000000.0f, true, FREQ_THETA}, /* long context */
      {3, 2, 64, 64, GLLMK_ROPE_GPTJ, 100000, 500000.0f, false, FREQ_THETA},
      {S.quick ? 3 : 9, S.quick ? 4 : 32, 128, 128, GLLMK_ROPE_NEOX, 8191,
       500000.0f, true, FREQ_THETA},
      /* The caller's frequencies (ABI 2.2): Llama 3.1's scaled table with
       * theta 0 (ignored), a random one with a theta that must be ignored;
       * long contexts, partial rotary, widths with and without 8-pair steps. */
      {9, 4, 128, 128, GLLMK_ROPE_NEOX, 100000, 0.0f, false, FREQ_LLAMA3},
      {5, 3, 96, 64, GLLMK_ROPE_GPTJ, 100000, 0.0f, true, FREQ_LLAMA3},
      {5, 3, 30, 20, GLLMK_ROPE_NEOX, 100000, 0.0f, false, FREQ_LLAMA3},
      {7, 2, 64, 48, GLLMK_ROPE_NEOX, 100000, 10000.0f, true, FREQ_RANDOM},
      {6, 3, 80, 80, GLLMK_ROPE_GPTJ, 100000, 10000.0f, false, FREQ_RANDOM},
      {4, 5, 40, 18, GLLMK_ROPE_GPTJ, 65535, 0.0f, true, FREQ_RANDOM},
  };
  for (int d = 0; d < FLOAT_DTYPE_COUNT; d++)
    for (size_t i = 0; i < sizeof problems / sizeof problems[0]; i++)
      rope_case(float_dtypes[d], &problems[i]);
}

/* --------------------------------------------------------- embedding */

static void embedding_case(gllmk_dtype dtype, int64_t vocab, int64_t dim, shape ids_shape) {
  const char *what = label("embedding %s vocab=%lld dim=%lld ids %s", dname(dtype),
                           (long long)vocab, (long long)dim, shape_text(ids_shape));
  dev table = dev_random(dtype, SHAPE(vocab, dim), -2, 2);
  int64_t count = shape_numel(ids_shape);
  int32_t *id_values = random_ids(count, vocab);
  dev ids = dev_ints(ids_shape, id_values);
  shape out_shape = ids_shape;
  out_shape.d[out_shape.ndim++] = dim;
  dev out = dev_output(dtype, out_shape);
  double *expected = host_alloc((size_t)out.numel * sizeof *expected);
  for (int64_t i = 0; i < count; i++)
    memcpy(expected + i * dim, table.host + id_values[i] * dim, (size_t)dim * sizeof *expected);
  RUN_OP(gllmk_embedding(S.ctx, &(gllmk_embedding_args){&out.t, &table.t, &ids.t}), what);
  dev_download(&out);
  expect_equal(what, out.numel, out.host, expected);
}

/* Out-of-range ids write zeros; the next synchronize reports them once. */
static void embedding_out_of_range(gllmk_dtype dtype) {
  const char *what = label("embedding %s with ids -1 and vocab", dname(dtype));
  const int64_t vocab = 50, dim = 24;
  dev table = dev_random(dtype, SHAPE(vocab, dim), -2, 2);
  const int32_t id_values[] = {3, -1, 49, 50, 0};
  dev ids = dev_ints(SHAPE(5), id_values);
  dev out = dev_output(dtype, SHAPE(5, dim));
  double *expected = host_alloc((size_t)out.numel * sizeof *expected);
  for (int64_t i = 0; i < 5; i++)
    if (id_values[i] >= 0 && id_values[i] < vocab)
      memcpy(expected + i * dim, table.host + id_values[i] * dim, (size_t)dim * sizeof *expected);
  RUN_OP(gllmk_embedding(S.ctx, &(gllmk_embedding_args){&out.t, &table.t, &ids.t}), what);
  gllmk_status first = gllmk_synchronize(S.ctx);
  if (first != GLLMK_ERR_OUT_OF_RANGE)
    conf_fail("%s: synchronize returned %s, expected GLLMK_ERR_OUT_OF_RANGE", what,
              gllmk_status_string(first));
  else if (!test_contains(gllmk_last_error(), "gllmk_embedding"))
    conf_fail("%s: the error message \"%s\" does not name gllmk_embedding", what,
              gllmk_last_error());
  gllmk_status second = gllmk_synchronize(S.ctx);
  if (second != GLLMK_OK)
    conf_fail("%s: the second synchronize returned %s (%s), expected GLLMK_OK", what,
              gllmk_status_string(second), gllmk_last_error());
  dev_download(&out);
  expect_equal(what, out.numel, out.host, expected);
}

static void conf_embedding(void) {
  for (int d = 0; d < FLOAT_DTYPE_COUNT; d++) {
    gllmk_dtype dtype = float_dtypes[d];
    embedding_case(dtype, 1, 1, SHAPE(1));
    embedding_case(dtype, 1000, 96, SHAPE(7));
    embedding_case(dtype, 333, 40, SHAPE(2, 5));
    embedding_case(dtype, S.quick ? 64 : 512, 4096, SHAPE(3));
    embedding_out_of_range(dtype);
  }
}

/* ------------------------------------------------------------ matmul */

typedef struct matmul_problem {
  int64_t batch0, batch1; /* leading dims of a, 0 = none */
  int64_t m, n, k;
  int32_t layout;
  bool b_batched;
  float alpha, beta;
  bool bias;
  bool a_norm; /* GLLMK_A_NORM_RMS with eps 1e-5 */
} matmul_problem;

static shape batched(const matmul_problem *p, int64_t rows, int64_t cols) {
  shape s = {0, {0}};
  if (p->batch0) s.d[s.ndim++] = p->batch0;
  if (p->batch1) s.d[s.ndim++] = p->batch1;
  s.d[s.ndim++] = rows;
  s.d[s.ndim++] = cols;
  return s;
}

static void matmul_case(gllmk_dtype dtype, const matmul_problem *p) {
  const char *what = label("matmul %s M=%lld N=%lld K=%lld batch=%lldx%lld %s%s alpha=%g "
                           "beta=%g%s%s", dname(dtype), (long long)p->m, (long long)p->n,
                           (long long)p->k, (long long)p->batch0, (long long)p->batch1,
                           p->layout == GLLMK_B_NK ? "b[N,K]" : "b[K,N]",
                           p->b_batched ? " batched b" : "", (double)p->alpha, (double)p->beta,
                           p->bias ? " bias" : "", p->a_norm ? " a_norm" : "");
  bool nk = p->layout == GLLMK_B_NK;
  dev a = dev_random(dtype, batched(p, p->m, p->k), -1, 1);
  shape b_shape = p->b_batched ? batched(p, nk ? p->n : p->k, nk ? p->k : p->n)
                               : SHAPE(nk ? p->n : p->k, nk ? p->k : p->n);
  dev b = dev_random(dtype, b_shape, -1, 1);
  dev bias = dev_random(dtype, SHAPE(p->n), -1, 1);
  dev out = p->beta != 0.0f ? dev_random(dtype, batched(p, p->m, p->n), -1, 1)
                            : dev_output(dtype, batched(p, p->m, p->n));
  ref_matmul_problem rp = {
      .batch = (p->batch0 ? p->batch0 : 1) * (p->batch1 ? p->batch1 : 1),
      .m = p->m, .n = p->n, .k = p->k, .b_layout = p->layout, .b_batched = p->b_batched,
      .alpha = p->alpha, .beta = p->beta};
  double *ref = host_copy(out.host, out.numel);
  const float eps = 1e-5f;
  double *a_ref = a.host;
  if (p->a_norm) {
    a_ref = host_copy(a.host, a.numel);
    rms_normalize_rows(a_ref, a.numel / p->k, p->k, eps);
  }
  ref_matmul(&rp, a_ref, b.host, p->bias ? bias.host : NULL, ref);
  RUN_OP(gllmk_matmul(S.ctx, &(gllmk_matmul_args){
             .out = &out.t, .a = &a.t, .b = &b.t, .bias = p->bias ? &bias.t : NULL,
             .alpha = p->alpha, .beta = p->beta, .b_layout = p->layout,
             .a_norm = p->a_norm ? GLLMK_A_NORM_RMS : GLLMK_A_NORM_NONE, .a_norm_eps = eps}),
         what);
  dev_download(&out);
  expect_close(what, dtype, out.numel, out.host, ref);
}

/* matmul with a rope on the output (ABI 2.5). */
typedef struct matmul_rope_problem {
  int64_t m, n, k, head_dim, rope_dim, columns;
  rope_freq freq;
  float alpha;
  bool bias, a_norm;
} matmul_rope_problem;

static void matmul_rope_case(gllmk_dtype dtype, const matmul_rope_problem *p) {
  const char *what = label("matmul %s rope M=%lld N=%lld K=%lld head_dim=%lld rope_dim=%lld "
                           "columns=%lld alpha=%g%s%s%s", dname(dtype), (long long)p->m,
                           (long long)p->n, (long long)p->k, (long long)p->head_dim,
                           (long long)p->rope_dim, (long long)p->columns, (double)p->alpha,
                           rope_freq_name(p->freq), p->bias ? " bias" : "",
                           p->a_norm ? " a_norm" : "");
  const int32_t max_position = 100000;
  const float theta = p->freq == FREQ_THETA ? 500000.0f : 0.0f, eps = 1e-5f;
  dev a = dev_random(dtype, SHAPE(p->m, p->k), -1, 1);
  dev b = dev_random(dtype, SHAPE(p->n, p->k), -1, 1);
  dev bias = dev_random(dtype, SHAPE(p->n), -1, 1);
  dev out = dev_output(dtype, SHAPE(p->m, p->n));
  int32_t *positions = host_alloc((size_t)p->m * sizeof *positions);
  for (int64_t r = 0; r < p->m; r++) positions[r] = (int32_t)test_rng_int(&S.rng, 0, max_position);
  positions[0] = max_position;
  dev pos = dev_ints(SHAPE(p->m), positions);
  dev inv_freq = {0};
  if (p->freq != FREQ_THETA) inv_freq = rope_inv_freq(p->freq, p->rope_dim);
  /* The product, then its first `columns` columns of each row turned. */
  double *ref = host_alloc((size_t)out.numel * sizeof *ref);
  double *a_ref = host_copy(a.host, a.numel);
  if (p->a_norm) rms_normalize_rows(a_ref, p->m, p->k, eps);
  ref_matmul(&(ref_matmul_problem){.batch = 1, .m = p->m, .n = p->n, .k = p->k,
                                   .b_layout = GLLMK_B_NK, .alpha = p->alpha},
             a_ref, b.host, p->bias ? bias.host : NULL, ref);
  const double *slack = rope_pair_slack(p->m, p->n, p->columns, p->head_dim, p->rope_dim, ref);
  ref_rope_columns(p->m, p->n, p->columns, p->head_dim, ref, positions, theta,
                   p->freq != FREQ_THETA ? inv_freq.host : NULL, p->rope_dim);
  RUN_OP(gllmk_matmul(S.ctx, &(gllmk_matmul_args){
             .out = &out.t, .a = &a.t, .b = &b.t, .bias = p->bias ? &bias.t : NULL,
             .alpha = p->alpha, .b_layout = GLLMK_B_NK,
             .a_norm = p->a_norm ? GLLMK_A_NORM_RMS : GLLMK_A_NORM_NONE, .a_norm_eps = eps,
             .rope_dim = (int32_t)p->rope_dim, .rope_head_dim = (int32_t)p->head_dim,
             .rope_columns = (int32_t)p->columns, .rope_theta = theta, .rope_positions = &pos.t,
             .rope_inv_freq = p->freq != FREQ_THETA ? &inv_freq.t : NULL}),
         what);
  dev_download(&out);
  expect_close_cond(what, dtype, out.numel, out.host, ref, slack);
}

/* cuda turns one row (its GEMV) or, f16/bf16 with K % 8 == 0, up to 16
 * (its skinny GEMM); vulkan up to 4 (its GEMV); other rows run on the cpu. */
static void conf_matmul_rope(void) {
  const bool quick = S.quick;
  const matmul_rope_problem problems[] = {
      /* M  N  K  head_dim rope_dim columns freq alpha bias a_norm */
      /* The generator's q/k/v of Llama 3 (q and k turned, v not). */
      {1, 6144, quick ? 1024 : 4096, 128, 128, 5120, FREQ_LLAMA3, 1.0f, false, true},
      {1, quick ? 768 : 3072, quick ? 512 : 2048, 128, 128, quick ? 512 : 2560, FREQ_THETA, 1.0f,
       true, false},
      /* Partial rotary, K off the vector loads, a pair of heads ending inside a
       * block of outputs, N ending there too, every column turned. */
      {1, 200, 100, 64, 32, 128, FREQ_THETA, 0.5f, true, false},
      {1, 21, 40, 6, 4, 18, FREQ_RANDOM, -1.0f, true, true},
      {1, 24, 40, 8, 8, 24, FREQ_RANDOM, 1.0f, false, false},
      {3, 40, 64, 8, 8, 40, FREQ_THETA, 1.0f, true, true},
      {5, 64, 48, 16, 16, 64, FREQ_THETA, 1.0f, true, true},
      {33, 160, 72, 32, 24, 96, FREQ_LLAMA3, 1.0f, false, false},
      /* A decode batch's q/k/v: K split among blocks (cuda's skinny GEMM, and
       * at 17-32 rows on Hopper its wgmma form); 64 rows, partial rotary
       * (cuda: refused). */
      {16, 640, quick ? 1024 : 2048, 128, 128, 512, FREQ_LLAMA3, 1.0f, true, true},
      {32, 640, quick ? 1024 : 2048, 128, 128, 512, FREQ_LLAMA3, 1.0f, true, true},
      {64, 160, 72, 32, 24, 96, FREQ_THETA, 1.0f, false, true},
  };
  for (int d = 0; d < FLOAT_DTYPE_COUNT; d++)
    for (size_t i = 0; i < sizeof problems / sizeof problems[0]; i++)
      matmul_rope_case(float_dtypes[d], &problems[i]);
}

/* matmul with a glu joining the product's halves (ABI 2.6). */
typedef struct matmul_glu_problem {
  int64_t m, n, k; /* n: the product's columns, out has n / 2 */
  int32_t layout;
  float alpha;
  bool bias, a_norm;
} matmul_glu_problem;

static void matmul_glu_case(gllmk_dtype dtype, const matmul_glu_problem *p) {
  const char *what = label("matmul %s glu M=%lld N=%lld K=%lld %s alpha=%g%s%s", dname(dtype),
                           (long long)p->m, (long long)p->n, (long long)p->k,
                           p->layout == GLLMK_B_NK ? "b[N,K]" : "b[K,N]", (double)p->alpha,
                           p->bias ? " bias" : "", p->a_norm ? " a_norm" : "");
  const bool nk = p->layout == GLLMK_B_NK;
  const float eps = 1e-5f;
  dev a = dev_random(dtype, SHAPE(p->m, p->k), -1, 1);
  dev b = dev_random(dtype, nk ? SHAPE(p->n, p->k) : SHAPE(p->k, p->n), -1, 1);
  dev bias = dev_random(dtype, SHAPE(p->n), -1, 1);
  dev out = dev_output(dtype, SHAPE(p->m, p->n / 2));
  double *product = host_alloc((size_t)(p->m * p->n) * sizeof *product);
  double *ref = host_alloc((size_t)out.numel * sizeof *ref);
  double *cond = host_alloc((size_t)out.numel * sizeof *cond);
  double *a_ref = host_copy(a.host, a.numel);
  if (p->a_norm) rms_normalize_rows(a_ref, p->m, p->k, eps);
  ref_matmul(&(ref_matmul_problem){.batch = 1, .m = p->m, .n = p->n, .k = p->k,
                                   .b_layout = p->layout, .alpha = p->alpha},
             a_ref, b.host, p->bias ? bias.host : NULL, product);
  ref_glu_halves(p->m, p->n, product, ref, cond);
  RUN_OP(gllmk_matmul(S.ctx, &(gllmk_matmul_args){
             .out = &out.t, .a = &a.t, .b = &b.t, .bias = p->bias ? &bias.t : NULL,
             .alpha = p->alpha, .b_layout = p->layout,
             .a_norm = p->a_norm ? GLLMK_A_NORM_RMS : GLLMK_A_NORM_NONE, .a_norm_eps = eps,
             .glu = GLLMK_GLU_SWIGLU}),
         what);
  dev_download(&out);
  expect_close_cond(what, dtype, out.numel, out.host, ref, cond);
}

/* cuda joins one row (its GEMV) or, aligned f16/bf16, up to 16 (its skinny GEMM) with b
 * as [N, K]; the rest runs on the cpu. */
static void conf_matmul_glu(void) {
  const bool quick = S.quick;
  const matmul_glu_problem problems[] = {
      /* M  N  K  layout alpha bias a_norm */
      /* The generator's gate/up of a Llama 3.2 1B-sized MLP. */
      {1, quick ? 4096 : 16384, quick ? 512 : 2048, GLLMK_B_NK, 1.0f, false, true},
      /* Halves ending inside a block of outputs, K off the vector loads. */
      {1, 10, 100, GLLMK_B_NK, 0.5f, true, false},
      {1, 2, 40, GLLMK_B_NK, -1.0f, true, true},
      {1, 198, 72, GLLMK_B_NK, 1.0f, false, false},
      {1, 64, 48, GLLMK_B_KN, 1.0f, true, false},
      {5, 96, 48, GLLMK_B_NK, 1.0f, true, true},
      {33, 160, 72, GLLMK_B_KN, 1.0f, false, false},
      /* Decode batches' gate/up, K split (cuda's skinny GEMM): halves of 512
       * columns, and of 101, which end inside a block's 64. */
      {16, 1024, quick ? 1024 : 2048, GLLMK_B_NK, 1.0f, true, true},
      {3, 202, 1024, GLLMK_B_NK, 0.5f, false, true},
      /* The same at 17-32 rows (cuda on Hopper: two TMA boxes of b a stage;
       * halves of 101 ending inside a block's 64), and 64 (cuda: refused). */
      {32, 1024, quick ? 1024 : 2048, GLLMK_B_NK, 1.0f, true, true},
      {20, 202, 1024, GLLMK_B_NK, 0.5f, false, true},
      {64, 198, 72, GLLMK_B_NK, 1.0f, false, false},
  };
  for (int d = 0; d < FLOAT_DTYPE_COUNT; d++)
    for (size_t i = 0; i < sizeof problems / sizeof problems[0]; i++)
      matmul_glu_case(float_dtypes[d], &problems[i]);
}

static void conf_matmul(void) {
  const bool quick = S.quick;
  const matmul_problem problems[] = {
      /* batch0 batch1  M  N  K  layout  b_batched alpha beta bias a_norm */
      {0, 0, 1, 1, 1, GLLMK_B_NK, false, 1.0f, 0.0f, false, false},
      {0, 0, 1, 1, 1, GLLMK_B_KN, false, 1.0f, 0.0f, true, false},
      {0, 0, 17, 45, 33, GLLMK_B_NK, false, 0.5f, 0.75f, true, false},
      {0, 0, 17, 45, 33, GLLMK_B_KN, false, 0.5f, 0.75f, true, false},
      {0, 0, 7, 13, 100, GLLMK_B_NK, false, -1.25f, 0.0f, false, false},
      {0, 0, 64, 96, 128, GLLMK_B_KN, false, 1.0f, 1.0f, false, false},
      {0, 0, 1, quick ? 256 : 4096, quick ? 1024 : 4096, GLLMK_B_NK, false, 1.0f, 0.0f, false, false},
      {0, 0, 1, quick ? 200 : 1000, quick ? 512 : 4096, GLLMK_B_KN, false, 1.0f, 0.0f, true, false},
      {0, 0, 1, 64, quick ? 3000 : 14336, GLLMK_B_NK, false, 1.0f, 0.0f, false, false},
      {0, 0, quick ? 5 : 37, quick ? 40 : 300, quick ? 64 : 1024, GLLMK_B_NK, false, 1.0f,
       0.0f, true, false},
      {2, 3, 5, 24, 40, GLLMK_B_NK, false, 1.0f, 0.0f, true, false},
      {2, 0, 9, 16, 24, GLLMK_B_NK, true, 1.0f, 0.0f, false, false},
      {2, 0, 9, 16, 24, GLLMK_B_KN, true, 0.5f, 2.0f, true, false},
      {3, 2, 1, 33, 8, GLLMK_B_KN, true, 1.0f, 0.0f, false, false},
      /* Decode batches (cuda's matmul_skinny): 16, 32 and 64-row tiles, N ending
       * inside a 128-column tile, K split over blocks, K not a multiple of 128. */
      {0, 0, 2, 200, quick ? 1024 : 4096, GLLMK_B_NK, false, 1.0f, 0.0f, true, false},
      {0, 0, 16, 64, 520, GLLMK_B_NK, false, 1.0f, 0.0f, false, false},
      {0, 0, 33, 130, quick ? 1000 : 3000, GLLMK_B_NK, false, 0.5f, 0.75f, true, false},
      {0, 0, 64, 520, quick ? 2048 : 4096, GLLMK_B_NK, false, 1.0f, 0.0f, false, false},
      /* On Hopper 17 to 64 rows take matmul_skinny_wgmma (TMA boxes of 32 or
       * 64 rows of a, zero past M): 32 rows into the residual with K split
       * in 4 or 8 and N ending 6 columns into a tile; 20 rows with K split
       * in 9 (its last split sums 9 partial tiles, four at a time); 17 rows,
       * one 64-deep pass. */
      {0, 0, 32, 390, quick ? 2048 : 4096, GLLMK_B_NK, false, 0.5f, 1.0f, true, false},
      {0, 0, 20, 200, 5000, GLLMK_B_NK, false, 1.0f, 0.5f, true, false},
      {0, 0, 17, 4100, 64, GLLMK_B_NK, false, 1.0f, 0.0f, true, false},
      /* cuda's matmul_simt (f32 and 16-bit operands it cannot put on tensor
       * cores) with enough 128 x 128 tiles to take them over 64 x 64 ones:
       * M and N cut inside a tile, K a multiple of 4 but not 8 (its vector
       * loads, the last k step half empty), then K odd (its scalar loads). */
      {0, 0, 1100, 4100, 36, GLLMK_B_NK, false, 1.0f, 0.0f, true, false},
      {0, 0, 1100, 4100, 37, GLLMK_B_KN, false, 0.5f, 0.75f, false, false},
      {3, 0, 700, 2100, 20, GLLMK_B_KN, true, 1.0f, 0.0f, true, false},
      /* The cpu GEMM's blocking: tiles along M and N, several row groups of a
       * (about 128 rows each), micro-tiles cut at the edges, a last K slice
       * (256 deep) cut short. */
      {0, 0, 259, quick ? 300 : 600, quick ? 300 : 520, GLLMK_B_NK, false, 0.5f, 0.75f, true,
       false},
      {0, 0, 259, quick ? 300 : 600, quick ? 300 : 520, GLLMK_B_KN, false, 1.0f, 0.0f, false,
       false},
      /* cuda's wgmma GEMM (Hopper; M >= 64, b as [N, K]), whose tile width
       * follows the shape: on 132 multiprocessors 128-column tiles (two and
       * three row tiles, K ending inside a 64-deep step, two batches with
       * their own b), then 256-column tiles in two waves (batches with their
       * own b) and in one full wave. With beta = 0 and rows 16-byte aligned
       * the tiles leave through shared memory and TMA stores, which stop at
       * M and N (N = 4000 and 1000 end inside a 64-column box). */
      {0, 0, 200, 4000, 64, GLLMK_B_NK, false, 1.0f, 0.0f, true, false},
      {0, 0, 300, 1000, 1000, GLLMK_B_NK, false, 0.5f, 0.75f, true, false},
      {0, 0, 300, 1000, 1000, GLLMK_B_NK, false, 0.5f, 0.0f, true, false},
      {2, 0, 130, 520, 600, GLLMK_B_NK, true, 1.0f, 0.0f, false, false},
      {2, 0, 1050, 2100, 40, GLLMK_B_NK, true, 0.5f, 0.75f, true, false},
      {0, 0, 1536, 2816, 16, GLLMK_B_NK, false, 1.0f, 0.0f, false, false},
      /* a_norm (cuda: b as [N, K], one row or, 16-bit and aligned, up to 16;
       * the rest skipped there):
       * the generator's decode projections (beta 1 adds into the residual),
       * K not a multiple of 8, batches of single rows, b as [K, N], GEMV and
       * GEMM rows on the cpu. */
      {0, 0, 1, 300, quick ? 1024 : 4096, GLLMK_B_NK, false, 1.0f, 1.0f, true, true},
      {0, 0, 1, 45, 33, GLLMK_B_NK, false, 0.5f, 0.0f, false, true},
      {2, 0, 1, 24, 40, GLLMK_B_NK, true, 1.0f, 0.0f, true, true},
      {0, 0, 1, 64, 100, GLLMK_B_KN, false, 1.0f, 0.0f, false, true},
      {0, 0, 3, 50, 64, GLLMK_B_NK, false, 1.0f, 0.5f, true, true}, /* vulkan's GEMV: 4 rows at most */
      {0, 0, 5, 24, 40, GLLMK_B_NK, false, 1.0f, 0.75f, false, true},
      {2, 0, 17, 45, 300, GLLMK_B_NK, false, 1.0f, 0.0f, true, true},
      /* The cpu GEMV reads F16/BF16 b a row at a time while a's rows fit
       * in 16 KiB (above: K = 4096 at one row, the boundary), four rows at
       * a time past it (here, with a row left over and K off every vector)
       * and for F32. */
      {0, 0, 1, 45, 4200, GLLMK_B_NK, false, 1.0f, 0.0f, false, false},
      {0, 0, 2, 37, 2100, GLLMK_B_NK, false, 0.5f, 0.75f, true, false},
      /* A decode batch's projection into the residual: cuda's skinny GEMM,
       * K split among blocks that each sum their part of a's squares; on
       * Hopper at 17-32 rows its wgmma form (32 rows, K split in 4 or 8).
       * 40 rows (K off the 64-wide TMA boxes, N ending inside a block):
       * cuda refuses a_norm above 32 rows, the other backends run it. */
      {0, 0, 16, 300, quick ? 1024 : 4096, GLLMK_B_NK, false, 1.0f, 1.0f, true, true},
      {0, 0, 32, 300, quick ? 1024 : 4096, GLLMK_B_NK, false, 1.0f, 1.0f, true, true},
      {0, 0, 40, 130, 1000, GLLMK_B_NK, false, 0.5f, 0.0f, false, true},
  };
  for (int d = 0; d < FLOAT_DTYPE_COUNT; d++)
    for (size_t i = 0; i < sizeof problems / sizeof problems[0]; i++)
      matmul_case(float_dtypes[d], &problems[i]);
  conf_matmul_rope();
  conf_matmul_glu();
}

/* --------------------------------------------------------- attention */

typedef struct attention_problem {
  int64_t batch, sq, skv, hq, hkv, d;
  int32_t causal;
  const int32_t *kv_lens; /* NULL = all keys */
  bool lse;
  /* Keys scaled by 1 + j / 16 (key j): scores that keep rising along the row,
   * so that a running maximum keeps moving. */
  bool rising;
  /* scale = -1 / sqrt(D): the API takes any finite scale, and a kernel that
   * took the row maximum of unscaled scores would then weigh the wrong keys. */
  bool negative_scale;
} attention_problem;

/* NaN over the keys past each sequence's length: padding must never be read. */
static void poison_padding(dev *kv, const attention_problem *p) {
  if (p->kv_lens == NULL) return;
  for (int64_t b = 0; b < p->batch; b++)
    for (int64_t j = p->kv_lens[b]; j < p->skv; j++)
      for (int64_t e = 0; e < p->hkv * p->d; e++)
        kv->host[(b * p->skv + j) * p->hkv * p->d + e] = NAN;
  dev_upload(kv);
}

static void attention_case(gllmk_dtype dtype, const attention_problem *p) {
  const char *what = label("attention %s B=%lld Sq=%lld Skv=%lld Hq=%lld Hkv=%lld D=%lld%s%s%s%s%s",
                           dname(dtype), (long long)p->batch, (long long)p->sq,
                           (long long)p->skv, (long long)p->hq, (long long)p->hkv,
                           (long long)p->d, p->causal ? " causal" : "",
                           p->kv_lens ? " kv_lens" : "", p->lse ? " lse" : "",
                           p->rising ? " rising" : "", p->negative_scale ? " negative scale" : "");
  dev q = dev_random(dtype, SHAPE(p->batch, p->sq, p->hq, p->d), -1.5, 1.5);
  dev k = dev_random(dtype, SHAPE(p->batch, p->skv, p->hkv, p->d), -1.5, 1.5);
  if (p->rising) {
    for (int64_t i = 0; i < k.numel; i++) {
      int64_t key = i / (p->hkv * p->d) % p->skv;
      k.host[i] *= 1.0 + (double)key / 16.0;
    }
    dev_upload(&k);
  }
  dev v = dev_random(dtype, SHAPE(p->batch, p->skv, p->hkv, p->d), -1, 1);
  poison_padding(&k, p);
  poison_padding(&v, p);
  dev lens = p->kv_lens ? dev_ints(SHAPE(p->batch), p->kv_lens) : q;
  dev out = dev_output(dtype, SHAPE(p->batch, p->sq, p->hq, p->d));
  dev lse = dev_output(GLLMK_F32, SHAPE(p->batch, p->hq, p->sq));
  ref_attention_problem rp = {p->batch, p->sq, p->skv, p->hq, p->hkv, p->d,
                              (p->negative_scale ? -1.0 : 1.0) / sqrt((double)p->d), p->causal};
  double *ref = host_alloc((size_t)out.numel * sizeof *ref);
  double *ref_lse = host_alloc((size_t)lse.numel * sizeof *ref_lse);
  double *lse_cond = host_alloc((size_t)lse.numel * sizeof *lse_cond);
  double *out_cond = host_alloc((size_t)out.numel * sizeof *out_cond);
  ref_attention(&rp, q.host, k.host, v.host, p->kv_lens, ref, ref_lse, lse_cond, out_cond);
  RUN_OP(gllmk_attention(S.ctx, &(gllmk_attention_args){&out.t, &q.t, &k.t, &v.t,
                                                         p->kv_lens ? &lens.t : NULL,
                                                         p->lse ? &lse.t : NULL,
                                                         (float)rp.scale, p->causal}),
         what);
  dev_download(&out);
  expect_close_cond(label("%s: out", what), dtype, out.numel, out.host, ref, out_cond);
  if (p->lse) {
    dev_download(&lse);
    /* lse is f32, but its inputs had dtype's precision. Its scores are dot
     * products: their rounding error is relative to scale * sum |q k|. */
    expect_close_cond(label("%s: lse", what), dtype, lse.numel, lse.host, ref_lse, lse_cond);
  }
}

static void conf_attention(void) {
  const bool quick = S.quick;
  static const int32_t ragged[] = {40, 17, 2}; /* 2 < Sq: rows that see no key */
  static const int32_t decode_lens[] = {300, 1};
  /* Prefill with lengths that end inside a tile of keys (the Hopper kernel
   * copies such a tile of V itself, zero-filled past the length). */
  static const int32_t prefill_lens[] = {150, 77}, prefill_lens_full[] = {300, 129};
  /* Causal, 200 queries over 50 keys: rows 0-149 see none, a whole 128-row
   * tile of the tensor-core kernels among them. */
  static const int32_t tile_unseen_lens[] = {50};
  const attention_problem problems[] = {
      /* B  Sq  Skv  Hq  Hkv  D  causal kv_lens lse rising negative_scale */
      {1, 1, 1, 1, 1, 8, 1, NULL, true, false, false},
      {1, 37, 37, 2, 2, 64, 0, NULL, false, false, false},
      {1, 37, 37, 2, 2, 64, 1, NULL, true, false, false},
      {2, quick ? 16 : 64, quick ? 16 : 64, quick ? 8 : 32, quick ? 2 : 8, 128, 1, NULL, true, false, false},
      {1, 5, 50, 4, 1, 64, 1, NULL, true, false, false}, /* MQA, Sq < Skv */
      {3, 4, 40, 4, 2, 64, 1, ragged, true, false, false},
      {3, 4, 40, 4, 2, 64, 0, ragged, true, false, false},
      {2, 1, 300, 4, 2, 8, 1, decode_lens, true, false, false},
      {2, 1, 300, 4, 2, 256, 0, decode_lens, false, false, false},
      {1, 1, quick ? 200 : 1000, quick ? 8 : 32, quick ? 2 : 8, 128, 1, NULL, true, false, false},
      {1, 9, 23, 6, 3, 256, 1, NULL, true, false, false},
      {2, 3, 19, 2, 1, 24, 1, NULL, false, false, false},
      {2, 40, 70, 4, 2, 64, 1, NULL, true, true, false},
      {1, 33, 100, 8, 2, 128, 0, NULL, false, true, false},
      {2, 130, 200, 4, 2, 256, 1, prefill_lens, true, false, false},
      {2, 150, 300, 4, 2, 128, 0, prefill_lens_full, true, false, false},
      {1, 70, 200, 2, 2, 256, 0, NULL, false, true, false},
      {1, 140, 140, 2, 1, 80, 1, NULL, true, false, false}, /* head dim padded to 128 */
      {1, 200, 200, 2, 1, 128, 1, tile_unseen_lens, true, false, false},
      {2, 40, 70, 4, 2, 64, 1, NULL, true, false, true},
      {1, 130, 130, 4, 2, 128, 0, NULL, true, false, true},
      {2, 1, 300, 4, 2, 128, 1, decode_lens, true, false, true},
  };
  for (int d = 0; d < FLOAT_DTYPE_COUNT; d++)
    for (size_t i = 0; i < sizeof problems / sizeof problems[0]; i++) {
      /* Rising scores reach tens, where F32's 1e-5 tolerance is below what
       * rounding the scores alone costs; they are there for the 16-bit
       * tensor-core kernels, whose running reference moves in steps. */
      if (problems[i].rising && float_dtypes[d] == GLLMK_F32) continue;
      attention_case(float_dtypes[d], &problems[i]);
    }
}

/* --------------------------------------------------------- kv_append */

typedef struct kv_cache {
  dev k, v;
  int64_t blocks, block_size, hkv, d;
} kv_cache;

/* Caches holding `fill_nan` ? NaN : random values everywhere. */
static kv_cache kv_cache_new(gllmk_dtype dtype, int64_t blocks, int64_t block_size, int64_t hkv,
                             int64_t d, bool fill_nan) {
  kv_cache c = {.blocks = blocks, .block_size = block_size, .hkv = hkv, .d = d};
  shape s = SHAPE(blocks, block_size, hkv, d);
  if (fill_nan) {
    c.k = dev_output(dtype, s);
    c.v = dev_output(dtype, s);
    for (int64_t i = 0; i < c.k.numel; i++) c.k.host[i] = c.v.host[i] = NAN;
  } else {
    c.k = dev_random(dtype, s, -1, 1);
    c.v = dev_random(dtype, s, -1, 1);
  }
  return c;
}

static void kv_append_case(gllmk_dtype dtype, int64_t tokens, bool out_of_range) {
  const char *what = label("kv_append %s T=%lld%s", dname(dtype), (long long)tokens,
                           out_of_range ? " with an out-of-range slot" : " with a padding slot");
  kv_cache c = kv_cache_new(dtype, 7, 16, 2, 64, false);
  int64_t slot_count = c.blocks * c.block_size, row = c.hkv * c.d;
  int32_t *order = host_alloc((size_t)slot_count * sizeof *order);
  test_rng_permutation(&S.rng, order, slot_count);
  int32_t *slots = host_alloc((size_t)tokens * sizeof *slots);
  for (int64_t t = 0; t < tokens; t++) slots[t] = order[t];
  slots[tokens / 2] = -1; /* padding: skipped */
  if (out_of_range) slots[tokens - 1] = (int32_t)slot_count;
  dev k = dev_random(dtype, SHAPE(tokens, c.hkv, c.d), -1, 1);
  dev v = dev_random(dtype, SHAPE(tokens, c.hkv, c.d), -1, 1);
  dev slot_t = dev_ints(SHAPE(tokens), slots);
  double *k_expected = host_copy(c.k.host, c.k.numel);
  double *v_expected = host_copy(c.v.host, c.v.numel);
  for (int64_t t = 0; t < tokens; t++) {
    if (slots[t] < 0 || slots[t] >= slot_count) continue;
    memcpy(k_expected + slots[t] * row, k.host + t * row, (size_t)row * sizeof(double));
    memcpy(v_expected + slots[t] * row, v.host + t * row, (size_t)row * sizeof(double));
  }
  RUN_OP(gllmk_kv_append(S.ctx, &(gllmk_kv_append_args){&c.k.t, &c.v.t, &k.t, &v.t, &slot_t.t}),
         what);
  gllmk_status sync = gllmk_synchronize(S.ctx);
  gllmk_status expected = out_of_range ? GLLMK_ERR_OUT_OF_RANGE : GLLMK_OK;
  if (sync != expected)
    conf_fail("%s: synchronize returned %s (%s), expected %s", what, gllmk_status_string(sync),
              gllmk_last_error(), gllmk_status_string(expected));
  else if (out_of_range && !test_contains(gllmk_last_error(), "gllmk_kv_append"))
    conf_fail("%s: the error message \"%s\" does not name gllmk_kv_append", what,
              gllmk_last_error());
  if (out_of_range && (sync = gllmk_synchronize(S.ctx)) != GLLMK_OK)
    conf_fail("%s: the second synchronize returned %s", what, gllmk_status_string(sync));
  dev_download(&c.k);
  dev_download(&c.v);
  expect_equal(label("%s: k_cache", what), c.k.numel, c.k.host, k_expected);
  expect_equal(label("%s: v_cache", what), c.v.numel, c.v.host, v_expected);
}

/* Which slots a matmul kv case's rows take. */
typedef enum kv_slot_kind { SLOTS_VALID, SLOTS_PADDING, SLOTS_PAST_END } kv_slot_kind;

/* kv_append's work inside a matmul (ABI 2.6): a q/k/v projection of Hq = 4,
 * Hkv = 2, D = 64 with 8 more columns after v, optionally turned (rope on q
 * and k, as the generator's); the caches must then hold, at each row's
 * slot, exactly the k and v values out received, and nothing else changes. */
static void matmul_kv_case(gllmk_dtype dtype, int64_t m, int64_t k, bool rope, kv_slot_kind kind) {
  static const char *const kinds[] = {"", " with a padding slot", " with a slot past the cache"};
  const char *what = label("matmul %s kv M=%lld K=%lld%s%s", dname(dtype), (long long)m, (long long)k,
                           rope ? " rope" : "", kinds[kind]);
  const int64_t hq = 4, d = 64;
  kv_cache c = kv_cache_new(dtype, 7, 16, 2, d, false);
  const int64_t slot_count = c.blocks * c.block_size, width = c.hkv * d, first = hq * d;
  const int64_t n = first + 2 * width + 8;
  int32_t *order = host_alloc((size_t)slot_count * sizeof *order);
  test_rng_permutation(&S.rng, order, slot_count);
  int32_t *slots = host_alloc((size_t)m * sizeof *slots), *positions = host_alloc((size_t)m * sizeof *positions);
  for (int64_t r = 0; r < m; r++) {
    slots[r] = order[r];
    positions[r] = (int32_t)((9000 + 4073 * r) % 9001);
  }
  if (kind == SLOTS_PADDING) slots[m - 1] = -1;
  if (kind == SLOTS_PAST_END) slots[m - 1] = (int32_t)slot_count;
  dev a = dev_random(dtype, SHAPE(m, k), -1, 1);
  dev b = dev_random(dtype, SHAPE(n, k), -1, 1);
  dev out = dev_output(dtype, SHAPE(m, n));
  dev slot_t = dev_ints(SHAPE(m), slots);
  dev pos = dev_ints(SHAPE(m), positions);
  double *ref = host_alloc((size_t)out.numel * sizeof *ref);
  ref_matmul(&(ref_matmul_problem){.batch = 1, .m = m, .n = n, .k = k, .b_layout = GLLMK_B_NK,
                                   .alpha = 1.0f},
             a.host, b.host, NULL, ref);
  const double *slack = rope ? rope_pair_slack(m, n, first + width, d, d, ref) : NULL;
  if (rope) ref_rope_columns(m, n, first + width, d, ref, positions, 10000.0, NULL, d);
  double *k_expected = host_copy(c.k.host, c.k.numel);
  double *v_expected = host_copy(c.v.host, c.v.numel);
  RUN_OP(gllmk_matmul(S.ctx, &(gllmk_matmul_args){
             .out = &out.t, .a = &a.t, .b = &b.t, .alpha = 1.0f, .b_layout = GLLMK_B_NK,
             .rope_dim = rope ? (int32_t)d : 0, .rope_head_dim = rope ? (int32_t)d : 0,
             .rope_columns = rope ? (int32_t)(first + width) : 0, .rope_theta = rope ? 10000.0f : 0.0f,
             .rope_positions = rope ? &pos.t : NULL, .kv_first = (int32_t)first,
             .kv_k_cache = &c.k.t, .kv_v_cache = &c.v.t, .kv_slots = &slot_t.t}),
         what);
  gllmk_status sync = gllmk_synchronize(S.ctx);
  gllmk_status expected = kind == SLOTS_PAST_END ? GLLMK_ERR_OUT_OF_RANGE : GLLMK_OK;
  if (sync != expected)
    conf_fail("%s: synchronize returned %s (%s), expected %s", what, gllmk_status_string(sync),
              gllmk_last_error(), gllmk_status_string(expected));
  dev_download(&out);
  expect_close_cond(what, dtype, out.numel, out.host, ref, slack);
  for (int64_t r = 0; r < m; r++) {
    if (slots[r] < 0 || slots[r] >= slot_count) continue;
    memcpy(k_expected + slots[r] * width, out.host + r * n + first, (size_t)width * sizeof(double));
    memcpy(v_expected + slots[r] * width, out.host + r * n + first + width,
           (size_t)width * sizeof(double));
  }
  dev_download(&c.k);
  dev_download(&c.v);
  expect_equal(label("%s: k_cache", what), c.k.numel, c.k.host, k_expected);
  expect_equal(label("%s: v_cache", what), c.v.numel, c.v.host, v_expected);
}

/* cuda copies k and v inside its one-row GEMV and its skinny GEMM (K split
 * at 16 and 32 rows; 24 rows on Hopper in one pass; 64 refused). */
static void conf_kv_append(void) {
  for (int d = 0; d < FLOAT_DTYPE_COUNT; d++) {
    kv_append_case(float_dtypes[d], 2, false);
    kv_append_case(float_dtypes[d], 37, false);
    kv_append_case(float_dtypes[d], 37, true);
    matmul_kv_case(float_dtypes[d], 1, 96, true, SLOTS_VALID);
    matmul_kv_case(float_dtypes[d], 1, 96, false, SLOTS_VALID);
    matmul_kv_case(float_dtypes[d], 1, 96, true, SLOTS_PADDING);
    matmul_kv_case(float_dtypes[d], 1, 96, true, SLOTS_PAST_END);
    matmul_kv_case(float_dtypes[d], 3, 96, true, SLOTS_VALID);
    matmul_kv_case(float_dtypes[d], 3, 96, false, SLOTS_PAST_END);
    matmul_kv_case(float_dtypes[d], 16, 1536, true, SLOTS_PADDING);
    matmul_kv_case(float_dtypes[d], 32, 1536, true, SLOTS_PADDING);
    matmul_kv_case(float_dtypes[d], 24, 96, false, SLOTS_PAST_END);
    matmul_kv_case(float_dtypes[d], 64, 96, true, SLOTS_VALID);
  }
}

/* --------------------------------------------------- paged_attention */

/* B sequences in a paged cache: sequence b owns blocks table[b][0..]. */
typedef struct paged_batch {
  int64_t batch, max_blocks;
  const int32_t *seq_lens, *q_lens;
  int32_t *table;    /* [batch, max_blocks] */
  int32_t *q_starts; /* [batch + 1] */
} paged_batch;

/* Shuffled blocks for every sequence; the rest of the table holds other
 * (valid) block numbers that must never be read. */
static paged_batch paged_layout(const int32_t *seq_lens, const int32_t *q_lens, int64_t batch,
                                const kv_cache *c) {
  paged_batch pb = {.batch = batch, .seq_lens = seq_lens, .q_lens = q_lens};
  for (int64_t b = 0; b < batch; b++) {
    int64_t need = (seq_lens[b] + c->block_size - 1) / c->block_size;
    if (need > pb.max_blocks) pb.max_blocks = need;
  }
  pb.max_blocks += 1;
  int32_t *order = host_alloc((size_t)c->blocks * sizeof *order);
  test_rng_permutation(&S.rng, order, c->blocks);
  pb.table = host_alloc((size_t)(batch * pb.max_blocks) * sizeof *pb.table);
  pb.q_starts = host_alloc((size_t)(batch + 1) * sizeof *pb.q_starts);
  int64_t next = 0;
  for (int64_t b = 0; b < batch; b++) {
    int64_t need = (seq_lens[b] + c->block_size - 1) / c->block_size;
    for (int64_t i = 0; i < pb.max_blocks; i++)
      pb.table[b * pb.max_blocks + i] =
          i < need ? order[next++] : (int32_t)test_rng_int(&S.rng, 0, c->blocks - 1);
    pb.q_starts[b + 1] = pb.q_starts[b] + q_lens[b];
  }
  ck_assert_int_le(next, c->blocks);
  return pb;
}

static int64_t paged_slot(const paged_batch *pb, const kv_cache *c, int64_t b, int64_t pos) {
  return (int64_t)pb->table[b * pb->max_blocks + pos / c->block_size] * c->block_size +
         pos % c->block_size;
}

typedef struct paged_problem {
  int64_t hq, hkv, d, block_size;
  int64_t batch;
  int32_t seq_lens[4], q_lens[4];
  const char *name;
  /* Keys scaled by 1 + pos / 16, as attention_problem's `rising`. */
  bool rising;
  bool negative_scale; /* as attention_problem's */
} paged_problem;

static void paged_case(gllmk_dtype dtype, const paged_problem *p) {
  const char *what = label("paged_attention %s %s Hq=%lld Hkv=%lld D=%lld block=%lld",
                           dname(dtype), p->name, (long long)p->hq, (long long)p->hkv,
                           (long long)p->d, (long long)p->block_size);
  int64_t blocks = 0, total_q = 0, row = p->hkv * p->d;
  for (int64_t b = 0; b < p->batch; b++) {
    blocks += (p->seq_lens[b] + p->block_size - 1) / p->block_size;
    total_q += p->q_lens[b];
  }
  kv_cache c = kv_cache_new(dtype, blocks + 3, p->block_size, p->hkv, p->d, true);
  paged_batch pb = paged_layout(p->seq_lens, p->q_lens, p->batch, &c);
  dev q = dev_random(dtype, SHAPE(total_q, p->hq, p->d), -1.5, 1.5);
  dev out = dev_output(dtype, SHAPE(total_q, p->hq, p->d));
  double *ref = host_alloc((size_t)out.numel * sizeof *ref);
  double scale = (p->negative_scale ? -1.0 : 1.0) / sqrt((double)p->d);
  /* Each sequence's keys and values go to its blocks; the rest stays NaN. */
  for (int64_t b = 0; b < p->batch; b++)
    for (int64_t pos = 0; pos < p->seq_lens[b]; pos++) {
      int64_t slot = paged_slot(&pb, &c, b, pos);
      double k_scale = p->rising ? 1.0 + (double)pos / 16.0 : 1.0;
      for (int64_t e = 0; e < row; e++) {
        c.k.host[slot * row + e] = test_rng_uniform(&S.rng, -1.5, 1.5) * k_scale;
        c.v.host[slot * row + e] = test_rng_uniform(&S.rng, -1, 1);
      }
    }
  dev_upload(&c.k);
  dev_upload(&c.v);
  for (int64_t b = 0; b < p->batch; b++) {
    int64_t len = p->seq_lens[b], q_row = p->hq * p->d;
    double *k = host_alloc((size_t)(len * row) * sizeof *k);
    double *v = host_alloc((size_t)(len * row) * sizeof *v);
    for (int64_t pos = 0; pos < len; pos++) {
      int64_t slot = paged_slot(&pb, &c, b, pos);
      memcpy(k + pos * row, c.k.host + slot * row, (size_t)row * sizeof *k);
      memcpy(v + pos * row, c.v.host + slot * row, (size_t)row * sizeof *v);
    }
    ref_attention_problem rp = {1, p->q_lens[b], len, p->hq, p->hkv, p->d, scale, 1};
    ref_attention(&rp, q.host + pb.q_starts[b] * q_row, k, v, NULL, ref + pb.q_starts[b] * q_row,
                  NULL, NULL, NULL);
  }
  dev table = dev_ints(SHAPE(p->batch, pb.max_blocks), pb.table);
  dev starts = dev_ints(SHAPE(p->batch + 1), pb.q_starts);
  dev lens = dev_ints(SHAPE(p->batch), p->seq_lens);
  RUN_OP(gllmk_paged_attention(S.ctx, &(gllmk_paged_attention_args){
                                          &out.t, &q.t, &c.k.t, &c.v.t, &table.t, &starts.t,
                                          &lens.t, (float)scale}),
         what);
  dev_download(&out);
  expect_close(what, dtype, out.numel, out.host, ref);
}

/* The same sequences through attention (contiguous, kv_lens, causal) and
 * through kv_append + paged_attention must agree. */
static void attention_vs_paged(gllmk_dtype dtype) {
  const char *what = label("attention vs kv_append+paged_attention %s", dname(dtype));
  const int64_t batch = 3, sq = 4, skv = 40, hq = 8, hkv = 2, d = 64;
  static const int32_t lens[] = {4, 19, 40}, q_lens[] = {4, 4, 4};
  attention_problem ap = {batch, sq, skv, hq, hkv, d, 1, lens, false, false, false};
  dev q = dev_random(dtype, SHAPE(batch, sq, hq, d), -1.5, 1.5);
  dev k = dev_random(dtype, SHAPE(batch, skv, hkv, d), -1.5, 1.5);
  dev v = dev_random(dtype, SHAPE(batch, skv, hkv, d), -1, 1);
  poison_padding(&k, &ap);
  poison_padding(&v, &ap);
  dev kv_lens = dev_ints(SHAPE(batch), lens);
  dev out_contiguous = dev_output(dtype, SHAPE(batch, sq, hq, d));
  float scale = 1.0f / sqrtf((float)d);
  RUN_OP(gllmk_attention(S.ctx, &(gllmk_attention_args){&out_contiguous.t, &q.t, &k.t, &v.t,
                                                         &kv_lens.t, NULL, scale, 1}),
         what);

  kv_cache c = kv_cache_new(dtype, 12, 8, hkv, d, true);
  paged_batch pb = paged_layout(lens, q_lens, batch, &c);
  int32_t *slots = host_alloc((size_t)(batch * skv) * sizeof *slots);
  for (int64_t b = 0; b < batch; b++)
    for (int64_t pos = 0; pos < skv; pos++)
      slots[b * skv + pos] = pos < lens[b] ? (int32_t)paged_slot(&pb, &c, b, pos) : -1;
  dev slot_t = dev_ints(SHAPE(batch * skv), slots);
  gllmk_tensor k_rows = reshape(&k.t, SHAPE(batch * skv, hkv, d));
  gllmk_tensor v_rows = reshape(&v.t, SHAPE(batch * skv, hkv, d));
  RUN_OP(gllmk_kv_append(S.ctx, &(gllmk_kv_append_args){&c.k.t, &c.v.t, &k_rows, &v_rows,
                                                         &slot_t.t}),
         what);
  dev table = dev_ints(SHAPE(batch, pb.max_blocks), pb.table);
  dev starts = dev_ints(SHAPE(batch + 1), pb.q_starts);
  dev seq_lens = dev_ints(SHAPE(batch), lens);
  gllmk_tensor q_rows = reshape(&q.t, SHAPE(batch * sq, hq, d));
  dev out_paged = dev_output(dtype, SHAPE(batch * sq, hq, d));
  RUN_OP(gllmk_paged_attention(S.ctx, &(gllmk_paged_attention_args){
                                          &out_paged.t, &q_rows, &c.k.t, &c.v.t, &table.t,
                                          &starts.t, &seq_lens.t, scale}),
         what);
  dev_download(&out_contiguous);
  dev_download(&out_paged);
  expect_close(what, dtype, out_paged.numel, out_paged.host, out_contiguous.host);
}

static void conf_paged_attention(void) {
  const bool quick = S.quick;
  const paged_problem problems[] = {
      {8, 2, 64, 16, 3, {1, 16, 33}, {1, 1, 1}, "decode", false, false},
      {8, 2, 64, 16, 4, {37, 50, 70, 20}, {1, 16, 30, 20},
       "decode + chunked prefill + prefill after prefix + prefill", false, false},
      {4, 4, 128, 5, 2, {23, 9}, {7, 9}, "odd block size", false, false},
      {quick ? 8 : 32, quick ? 2 : 8, 128, 16, 2, {quick ? 40 : 300, 17}, {1, 17},
       "GQA decode and prefill", false, false},
      {4, 1, 256, 16, 1, {45}, {45}, "MQA prefill D=256", false, false},
      {2, 1, 8, 4, 2, {3, 1}, {2, 1}, "tiny D=8", false, false},
      {8, 2, 128, 16, 4, {1, 300, 77, quick ? 400 : 1000}, {1, 1, 1, 1}, "GQA decode, long", false, false},
      {4, 1, 256, 16, 3, {45, 20, 2}, {1, 0, 2}, "decode with an empty sequence, D=256", false, false},
      {4, 4, 64, 5, 2, {23, 9}, {1, 1}, "decode, odd block size", false, false},
      {8, 2, 128, 16, 2, {300, 77}, {1, 1}, "GQA decode, rising scores", true, false},
      {8, 2, 128, 16, 1, {4000}, {1}, "decode of one long sequence (cuda: the most splits)", false, false},
      {8, 2, 128, 16, 3, {300, 77, 40}, {1, 1, 40}, "decode and prefill, negative scale", false, true},
  };
  for (int d = 0; d < FLOAT_DTYPE_COUNT; d++) {
    for (size_t i = 0; i < sizeof problems / sizeof problems[0]; i++) {
      /* As in conf_attention: rising scores are for the 16-bit types. */
      if (problems[i].rising && float_dtypes[d] == GLLMK_F32) continue;
      paged_case(float_dtypes[d], &problems[i]);
    }
    attention_vs_paged(float_dtypes[d]);
  }
}

/* ------------------------------------------------------------ argmax */

/* The cpu backend's definition: NaN is smaller than every number, so a row
 * of NaN gives 0. */
static int64_t argmax_of(const double *row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; i++)
    if (row[i] > row[best] || (isnan(row[best]) && !isnan(row[i]))) best = i;
  return best;
}

/* Uploads logits (of shape logits_shape) and checks gllmk_argmax of its
 * rows against argmax_of. */
static void expect_argmax(const char *what, dev *logits, shape logits_shape) {
  int64_t rows, vocab;
  rows_cols(logits_shape, &rows, &vocab);
  dev_upload(logits);
  shape out_shape = logits_shape;
  out_shape.ndim--;
  if (out_shape.ndim == 0) out_shape = SHAPE(1);
  dev out = dev_output(GLLMK_I32, out_shape);
  double *expected = host_alloc((size_t)rows * sizeof *expected);
  for (int64_t r = 0; r < rows; r++)
    expected[r] = (double)argmax_of(logits->host + r * vocab, vocab);
  RUN_OP(gllmk_argmax(S.ctx, &(gllmk_argmax_args){&out.t, &logits->t}), what);
  dev_download(&out);
  expect_equal(what, rows, out.host, expected);
}

static void argmax_case(gllmk_dtype dtype, shape logits_shape, bool ties) {
  const char *what = label("argmax %s %s%s", dname(dtype), shape_text(logits_shape),
                           ties ? " with tied maxima" : "");
  int64_t rows, vocab;
  rows_cols(logits_shape, &rows, &vocab);
  dev logits = dev_new(dtype, logits_shape);
  for (int64_t i = 0; i < logits.numel; i++) logits.host[i] = test_rng_uniform(&S.rng, -10, 10);
  /* Three copies of the maximum at random columns, and a fourth next to one
   * of them (a tie within one 8-element load: cuda looks there by value). */
  for (int64_t r = 0; ties && r < rows; r++)
    for (int copies = 0; copies < 3; copies++) {
      const int64_t c = test_rng_int(&S.rng, 0, vocab - 1);
      logits.host[r * vocab + c] = 12.0;
      if (copies == 0 && c + 1 < vocab) logits.host[r * vocab + c + 1] = 12.0;
    }
  expect_argmax(what, &logits, logits_shape);
}

/* Rows with NaN: NaN first and scattered through random numbers; all NaN;
 * NaN but for one -inf; NaN but for tied numbers. As one [4, vocab] call,
 * or with `one_row_a_call` four [1, vocab] calls (a backend may split a
 * lone row over its threads or blocks). */
static void argmax_nan_case(gllmk_dtype dtype, int64_t vocab, bool one_row_a_call) {
  double *rows = host_alloc((size_t)(4 * vocab) * sizeof *rows);
  for (int64_t i = 0; i < vocab; i++)
    rows[i] = i == 0 || test_rng_int(&S.rng, 0, 9) == 0 ? NAN : test_rng_uniform(&S.rng, -10, 10);
  for (int64_t i = vocab; i < 4 * vocab; i++) rows[i] = NAN;
  rows[2 * vocab + test_rng_int(&S.rng, 0, vocab - 1)] = -INFINITY;
  for (int copies = 0; copies < 3; copies++) rows[3 * vocab + test_rng_int(&S.rng, 0, vocab - 1)] = -3.0;
  const int64_t per_call = one_row_a_call ? 1 : 4;
  for (int64_t first = 0; first < 4; first += per_call) {
    shape logits_shape = SHAPE(per_call, vocab);
    const char *what = label("argmax %s %s with NaN", dname(dtype), shape_text(logits_shape));
    dev logits = dev_new(dtype, logits_shape);
    memcpy(logits.host, rows + first * vocab, (size_t)(per_call * vocab) * sizeof *rows);
    expect_argmax(what, &logits, logits_shape);
  }
}

/* Rows of negative numbers only: NaN with the sign bit set among them, and
 * -0 before +0 (a tie: the first zero wins); NaN with the sign bit set but
 * for one -inf. Backends may order F16/BF16 by their bits (cpu), where
 * these sit at the edges of the order. */
static void argmax_sign_case(gllmk_dtype dtype, int64_t vocab) {
  shape logits_shape = SHAPE(3, vocab);
  const char *what = label("argmax %s %s of negative numbers, -NaN, -0 and +0", dname(dtype),
                           shape_text(logits_shape));
  dev logits = dev_new(dtype, logits_shape);
  double *row = logits.host;
  for (int64_t i = 0; i < 2 * vocab; i++)
    row[i] = i % vocab == 0 || test_rng_int(&S.rng, 0, 9) == 0 ? -NAN : test_rng_uniform(&S.rng, -10, -1);
  const int64_t zero = test_rng_int(&S.rng, 1, vocab - 2);
  row[zero] = -0.0;
  row[zero + 1 + test_rng_int(&S.rng, 0, vocab - zero - 2)] = 0.0;
  for (int64_t i = 2 * vocab; i < 3 * vocab; i++) row[i] = -NAN;
  row[2 * vocab + test_rng_int(&S.rng, 0, vocab - 1)] = -INFINITY;
  expect_argmax(what, &logits, logits_shape);
}

static void conf_argmax(void) {
  for (int d = 0; d < FLOAT_DTYPE_COUNT; d++) {
    gllmk_dtype dtype = float_dtypes[d];
    argmax_case(dtype, SHAPE(1, 1), false);
    argmax_case(dtype, SHAPE(3, 7), false);
    argmax_case(dtype, SHAPE(5, 1000), true);
    argmax_case(dtype, SHAPE(2, 3, 100), true);
    argmax_case(dtype, SHAPE(4, S.quick ? 5000 : 32000), false);
    argmax_case(dtype, SHAPE(2, S.quick ? 5000 : 151936), true);
    /* Rows split into chunks (vulkan): 16-byte words and a tail, elements. */
    argmax_case(dtype, SHAPE(1, 8195), true);
    argmax_case(dtype, SHAPE(3, 4099), true);
    argmax_nan_case(dtype, 1000, false);
    argmax_nan_case(dtype, 8195, false);
    /* Lone rows long enough to be shared out (the cpu's threads, cuda's blocks). */
    argmax_case(dtype, SHAPE(1, S.quick ? 70001 : 151936), true);
    argmax_nan_case(dtype, 70001, true);
    argmax_sign_case(dtype, 1000);
    argmax_sign_case(dtype, 8195);
  }
}

/* ------------------------------------------------------------ sample */

typedef struct sample_params {
  float temperature, top_p, min_p;
  int32_t top_k;
} sample_params;

static gllmk_status run_sample(const dev *out, const dev *logits, const sample_params *sp,
                               uint64_t seed, uint64_t offset) {
  return gllmk_sample(S.ctx, &(gllmk_sample_args){&out->t, &logits->t, sp->temperature,
                                                  sp->top_p, sp->min_p, sp->top_k, seed, offset});
}

static int64_t count_differences(const double *a, const double *b, int64_t n) {
  int64_t differ = 0;
  for (int64_t i = 0; i < n; i++) differ += a[i] != b[i];
  return differ;
}

/* Same (seed, offset) -> same tokens; another offset or seed -> others.
 * With top_k, fewer than top_k logits of its row are larger than every
 * token's (which holds whether a backend keeps all the ties at the top_k
 * threshold or not). */
static void sample_determinism(gllmk_dtype dtype, int64_t vocab, const sample_params *sp) {
  const char *what = label("sample %s determinism width=%lld top_k=%d", dname(dtype), (long long)vocab,
                           sp->top_k);
  const int64_t rows = vocab > 4096 ? 16 : 64;
  dev logits = dev_random(dtype, SHAPE(rows, vocab), -3, 3);
  dev first = dev_output(GLLMK_I32, SHAPE(rows));
  dev again = dev_output(GLLMK_I32, SHAPE(rows));
  dev next_offset = dev_output(GLLMK_I32, SHAPE(rows));
  dev next_seed = dev_output(GLLMK_I32, SHAPE(rows));
  RUN_OP(run_sample(&first, &logits, sp, 1234, 7), what);
  RUN_OP(run_sample(&again, &logits, sp, 1234, 7), what);
  RUN_OP(run_sample(&next_offset, &logits, sp, 1234, 8), what);
  RUN_OP(run_sample(&next_seed, &logits, sp, 1235, 7), what);
  dev_download(&first);
  dev_download(&again);
  dev_download(&next_offset);
  dev_download(&next_seed);
  for (int64_t r = 0; r < rows; r++) {
    const double token = first.host[r];
    if (!token_in_row(what, r, token, vocab)) return;
    const double *row = logits.host + r * vocab;
    if (sp->top_k > 0 && count_larger(row, vocab, row[(int64_t)token]) >= sp->top_k) {
      conf_fail("%s: row %lld drew token %g, not among its top_k", what, (long long)r, token);
      return;
    }
  }
  expect_equal(label("%s: same seed and offset", what), rows, again.host, first.host);
  /* Rows of ~uniform draws over 1000 (or top_k = 50) tokens: all equal by
   * chance is impossible. */
  if (count_differences(first.host, next_offset.host, rows) == 0)
    conf_fail("%s: offset 8 drew exactly the tokens of offset 7", what);
  if (count_differences(first.host, next_seed.host, rows) == 0)
    conf_fail("%s: seed 1235 drew exactly the tokens of seed 1234", what);
  if (count_differences(first.host, first.host + 1, rows - 1) == 0)
    conf_fail("%s: every row drew the same token", what);
}

/* Rows wider than a chunk of cuda's top_k path (2048 logits) whose top_k
 * threshold is tied across chunks. Backends differ on such ties (cuda keeps
 * every tied token, cpu the first ones by id, as the API says), so the
 * checks hold either way: the same token for the same seed and offset, and
 * by the kind of row (r % 3):
 *   0: all logits equal: any column, but not the same one in every row;
 *   1: three larger logits, then 0.5 in most columns and -1 in every third:
 *      a logit >= 0.5;
 *   2: three finite logits among -inf ones: one of the three. */
static void sample_ties(gllmk_dtype dtype, const sample_params *sp) {
  const char *what = label("sample %s ties at the threshold top_k=%d top_p=%g", dname(dtype), sp->top_k,
                           (double)sp->top_p);
  const int64_t rows = 48, width = 2 * 2048 + 300;
  const int64_t high[3] = {5, width / 2 + 3, width - 7};
  dev logits = dev_new(dtype, SHAPE(rows, width));
  for (int64_t r = 0; r < rows; r++) {
    double *row = logits.host + r * width;
    for (int64_t c = 0; c < width; c++)
      row[c] = r % 3 == 0 ? 0.25 : r % 3 == 1 ? (c % 3 == 2 ? -1.0 : 0.5) : -INFINITY;
    for (int i = 0; r % 3 != 0 && i < 3; i++) row[high[i]] = r % 3 == 1 ? 2.0 - 0.5 * i : 1.0 - i;
  }
  dev_upload(&logits);
  dev first = dev_output(GLLMK_I32, SHAPE(rows));
  dev again = dev_output(GLLMK_I32, SHAPE(rows));
  const uint64_t seed = test_rng_next(&S.rng);
  RUN_OP(run_sample(&first, &logits, sp, seed, 11), what);
  RUN_OP(run_sample(&again, &logits, sp, seed, 11), what);
  dev_download(&first);
  dev_download(&again);
  expect_equal(label("%s: same seed and offset", what), rows, again.host, first.host);
  bool all_equal_rows_differ = false;
  for (int64_t r = 0; r < rows; r++) {
    const double token = first.host[r];
    if (!token_in_row(what, r, token, width)) return;
    const double logit = logits.host[r * width + (int64_t)token];
    if ((r % 3 == 1 && logit < 0.5) || (r % 3 == 2 && logit == -INFINITY)) {
      conf_fail("%s: row %lld drew token %g of logit %g, below the top_k threshold", what, (long long)r,
                token, logit);
      return;
    }
    all_equal_rows_differ = all_equal_rows_differ || (r % 3 == 0 && token != first.host[0]);
  }
  if (!all_equal_rows_differ) conf_fail("%s: every row of equal logits drew the same token", what);
}

/* Settings that leave only the most likely token must give argmax. */
static void sample_greedy(gllmk_dtype dtype, const sample_params *sp, const char *name) {
  const char *what = label("sample %s %s = argmax", dname(dtype), name);
  const int64_t rows = 16, vocab = 517;
  dev logits = dev_random(dtype, SHAPE(rows, vocab), -5, 5);
  dev out = dev_output(GLLMK_I32, SHAPE(rows));
  double *expected = host_alloc((size_t)rows * sizeof *expected);
  for (int64_t r = 0; r < rows; r++) expected[r] = (double)argmax_of(logits.host + r * vocab, vocab);
  RUN_OP(run_sample(&out, &logits, sp, test_rng_next(&S.rng), 3), what);
  dev_download(&out);
  expect_equal(what, rows, out.host, expected);
}

/* Logits whose filtered distribution has every filter decision at least
 * `margin` away from its threshold, and no two equal values. */
static double *sample_logits(gllmk_dtype dtype, int64_t vocab, const ref_sample_filter *f,
                             double *probs) {
  double *logits = host_alloc((size_t)vocab * sizeof *logits);
  for (int attempt = 0; attempt < 10000; attempt++) {
    for (int64_t i = 0; i < vocab; i++)
      logits[i] = test_round(dtype, test_rng_uniform(&S.rng, -2.5, 2.5));
    bool distinct = true;
    for (int64_t i = 0; i < vocab && distinct; i++)
      for (int64_t j = i + 1; j < vocab; j++) distinct = distinct && logits[i] != logits[j];
    if (distinct && ref_sample_probs(vocab, logits, f, probs) >= 0.02) return logits;
  }
  ck_abort_msg("no logits with clear filter margins found (seed %llu)",
               (unsigned long long)test_opts.seed);
  return NULL;
}

/* The column of logit i in a row `spread` times as wide as the logits (the
 * other columns hold -inf): spread over the row, so that a workgroup
 * kernel's invocations each see a few of them. */
static int64_t sample_column(int64_t i, int64_t spread) {
  return i * spread + (i * 5) % spread;
}

/* Draws many tokens from one small distribution (one row per draw, many
 * seeds and offsets) and compares their counts with the filtered
 * distribution computed in double: each count within 6 standard deviations
 * plus 6 of N p (the +6 keeps rare tokens, whose counts are Poisson rather
 * than normal, from failing by chance: about once in 1e8 runs either way),
 * and never a token the filters removed. With `spread` > 1 the rows are
 * spread times as wide and hold the distribution's logits among -inf ones
 * (probability 0, ranked last), which takes backends that sample short rows
 * one per thread onto their workgroup path; rows of several thousand
 * columns take cuda's top_k path over several chunks (top_k >= 12 there:
 * the threshold is -inf, tied across chunks). */
static void sample_statistics(gllmk_dtype dtype, const sample_params *sp, int64_t spread) {
  enum { VOCAB = 12 };
  const int64_t width = VOCAB * spread;
  const char *what =
      label("sample %s statistics width=%lld temperature=%g top_k=%d top_p=%g min_p=%g",
            dname(dtype), (long long)width, (double)sp->temperature, sp->top_k,
            (double)sp->top_p, (double)sp->min_p);
  /* Fewer draws from wide rows: a software device takes minutes for as many. */
  const int64_t rows = (S.quick ? 1024 : 4096) / (width > 4096 ? 16 : spread > 1 ? 4 : 1);
  const int64_t calls = S.quick ? 4 : 8;
  ref_sample_filter f = {sp->temperature, sp->top_p, sp->min_p, sp->top_k};
  double probs[VOCAB];
  double *row = sample_logits(dtype, VOCAB, &f, probs);
  double *padded = host_alloc((size_t)width * sizeof *padded);
  int32_t *token_of_column = host_alloc((size_t)width * sizeof *token_of_column);
  for (int64_t c = 0; c < width; c++) {
    padded[c] = -INFINITY;
    token_of_column[c] = -1;
  }
  for (int64_t i = 0; i < VOCAB; i++) {
    padded[sample_column(i, spread)] = row[i];
    token_of_column[sample_column(i, spread)] = (int32_t)i;
  }
  dev logits = dev_new(dtype, SHAPE(rows, width));
  for (int64_t r = 0; r < rows; r++)
    memcpy(logits.host + r * width, padded, (size_t)width * sizeof *padded);
  dev_upload(&logits);
  dev out = dev_output(GLLMK_I32, SHAPE(rows));
  int64_t counts[VOCAB] = {0}, total = rows * calls;
  uint64_t seed = test_rng_next(&S.rng);
  for (int64_t call = 0; call < calls; call++) {
    RUN_OP(run_sample(&out, &logits, sp, seed + (uint64_t)(call % 2), (uint64_t)call * 1000003u),
           what);
    dev_download(&out);
    for (int64_t r = 0; r < rows; r++) {
      double column = out.host[r];
      if (!(column >= 0 && column < (double)width) || token_of_column[(int64_t)column] < 0) {
        conf_fail("%s: drew column %g, which holds no logit of the distribution", what, column);
        return;
      }
      counts[token_of_column[(int64_t)column]]++;
    }
  }
  for (int i = 0; i < VOCAB; i++) {
    double expected = probs[i] * (double)total;
    double bound = 6.0 * sqrt(expected * (1.0 - probs[i])) + 6.0;
    if (probs[i] == 0.0 && counts[i] != 0)
      conf_fail("%s: token %d was filtered out but drawn %lld times", what, i,
                (long long)counts[i]);
    else if (fabs((double)counts[i] - expected) > bound)
      conf_fail("%s: token %d drawn %lld times in %lld, expected %.1f +- %.1f", what, i,
                (long long)counts[i], (long long)total, expected, bound);
  }
}

static void conf_sample(void) {
  const sample_params filters[] = {
      {1.0f, 1.0f, 0.0f, 0},   {0.7f, 1.0f, 0.0f, 5},   {1.0f, 0.8f, 0.0f, 0},
      {1.0f, 1.0f, 0.15f, 0},  {1.3f, 0.9f, 0.05f, 8},  {0.5f, 0.6f, 0.0f, 10},
      {2.0f, 0.95f, 0.3f, 0},  {1.0f, 0.9f, 0.0f, 16},
  };
  for (int d = 0; d < FLOAT_DTYPE_COUNT; d++) {
    gllmk_dtype dtype = float_dtypes[d];
    sample_determinism(dtype, 1000, &(sample_params){1.0f, 1.0f, 0.0f, 0});
    /* Wide rows: 16-byte loads at 128256, single elements at 8195. */
    sample_determinism(dtype, S.quick ? 8195 : 128256, &(sample_params){0.8f, 0.9f, 0.0f, 50});
    sample_ties(dtype, &(sample_params){1.0f, 1.0f, 0.0f, 5});
    if (dtype == GLLMK_F32) sample_ties(dtype, &(sample_params){0.8f, 0.9f, 0.05f, 50});
    sample_greedy(dtype, &(sample_params){0.0f, 1.0f, 0.0f, 0}, "temperature 0");
    sample_greedy(dtype, &(sample_params){0.8f, 1.0f, 0.0f, 1}, "top_k 1");
    sample_greedy(dtype, &(sample_params){0.0f, 0.5f, 0.2f, 40}, "temperature 0 with filters");
    if (dtype == GLLMK_F32) { /* no ties at the top in f32 random logits */
      sample_greedy(dtype, &(sample_params){1.0f, 1e-6f, 0.0f, 0}, "top_p 1e-6");
      sample_greedy(dtype, &(sample_params){1.0f, 1.0f, 1.0f, 0}, "min_p 1");
    }
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++) {
      sample_statistics(dtype, &filters[i], 1);
      if (dtype == GLLMK_F32) sample_statistics(dtype, &filters[i], 29);
      /* Several chunks of 2048, by single elements (f32) and 16 bytes (bf16,
       * not on a software device: seconds a case there). */
      if (filters[i].top_k > 1 && (dtype == GLLMK_F32 || (dtype == GLLMK_BF16 && !S.quick)))
        sample_statistics(dtype, &filters[i], dtype == GLLMK_F32 ? 701 : 700);
    }
  }
}

/* ============================================================ driver */

/* One entry per op of gllmk_ops.def: an op without a conformance case here
 * does not compile. */
static void (*const conf_cases[GLLMK_OP_COUNT])(void) = {
#define GLLMK_OP(name) conf_##name,
#include "gllmk/gllmk_ops.def"
};

static void setup(void) { memset(&S, 0, sizeof S); }

static void teardown(void) {
  if (S.ctx) gllmk_context_destroy(S.ctx);
  for (size_t i = 0; i < S.alloc_count; i++) free(S.allocs[i]);
  free(S.allocs);
  memset(&S, 0, sizeof S);
}

/* Loop index = backend * GLLMK_OP_COUNT + op. */
/* Starts test `op` on backend number `backend`: the state, the random
 * stream, and a context forced onto that backend. */
static void begin_test(int backend, const char *op, uint64_t stream) {
  S.backend = backends[backend].name;
  S.op = op;
  S.quick = test_opts.quick || backends[backend].software;
  S.rng = test_rng_for(stream);
  gllmk_context_options options = {.backend = S.backend, .plugin_dir = test_opts.plugin_dir};
  must(gllmk_context_create(&options, &S.ctx), "gllmk_context_create");
  ck_assert_str_eq(gllmk_context_backend(S.ctx), S.backend);
}

START_TEST(op_conformance) {
  gllmk_op op = (gllmk_op)(_i % GLLMK_OP_COUNT);
  begin_test(_i / GLLMK_OP_COUNT, gllmk_op_name(op), (uint64_t)_i);
  conf_cases[op]();
  ck_assert_msg(S.failures == 0, "%s on %s: %d sub-case(s) failed (listed above); seed %llu",
                S.op, S.backend, S.failures, (unsigned long long)test_opts.seed);
}
END_TEST

/* Loop index = backend * FLOAT_DTYPE_COUNT + dtype: one decoder layer built
 * from the ops above (tests/decoder_block.c). */
START_TEST(decoder_block) {
  const uint64_t stream = GLLMK_OP_COUNT * MAX_BACKENDS + (uint64_t)_i; /* after the ops' */
  begin_test(_i / FLOAT_DTYPE_COUNT, "decoder_block", stream);
  decoder_block_check(S.ctx, float_dtypes[_i % FLOAT_DTYPE_COUNT], S.quick, stream);
}
END_TEST

/* Loop index = backend * FLOAT_DTYPE_COUNT + dtype: a recorded chain of
 * ops (rmsnorm, matmul with bias, silu) replayed twice with new inputs in
 * between, then refused, running nothing, once a buffer it uses is freed.
 * Each op rounds to the dtype, and a backend's rmsnorm may round a value
 * to the other neighbour than the reference's: the allowance per output is
 * |silu'(y)| (|y| + sum_j |h_j w_j|), what one rounding of y or of every
 * h_j moves it by (a vulkan-portable f16 replay once missed by 0.3%). */
static void recorded_chain_expect(const dev *x, const dev *w, const dev *wm, const dev *bias,
                                  dev *out, const char *what) {
  const int64_t rows = out->t.shape[0], n = out->t.shape[1], k = x->t.shape[1];
  double *h = host_alloc((size_t)(rows * k) * sizeof *h);
  double *ref = host_alloc((size_t)(rows * n) * sizeof *ref);
  double *cond = host_alloc((size_t)(rows * n) * sizeof *cond);
  ref_rmsnorm(rows, k, x->host, w->host, 1e-5, h);
  for (int64_t i = 0; i < rows * k; i++) h[i] = test_round(x->dtype, h[i]);
  ref_matmul(&(ref_matmul_problem){.batch = 1, .m = rows, .n = n, .k = k,
                                   .b_layout = GLLMK_B_NK, .alpha = 1.0},
             h, wm->host, bias->host, ref);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < n; c++) {
      const double y = test_round(x->dtype, ref[r * n + c]), sigmoid = 1.0 / (1.0 + exp(-y));
      double terms = fabs(y);
      for (int64_t j = 0; j < k; j++) terms += fabs(h[r * k + j] * wm->host[c * k + j]);
      cond[r * n + c] = fabs(sigmoid * (1.0 + y * (1.0 - sigmoid))) * terms;
      ref[r * n + c] = ref_silu(y);
    }
  dev_download(out);
  expect_close_cond(what, x->dtype, out->numel, out->host, ref, cond);
}

START_TEST(recording_replays) {
  const uint64_t stream = GLLMK_OP_COUNT * MAX_BACKENDS + 64 + (uint64_t)_i;
  begin_test(_i / FLOAT_DTYPE_COUNT, "recording", stream);
  const gllmk_dtype dtype = float_dtypes[_i % FLOAT_DTYPE_COUNT];
  const int64_t rows = 7, k = 96, n = 40;
  dev x = dev_random(dtype, SHAPE(rows, k), -2, 2), w = dev_random(dtype, SHAPE(k), 0.5, 1.5);
  dev wm = dev_random(dtype, SHAPE(n, k), -0.2, 0.2), bias = dev_random(dtype, SHAPE(n), -1, 1);
  dev h = dev_output(dtype, SHAPE(rows, k)), out = dev_output(dtype, SHAPE(rows, n));
  must(gllmk_recording_begin(S.ctx), "gllmk_recording_begin");
  must(gllmk_rmsnorm(S.ctx, &(gllmk_rmsnorm_args){&h.t, &x.t, &w.t, 1e-5f}), "record rmsnorm");
  must(gllmk_matmul(S.ctx, &(gllmk_matmul_args){.out = &out.t, .a = &h.t, .b = &wm.t,
                                                .bias = &bias.t, .alpha = 1.0f}),
       "record matmul");
  must(gllmk_silu(S.ctx, &(gllmk_silu_args){&out.t, &out.t}), "record silu");
  gllmk_recording *recording;
  must(gllmk_recording_end(S.ctx, &recording), "gllmk_recording_end");
  ck_assert_uint_eq(gllmk_recording_size(recording), 3);
  printf("conformance: %s %s recording is %s\n", S.backend, dname(dtype),
         gllmk_recording_is_native(recording) ? "native" : "replayed by the core");
  /* Recording ran nothing: out still holds its poison. */
  dev_download(&out);
  for (int64_t i = 0; i < out.numel; i++) ck_assert_msg(isnan(out.host[i]), "recording ran");
  for (int round = 0; round < 3; round++) {
    if (round > 0) { /* new inputs, the same recording */
      for (int64_t i = 0; i < x.numel; i++) x.host[i] = test_rng_uniform(&S.rng, -2, 2);
      dev_upload(&x);
      dev_poison(&out);
    }
    must(gllmk_recording_replay(recording), "gllmk_recording_replay");
    recorded_chain_expect(&x, &w, &wm, &bias, &out, label("%s replay %d", dname(dtype), round));
  }
  dev_poison(&out);
  gllmk_buffer_free(wm.buffer);
  ck_assert_int_eq(gllmk_recording_replay(recording), GLLMK_ERR_INVALID_ARGUMENT);
  ck_assert_msg(test_contains(gllmk_last_error(), "freed"), "message: %s", gllmk_last_error());
  dev_download(&out);
  for (int64_t i = 0; i < out.numel; i++) ck_assert_msg(isnan(out.host[i]), "a refused replay ran");
  gllmk_recording_free(recording);
  ck_assert_int_eq(gllmk_recording_replay(recording), GLLMK_ERR_INVALID_ARGUMENT);
  ck_assert_uint_eq(gllmk_recording_size(recording), 0);
  ck_assert_msg(S.failures == 0, "recording on %s: %d sub-case(s) failed; seed %llu", S.backend,
                S.failures, (unsigned long long)test_opts.seed);
}
END_TEST

/* A program that exits with a context still open (exit() in its middle, or
 * no gllmk_context_destroy) must still exit cleanly: the plugin's unload
 * then runs after the driver's own exit handlers. A fresh copy of this
 * program does it (`--exit-with-context-open BACKEND PLUGIN_DIR`): a fork
 * alone would inherit a driver this process may have initialised (CUDA
 * refuses that) when Check runs the tests without forking. */
static int exit_with_context_open_main(const char *backend, const char *plugin_dir) {
  gllmk_context_options options = {.backend = backend,
                                   .plugin_dir = plugin_dir[0] ? plugin_dir : NULL};
  gllmk_context *ctx;
  gllmk_buffer *buffer;
  if (gllmk_context_create(&options, &ctx) || gllmk_buffer_alloc(ctx, 4096, &buffer) ||
      gllmk_buffer_fill(buffer, 0, 4096, 1) || gllmk_synchronize(ctx)) {
    fprintf(stderr, "exit-with-context-open: %s: %s\n", backend, gllmk_last_error());
    return 2;
  }
  exit(0); /* runs the exit handlers and library destructors */
}

START_TEST(exit_with_context_open) {
  const char *backend = backends[_i].name;
  /* The path read here, not "/proc/self/exe" exec'd by the child: under
   * valgrind the process image is valgrind's tool, and readlink (which
   * valgrind answers) names the program. */
  char self_path[4096];
  ssize_t length = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
  ck_assert_msg(length > 0, "readlink /proc/self/exe failed");
  self_path[length] = '\0';
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  ck_assert_msg(pid >= 0, "fork failed");
  if (pid == 0) {
    const char *plugin_dir = test_opts.plugin_dir ? test_opts.plugin_dir : "";
    if (test_opts.exec_via)
      execlp(test_opts.exec_via, test_opts.exec_via, self_path, "--exit-with-context-open",
             backend, plugin_dir, (char *)NULL);
    else
      execl(self_path, self_path, "--exit-with-context-open", backend, plugin_dir, (char *)NULL);
    _exit(127);
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(!WIFSIGNALED(status),
                "%s: a process that exited with a context open died of signal %d", backend,
                WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "%s: a process that exited with a context open returned %d", backend,
                WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}
END_TEST

/* Loop index = backend: a few MiB of random bytes written, copied to
 * another buffer and read back at odd offsets and sizes, the bytes around
 * each range left as they were. The cpu backend splits large transfers
 * between its threads and writes them past the cache (its cpu-stream
 * variant at any size). */
static void expect_bytes(const char *what, const unsigned char *got, const unsigned char *want, uint64_t size) {
  uint64_t i = 0;
  while (i < size && got[i] == want[i]) i++;
  ck_assert_msg(i == size, "%s on %s: byte %llu of %llu is %u, not %u", what, S.backend, (unsigned long long)i,
                (unsigned long long)size, i < size ? got[i] : 0, i < size ? want[i] : 0);
}

START_TEST(buffer_transfers) {
  begin_test(_i, "buffer_transfers", GLLMK_OP_COUNT * MAX_BACKENDS + 128 + (uint64_t)_i);
  const uint64_t size = (S.quick ? 1 << 20 : 5 << 20) + 37, pad = 4099, total = size + 2 * pad;
  const uint64_t at_a = 13, at_b = pad + 3;
  unsigned char *data = host_alloc(size), *poison = host_alloc(total), *want = host_alloc(total),
                *got = host_alloc(total);
  for (uint64_t i = 0; i < size; i++) data[i] = (unsigned char)test_rng_next(&S.rng);
  for (uint64_t i = 0; i < total; i++) poison[i] = (unsigned char)test_rng_next(&S.rng);
  gllmk_buffer *a = NULL, *b = NULL;
  must(gllmk_buffer_alloc(S.ctx, total, &a), "gllmk_buffer_alloc");
  must(gllmk_buffer_alloc(S.ctx, total, &b), "gllmk_buffer_alloc");
  must(gllmk_buffer_write(a, 0, poison, total), "gllmk_buffer_write");
  must(gllmk_buffer_write(b, 0, poison, total), "gllmk_buffer_write");
  must(gllmk_buffer_write(a, at_a, data, size), "gllmk_buffer_write");
  must(gllmk_buffer_copy(b, at_b, a, at_a, size), "gllmk_buffer_copy");

  memcpy(want, poison, total);
  memcpy(want + at_a, data, size);
  must(gllmk_buffer_read(a, 0, got, total), "gllmk_buffer_read");
  expect_bytes("gllmk_buffer_write", got, want, total);
  memcpy(want, poison, total);
  memcpy(want + at_b, data, size);
  must(gllmk_buffer_read(b, 0, got, total), "gllmk_buffer_read");
  expect_bytes("gllmk_buffer_copy", got, want, total);
  memset(got, 0, total);
  must(gllmk_buffer_read(b, at_b + 1, got + 1, size - 1), "gllmk_buffer_read");
  ck_assert_msg(got[0] == 0 && got[size] == 0, "gllmk_buffer_read on %s wrote outside its range", S.backend);
  expect_bytes("gllmk_buffer_read", got + 1, data + 1, size - 1);
  gllmk_buffer_free(a);
  gllmk_buffer_free(b);
}
END_TEST

/* Whether the plugin's first device is emulated (lavapipe, PoCL). */
int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--exit-with-context-open") == 0)
    return exit_with_context_open_main(argv[2], argv[3]);
  test_parse_args(argc, argv);
  /* An emulated device runs every case at the --quick sizes: it is there
   * for coverage, and full sizes would take it many minutes; --skip-software
   * leaves it out (valgrind: a JIT under valgrind takes an hour). */
  backend_count = test_find_backends("conformance", backends, MAX_BACKENDS);
  printf("conformance: seed %llu%s, backends:", (unsigned long long)test_opts.seed,
         test_opts.quick ? " (quick sizes)" : "");
  for (int b = 0; b < backend_count; b++) printf(" %s", backends[b].name);
  printf("\n");
  fflush(stdout);
  if (backend_count == 0) {
    fprintf(stderr, "conformance: no backend has a device; nothing was tested\n");
    return EXIT_FAILURE;
  }
  Suite *suite = suite_create("conformance");
  for (int b = 0; b < backend_count; b++) {
    TCase *tc = test_tcase(backends[b].name);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, op_conformance, b * GLLMK_OP_COUNT, (b + 1) * GLLMK_OP_COUNT);
    tcase_add_loop_test(tc, decoder_block, b * FLOAT_DTYPE_COUNT, (b + 1) * FLOAT_DTYPE_COUNT);
    tcase_add_loop_test(tc, recording_replays, b * FLOAT_DTYPE_COUNT, (b + 1) * FLOAT_DTYPE_COUNT);
    tcase_add_loop_test(tc, exit_with_context_open, b, b + 1);
    tcase_add_loop_test(tc, buffer_transfers, b, b + 1);
    conformance_views_add(tc, b, backends[b].name, backends[b].software);
    suite_add_tcase(suite, tc);
  }
  return test_run_suite(suite);
}
