/*
 * common.glsl - what every gllmk Vulkan kernel shares.
 *
 * Each kernel is compiled twice (see plugin.mk):
 *   STORAGE16=1 SUBGROUPS=1  "native":   16-bit storage buffers, subgroup reductions
 *   STORAGE16=0 SUBGROUPS=0  "portable": F16/BF16 read and written as halves of
 *                            32-bit words, reductions through shared memory
 * The plugin picks "native" when the device has both features.
 *
 * Specialisation constants (set by the host for each pipeline):
 *   0  workgroup size (local_size_x)
 *   1  DTYPE      storage type of the float tensors (gllmk_dtype)
 *   2  DTYPE_OUT  storage type of the output where it differs (copy)
 *   3  VARIANT    which form of the op (per kernel)
 *   4.. tile sizes (per kernel)
 *
 * Bindings 0..7 are the op's tensors, each bound from its offset rounded down
 * to minStorageBufferOffsetAlignment; the push constants carry each tensor's
 * element offset from there. Binding 8 is the device's error word.
 */
#extension GL_EXT_control_flow_attributes : enable
#if STORAGE16
#extension GL_EXT_shader_16bit_storage : require
#endif
#if SUBGROUPS
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint DTYPE = 0;
layout(constant_id = 2) const uint DTYPE_OUT = 0;
layout(constant_id = 3) const uint VARIANT = 0;

const uint DT_F32 = 0u;
const uint DT_F16 = 1u;
const uint DT_BF16 = 2u;
const uint DT_I32 = 3u;

#define NEG_INF uintBitsToFloat(0xff800000u)
#define POS_INF uintBitsToFloat(0x7f800000u)

/* --------------------------------------------------------------- errors */

/* Error codes the host turns into GLLMK_ERR_OUT_OF_RANGE messages. */
const uint ERR_EMBEDDING_ID = 1u;
const uint ERR_KV_APPEND_SLOT = 2u;
const uint ERR_PAGED_BLOCK = 3u;
const uint ERR_PAGED_LENGTH = 4u;
const uint ERR_PAGED_LAYOUT = 5u;
const uint ERR_ATTENTION_KV_LEN = 6u;

layout(std430, binding = 8) buffer ErrorWord {
  uint err_code;
  int err_value;
  int err_limit;
  uint err_pad;
};

/* The first error since the last synchronize wins; later ones are dropped. */
void raise_error(uint code, int value, int limit) {
  if (atomicCompSwap(err_code, 0u, code) == 0u) {
    err_value = value;
    err_limit = limit;
  }
}

/* ------------------------------------------------------ 16-bit formats */

/* F32 -> F16 bits, round to nearest even; NaN stays NaN, overflow gives inf. */
uint f32_to_f16_bits(float f) {
  uint x = floatBitsToUint(f);
  uint sign = (x >> 16) & 0x8000u;
  uint ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u | ((ax >> 13) & 0x3ffu);
  if (ax >= 0x477ff000u) return sign | 0x7c00u; /* >= 65520 rounds to inf */
  if (ax >= 0x38800000u) {                      /* a normal F16 */
    uint r = ax + 0xfffu + ((ax >> 13) & 1u);
    return sign | ((r - 0x38000000u) >> 13);
  }
  uint e = ax >> 23;
  if (e < 102u) return sign; /* below half the smallest subnormal */
  uint m = (ax & 0x7fffffu) | 0x800000u;
  uint shift = 126u - e; /* 14 .. 24 */
  uint q = m >> shift;
  uint rem = m & ((1u << shift) - 1u);
  uint half_ulp = 1u << (shift - 1u);
  if (rem > half_ulp || (rem == half_ulp && (q & 1u) != 0u)) q++;
  return sign | q;
}

