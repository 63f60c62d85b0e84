/*
 * row_argmax.glsl - the argmax of one row, as the cpu backend defines it:
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

/* By one invocation alone. */
uint row_argmax_serial(uint xo, uint cols) {
  float bv = 0.0;
  uint bi = NO_INDEX;
  for (uint c = 0u; c < cols; c++) {
    float v = x_load(xo + c);
    if (argmax_better(v, c, bv, bi)) {
      bv = v;
      bi = c;
    }
  }
  return bi;
}

/* By the whole workgroup: every invocation must call it and gets the result. */
uint row_argmax(uint xo, uint cols) {
  uint t = gl_LocalInvocationIndex;
  float bv = 0.0;
  uint bi = NO_INDEX;
  for (uint c = t; c < cols; c += gl_WorkGroupSize.x) {
    float v = x_load(xo + c);
    if (argmax_better(v, c, bv, bi)) {
      bv = v;
      bi = c;
    }
  }
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
  return best_index[0];
}
