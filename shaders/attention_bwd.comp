#version 450
#extension GL_GOOGLE_include_directive : require
// Flash-style attention backward, recomputing the probabilities from the
// saved log-sum-exps (no T x T matrix is stored):
//   mode 1: one workgroup per query row i:  D_i = rowsum(dO_i * O_i) (written),
//           dQ_i = scale * sum_j P_ij (dP_ij - D_i) K_j
//   mode 2: one workgroup per key row j:    dV_j = sum_i Pd_ij dO_i,
//           dK_j = scale * sum_i P_ij (dP_ij - D_i) Q_i
//           over the queries of one window (vk_opcodes.h: ATTN_BWD_WINDOW),
//           added to what the windows before wrote (a loop stays within
//           VK_MAX_LOOP queries: lavapipe cuts longer loops short)
// with P = exp(S - lse), Pd = P * dropout multiplier, dP = (dO V^T) * multiplier.
// Mask and dropout exactly as attention.comp.  Head dim up to 256.
// CAUSAL: query i and key j meet only when j <= i.  VARLEN: packed
// sequences as attention.comp (one workgroup per (token, head); binding 9
// holds the offsets, mask_bstride = B; O, dO, dQ, dK, dV [total, A, d],
// lse and D [A, total]).
layout(constant_id = 0) const uint CAUSAL = 0u;
layout(constant_id = 1) const uint VARLEN = 0u;
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer OA { float oa[]; };      // mode 1: dQ, mode 2: dK
layout(std430, binding = 1) buffer OB { float ob[]; };      // mode 2: dV
layout(std430, binding = 2) buffer Dd { float dd[]; };      // D [BH * Tq]
layout(std430, binding = 3) readonly buffer LSE { float lse[]; };
layout(std430, binding = 4) readonly buffer Q { float q[]; };
layout(std430, binding = 5) readonly buffer K { float k[]; };
layout(std430, binding = 6) readonly buffer V { float v[]; };
layout(std430, binding = 7) readonly buffer O { float o[]; };
layout(std430, binding = 8) readonly buffer DO { float dout[]; };
layout(std430, binding = 9) readonly buffer Mk { uint mk[]; };
layout(push_constant) uniform P {
  uint boa, bob, bd, bl, bq, bk, bv, bo, bdo, bm;
  uint A, Tq, Tk, d;
  uint qs0, qs1, qs2, ks0, ks1, ks2;
  uint mask_bstride, mask_flags;
  float mask_value, scale;
  uint thr;
  float keep_scale;
  uint seed_lo, seed_hi, off_lo, off_hi;
  uint mode;
} p;
#include "common.glsl"
#include "vk_opcodes.h"

shared float sa[256];
shared float sb[256];
shared float w1[64];
shared float w2[64];
shared float red[64];

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

float bias_of(uint b, uint j) {
  if ((p.mask_flags & 1u) == 0u) return 0.0;
  uint w = mk[p.bm + b * p.mask_bstride + j];
  float mv = (p.mask_flags & 4u) != 0u ? float(int(w)) : uintBitsToFloat(w);
  return (p.mask_flags & 2u) != 0u ? (1.0 - mv) * p.mask_value : mv;
}

float mult_of(uint bh, uint i, uint j) {
  if (p.thr == 0u) return 1.0;
  uint idx_lo, idx_hi;
  umulExtended(bh * p.Tq + i, p.Tk, idx_hi, idx_lo);
  uint lo2 = idx_lo + j;
  idx_hi += lo2 < idx_lo ? 1u : 0u;
  uint qlo = (lo2 >> 2) | (idx_hi << 30), qhi = idx_hi >> 2;
  uint c0 = p.off_lo + qlo;
  uint c1 = p.off_hi + qhi + (c0 < qlo ? 1u : 0u);
  uvec4 r = philox(c0, c1, p.seed_lo, p.seed_hi);
  return r[lo2 & 3u] >= p.thr ? p.keep_scale : 0.0;
}

// VARLEN: the sequence holding token tok (the last b with offsets[b] <= tok)
uint seq_of(uint tok, uint nseq) {
  uint lo = 0u, hi = nseq;
  while (hi - lo > 1u) { uint mid = (lo + hi) / 2u; if (mk[p.bm + mid] <= tok) lo = mid; else hi = mid; }
  return lo;
}