/* F32 -> BF16 bits, round to nearest even; NaN stays NaN. */
uint f32_to_bf16_bits(float f) {
  uint x = floatBitsToUint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

float half_bits_to_f32(uint h, uint dt) {
  if (dt == DT_BF16) return uintBitsToFloat(h << 16);
  return unpackHalf2x16(h).x;
}

uint f32_to_half_bits(float v, uint dt) {
  return dt == DT_BF16 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
}

/* Eight values from the eight F16/BF16 halves of a 16-byte word, in
 * memory order (little endian: the low half first). */
void halves_to_f32(uvec4 w, uint dt, out float v[8]) {
  [[unroll]] for (uint k = 0u; k < 4u; k++) {
    if (dt == DT_BF16) {
      v[2u * k] = uintBitsToFloat(w[k] << 16);
      v[2u * k + 1u] = uintBitsToFloat(w[k] & 0xffff0000u);
    } else {
      vec2 h = unpackHalf2x16(w[k]);
      v[2u * k] = h.x;
      v[2u * k + 1u] = h.y;
    }
  }
}

uvec4 f32_to_halves(float v[8], uint dt) {
  uvec4 w;
  [[unroll]] for (uint k = 0u; k < 4u; k++)
    w[k] = f32_to_half_bits(v[2u * k], dt) | (f32_to_half_bits(v[2u * k + 1u], dt) << 16);
  return w;
}

/* The value as the storage type holds it (what a store then a load gives). */
float round_to_dtype(float v, uint dt) {
  if (dt == DT_F32) return v;
  return half_bits_to_f32(f32_to_half_bits(v, dt), dt);
}

/* ------------------------------------------------------------- tensors
 *
 * FLOAT_IN(name, binding, dtype)  declares name_load(i) and name_load8(i, v)
 * FLOAT_OUT(name, binding, dtype) adds name_store(i, v) and name_store8(i, v)
 * Indices are in elements from the start of the binding.
 *
 * name_load8 and name_store8 move 8 consecutive elements from an index that
 * is a multiple of 8 as whole 16-byte words (two uvec4 for F32, one for
 * F16/BF16), the same in both forms: the wide accesses that bandwidth-bound
 * kernels need. name_v[] is that uvec4 view of the binding. */

#define VEC8_LOAD(NAME, DT)                                                           \
  void NAME##_load8(uint i, out float v[8]) {                                         \
    if (DT == DT_F32) {                                                               \
      vec4 lo = uintBitsToFloat(NAME##_v[i / 4u]);                                    \
      vec4 hi = uintBitsToFloat(NAME##_v[i / 4u + 1u]);                               \
      v = float[8](lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w);                  \
    } else {                                                                          \
      halves_to_f32(NAME##_v[i / 8u], DT, v);                                         \
    }                                                                                 \
  }

#define VEC8_IN(NAME, BINDING, DT)                                                    \
  layout(std430, binding = BINDING) readonly buffer NAME##_bv { uvec4 NAME##_v[]; };  \
  VEC8_LOAD(NAME, DT)

#define VEC8_OUT(NAME, BINDING, DT)                                                   \
  layout(std430, binding = BINDING) buffer NAME##_bv { uvec4 NAME##_v[]; };           \
  VEC8_LOAD(NAME, DT)                                                                 \
  void NAME##_store8(uint i, float v[8]) {                                            \
    if (DT == DT_F32) {                                                               \
      NAME##_v[i / 4u] = floatBitsToUint(vec4(v[0], v[1], v[2], v[3]));              \
      NAME##_v[i / 4u + 1u] = floatBitsToUint(vec4(v[4], v[5], v[6], v[7]));         \
    } else {                                                                          \
      NAME##_v[i / 8u] = f32_to_halves(v, DT);                                        \
    }                                                                                 \
  }

#if STORAGE16

#define FLOAT_IN(NAME, BINDING, DT)                                                   \
  layout(std430, binding = BINDING) readonly buffer NAME##_b32 { float NAME##_f32[]; }; \
  layout(std430, binding = BINDING) readonly buffer NAME##_b16 { uint16_t NAME##_u16[]; }; \
  float NAME##_load(uint i) {                                                         \
    if (DT == DT_F32) return NAME##_f32[i];                                           \
    return half_bits_to_f32(uint(NAME##_u16[i]), DT);                                 \
  }                                                                                   \
  VEC8_IN(NAME, BINDING, DT)

#define FLOAT_OUT(NAME, BINDING, DT)                                                  \
  layout(std430, binding = BINDING) buffer NAME##_b32 { float NAME##_f32[]; };        \
  layout(std430, binding = BINDING) buffer NAME##_b16 { uint16_t NAME##_u16[]; };     \
  float NAME##_load(uint i) {                                                         \
    if (DT == DT_F32) return NAME##_f32[i];                                           \
    return half_bits_to_f32(uint(NAME##_u16[i]), DT);                                 \
  }                                                                                   \
  void NAME##_store(uint i, float v) {                                                \
    if (DT == DT_F32)                                                                 \
      NAME##_f32[i] = v;                                                              \
    else                                                                              \
      NAME##_u16[i] = uint16_t(f32_to_half_bits(v, DT));                              \
  }                                                                                   \
  VEC8_OUT(NAME, BINDING, DT)

/* Raw element bits, for copies that keep the dtype. */
#define RAW_IN(NAME, BINDING)                                                         \
  layout(std430, binding = BINDING) readonly buffer NAME##_r32 { uint NAME##_w32[]; }; \
  layout(std430, binding = BINDING) readonly buffer NAME##_r16 { uint16_t NAME##_w16[]; }; \
  uint NAME##_load16(uint i) { return uint(NAME##_w16[i]); }

#define RAW_OUT(NAME, BINDING)                                                        \
  layout(std430, binding = BINDING) buffer NAME##_r32 { uint NAME##_w32[]; };         \
  layout(std430, binding = BINDING) buffer NAME##_r16 { uint16_t NAME##_w16[]; };     \
  void NAME##_store16(uint i, uint bits) { NAME##_w16[i] = uint16_t(bits); }

#else /* F16 and BF16 live in halves of 32-bit words (little endian) */

#define HALF_FROM_WORD(w, i) (((i) & 1u) != 0u ? (w) >> 16 : (w) & 0xffffu)

#define FLOAT_IN(NAME, BINDING, DT)                                                   \
  layout(std430, binding = BINDING) readonly buffer NAME##_b32 { float NAME##_f32[]; }; \
  layout(std430, binding = BINDING) readonly buffer NAME##_bw { uint NAME##_u32[]; }; \
  float NAME##_load(uint i) {                                                         \
    if (DT == DT_F32) return NAME##_f32[i];                                           \
    return half_bits_to_f32(HALF_FROM_WORD(NAME##_u32[i >> 1], i), DT);               \
  }                                                                                   \
  VEC8_IN(NAME, BINDING, DT)

/* Two invocations may write the two halves of one word: atomics keep both. */
#define FLOAT_OUT(NAME, BINDING, DT)                                                  \
  layout(std430, binding = BINDING) buffer NAME##_b32 { float NAME##_f32[]; };        \
  layout(std430, binding = BINDING) buffer NAME##_bw { uint NAME##_u32[]; };          \
  float NAME##_load(uint i) {                                                         \
    if (DT == DT_F32) return NAME##_f32[i];                                           \
    return half_bits_to_f32(HALF_FROM_WORD(NAME##_u32[i >> 1], i), DT);               \
  }                                                                                   \
  void NAME##_store(uint i, float v) {                                                \
    if (DT == DT_F32) {                                                               \
      NAME##_f32[i] = v;                                                              \
    } else {                                                                          \
      uint shift = (i & 1u) * 16u;                                                    \
      atomicAnd(NAME##_u32[i >> 1], ~(0xffffu << shift));                             \
      atomicOr(NAME##_u32[i >> 1], f32_to_half_bits(v, DT) << shift);                 \
    }                                                                                 \
  }                                                                                   \
  VEC8_OUT(NAME, BINDING, DT)

#define RAW_IN(NAME, BINDING)                                                         \
  layout(std430, binding = BINDING) readonly buffer NAME##_r32 { uint NAME##_w32[]; }; \
  uint NAME##_load16(uint i) { return HALF_FROM_WORD(NAME##_w32[i >> 1], i); }

#define RAW_OUT(NAME, BINDING)                                                        \
  layout(std430, binding = BINDING) buffer NAME##_r32 { uint NAME##_w32[]; };         \
  void NAME##_store16(uint i, uint bits) {                                            \
    uint shift = (i & 1u) * 16u;                                                      \
    atomicAnd(NAME##_w32[i >> 1], ~(0xffffu << shift));                               \
    atomicOr(NAME##_w32[i >> 1], (bits & 0xffffu) << shift);                          \
  }

#endif

#define INT_IN(NAME, BINDING) \
  layout(std430, binding = BINDING) readonly buffer NAME##_bi { int NAME##_i32[]; };

/* ----------------------------------------------------------- reductions
 *
 * Workgroup-wide sum / max. Every invocation must call them (they contain
 * barriers) and every invocation gets the result. */

#if SUBGROUPS
shared float red_scratch[gl_WorkGroupSize.x / 4u]; /* one per subgroup of at least 4 */

float wg_sum(float v) {
  v = subgroupAdd(v);
  barrier();
  if (subgroupElect()) red_scratch[gl_SubgroupID] = v;
  barrier();
  float total = 0.0;
  for (uint s = 0u; s < gl_NumSubgroups; s++) total += red_scratch[s];
  return total;
}

float wg_max(float v) {
  v = subgroupMax(v);
  barrier();
  if (subgroupElect()) red_scratch[gl_SubgroupID] = v;
  barrier();
  float m = red_scratch[0];
  for (uint s = 1u; s < gl_NumSubgroups; s++) m = max(m, red_scratch[s]);
  return m;
}
#else
shared float red_scratch[gl_WorkGroupSize.x];

float wg_reduce(float v, bool take_max) {
  barrier();
  red_scratch[gl_LocalInvocationIndex] = v;
  barrier();
  for (uint half_n = gl_WorkGroupSize.x / 2u; half_n > 0u; half_n /= 2u) {
    if (gl_LocalInvocationIndex < half_n) {
      float other = red_scratch[gl_LocalInvocationIndex + half_n];
      float mine = red_scratch[gl_LocalInvocationIndex];
      red_scratch[gl_LocalInvocationIndex] = take_max ? max(mine, other) : mine + other;
    }
    barrier();
  }
  return red_scratch[0];
}

float wg_sum(float v) { return wg_reduce(v, false); }
float wg_max(float v) { return wg_reduce(v, true); }
#endif

/* ---------------------------------------------------------------- math */

float sigmoid(float x) { return 1.0 / (1.0 + exp(-x)); }

/* log2(e): softmax works in log2 units, exp(x) = exp2(x * LOG2E), so that
 * one multiply scales the logits and exp2 needs no further one. */
#define LOG2E 1.4426950408889634

/* Folds the first n (<= 8) of the values v (in log2 units) into softmax's
 * running maximum m and sum s of exp2(v - m). -inf values (masked logits)
 * add nothing: while all are -inf, m stays -inf and no -inf - -inf (NaN) is
 * taken. */
void softmax_fold(const in float v[8], const uint n, inout float m, inout float s) {
  float top = m;
  [[unroll]] for (uint k = 0u; k < 8u; k++)
    if (k < n) top = max(top, v[k]);
  if (top == NEG_INF) return;
  if (top > m) {
    s *= exp2(m - top);
    m = top;
  }
  [[unroll]] for (uint k = 0u; k < 8u; k++)
    if (k < n) s += exp2(v[k] - m);
}

/* e^y for F32 results judged to a few ulp far from 1: GLSL's exp may err by
 * (3 + 2|y|) ulp, 1.3e-5 relative at y = 50 on NVIDIA, where gelu's tanh
 * form reads it. y = k ln2 + r with the reduction exact (ln2_hi has 15
 * significant bits, so k * ln2_hi is exact for |y| < 350; beyond, the result
 * is 0 or inf either way), then exp(r) with |r| <= ln2 / 2 errs by < 4 ulp. */
float exp_reduced(float y) {
  precise float k = round(y * 1.44269504088896341);
  precise float r = (y - k * 0.693145751953125) - k * 1.42860682030941723e-6;
  return ldexp(exp(r), int(clamp(k, -300.0, 300.0)));
}

/* Complementary error function, relative error about 1.2e-7 for x >= 0
 * (the Chebyshev fit of Numerical Recipes, section 6.2). */
float erfc_nonneg(float x) {
  float t = 1.0 / (1.0 + 0.5 * x);
  float p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
            t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
            t * (-0.82215223 + t * 0.17087277))))))));
  return t * exp_reduced(-x * x + p);
}

