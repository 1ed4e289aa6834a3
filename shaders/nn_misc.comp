#version 450
#extension GL_GOOGLE_include_directive : require
// Small fused kernels, one thread per element, selected by mode (the
// MISC_* names of csrc/vulkan/vk_opcodes.h):
//  MISC_BIAS_GELU           o = gelu(x + b[i % N])            (flags MISC_HAS_BIAS, MISC_TANH)
//  MISC_BIAS_GELU_BACKWARD  o = dy * gelu'(x + b[i % N])       (dy in the ids binding, as float bits)
//  MISC_EMBED_GATHER        o[r, j] = w[ids[r], j]             (n = R * N)
//  MISC_EMBED_SCATTER       w[ids[r], j] += dy[r, j], one thread per column j, rows in order (n = N)
//  MISC_COLUMN_SUMS         o[j] = sum_r x[r, j]               (n = N, R rows)
//  MISC_DROPOUT             o = x * keep(i) * scale            (Philox, as the CPU)
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
#include "vk_opcodes.h"

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
  if (p.mode == MISC_BIAS_GELU || p.mode == MISC_BIAS_GELU_BACKWARD) {
    float v = x[p.bx + i] + ((p.flags & MISC_HAS_BIAS) != 0u ? b[p.bb + i % p.N] : 0.0);
    bool th = (p.flags & MISC_TANH) != 0u;
    if (p.mode == MISC_BIAS_GELU) o[p.bo + i] = th ? gelu_tanh(v) : gelu_erf(v);
    else o[p.bo + i] = intBitsToFloat(ids[p.bi + i]) * (th ? gelu_tanh_grad(v) : gelu_erf_grad(v));
  } else if (p.mode == MISC_EMBED_GATHER) {
    // MISC_LATER_WIN: a later window of the table; rows of other windows are left alone
    uint r = i / p.N, j = i % p.N;
    int id = ids[p.bi + r];
    bool in_win = id >= int(p.v0) && uint(id) - p.v0 < p.vn;
    if (in_win) o[p.bo + i] = x[p.bx + (uint(id) - p.v0) * p.N + j];
    else if ((p.flags & MISC_LATER_WIN) == 0u) o[p.bo + i] = 0.0;
  } else if (p.mode == MISC_EMBED_SCATTER) {
    for (uint r = 0; r < p.R; r++) {
      int id = ids[p.bi + r];
      if (id >= int(p.v0) && uint(id) - p.v0 < p.vn) o[p.bo + (uint(id) - p.v0) * p.N + i] += x[p.bx + r * p.N + i];
    }
  } else if (p.mode == MISC_COLUMN_SUMS) {
    float s = 0.0;
    for (uint r = 0; r < p.R; r++) s += x[p.bx + r * p.N + i];
    o[p.bo + i] = (p.flags & MISC_ACCUMULATE) != 0u ? o[p.bo + i] + s : s;   // later row windows
  } else {   // MISC_DROPOUT
    uint q = i / 4u, w = i % 4u;
    uint c0 = p.off_lo + q;
    uint c1 = p.off_hi + (c0 < q ? 1u : 0u);
    uvec4 r = philox(c0, c1, p.seed_lo, p.seed_hi);
    // x * mask as on the cpu, so a dropped NaN stays NaN; p >= 1 (scale 0) writes zeros
    o[p.bo + i] = p.scale == 0.0 ? 0.0 : x[p.bx + i] * (r[w] >= p.thr ? p.scale : 0.0);
  }
}
