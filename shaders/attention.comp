#version 450
#extension GL_GOOGLE_include_directive : require
// Flash-style attention forward: one workgroup per (batch*head, query row),
// keys in chunks of 64 with an online softmax; only O and the row's
// log-sum-exp are written.  Key-padding mask: keep mask [B, Tk] (bias
// (1 - m) * mask_value) or additive bias [B, 1, 1, Tk]; dropout on the
// probabilities with the CPU's Philox counters ((bh*Tq + i)*Tk + j).
// Head dim up to 256; q, k, v rows with unit stride in the last dim.
// CAUSAL: query i reads keys j <= i only (the chunks after it are never
// formed).  VARLEN: packed sequences, one workgroup per (token, head) of
// q, k, v, O [total, A, d]; binding 5 then holds the int32 offsets [B + 1]
// (no mask), mask_bstride = B, Tq = Tk = the longest sequence (dropout
// counters as the padded op's), the batch strides 0, lse [A, total].
layout(constant_id = 0) const uint CAUSAL = 0u;
layout(constant_id = 1) const uint VARLEN = 0u;
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer O { float o[]; };
layout(std430, binding = 1) buffer LSE { float lse[]; };
layout(std430, binding = 2) readonly buffer Q { float q[]; };
layout(std430, binding = 3) readonly buffer K { float k[]; };
layout(std430, binding = 4) readonly buffer V { float v[]; };
layout(std430, binding = 5) readonly buffer Mk { uint mk[]; };
layout(push_constant) uniform P {
  uint bo, bl, bq, bk, bv, bm;
  uint A, Tq, Tk, d;
  uint qs0, qs1, qs2, ks0, ks1, ks2, vs0, vs1, vs2;
  uint mask_bstride, mask_flags;   // bit 0 present, bit 1 keep mask, bit 2 int32; VARLEN: B, 0
  float mask_value, scale;
  uint thr;
  float keep_scale;
  uint seed_lo, seed_hi, off_lo, off_hi;
} p;
#include "common.glsl"

shared float qs[256];
shared float ps[64];
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

// VARLEN: the sequence holding token tok (the last b with offsets[b] <= tok)
uint seq_of(uint tok, uint nseq) {
  uint lo = 0u, hi = nseq;
  while (hi - lo > 1u) { uint mid = (lo + hi) / 2u; if (mk[p.bm + mid] <= tok) lo = mid; else hi = mid; }
  return lo;
}

void main() {
  uint t = gl_LocalInvocationID.x;
  uint gid = group_linear();
  uint b, a, i, bh, s0 = 0u, nk = p.Tk, orow_id, lrow;
  if (VARLEN != 0u) {
    uint total = mk[p.bm + p.mask_bstride], tok = gid / p.A;
    if (tok >= total) return;
    a = gid % p.A;
    b = seq_of(tok, p.mask_bstride);
    s0 = mk[p.bm + b];
    nk = mk[p.bm + b + 1u] - s0;
    i = tok - s0;
    bh = b * p.A + a;
    orow_id = tok * p.A + a;
    lrow = a * total + tok;
  } else {
    bh = gid / p.Tq; i = gid % p.Tq;
    if (bh * p.Tq >= 0xffffffffu) return;
    b = bh / p.A; a = bh % p.A;
    orow_id = bh * p.Tq + i;
    lrow = orow_id;
  }
  if (CAUSAL != 0u) nk = min(nk, i + 1u);
  uint qrow = p.bq + b * p.qs0 + a * p.qs1 + (s0 + i) * p.qs2;
  for (uint x = t; x < p.d; x += 64u) qs[x] = q[qrow + x];
  barrier();
  uint kb = p.bk + b * p.ks0 + a * p.ks1 + s0 * p.ks2, vb = p.bv + b * p.vs0 + a * p.vs1 + s0 * p.vs2;
  float m = -1.0 / 0.0, l = 0.0;
  float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
  for (uint j0 = 0; j0 < nk; j0 += 64u) {
    uint j = j0 + t;
    float s = -1.0 / 0.0;
    if (j < nk) {
      s = 0.0;
      uint kr = kb + j * p.ks2;
      for (uint x = 0; x < p.d; x++) s = fma(qs[x], k[kr + x], s);
      s *= p.scale;
      if ((p.mask_flags & 1u) != 0u) {
        uint w = mk[p.bm + b * p.mask_bstride + j];
        float mv = (p.mask_flags & 4u) != 0u ? float(int(w)) : uintBitsToFloat(w);
        s += (p.mask_flags & 2u) != 0u ? (1.0 - mv) * p.mask_value : mv;
      }
    }
    red[t] = s;
    barrier();
    for (uint st = 32u; st > 0u; st >>= 1) { if (t < st) red[t] = max(red[t], red[t + st]); barrier(); }
    float mnew = max(m, red[0]);
    barrier();
    float e = j < nk ? exp(s - mnew) : 0.0;
    red[t] = e;
    barrier();
    for (uint st = 32u; st > 0u; st >>= 1) { if (t < st) red[t] += red[t + st]; barrier(); }
    float alpha = m == -1.0 / 0.0 ? 0.0 : exp(m - mnew);
    l = l * alpha + red[0];
    m = mnew;
    if (p.thr != 0u && j < nk) {
      uint idx_lo, idx_hi;   // 64-bit (bh*Tq + i) * Tk + j
      umulExtended(bh * p.Tq + i, p.Tk, idx_hi, idx_lo);
      uint lo2 = idx_lo + j;
      idx_hi += lo2 < idx_lo ? 1u : 0u;
      uint qlo = (lo2 >> 2) | (idx_hi << 30), qhi = idx_hi >> 2;
      uint c0 = p.off_lo + qlo;
      uint c1 = p.off_hi + qhi + (c0 < qlo ? 1u : 0u);
      uvec4 r = philox(c0, c1, p.seed_lo, p.seed_hi);
      e = r[lo2 & 3u] >= p.thr ? e * p.keep_scale : 0.0;
    }
    ps[t] = e;
    barrier();
    uint n = min(64u, nk - j0);
    for (uint c = 0; c < 4u; c++) {
      uint x = t + c * 64u;
      if (x >= p.d) break;
      float sacc = acc[c] * alpha;
      for (uint jj = 0; jj < n; jj++) sacc = fma(ps[jj], v[vb + (j0 + jj) * p.vs2 + x], sacc);
      acc[c] = sacc;
    }
    barrier();
  }
  uint orow = p.bo + orow_id * p.d;
  for (uint c = 0; c < 4u; c++) {
    uint x = t + c * 64u;
    if (x < p.d) o[orow + x] = acc[c] / l;
  }
  if (t == 0u) lse[p.bl + lrow] = m + log(l);
}
