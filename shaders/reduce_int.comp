#version 450
#extension GL_GOOGLE_include_directive : require
// reduce.comp's sum, max and min for int32 input and output, in int32 as
// the CPU: the sum wraps, max / min compare as integers (first index wins).
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer O { int o[]; };
layout(std430, binding = 1) readonly buffer X { int x[]; };
layout(std430, binding = 2) buffer I { int idx[]; };
layout(push_constant) uniform P { uint base_o, base_x, base_i; uint R, inner, nout, op, want_idx; float denom; uint int_mode; } p;
#include "common.glsl"
#include "vk_opcodes.h"
shared int sv[256];
shared int si[256];

bool better(int b, int ib, int a, int ia, bool want_max) {
  if (ib < 0) return false;
  if (ia < 0) return true;
  if (b == a) return ib < ia;
  return want_max ? b > a : b < a;
}

void main() {
  uint g = group_linear();
  if (g >= p.nout) return;
  uint t = gl_LocalInvocationID.x;
  uint ob = g / p.inner, ii = g % p.inner;
  uint xb = p.base_x + ob * p.R * p.inner + ii;
  bool ext = p.op == RED_MAX || p.op == RED_MIN;
  bool want_max = p.op == RED_MAX;
  int acc = 0, ai = -1;
  for (uint r = t; r < p.R; r += 256u) {
    int v = x[xb + r * p.inner];
    if (!ext) acc += v;   // wraps like the cpu's int32 result
    else if (better(v, int(r), acc, ai, want_max)) { acc = v; ai = int(r); }
  }
  sv[t] = acc; si[t] = ai;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s) {
      if (!ext) sv[t] += sv[t + s];
      else if (better(sv[t + s], si[t + s], sv[t], si[t], want_max)) { sv[t] = sv[t + s]; si[t] = si[t + s]; }
    }
    barrier();
  }
  if (t == 0u) {
    o[p.base_o + g] = sv[0];
    if (p.want_idx != 0u) idx[p.base_i + g] = si[0];
  }
}
