/*
 * attention_attend.glsl - the flash-attention loop shared by attention.comp
 * and attention_paged.comp.
 *
 * A workgroup owns up to BQ query rows that read the same kv head. The keys
 * are walked in tiles of BK: keys and values are staged in shared memory as
 * F32, each row keeps a running max and sum (online softmax), and each row's
 * output accumulates in the registers of the TPR invocations that own its
 * dims (dim d of a row belongs to lane d % TPR).
 *
 * Inner loops are unrolled where their trip count allows: besides speed,
 * lavapipe (Mesa 22) stops any invocation's loops after 65535 iterations in
 * all, which otherwise limits the keys a row can see there to about 6000
 * (now about 30000).
 *
 * The including kernel declares q (binding 1), k (2), v (3) with FLOAT_IN,
 * defines key_k_offset / key_v_offset, fills q_tile, row_last and row_out,
 * then calls attend_keys and attend_finish.
 */
layout(constant_id = 4) const uint BQ = 16;    /* query rows per workgroup */
layout(constant_id = 5) const uint BK = 16;    /* keys per tile */
layout(constant_id = 6) const uint DMAX = 128; /* head_dim <= DMAX */

const uint TPR = gl_WorkGroupSize.x / BQ; /* invocations per query row */
const uint DPT = DMAX / TPR;              /* dims per invocation */
const uint K_STRIDE = DMAX + 1u;          /* padding: conflict-free score reads */
const int ROW_NONE = -1;                  /* the row sees no key */
const int ROW_ABSENT = -2;                /* no query row here: nothing to write */

shared float q_tile[BQ * DMAX];
shared float k_tile[BK * K_STRIDE];
shared float v_tile[BK * DMAX];
shared float p_tile[BQ * BK];
shared float row_max[BQ], row_sum[BQ], row_scale[BQ];
shared int row_last[BQ]; /* the last key position the row sees, or ROW_NONE / ROW_ABSENT */
shared uint row_out[BQ]; /* element offset of the row's output */

uint key_k_offset(uint pos); /* element offset of dim 0 of key `pos` */
uint key_v_offset(uint pos);

float acc[DPT];

void attend_init() {
  [[unroll]] for (uint i = 0u; i < DPT; i++) acc[i] = 0.0;
  if (gl_LocalInvocationIndex < BQ) {
    row_max[gl_LocalInvocationIndex] = NEG_INF;
    row_sum[gl_LocalInvocationIndex] = 0.0;
  }
}

/* Keys [0, key_end) (uniform over the workgroup); the rows mask their own. */
void attend_keys(uint head_dim, float scale, uint key_end) {
  uint tid = gl_LocalInvocationIndex;
  uint r = tid / TPR, lane = tid - (tid / TPR) * TPR;
  for (uint k0 = 0u; k0 < key_end; k0 += BK) {
    barrier();
    for (uint idx = tid; idx < BK * head_dim; idx += gl_WorkGroupSize.x) {
      uint j = idx / head_dim, d = idx - (idx / head_dim) * head_dim;
      uint pos = k0 + j;
      float kv = 0.0, vv = 0.0; /* keys past the end are never read: they may be NaN */
      if (pos < key_end) {
        kv = k_load(key_k_offset(pos) + d);
        vv = v_load(key_v_offset(pos) + d);
      }
      k_tile[j * K_STRIDE + d] = kv;
      v_tile[j * DMAX + d] = vv;
    }
    barrier();
    for (uint idx = tid; idx < BQ * BK; idx += gl_WorkGroupSize.x) {
      uint qr = idx / BK, j = idx - (idx / BK) * BK;
      float s = NEG_INF;
      if (int(k0 + j) <= row_last[qr]) {
        float dot = 0.0;
        for (uint d0 = 0u; d0 < head_dim; d0 += 8u) /* head_dim is a multiple of 8 */
          [[unroll]] for (uint u = 0u; u < 8u; u++)
            dot += q_tile[qr * DMAX + d0 + u] * k_tile[j * K_STRIDE + d0 + u];
        s = dot * scale;
      }
      p_tile[idx] = s;
    }
    barrier();
    if (tid < BQ) { /* online softmax, one invocation per row */
      float m_old = row_max[tid], m = m_old;
      [[unroll]] for (uint j = 0u; j < BK; j++) m = max(m, p_tile[tid * BK + j]);
      float rescale = m == NEG_INF ? 1.0 : exp(m_old - m);
      float l = row_sum[tid] * rescale;
      [[unroll]] for (uint j = 0u; j < BK; j++) {
        float e = m == NEG_INF ? 0.0 : exp(p_tile[tid * BK + j] - m);
        p_tile[tid * BK + j] = e;
        l += e;
      }
      row_max[tid] = m;
      row_sum[tid] = l;
      row_scale[tid] = rescale;
    }
    barrier();
    float rescale = row_scale[r];
    [[unroll]] for (uint i = 0u; i < DPT; i++) {
      uint d = lane + i * TPR;
      if (d < head_dim) {
        float a = acc[i] * rescale;
        [[unroll]] for (uint j = 0u; j < BK; j++) a += p_tile[r * BK + j] * v_tile[j * DMAX + d];
        acc[i] = a;
      }
    }
  }
  barrier();
}

/* out = acc / sum (0 for a row that saw no key); returns the row's natural
 * log-sum-exp (-inf for none) to the invocations of lane 0. */
float attend_finish(uint head_dim) {
  uint tid = gl_LocalInvocationIndex;
  uint r = tid / TPR, lane = tid - (tid / TPR) * TPR;
  if (row_last[r] == ROW_ABSENT) return NEG_INF;
  float l = row_sum[r];
  float inv = l > 0.0 ? 1.0 / l : 0.0;
  [[unroll]] for (uint i = 0u; i < DPT; i++) {
    uint d = lane + i * TPR;
    if (d < head_dim) out_store(row_out[r] + d, acc[i] * inv);
  }
  return l > 0.0 ? row_max[r] + log(l) : NEG_INF;
}
