#version 450
/* argmax per row (see sample_row_argmax.glsl). A row is split into p.chunks
 * chunks of p.chunk_cols columns, so that a few long rows still fill the
 * device: workgroup (chunk c, row) finds the best of its chunk; with one
 * chunk per row it writes the token, else it writes (value, index) to the
 * partials (binding 2, one uvec2 per row and chunk) and counts itself in
 * the row's arrivals word (binding 3), and the workgroup that arrives last
 * picks the best of the partials and sets the word back to zero for the
 * next call (on an H100 [1, 128256] f32 took 9.7-10.0 us so, 10.9-12.0
 * with a second dispatch for the merge). No workgroup waits for another.
 * VECTORS = 1 (row starts at multiples of 8 elements, chunk_cols a
 * multiple of 8) reads 16-byte words, UNROLL of them in flight. */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 4) const uint VECTORS = 0u;
const uint UNROLL = 4u;

FLOAT_IN(x, 0, DTYPE)
layout(std430, binding = 1) writeonly buffer Out { int out_i32[]; };
/* coherent: the last workgroup reads what others wrote in this dispatch. */
layout(std430, binding = 2) coherent buffer Partials { uvec2 part[]; };
layout(std430, binding = 3) coherent buffer Arrivals { uint arrived[]; };

shared bool last_to_arrive;

layout(push_constant) uniform Push {
  uint rows, cols;
  uint x_offset, x_row_stride;
  uint out_offset, out_cols, out_row_stride; /* out as rows of out_cols */
  uint chunks, chunk_cols;
} p;

#include "sample_row_argmax.glsl"

void write_token(uint row, uint token) {
  uint orow = row / p.out_cols;
  out_i32[p.out_offset + orow * p.out_row_stride + (row - orow * p.out_cols)] = int(token);
}

/* Folds this invocation's 16-byte words of [w0, w1) of the row at xo into
 * its best. Careless, it takes an element only if it is > the best: the
 * columns come in order, so that keeps the lowest index of the largest
 * number, with a few of the instructions argmax_take needs (H100,
 * [128, 128256]: bf16 29.3 -> 24.2 us, f32 36.9 -> 34), but never takes
 * NaN or -inf; a careless pass that found nothing is run again with care. */
void words_best(uint xo, uint w0, uint w1, bool careful, inout float bv, inout uint bi) {
  uint n = gl_WorkGroupSize.x;
  for (uint w = w0 + gl_LocalInvocationIndex; w < w1; w += UNROLL * n) {
    float e[UNROLL][8];
    [[unroll]] for (uint j = 0u; j < UNROLL; j++) x_load8(xo + 8u * min(w + j * n, w1 - 1u), e[j]);
    [[unroll]] for (uint j = 0u; j < UNROLL; j++) {
      if (w + j * n >= w1) break;
      [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint c = 8u * (w + j * n) + i;
        if (careful) {
          argmax_take(e[j][i], c, bv, bi);
        } else if (e[j][i] > bv) {
          bv = e[j][i];
          bi = c;
        }
      }
    }
  }
}

/* Folds columns [c0, c1) of the row at xo into this invocation's best,
 * which is empty (NO_INDEX) on entry. */
void chunk_best(uint xo, uint c0, uint c1, inout float bv, inout uint bi) {
  uint tail = c0;
  if (VECTORS == 1u) {
    uint w1 = c1 / 8u; /* words [c0 / 8, w1) are whole */
    bv = NEG_INF;
    words_best(xo, c0 / 8u, w1, false, bv, bi);
    if (bi == NO_INDEX) words_best(xo, c0 / 8u, w1, true, bv, bi);
    tail = 8u * w1; /* c0 is a multiple of 8, so at least c0 */
  }
  range_argmax(xo, tail, c1, bv, bi);
}

/* The row's token from its chunks' partials, by the last workgroup to
 * write one. */
void merge_partials(uint row) {
  uint t = gl_LocalInvocationIndex;
  float bv = 0.0, value;
  uint bi = NO_INDEX;
  for (uint c = t; c < p.chunks; c += gl_WorkGroupSize.x) {
    uvec2 e = part[row * p.chunks + c];
    argmax_take(uintBitsToFloat(e.x), e.y, bv, bi);
  }
  uint best = workgroup_argmax(bv, bi, value);
  if (t == 0u) {
    write_token(row, best);
    arrived[row] = 0u;
  }
}

void main() {
  uint t = gl_LocalInvocationIndex;
  float value;
  uint c0 = gl_WorkGroupID.x * p.chunk_cols, c1 = min(c0 + p.chunk_cols, p.cols);
  for (uint row = gl_WorkGroupID.y; row < p.rows; row += gl_NumWorkGroups.y) {
    float bv = 0.0;
    uint bi = NO_INDEX;
    chunk_best(p.x_offset + row * p.x_row_stride, c0, c1, bv, bi);
    uint best = workgroup_argmax(bv, bi, value);
    if (p.chunks == 1u) {
      if (t == 0u) write_token(row, best);
      continue;
    }
    if (t == 0u) {
      part[row * p.chunks + gl_WorkGroupID.x] = uvec2(floatBitsToUint(value), best);
      memoryBarrierBuffer(); /* the partial is visible before the count */
      last_to_arrive = atomicAdd(arrived[row], 1u) == p.chunks - 1u;
    }
    barrier();
    if (last_to_arrive) {
      memoryBarrierBuffer();
      merge_partials(row);
    }
  }
}
