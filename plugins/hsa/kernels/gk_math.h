/*
 * gk_math.h - the F32 math of the kernels, built from the primitives of
 * gk_device.h (exp2, log2, sqrt, fma, rint, ldexp) so that the AMD build and
 * the PoCL build compute the same way. Accuracy targets: a few ulp for exp
 * and sigmoid; about 1e-7 relative for erfc (hence gelu, also for large
 * negative x where 1 + erf(x) cancels); rope angles reduced in double.
 */
#ifndef GK_MATH_H_
#define GK_MATH_H_

#define GK_INFINITY (__builtin_inff())
#define GK_LOG2E 1.44269504088896341f
#define GK_LN2 0.693147180559945309f

GK_INLINE uint gk_f32_bits(float f) { return __builtin_astype(f, uint); }
GK_INLINE float gk_bits_f32(uint u) { return __builtin_astype(u, float); }
GK_INLINE int gk_isnan(float x) { return x != x; }

/* ------------------------------------------------------------ bf16 */

GK_INLINE float gk_bf16_to_f32(ushort h) { return gk_bits_f32((uint)h << 16); }

/* Round to nearest even; NaN stays a (quiet) NaN. */
GK_INLINE ushort gk_f32_to_bf16(float f) {
  uint u = gk_f32_bits(f);
  if (gk_isnan(f)) return (ushort)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (ushort)(u >> 16);
}

/* ------------------------------------------------------------ exp, log */

/* e^x: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two so n ln2 is exact
 * enough), e^x = 2^n 2^(r log2 e). */
GK_INLINE float gk_exp(float x) {
  if (gk_isnan(x)) return x;
  if (x > 88.8f) return GK_INFINITY;
  if (x < -104.0f) return 0.0f;
  float n = gk_rint(x * GK_LOG2E);
  float r = gk_fma(-n, 0.693145751953125f, x); /* ln2 high part: 16 bits */
  r = gk_fma(-n, 1.428606765330187e-06f, r);   /* ln2 - high part */
  return gk_ldexp(gk_exp2_raw(r * GK_LOG2E), (int)n);
}

GK_INLINE float gk_log(float x) { return gk_log2_raw(x) * GK_LN2; }

/* ------------------------------------------------ sigmoid, erfc */

GK_INLINE float gk_sigmoid(float x) { return 1.0f / (1.0f + gk_exp(-x)); }

/* e^(-z^2) with z^2 split exactly in two, so large z lose no accuracy. */
GK_INLINE float gk_exp_neg_square(float z) {
  float hi = z * z;
  float lo = gk_fma(z, z, -hi);
  return gk_exp(-hi) * (1.0f - lo);
}

/* erfc(z) for z >= 0.45, relative error about 1e-7: with t = 1/(1 + z/2),
 * erfc(z) = t e^(-z^2 + P(t)); P is a degree 8 least-squares fit (on
 * Chebyshev nodes, z in [0.45, 10]) of log(erfc(z)/t) + z^2. */
GK_INLINE float gk_erfc_tail(float z) {
  float t = 1.0f / (1.0f + 0.5f * z);
  float p = -0.0710893663877f;
  p = gk_fma(p, t, 0.0530475539569f);
  p = gk_fma(p, t, 0.429085819463f);
  p = gk_fma(p, t, -0.790846971514f);
  p = gk_fma(p, t, 0.288783754489f);
  p = gk_fma(p, t, -0.039819800235f);
  p = gk_fma(p, t, 0.39851107153f);
  p = gk_fma(p, t, 0.997574322359f);
  p = gk_fma(p, t, -1.26540777193f);
  return t * gk_exp_neg_square(z) * gk_exp(p);
}

