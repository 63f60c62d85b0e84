#version 450
/* attention_khr.glsl with BF16 tiles (needs VK_KHR_shader_bfloat16). */
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_bfloat16 : require
#define ELEM bfloat16_t
#include "attention_khr.glsl"
