#version 450
#extension GL_GOOGLE_include_directive : require
// Reductions over the middle dim of a contiguous [outer, R, inner] float32
// view, one workgroup per output (the RED_* ops of csrc/vulkan/vk_opcodes.h):
// sum, mean, max, min (with the index of the first extremum; NaN wins, as
// on the CPU), sum of squares, softmax and log_softmax (writing [outer, R,
// inner]).  int32 input: reduce_int.comp.  The host splits R so that no
// invocation loops more than VK_MAX_LOOP times.
layout(local_size_x = 256) in;
// the op as a specialization constant: each op's pipeline keeps only its path
layout(constant_id = 0) const uint OP = 0u;
layout(std430, binding = 0) buffer O { float o[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) buffer I { int idx[]; };
layout(push_constant) uniform P { uint base_o, base_x, base_i; uint R, inner, nout, op, want_idx; float denom; uint int_mode; } p;
#include "common.glsl"
#include "vk_opcodes.h"
shared float sv[256];
shared int si[256];

// Does (b, ib) beat (a, ia)?  ia < 0: a is no candidate yet.  NaN beats
// numbers; among equals (NaN included) the lower index wins.
bool better(float b, int ib, float a, int ia, bool want_max) {
  if (ib < 0) return false;
  if (ia < 0) return true;
  bool bn = isnan(b), an = isnan(a);
  if (bn || an) return bn && (!an || ib < ia);
  if (b == a) return ib < ia;
  return want_max ? b > a : b < a;
}

void main() {
  uint g = group_linear();
  if (g >= p.nout) return;
  uint t = gl_LocalInvocationID.x;
  uint ob = g / p.inner, ii = g % p.inner;
  uint xb = p.base_x + ob * p.R * p.inner + ii;
  bool ext = OP == RED_MAX || OP == RED_MIN || OP == RED_SOFTMAX || OP == RED_LOG_SOFTMAX;
  bool want_max = OP != RED_MIN;
  float acc = 0.0;
  int ai = -1;
  if (ext) {
    for (uint r = t; r < p.R; r += 256u) {
      float v = x[xb + r * p.inner];
      if (better(v, int(r), acc, ai, want_max)) { acc = v; ai = int(r); }
    }
  } else if (OP == RED_SUMSQ) {
    for (uint r = t; r < p.R; r += 256u) { float v = x[xb + r * p.inner]; acc += v * v; }
  } else {
    for (uint r = t; r < p.R; r += 256u) acc += x[xb + r * p.inner];
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
  float red = sv[0];
  if (OP != RED_SOFTMAX && OP != RED_LOG_SOFTMAX) {
    if (t == 0u) {
      o[p.base_o + g] = OP == RED_MEAN ? red / p.denom : red;
      if (p.want_idx != 0u) idx[p.base_i + g] = si[0];
    }
    return;
  }
  // softmax: red is the max; now the sum of exponentials
  float m = red;
  barrier();
  float s = 0.0;
  for (uint r = t; r < p.R; r += 256u) s += exp(x[xb + r * p.inner] - m);
  sv[t] = s;
  barrier();
  for (uint k = 128u; k > 0u; k >>= 1) { if (t < k) sv[t] += sv[t + k]; barrier(); }
  float tot = sv[0];
  uint obase = p.base_o + ob * p.R * p.inner + ii;
  for (uint r = t; r < p.R; r += 256u) {
    float v = x[xb + r * p.inner] - m;
    o[obase + r * p.inner] = OP == RED_LOG_SOFTMAX ? v - log(tot) : exp(v) / tot;
  }
}
