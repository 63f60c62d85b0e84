/*
 * bench_data.c - host copies of benchmark tensors: dtype conversion,
 * deterministic random contents, shapes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* ------------------------------------------------------------ dtypes */

static float float_from_bits(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static uint32_t bits_from_float(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return bits;
}

static double bf16_to_double(uint16_t h) { return float_from_bits((uint32_t)h << 16); }

/* Round to nearest even, NaN stays NaN. */
static uint16_t bf16_from_double(double value) {
  uint32_t bits = bits_from_float((float)value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

static double f16_to_double(uint16_t h) {
  int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double magnitude;
  if (exponent == 0)
    magnitude = ldexp(mantissa, -24);
  else if (exponent == 31)
    magnitude = mantissa ? NAN : INFINITY;
  else
    magnitude = ldexp(mantissa + 1024, exponent - 25);
  return sign ? -magnitude : magnitude;
}

/* Round to nearest even through the exact double value; overflow to inf. */
static uint16_t f16_from_double(double value) {
  uint16_t sign = signbit(value) ? 0x8000 : 0;
  double a = fabs(value);
  if (isnan(value)) return 0x7e00;
  if (a >= 65520.0) return sign | 0x7c00; /* rounds past the largest finite f16 */
  if (a < ldexp(1.0, -14)) /* subnormal: units of 2^-24 */
    return sign | (uint16_t)nearbyint(ldexp(a, 24));
  int exponent;
  double fraction = frexp(a, &exponent); /* a = fraction * 2^exponent, fraction in [0.5, 1) */
  double mantissa = nearbyint(ldexp(fraction, 11)); /* 1024 .. 2048 */
  if (mantissa >= 2048.0) {
    mantissa = 1024.0;
    exponent++;
  }
  return sign | (uint16_t)((exponent + 14) << 10) | (uint16_t)((int)mantissa - 1024);
}

double dtype_get(gllmk_dtype dtype, const void *raw, int64_t index) {
  switch (dtype) {
  case GLLMK_F32: return ((const float *)raw)[index];
  case GLLMK_BF16: return bf16_to_double(((const uint16_t *)raw)[index]);
  case GLLMK_F16: return f16_to_double(((const uint16_t *)raw)[index]);
  case GLLMK_I32: return ((const int32_t *)raw)[index];
  }
  return NAN;
}

void dtype_set(gllmk_dtype dtype, void *raw, int64_t index, double value) {
  switch (dtype) {
  case GLLMK_F32: ((float *)raw)[index] = (float)value; break;
  case GLLMK_BF16: ((uint16_t *)raw)[index] = bf16_from_double(value); break;
  case GLLMK_F16: ((uint16_t *)raw)[index] = f16_from_double(value); break;
  case GLLMK_I32: ((int32_t *)raw)[index] = (int32_t)value; break;
  }
}

double dtype_round(gllmk_dtype dtype, double value) {
  union { float f32; uint16_t half; int32_t i32; } cell;
  dtype_set(dtype, &cell, 0, value);
  return dtype_get(dtype, &cell, 0);
}

void dtype_get_run(gllmk_dtype dtype, const void *raw, int64_t start, int64_t count,
                   double *out) {
  if (dtype == GLLMK_F32) { /* the hot case of the matmul reference */
    const float *f = (const float *)raw + start;
    for (int64_t i = 0; i < count; i++) out[i] = f[i];
    return;
  }
  for (int64_t i = 0; i < count; i++) out[i] = dtype_get(dtype, raw, start + i);
}

const char *dtype_label(gllmk_dtype dtype) {
  const char *name = gllmk_dtype_name(dtype);
  return name ? name : "?";
}

/* The conformance tolerances of DESIGN.md, on the relative norm. */
double dtype_tolerance(gllmk_dtype dtype) {
  switch (dtype) {
  case GLLMK_F32: return 1e-5;
  case GLLMK_F16: return 1e-3;
  case GLLMK_BF16: return 1e-2;
  case GLLMK_I32: return 0;
  }
  return 0;
}

/* ------------------------------------------------------------ tensors */

int64_t tensor_numel(const bench_tensor *t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

int64_t tensor_cols(const bench_tensor *t) { return t->shape[t->ndim - 1]; }

int64_t tensor_rows(const bench_tensor *t) { return tensor_numel(t) / tensor_cols(t); }

int wl_tensor(workload *w, int index, const char *name, gllmk_dtype dtype, bench_role role,
              bench_check check, int32_t ndim, const int64_t *shape) {
  bench_tensor *t = &w->tensors[index];
  memset(t, 0, sizeof *t);
  t->name = name;
  t->dtype = dtype;
  t->ndim = ndim;
  memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
  t->role = role;
  t->check = check;
  t->bytes = (uint64_t)tensor_numel(t) * gllmk_dtype_size(dtype);
  if (index >= w->tensor_count) w->tensor_count = index + 1;
  if (role == ROLE_OUT) return 0;
  t->host = calloc(1, (size_t)t->bytes);
  return t->host ? 0 : -1;
}

/* splitmix64: a fast, well-mixed counter-based generator. */
static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void wl_fill_uniform(workload *w, int index, double lo, double hi) {
  bench_tensor *t = &w->tensors[index];
  uint64_t state = mix64(w->seed * 131 + (uint64_t)index);
  double scale = (hi - lo) / 9007199254740992.0; /* 2^53 */
  int64_t n = tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    state += 0x9e3779b97f4a7c15ull;
    dtype_set(t->dtype, t->host, i, lo + (double)(mix64(state) >> 11) * scale);
  }
}

int wl_input(workload *w, int index, const char *name, int32_t ndim, const int64_t *shape,
             double lo, double hi) {
  if (wl_tensor(w, index, name, w->bcase->dtype, ROLE_IN, CHECK_NONE, ndim, shape)) return -1;
  wl_fill_uniform(w, index, lo, hi);
  return 0;
}

int wl_output(workload *w, int index, int32_t ndim, const int64_t *shape) {
  return wl_tensor(w, index, "out", w->bcase->dtype, ROLE_OUT, CHECK_FLOAT, ndim, shape);
}

void wl_permutation(const workload *w, uint64_t salt, int32_t *perm, int64_t count) {
  uint64_t state = mix64(w->seed * 977 + salt);
  for (int64_t i = 0; i < count; i++) perm[i] = (int32_t)i;
  for (int64_t i = count - 1; i > 0; i--) { /* Fisher-Yates */
    state += 0x9e3779b97f4a7c15ull;
    int64_t j = (int64_t)(mix64(state) % (uint64_t)(i + 1));
    int32_t tmp = perm[i];
    perm[i] = perm[j];
    perm[j] = tmp;
  }
}

void wl_row(const workload *w, int index, int64_t row, double *out) {
  const bench_tensor *t = &w->tensors[index];
  int64_t cols = tensor_cols(t);
  dtype_get_run(t->dtype, t->host, row * cols, cols, out);
}

void wl_shape_text(workload *w, int index) {
  const bench_tensor *t = &w->tensors[index];
  size_t used = 0;
  used += (size_t)snprintf(w->shape, sizeof w->shape, "[");
  for (int32_t i = 0; i < t->ndim && used < sizeof w->shape; i++)
    used += (size_t)snprintf(w->shape + used, sizeof w->shape - used, "%s%lld",
                             i ? ", " : "", (long long)t->shape[i]);
  if (used < sizeof w->shape) snprintf(w->shape + used, sizeof w->shape - used, "]");
}

double wl_default_bytes(const workload *w) {
  double bytes = 0;
  for (int i = 0; i < w->tensor_count; i++) {
    const bench_tensor *t = &w->tensors[i];
    bytes += (double)t->bytes * (t->role == ROLE_INOUT ? 2 : 1);
  }
  return bytes;
}

void wl_free(workload *w) {
  for (int i = 0; i < w->tensor_count; i++) free(w->tensors[i].host);
  free(w->aux);
  memset(w, 0, sizeof *w);
}

int64_t dram_rows(int64_t cols, gllmk_dtype dtype, int64_t min_rows) {
  double row_bytes = (double)cols * (double)gllmk_dtype_size(dtype);
  int64_t rows = (int64_t)ceil(DRAM_TENSOR_BYTES / row_bytes);
  return rows > min_rows ? rows : min_rows;
}
