#version 450
/* attention_khr.glsl with F16 tiles. */
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define ELEM float16_t
#include "attention_khr.glsl"
