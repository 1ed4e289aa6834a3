#version 450
#extension GL_GOOGLE_include_directive : require
// Reductions over the middle dim of a contiguous [outer, R, inner] view, one
// workgroup per output (the RED_* ops of csrc/vulkan/vk_opcodes.h): sum,
// mean, max, min (with the index of the first extremum; NaN wins, as on the
// CPU), sum of squares, softmax and log_softmax (writing [outer, R, inner]).
// int_mode: x and o hold int32 (sum wraps, max / min compare as integers).
// The host splits R so that no invocation loops more than VK_MAX_LOOP times.
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer O { uint o[]; };
layout(std430, binding = 1) readonly buffer X { uint x[]; };
layout(std430, binding = 2) buffer I { int idx[]; };
layout(push_constant) uniform P { uint base_o, base_x, base_i; uint R, inner, nout, op, want_idx; float denom; uint int_mode; } p;
#include "common.glsl"
#include "vk_opcodes.h"
shared float sv[256];
shared int sn[256];
shared int si[256];

// Does (b, ib) beat (a, ia)?  ia < 0: a is no candidate yet.  NaN beats
// numbers; among equals (NaN included) the lower index wins.
bool better_f(float b, int ib, float a, int ia, bool want_max) {
  if (ib < 0) return false;
  if (ia < 0) return true;
  bool bn = isnan(b), an = isnan(a);
  if (bn || an) return bn && (!an || ib < ia);
  if (b == a) return ib < ia;
  return want_max ? b > a : b < a;
}
bool better_i(int b, int ib, int a, int ia, bool want_max) {
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
  bool ext = p.op == RED_MAX || p.op == RED_MIN || p.op == RED_SOFTMAX || p.op == RED_LOG_SOFTMAX;
  bool want_max = p.op != RED_MIN;
  bool ints = p.int_mode != 0u;
  float acc = 0.0;
  int iacc = 0, ai = -1;
  for (uint r = t; r < p.R; r += 256u) {
    uint w = x[xb + r * p.inner];
    if (ints) {
      int v = int(w);
      if (ext) { if (better_i(v, int(r), iacc, ai, want_max)) { iacc = v; ai = int(r); } }
      else iacc += v;   // wraps like the cpu's int32 result
    } else {
      float v = uintBitsToFloat(w);
      if (ext) { if (better_f(v, int(r), acc, ai, want_max)) { acc = v; ai = int(r); } }
      else acc += p.op == RED_SUMSQ ? v * v : v;
    }
  }
  sv[t] = acc; sn[t] = iacc; si[t] = ai;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s) {
      if (!ext) { sv[t] += sv[t + s]; sn[t] += sn[t + s]; }
      else if (ints ? better_i(sn[t + s], si[t + s], sn[t], si[t], want_max)
                    : better_f(sv[t + s], si[t + s], sv[t], si[t], want_max)) {
        sv[t] = sv[t + s]; sn[t] = sn[t + s]; si[t] = si[t + s];
      }
    }
    barrier();
  }
  float red = sv[0];
  if (p.op != RED_SOFTMAX && p.op != RED_LOG_SOFTMAX) {
    if (t == 0u) {
      o[p.base_o + g] = ints ? uint(sn[0]) : floatBitsToUint(p.op == RED_MEAN ? red / p.denom : red);
      if (p.want_idx != 0u) idx[p.base_i + g] = si[0];
    }
    return;
  }
  // softmax: red is the max; now the sum of exponentials
  float m = red;
  barrier();
  float s = 0.0;
  for (uint r = t; r < p.R; r += 256u) s += exp(uintBitsToFloat(x[xb + r * p.inner]) - m);
  sv[t] = s;
  barrier();
  for (uint k = 128u; k > 0u; k >>= 1) { if (t < k) sv[t] += sv[t + k]; barrier(); }
  float tot = sv[0];
  uint obase = p.base_o + ob * p.R * p.inner + ii;
  for (uint r = t; r < p.R; r += 256u) {
    float v = uintBitsToFloat(x[xb + r * p.inner]) - m;
    o[obase + r * p.inner] = floatBitsToUint(p.op == RED_LOG_SOFTMAX ? v - log(tot) : exp(v) / tot);
  }
}
