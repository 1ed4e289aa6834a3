#version 450
#extension GL_GOOGLE_include_directive : require
// Reductions over the middle dim of a contiguous [outer, R, inner] view, one
// workgroup per output: op 0 sum, 1 mean, 2 max, 3 min (with the index of
// the first extremum), 6 sum of squares, 4 softmax, 5 log_softmax (writing [outer, R, inner]).
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer O { float o[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) buffer I { int idx[]; };
layout(push_constant) uniform P { uint base_o, base_x, base_i; uint R, inner, nout, op, want_idx; float denom; } p;
#include "common.glsl"
shared float sv[256];
shared int si[256];

void main() {
  uint g = group_linear();
  if (g >= p.nout) return;
  uint t = gl_LocalInvocationID.x;
  uint ob = g / p.inner, ii = g % p.inner;
  uint xb = p.base_x + ob * p.R * p.inner + ii;
  bool ext = p.op == 2u || p.op == 3u || p.op == 4u || p.op == 5u;
  float acc = p.op == 3u ? 1.0 / 0.0 : (ext ? -1.0 / 0.0 : 0.0);
  int ai = -1;
  for (uint r = t; r < p.R; r += 256u) {
    float v = x[xb + r * p.inner];
    if (p.op == 3u) { if (v < acc || ai < 0) { acc = v; ai = int(r); } }
    else if (ext) { if (v > acc || ai < 0) { acc = v; ai = int(r); } }
    else acc += p.op == 6u ? v * v : v;
  }
  sv[t] = acc; si[t] = ai;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s) {
      float a = sv[t], b = sv[t + s];
      int ia = si[t], ib = si[t + s];
      if (!ext) sv[t] = a + b;
      else {
        bool take = ib >= 0 && (ia < 0 || (p.op == 3u ? (b < a || (b == a && ib < ia)) : (b > a || (b == a && ib < ia))));
        if (take) { sv[t] = b; si[t] = ib; }
      }
    }
    barrier();
  }
  float red = sv[0];
  if (p.op < 4u || p.op == 6u) {
    if (t == 0u) {
      o[p.base_o + g] = p.op == 1u ? red / p.denom : red;
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
    o[obase + r * p.inner] = p.op == 5u ? v - log(tot) : exp(v) / tot;
  }
}
