/*
 * attention_paged.glsl - what attention_paged.comp and
 * attention_paged_decode.comp share: the op's bindings 0-6 and push
 * constants (the host's vk_paged_push; only attention_paged_decode.comp
 * reads the last three), the cache slot of a key, and the checks of the
 * device data (as the cpu backend makes them).
 */
FLOAT_OUT(out, 0, DTYPE)
FLOAT_IN(q, 1, DTYPE)
FLOAT_IN(k, 2, DTYPE)
FLOAT_IN(v, 3, DTYPE)
INT_IN(table, 4)
INT_IN(starts, 5)
INT_IN(lens, 6)

layout(push_constant) uniform Push {
  uint tokens, batch, hq, head_dim, group;
  float scale;
  uint block_size, max_blocks, cache_blocks, hkv;
  uint q_offset, q_st, q_sh;
  uint o_offset, o_st, o_sh;
  uint k_offset, v_offset, table_offset, starts_offset, lens_offset;
  uint splits, split_keys, head_chunks;
} p;

/* The cache slot (block * block_size + offset) of position pos of
 * sequence b; block_size is p.block_size, or a specialisation constant of
 * the same value where the division is in a hot loop. */
uint cache_slot(uint b, uint pos, uint block_size) {
  uint block = uint(table_i32[p.table_offset + b * p.max_blocks + pos / block_size]);
  return block * block_size + pos % block_size;
}

shared uint layout_ok;
shared uint first_bad_block;

/* Whether q_starts and seq_lens describe the T tokens (every workgroup
 * checks, so every one knows; the first raises ERR_PAGED_LAYOUT if not). */
bool layout_valid() {
  if (gl_LocalInvocationIndex == 0u) layout_ok = 1u;
  barrier();
  int t = int(p.tokens);
  if (gl_LocalInvocationIndex == 0u &&
      (starts_i32[p.starts_offset] != 0 || starts_i32[p.starts_offset + p.batch] != t))
    layout_ok = 0u;
  for (uint s = gl_LocalInvocationIndex; s < p.batch; s += gl_WorkGroupSize.x) {
    int q_len = starts_i32[p.starts_offset + s + 1u] - starts_i32[p.starts_offset + s];
    if (q_len < 0 || lens_i32[p.lens_offset + s] < q_len) layout_ok = 0u;
  }
  barrier();
  if (layout_ok == 0u && gl_LocalInvocationIndex == 0u && gl_WorkGroupID == uvec3(0u))
    raise_error(ERR_PAGED_LAYOUT, starts_i32[p.starts_offset + p.batch], t);
  return layout_ok != 0u;
}

/* Positions of sequence b whose blocks can be read (the reporter raising
 * the first problem found). */
int readable_length(uint b, int seq_len, bool reporter) {
  uint needed = (uint(seq_len) + p.block_size - 1u) / p.block_size;
  if (gl_LocalInvocationIndex == 0u) first_bad_block = needed;
  barrier();
  for (uint i = gl_LocalInvocationIndex; i < min(needed, p.max_blocks); i += gl_WorkGroupSize.x) {
    int block = table_i32[p.table_offset + b * p.max_blocks + i];
    if (block < 0 || uint(block) >= p.cache_blocks) atomicMin(first_bad_block, i);
  }
  if (gl_LocalInvocationIndex == 0u && needed > p.max_blocks)
    atomicMin(first_bad_block, p.max_blocks);
  barrier();
  uint bad = first_bad_block;
  if (bad < needed && reporter && gl_LocalInvocationIndex == 0u) {
    if (bad < p.max_blocks)
      raise_error(ERR_PAGED_BLOCK, table_i32[p.table_offset + b * p.max_blocks + bad],
                  int(p.cache_blocks));
    else
      raise_error(ERR_PAGED_LENGTH, seq_len, int(p.max_blocks * p.block_size));
  }
  return bad < needed ? int(bad * p.block_size) : seq_len;
}