/* erf(z) for |z| < 0.5 from its Taylor series (2/sqrt(pi)) sum (-1)^n z^(2n+1) / (n! (2n+1)). */
GK_INLINE float gk_erf_small(float z) {
  float z2 = z * z;
  float s = -1.0f / 75600;            /* n = 7: 1/(7! 15) */
  s = gk_fma(s, z2, 1.0f / 9360);     /* n = 6: 1/(6! 13) */
  s = gk_fma(s, z2, -1.0f / 1320);
  s = gk_fma(s, z2, 1.0f / 216);
  s = gk_fma(s, z2, -1.0f / 42);
  s = gk_fma(s, z2, 1.0f / 10);
  s = gk_fma(s, z2, -1.0f / 3);
  s = gk_fma(s, z2, 1.0f);
  return 1.12837916709551257f * z * s;
}

/* 1 + erf(z), accurate also where it is tiny (z very negative). */
GK_INLINE float gk_one_plus_erf(float z) {
  if (gk_fabs(z) < 0.5f) return 1.0f + gk_erf_small(z);
  if (z < 0) return gk_erfc_tail(-z);
  return 2.0f - gk_erfc_tail(z);
}

GK_INLINE float gk_gelu_erf(float x) {
  return 0.5f * x * gk_one_plus_erf(x * 0.707106781186547524f);
}

/* 0.5 x (1 + tanh(u)) = x sigmoid(2u) = x / (1 + e^(-2u)): no cancellation
 * where tanh(u) is near -1 (x very negative), and dividing x directly keeps
 * sigmoid's tiny value out of the subnormal range, where it loses bits. */
GK_INLINE float gk_gelu_tanh(float x) {
  const float k2 = 1.59576912160573071f; /* 2 sqrt(2/pi) */
  return x / (1.0f + gk_exp(-k2 * gk_fma(0.044715f * x, x * x, x)));
}

GK_INLINE float gk_silu(float x) { return x / (1.0f + gk_exp(-x)); }

/* ---------------------------------------------------------- rope angles */

/* 2^y in double, for y <= 0 of moderate size: y = n + f, |f| <= 1/2,
 * 2^f = e^(f ln2) by its Taylor series (|f ln2| < 0.35: 16 terms). */
GK_INLINE double gk_exp2_f64(double y) {
  double n = gk_rint_f64(y);
  double x = (y - n) * 0.69314718055994530942;
  double s = 1.0;
  for (int i = 16; i >= 1; i--) s = gk_fma_f64(s, x * (1.0 / i), 1.0);
  ulong bits = (ulong)((long)n + 1023) << 52; /* 2^n, n within the normal range */
  return s * __builtin_astype(bits, double);
}

/* sin and cos of a (double, any size): reduced to r in [-pi/4, pi/4] and a
 * quadrant in double (pi/2 in two parts, fma), then Taylor polynomials in F32. */
GK_INLINE void gk_sincos(double a, float *out_sin, float *out_cos) {
  double q = gk_rint_f64(a * 0.63661977236758134308);
  double rd = gk_fma_f64(-q, 1.5707963267948965580, a);
  rd = gk_fma_f64(-q, 6.123233995736766036e-17, rd);
  float r = (float)rd, r2 = r * r;
  float s = r * gk_fma(r2, gk_fma(r2, gk_fma(r2, gk_fma(r2, gk_fma(r2, -1.0f / 39916800, 1.0f / 362880),
                                             -1.0f / 5040), 1.0f / 120), -1.0f / 6), 1.0f);
  float c = gk_fma(r2, gk_fma(r2, gk_fma(r2, gk_fma(r2, gk_fma(r2, gk_fma(r2, 1.0f / 479001600,
                          -1.0f / 3628800), 1.0f / 40320), -1.0f / 720), 1.0f / 24), -0.5f), 1.0f);
  long quadrant = (long)q & 3;
  float sn = (quadrant & 1) ? c : s, cs = (quadrant & 1) ? s : c;
  *out_sin = (quadrant & 2) ? -sn : sn;
  *out_cos = (quadrant == 1 || quadrant == 2) ? -cs : cs;
}

#endif /* GK_MATH_H_ */
