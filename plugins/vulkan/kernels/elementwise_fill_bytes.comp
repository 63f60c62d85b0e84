#version 450
/* mem_fill's partial words: sets the bytes `mask` selects in one word,
 * leaving the others alone (vkCmdFillBuffer does the whole words). */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(std430, binding = 0) buffer Words { uint words[]; };

layout(push_constant) uniform Push {
  uint index; /* word index from the binding's start */
  uint mask;  /* bytes to set */
  uint value; /* the byte repeated four times */
} p;

void main() {
  if (gl_GlobalInvocationID.x != 0u) return;
  words[p.index] = (words[p.index] & ~p.mask) | (p.value & p.mask);
}