/* The normal tail erfc(a / sqrt 2) / 2 for a = |x| >= 0, for results
 * rounded to 16 bits: t 2^(P(t) - a^2 log2(e) / 2) with t = 1 / (1 + 0.6 a /
 * sqrt 2) and P a least-squares fit of degree 6 (the cuda backend's; its
 * relative error is below 1.3e-6 for a <= 10.6, so the tail keeps relative
 * accuracy wherever a 16-bit gelu is not zero). */
float normal_tail_short(float a) {
  float t = 1.0 / (1.0 + 0.4242640687 * a);
  float p = -2.857853010e-01;
  p = p * t + 1.208466814;
  p = p * t - 1.766426520;
  p = p * t + 6.597447063e-01;
  p = p * t + 2.811350349e-01;
  p = p * t + 1.466889947;
  p = p * t - 2.564024854;
  return t * exp2(p - 0.72134752044448170 * a * a);
}

/* Standard normal CDF for a result of dtype dt: accurate in both tails for
 * F32; the short tail for F16/BF16, whose gelu is bound by arithmetic, not
 * memory (bf16 gelu on an H100: 81% of copy with F32's erfc, 88% with this). */
float normal_cdf(float x, uint dt) {
  float c = dt == DT_F32 ? 0.5 * erfc_nonneg(abs(x) * 0.70710678118654752)
                         : normal_tail_short(abs(x));
  return x < 0.0 ? c : 1.0 - c;
}

float gelu_erf(float x, uint dt) { return x * normal_cdf(x, dt); }

/* 0.5 x (1 + tanh(u)) written as x * sigmoid(2u), exact in both tails; F32
 * takes the exactly reduced exp (|2u| reaches 50 where gelu is still a
 * normal F32). */
float gelu_tanh(float x, uint dt) {
  float u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
  float e = dt == DT_F32 ? exp_reduced(-2.0 * u) : exp(-2.0 * u);
  return x / (1.0 + e);
}

/* Invocations in the grid: the step of a loop over elements or vectors. */
uint grid_threads() { return gl_NumWorkGroups.x * gl_WorkGroupSize.x; }
