#version 450
#extension GL_GOOGLE_include_directive : require
// LayerNorm(x + residual) over rows of H: one workgroup per row.  Writes y
// and the per-row mean and rstd (stats[2r], stats[2r + 1]) for backward.
// flags: bit 0 residual, bit 1 gamma, bit 2 beta.
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer Y { float y[]; };
layout(std430, binding = 1) buffer S { float stats[]; };
layout(std430, binding = 2) readonly buffer X { float x[]; };
layout(std430, binding = 3) readonly buffer Rs { float res[]; };
layout(std430, binding = 4) readonly buffer G { float gamma[]; };
layout(std430, binding = 5) readonly buffer Bt { float beta[]; };
layout(push_constant) uniform P { uint by, bs, bx, br, bg, bb; uint R, H, flags; float eps; } p;
#include "common.glsl"
shared float red[256];

float sum256(float v) {
  uint t = gl_LocalInvocationID.x;
  red[t] = v;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) { if (t < s) red[t] += red[t + s]; barrier(); }
  float r = red[0];
  barrier();
  return r;
}

float val(uint i) { return (p.flags & 1u) != 0u ? x[p.bx + i] + res[p.br + i] : x[p.bx + i]; }

void main() {
  uint r = group_linear();
  if (r >= p.R) return;
  uint t = gl_LocalInvocationID.x, row = r * p.H;
  // sums of x - x0 (the row's first value): float sums of shifted data do
  // not cancel, and a constant row gives mean x0 and variance 0 exactly
  float x0 = p.H > 0u ? val(row) : 0.0;
  float s = 0.0;
  for (uint j = t; j < p.H; j += 256u) s += val(row + j) - x0;
  float md = sum256(s) / float(p.H);
  float mu = x0 + md;
  float v = 0.0;
  for (uint j = t; j < p.H; j += 256u) { float d = (val(row + j) - x0) - md; v += d * d; }
  float rs = inversesqrt(sum256(v) / float(p.H) + p.eps);
  for (uint j = t; j < p.H; j += 256u) {
    float o = (val(row + j) - mu) * rs;
    if ((p.flags & 2u) != 0u) o *= gamma[p.bg + j];
    if ((p.flags & 4u) != 0u) o += beta[p.bb + j];
    y[p.by + row + j] = o;
  }
  if (t == 0u) { stats[p.bs + 2u * r] = mu; stats[p.bs + 2u * r + 1u] = rs; }
}
