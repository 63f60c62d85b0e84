/*
 * sample_row_argmax.glsl - the argmax of one row, as the cpu backend defines it:
 * the largest value, the lowest index on ties, NaN smaller than every number
 * (a row of NaN gives 0). Needs x_load() declared before inclusion.
 */
shared float best_value[gl_WorkGroupSize.x];
shared uint best_index[gl_WorkGroupSize.x];

const uint NO_INDEX = 0xffffffffu;

/* Whether (v, i) beats (bv, bi); NO_INDEX marks "nothing yet". */
bool argmax_better(float v, uint i, float bv, uint bi) {
  if (bi == NO_INDEX) return i != NO_INDEX;
  if (i == NO_INDEX) return false;
  if (isnan(v) != isnan(bv)) return isnan(bv);
  if (isnan(v)) return i < bi;
  return v > bv || (v == bv && i < bi);
}

void argmax_take(float v, uint i, inout float bv, inout uint bi) {
  if (argmax_better(v, i, bv, bi)) {
    bv = v;
    bi = i;
  }
}

/* By one invocation alone. */
uint row_argmax_serial(uint xo, uint cols) {
  float bv = 0.0;
  uint bi = NO_INDEX;
  for (uint c = 0u; c < cols; c++) argmax_take(x_load(xo + c), c, bv, bi);
  return bi;
}

/* The best of every invocation's (bv, bi): every invocation must call it
 * and gets the index, and the value in `value`. */
#if SUBGROUPS && !defined(ARGMAX_BY_TREE)
/* The subgroup's best: the largest number and its lowest index, else
 * (only NaN or nothing) the lowest index, NaN or NO_INDEX. Two barriers
 * where the tree below has one per halving: on an H100 argmax [128, 128256]
 * took f32 30.4-31.0 us against 32.6-33.5, bf16 20.2-20.4 against
 * 21.6-21.9, and [1, 128256] 7.8-8.7 against 9.3-10.0. */
uint subgroup_argmax(inout float bv, uint bi) {
  bool number = bi != NO_INDEX && !isnan(bv);
  float largest = subgroupMax(number ? bv : NEG_INF);
  uint index = subgroupMin(number && bv == largest ? bi : NO_INDEX);
  if (index != NO_INDEX) { /* uniform: a subgroup result */
    bv = largest;
    return index;
  }
  bv = uintBitsToFloat(0x7fc00000u); /* NaN */
  return subgroupMin(bi);
}

uint workgroup_argmax(float bv, uint bi, out float value) {
  bi = subgroup_argmax(bv, bi);
  barrier();
  if (subgroupElect()) {
    best_value[gl_SubgroupID] = bv;
    best_index[gl_SubgroupID] = bi;
  }
  barrier();
  bv = 0.0;
  bi = NO_INDEX;
  for (uint s = 0u; s < gl_NumSubgroups; s++) argmax_take(best_value[s], best_index[s], bv, bi);
  value = bv;
  return bi;
}
#else
uint workgroup_argmax(float bv, uint bi, out float value) {
  uint t = gl_LocalInvocationIndex;
  barrier();
  best_value[t] = bv;
  best_index[t] = bi;
  barrier();
  for (uint half_n = gl_WorkGroupSize.x / 2u; half_n > 0u; half_n /= 2u) {
    if (t < half_n && argmax_better(best_value[t + half_n], best_index[t + half_n],
                                    best_value[t], best_index[t])) {
      best_value[t] = best_value[t + half_n];
      best_index[t] = best_index[t + half_n];
    }
    barrier();
  }
  value = best_value[0];
  return best_index[0];
}
#endif

/* Folds columns [c0, c1) of the row at xo into this invocation's best, the
 * workgroup's invocations taking every n-th column, four loads in flight. */
void range_argmax(uint xo, uint c0, uint c1, inout float bv, inout uint bi) {
  uint n = gl_WorkGroupSize.x;
  for (uint c = c0 + gl_LocalInvocationIndex; c < c1; c += 4u * n) {
    float v[4];
    [[unroll]] for (uint j = 0u; j < 4u; j++) v[j] = x_load(xo + min(c + j * n, c1 - 1u));
    [[unroll]] for (uint j = 0u; j < 4u; j++)
      if (c + j * n < c1) argmax_take(v[j], c + j * n, bv, bi);
  }
}

/* By the whole workgroup: every invocation must call it and gets the result. */
uint row_argmax(uint xo, uint cols) {
  float bv = 0.0, value;
  uint bi = NO_INDEX;
  range_argmax(xo, 0u, cols, bv, bi);
  return workgroup_argmax(bv, bi, value);
}
