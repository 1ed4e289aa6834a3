#version 450
#extension GL_GOOGLE_include_directive : require
// LAMB (optim.c's arithmetic) in three dispatches over one parameter tensor,
// so that the trust ratio never leaves the device:
//   mode 0: m, v updated; u = m*ibc1 / (sqrt(v)*isb2 + eps) + wd*p; per
//           workgroup the largest |p| and |u| and the sums of (p/max)^2 and
//           (u/max)^2 -> part[4(goff + group) + {0, 1, 2, 3}]: scaled sums, so
//           that squares of large values (|p| ~ 1e20) do not overflow float
//   mode 1: one workgroup combines the ngroups partial norms; the trust ratio
//           |p| / |u| (1 unless adapt and both norms > 0) -> part[4 ngroups]
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

void sum2(uint t) {
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s) { rp[t] += rp[t + s]; ru[t] += ru[t + s]; }
    barrier();
  }
}

void max2(uint t) {
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s) { rp[t] = max(rp[t], rp[t + s]); ru[t] = max(ru[t], ru[t + s]); }
    barrier();
  }
}

float sq(float x, float scale) { float r = scale > 0.0 ? x / scale : 0.0; return r * r; }

void main() {
  uint t = gl_LocalInvocationID.x;
  if (p.mode == 1u) {
    // the largest group maxima, then the groups' sums rescaled to them
    float mp = 0.0, mu = 0.0;
    for (uint k = t; k < p.ngroups; k += 256u) { mp = max(mp, part[p.bpart + 4u * k]); mu = max(mu, part[p.bpart + 4u * k + 2u]); }
    rp[t] = mp;
    ru[t] = mu;
    max2(t);
    mp = rp[0];
    mu = ru[0];
    barrier();
    float sp = 0.0, su = 0.0;
    for (uint k = t; k < p.ngroups; k += 256u) {
      sp += part[p.bpart + 4u * k + 1u] * sq(part[p.bpart + 4u * k], mp);
      su += part[p.bpart + 4u * k + 3u] * sq(part[p.bpart + 4u * k + 2u], mu);
    }
    rp[t] = sp;
    ru[t] = su;
    sum2(t);
    if (t == 0u) {
      float pn = mp * sqrt(rp[0]), un = mu * sqrt(ru[0]);
      part[p.bpart + 4u * p.ngroups] = p.adapt != 0u && pn > 0.0 && un > 0.0 ? pn / un : 1.0;
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
      sp = pi;
      su = u;
    }
    rp[t] = abs(sp);
    ru[t] = abs(su);
    max2(t);
    float mp = rp[0], mu = ru[0];
    barrier();
    rp[t] = sq(sp, mp);
    ru[t] = sq(su, mu);
    sum2(t);
    if (t == 0u) {
      uint at = p.bpart + 4u * (p.goff + grp);
      part[at] = mp; part[at + 1u] = rp[0]; part[at + 2u] = mu; part[at + 3u] = ru[0];
    }
    return;
  }
  if (i >= p.n) return;
  float trust = part[p.bpart + 4u * p.ngroups];
  float pi = pp[p.bp + i];
  float u = (m[p.bm + i] * p.ibc1) / (sqrt(v[p.bv + i]) * p.isb2 + p.eps) + p.wd * pi;
  pp[p.bp + i] = pi - (p.lr * trust) * u;
}
