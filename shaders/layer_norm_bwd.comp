#version 450
#extension GL_GOOGLE_include_directive : require
// LayerNorm backward.  mode 0: dx per row (one workgroup per row);
// mode 1: dgamma / dbeta per column (one thread per column, rows in order;
// flags bit 2 adds to them, for later windows of rows).  stats: [R, 2].
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer DX { float dx[]; };
layout(std430, binding = 1) buffer DG { float dg[]; };
layout(std430, binding = 2) readonly buffer DY { float dy[]; };
layout(std430, binding = 3) readonly buffer X { float x[]; };
layout(std430, binding = 4) readonly buffer Rs { float res[]; };
layout(std430, binding = 5) readonly buffer G { float gamma[]; };
layout(std430, binding = 6) readonly buffer S { float stats[]; };
layout(push_constant) uniform P { uint bdx, bdg, bdy, bx, br, bgm, bs; uint R, H, flags, mode; } p;
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
  uint t = gl_LocalInvocationID.x;
  if (p.mode == 1u) {
    uint j = group_linear() * 256u + t;
    if (j >= p.H) return;
    float sg = 0.0, sb = 0.0;
    for (uint r = 0; r < p.R; r++) {
      float xh = (val(r * p.H + j) - stats[p.bs + 2u * r]) * stats[p.bs + 2u * r + 1u];
      float d = dy[p.bdy + r * p.H + j];
      sg += d * xh;
      sb += d;
    }
    if ((p.flags & 4u) != 0u) { sg += dg[p.bdg + j]; sb += dg[p.bdg + p.H + j]; }
    dg[p.bdg + j] = sg;           // dgamma in [0, H), dbeta in [H, 2H)
    dg[p.bdg + p.H + j] = sb;
    return;
  }
  uint r = group_linear();
  if (r >= p.R) return;
  uint row = r * p.H;
  float mu = stats[p.bs + 2u * r], rs = stats[p.bs + 2u * r + 1u];
  float a = 0.0, c = 0.0;
  for (uint j = t; j < p.H; j += 256u) {
    float xh = (val(row + j) - mu) * rs;
    float g = dy[p.bdy + row + j] * ((p.flags & 2u) != 0u ? gamma[p.bgm + j] : 1.0);
    a += g;
    c += g * xh;
  }
  a = sum256(a) / float(p.H);
  c = sum256(c) / float(p.H);
  for (uint j = t; j < p.H; j += 256u) {
    float xh = (val(row + j) - mu) * rs;
    float g = dy[p.bdy + row + j] * ((p.flags & 2u) != 0u ? gamma[p.bgm + j] : 1.0);
    dx[p.bdx + row + j] = rs * (g - a - xh * c);
  }
}
