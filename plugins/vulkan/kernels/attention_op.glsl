/*
 * attention_op.glsl - what attention.comp and attention_khr.glsl share: the
 * op's bindings and push constants (q [B, Sq, Hq, D], k and v [B, Skv, Hkv,
 * D], out like q, kv_lens [B], lse [B, Hq, Sq] F32), the rows a workgroup
 * (x, hkv, b) owns and where its keys are.
 */
FLOAT_OUT(out, 0, DTYPE)
FLOAT_IN(q, 1, DTYPE)
FLOAT_IN(k, 2, DTYPE)
FLOAT_IN(v, 3, DTYPE)
INT_IN(lens, 4)
layout(std430, binding = 5) writeonly buffer Lse { float lse_f32[]; };

layout(push_constant) uniform Push {
  uint sq, skv, hq, head_dim, group;
  float scale;
  uint has_lens, has_lse;
  uint q_offset, q_sb, q_ss, q_sh;
  uint k_offset, k_sb, k_ss, k_sh;
  uint v_offset, v_sb, v_ss, v_sh;
  uint o_offset, o_sb, o_ss, o_sh;
  uint lens_offset, lse_offset;
} p;

/* The query position and head of row `row` of this kv head's list. */
uvec2 row_query(uint row) {
  uint i = row / p.group;
  return uvec2(i, gl_WorkGroupID.y * p.group + (row - i * p.group));
}

uint key_k_offset(uint pos) {
  return p.k_offset + gl_WorkGroupID.z * p.k_sb + pos * p.k_ss + gl_WorkGroupID.y * p.k_sh;
}
uint key_v_offset(uint pos) {
  return p.v_offset + gl_WorkGroupID.z * p.v_sb + pos * p.v_ss + gl_WorkGroupID.y * p.v_sh;
}
