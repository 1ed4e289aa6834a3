#version 450
#extension GL_GOOGLE_include_directive : require
// Small fused kernels, one thread per element (mode):
//  0 bias_gelu forward   o = gelu(x + b[i % N])            (flags bit 0: bias, bit 1: tanh)
//  1 bias_gelu backward  o = dy * gelu'(x + b[i % N])       (dy in the ids binding, as float bits)
//  2 embedding gather    o[r, j] = w[ids[r], j]             (n = R * N)
//  3 embedding scatter   w[ids[r], j] += dy[r, j], one thread per column j, rows in order (n = N)
//  4 column sums         o[j] = sum_r x[r, j]               (n = N, R rows)
//  5 dropout             o = x * keep(i) * scale            (Philox, as the CPU)
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer O { float o[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer Bb { float b[]; };
layout(std430, binding = 3) readonly buffer Ids { int ids[]; };
layout(push_constant) uniform P {
  uint bo, bx, bb, bi;
  uint n, N, R, mode, flags, thr;
  float scale;
  uint seed_lo, seed_hi, off_lo, off_hi;
  uint v0, vn;   // modes 2, 3: the table's rows [v0, v0 + vn) are bound (from row 0 of the binding)
} p;
#include "common.glsl"

uvec4 philox(uint c0, uint c1, uint k0, uint k1) {
  uint c2 = 0u, c3 = 0u;
  for (int r = 0; r < 10; r++) {
    uint hi0, lo0, hi1, lo1;
    umulExtended(0xD2511F53u, c0, hi0, lo0);
    umulExtended(0xCD9E8D57u, c2, hi1, lo1);
    uint n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return uvec4(c0, c1, c2, c3);
}

void main() {
  uint i = group_linear() * 256u + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  if (p.mode <= 1u) {
    float v = x[p.bx + i] + ((p.flags & 1u) != 0u ? b[p.bb + i % p.N] : 0.0);
    bool th = (p.flags & 2u) != 0u;
    if (p.mode == 0u) o[p.bo + i] = th ? gelu_tanh(v) : gelu_erf(v);
    else o[p.bo + i] = intBitsToFloat(ids[p.bi + i]) * (th ? gelu_tanh_grad(v) : gelu_erf_grad(v));
  } else if (p.mode == 2u) {
    // flags bit 3: a later window of the table; rows of other windows are left alone
    uint r = i / p.N, j = i % p.N;
    int id = ids[p.bi + r];
    bool in_win = id >= int(p.v0) && uint(id) - p.v0 < p.vn;
    if (in_win) o[p.bo + i] = x[p.bx + (uint(id) - p.v0) * p.N + j];
    else if ((p.flags & 8u) == 0u) o[p.bo + i] = 0.0;
  } else if (p.mode == 3u) {
    for (uint r = 0; r < p.R; r++) {
      int id = ids[p.bi + r];
      if (id >= int(p.v0) && uint(id) - p.v0 < p.vn) o[p.bo + (uint(id) - p.v0) * p.N + i] += x[p.bx + r * p.N + i];
    }
  } else if (p.mode == 4u) {
    float s = 0.0;
    for (uint r = 0; r < p.R; r++) s += x[p.bx + r * p.N + i];
    o[p.bo + i] = (p.flags & 16u) != 0u ? o[p.bo + i] + s : s;   // bit 4: accumulate (later row windows)
  } else {
    uint q = i / 4u, w = i % 4u;
    uint c0 = p.off_lo + q;
    uint c1 = p.off_hi + (c0 < q ? 1u : 0u);
    uvec4 r = philox(c0, c1, p.seed_lo, p.seed_hi);
    o[p.bo + i] = r[w] >= p.thr ? x[p.bx + i] * p.scale : 0.0;
  }
}
