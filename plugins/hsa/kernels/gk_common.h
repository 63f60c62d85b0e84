/*
 * gk_common.h - helpers every kernel file uses: tensor element access by
 * dtype, work-group reductions, grid-stride loops and the device error word.
 *
 * A tensor arrives as a global byte pointer plus a byte offset; element i
 * of a row is at (base + off) + i * element size. Float dtypes are handled
 * by functions taking the dtype as a compile-time constant (every kernel
 * body is inlined into one entry point per dtype), so each entry point is
 * straight-line code for its dtype.
 */
#ifndef GK_COMMON_H_
#define GK_COMMON_H_

#include "gk_params.h"
#include "gk_device.h"
#include "gk_math.h"

typedef global uchar *gk_ptr;

/* Bytes per element of a float dtype. */
GK_INLINE long gk_size(const int dt) { return dt == GK_F32 ? 4 : 2; }

/* Element i of a float array of dtype dt, as F32. */
GK_INLINE float gk_load(const int dt, gk_ptr p, long i) {
  if (dt == GK_F32) return ((global const float *)p)[i];
  if (dt == GK_F16) return gk_f16_to_f32(((global const ushort *)p)[i]);
  return gk_bf16_to_f32(((global const ushort *)p)[i]);
}

/* Stores v rounded to nearest even into element i. */
GK_INLINE void gk_store(const int dt, gk_ptr p, long i, float v) {
  if (dt == GK_F32) ((global float *)p)[i] = v;
  else if (dt == GK_F16) ((global ushort *)p)[i] = gk_f32_to_f16(v);
  else ((global ushort *)p)[i] = gk_f32_to_bf16(v);
}

/* v rounded to dtype dt (what a store and a load give back). */
GK_INLINE float gk_round(const int dt, float v) {
  if (dt == GK_F32) return v;
  if (dt == GK_F16) return gk_f16_to_f32(gk_f32_to_f16(v));
  return gk_bf16_to_f32(gk_f32_to_bf16(v));
}

GK_INLINE int gk_load_i32(gk_ptr p, long i) { return ((global const int *)p)[i]; }

/* ------------------------------------------------------ loops */

/* Grid-stride loops: the x dimension of the grid covers [0, n) with
 * work-items of wg-wide groups; the y dimension hands out rows to groups.
 * The host caps the grid, so any size is covered. */
#define GK_FOR_GRID_X(i, n, wg)                                                  \
  for (long i = (long)gk_group_x() * (wg) + gk_local_id(); i < (n);            \
       i += (long)gk_groups_x() * (wg))
#define GK_FOR_ROWS(r, rows) for (long r = gk_group_y(); r < (rows); r += gk_groups_y())
/* The work-items of one group over [0, n). */
#define GK_FOR_GROUP(i, n, wg) for (long i = gk_local_id(); i < (n); i += (wg))

/* ------------------------------------------------------ reductions */

/* Sum of v over the work-group (wg a power of two); every work-item gets it.
 * s holds wg floats. */
GK_INLINE float gk_group_sum(float v, local float *s, const uint wg) {
  uint lid = gk_local_id();
  s[lid] = v;
  gk_barrier();
  for (uint n = wg / 2; n > 0; n >>= 1) {
    if (lid < n) s[lid] += s[lid + n];
    gk_barrier();
  }
  float r = s[0];
  gk_barrier();
  return r;
}

GK_INLINE float gk_max(float a, float b) { return b > a ? b : a; }

/* Max of v over the work-group (NaN is ignored unless all are NaN). */
GK_INLINE float gk_group_max(float v, local float *s, const uint wg) {
  uint lid = gk_local_id();
  s[lid] = v;
  gk_barrier();
  for (uint n = wg / 2; n > 0; n >>= 1) {
    if (lid < n) s[lid] = gk_max(s[lid], s[lid + n]);
    gk_barrier();
  }
  float r = s[0];
  gk_barrier();
  return r;
}

/* ------------------------------------------------------ error word */

/* Records a device-side error: the first caller claims the word and stores
 * what happened; later ones leave it. The host reads it at synchronize. */
GK_INLINE void gk_raise(gk_ptr error, uint code, long index, long value, long limit) {
  volatile global uint *w = (volatile global uint *)error;
  if (gk_atomic_cmpxchg(w, 0u, code) != 0u) return;
  w[1] = (uint)index;
  w[2] = (uint)((ulong)index >> 32);
  w[3] = (uint)value;
  w[4] = (uint)((ulong)value >> 32);
  w[5] = (uint)limit;
  w[6] = (uint)((ulong)limit >> 32);
}

#endif /* GK_COMMON_H_ */
