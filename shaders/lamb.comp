#version 450
#extension GL_GOOGLE_include_directive : require
// LAMB (optim.c's arithmetic) in three dispatches over one parameter tensor,
// so that the trust ratio never leaves the device:
//   mode 0: m, v updated; u = m*ibc1 / (sqrt(v)*isb2 + eps) + wd*p; per
//           workgroup sums of p^2 and u^2 -> part[2(goff + group) + {0, 1}]
//   mode 1: one workgroup adds the ngroups partial sums; the trust ratio
//           |p| / |u| (1 unless adapt and both norms > 0) -> part[2 ngroups]
//   mode 2: p -= lr * trust * u, u recomputed from the unchanged p and new m, v
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer Pp { float pp[]; };
layout(std430, binding = 1) readonly buffer G { float g[]; };
layout(std430, binding = 2) buffer M { float m[]; };
layout(std430, binding = 3) buffer V { float v[]; };
layout(std430, binding = 4) buffer Part { float part[]; };
layout(push_constant) uniform P {
  uint bp, bg, bm, bv, bpart;
  uint n, mode, goff, ngroups, adapt;
  float b1, c1, b2, c2, ibc1, isb2, eps, wd, lr;
} p;
#include "common.glsl"
shared float rp[256];
shared float ru[256];

void reduce2(uint t) {
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s) { rp[t] += rp[t + s]; ru[t] += ru[t + s]; }
    barrier();
  }
}

void main() {
  uint t = gl_LocalInvocationID.x;
  if (p.mode == 1u) {
    float sp = 0.0, su = 0.0;
    for (uint k = t; k < p.ngroups; k += 256u) { sp += part[p.bpart + 2u * k]; su += part[p.bpart + 2u * k + 1u]; }
    rp[t] = sp;
    ru[t] = su;
    reduce2(t);
    if (t == 0u) {
      float pn = sqrt(rp[0]), un = sqrt(ru[0]);
      part[p.bpart + 2u * p.ngroups] = p.adapt != 0u && pn > 0.0 && un > 0.0 ? pn / un : 1.0;
    }
    return;
  }
  uint grp = group_linear(), i = grp * 256u + t;
  if (p.mode == 0u) {
    float sp = 0.0, su = 0.0;
    if (i < p.n) {
      float gi = g[p.bg + i];
      float mi = p.b1 * m[p.bm + i] + p.c1 * gi;
      float vi = p.b2 * v[p.bv + i] + p.c2 * (gi * gi);
      m[p.bm + i] = mi;
      v[p.bv + i] = vi;
      float pi = pp[p.bp + i];
      float u = (mi * p.ibc1) / (sqrt(vi) * p.isb2 + p.eps) + p.wd * pi;
      sp = pi * pi;
      su = u * u;
    }
    rp[t] = sp;
    ru[t] = su;
    reduce2(t);
    if (t == 0u) { part[p.bpart + 2u * (p.goff + grp)] = rp[0]; part[p.bpart + 2u * (p.goff + grp) + 1u] = ru[0]; }
    return;
  }
  if (i >= p.n) return;
  float trust = part[p.bpart + 2u * p.ngroups];
  float pi = pp[p.bp + i];
  float u = (m[p.bm + i] * p.ibc1) / (sqrt(v[p.bv + i]) * p.isb2 + p.eps) + p.wd * pi;
  pp[p.bp + i] = pi - (p.lr * trust) * u;
}