void main() {
  uint t = gl_LocalInvocationID.x;
  uint gid = group_linear();
  uint mode = p.mode & ((1u << ATTN_BWD_WINDOW) - 1u), window = p.mode >> ATTN_BWD_WINDOW;
  float acc1[4] = float[4](0.0, 0.0, 0.0, 0.0);
  float acc2[4] = float[4](0.0, 0.0, 0.0, 0.0);
  // this workgroup's row (a query row in mode 1, a key row in mode 2):
  // batch b, head a, row r within its sequence, which starts at row s0 and
  // has len rows; rid: its row in O / dO / dQ / dK / dV, total: tokens (VARLEN)
  uint b, a, r, bh, s0 = 0u, len, rid, total = 0u;
  if (VARLEN != 0u) {
    total = mk[p.bm + p.mask_bstride];
    uint tok = gid / p.A;
    if (tok >= total) return;
    a = gid % p.A;
    b = seq_of(tok, p.mask_bstride);
    s0 = mk[p.bm + b];
    len = mk[p.bm + b + 1u] - s0;
    r = tok - s0;
    bh = b * p.A + a;
    rid = tok * p.A + a;
  } else {
    uint T = mode == ATTN_BWD_Q ? p.Tq : p.Tk;
    bh = gid / T; r = gid % T;
    b = bh / p.A; a = bh % p.A;
    rid = bh * T + r;
    len = mode == ATTN_BWD_Q ? p.Tk : p.Tq;   // the other side's length
  }
  if (mode == ATTN_BWD_Q) {
    uint i = r;
    uint nk = CAUSAL != 0u ? min(len, i + 1u) : len;
    uint qrow = p.bq + b * p.qs0 + a * p.qs1 + (s0 + i) * p.qs2;
    uint orow = rid * p.d;
    uint lrow = VARLEN != 0u ? a * total + s0 + i : rid;
    float part = 0.0;
    for (uint x = t; x < p.d; x += 64u) {
      sa[x] = q[qrow + x];
      float g = dout[p.bdo + orow + x];
      sb[x] = g;
      part += g * o[p.bo + orow + x];
    }
    red[t] = part;
    barrier();
    for (uint st = 32u; st > 0u; st >>= 1) { if (t < st) red[t] += red[t + st]; barrier(); }
    float Di = red[0];
    float L = lse[p.bl + lrow];
    if (t == 0u) dd[p.bd + lrow] = Di;
    uint kb = p.bk + b * p.ks0 + a * p.ks1 + s0 * p.ks2, vb = p.bv + b * p.ks0 + a * p.ks1 + s0 * p.ks2;
    for (uint j0 = 0; j0 < nk; j0 += 64u) {
      uint j = j0 + t;
      float ds = 0.0;
      if (j < nk) {
        float s = 0.0, dp = 0.0;
        uint kr = kb + j * p.ks2, vr = vb + j * p.ks2;
        for (uint x = 0; x < p.d; x++) { s = fma(sa[x], k[kr + x], s); dp = fma(sb[x], v[vr + x], dp); }
        s = s * p.scale + bias_of(b, j);
        float pr = exp(s - L);
        ds = pr * (dp * mult_of(bh, i, j) - Di);
      }
      w1[t] = ds;
      barrier();
      uint n = min(64u, nk - j0);
      for (uint c = 0; c < 4u; c++) {
        uint x = t + c * 64u;
        if (x >= p.d) break;
        float s2 = acc1[c];
        for (uint jj = 0; jj < n; jj++) s2 = fma(w1[jj], k[kb + (j0 + jj) * p.ks2 + x], s2);
        acc1[c] = s2;
      }
      barrier();
    }
    for (uint c = 0; c < 4u; c++) {
      uint x = t + c * 64u;
      if (x < p.d) oa[p.boa + orow + x] = acc1[c] * p.scale;
    }
  } else {
    uint j = r;
    uint kr = p.bk + b * p.ks0 + a * p.ks1 + (s0 + j) * p.ks2, vr = p.bv + b * p.ks0 + a * p.ks1 + (s0 + j) * p.ks2;
    for (uint x = t; x < p.d; x += 64u) { sa[x] = k[kr + x]; sb[x] = v[vr + x]; }
    barrier();
    float bj = bias_of(b, j);
    uint qb = p.bq + b * p.qs0 + a * p.qs1 + s0 * p.qs2;
    // query row i's rows in dO (times d) and in lse / D
    uint ostep = VARLEN != 0u ? p.A : 1u;
    uint obase = VARLEN != 0u ? s0 * p.A + a : bh * p.Tq;
    uint lbase = VARLEN != 0u ? a * total + s0 : bh * p.Tq;
    // this window's queries [i_lo, i_hi)
    uint i_lo = window * VK_MAX_LOOP, i_hi = min(len, i_lo + VK_MAX_LOOP);
    for (uint i0 = CAUSAL != 0u ? max(j, i_lo) : i_lo; i0 < i_hi; i0 += 64u) {
      uint i = i0 + t;
      float ds = 0.0, pd = 0.0;
      if (i < i_hi) {
        float s = 0.0, dp = 0.0;
        uint qr = qb + i * p.qs2, orow = p.bdo + (obase + i * ostep) * p.d;
        for (uint x = 0; x < p.d; x++) { s = fma(q[qr + x], sa[x], s); dp = fma(dout[orow + x], sb[x], dp); }
        s = s * p.scale + bj;
        float pr = exp(s - lse[p.bl + lbase + i]);
        float m = mult_of(bh, i, j);
        pd = pr * m;
        ds = pr * (dp * m - dd[p.bd + lbase + i]);
      }
      w1[t] = ds;
      w2[t] = pd;
      barrier();
      uint n = min(64u, i_hi - i0);
      for (uint c = 0; c < 4u; c++) {
        uint x = t + c * 64u;
        if (x >= p.d) break;
        float sk = acc1[c], sv = acc2[c];
        for (uint ii = 0; ii < n; ii++) {
          sk = fma(w1[ii], q[qb + (i0 + ii) * p.qs2 + x], sk);
          sv = fma(w2[ii], dout[p.bdo + (obase + (i0 + ii) * ostep) * p.d + x], sv);
        }
        acc1[c] = sk;
        acc2[c] = sv;
      }
      barrier();
    }
    uint orow = rid * p.d;
    for (uint c = 0; c < 4u; c++) {
      uint x = t + c * 64u;
      if (x >= p.d) continue;
      if (window > 0u) { oa[p.boa + orow + x] += acc1[c] * p.scale; ob[p.bob + orow + x] += acc2[c]; }
      else { oa[p.boa + orow + x] = acc1[c] * p.scale; ob[p.bob + orow + x] = acc2[c]; }
    }
  }
}
