#version 450
#extension GL_GOOGLE_include_directive : require
// Tiled fp32 GEMM: C[z][m][n] = alpha * sum_k A(m,k) B(k,n) + beta * C + bias[n],
// then GELU (flags bit 1: erf, bit 2: tanh).  A and B are read through
// arbitrary element strides, so every transpose case is a choice of strides.
// Tiles are specialization constants: BM x BN per workgroup, BK deep,
// TM x TN per thread, (BM/TM)*(BN/TN) threads.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 16;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;
const uint PAD = 4;

layout(std430, binding = 0) buffer Cb { float c[]; };
layout(std430, binding = 1) readonly buffer Ab { float a[]; };
layout(std430, binding = 2) readonly buffer Bb { float b[]; };
layout(std430, binding = 3) readonly buffer Biasb { float bias[]; };
layout(push_constant) uniform P {
  uint base_c, base_a, base_b, base_bias;
  uint M, N, K;
  uint sam, sak, sbk, sbn;
  uint sab, sbb, scb;
  float alpha, beta;
  uint flags;            // bit 0: bias, bit 1: gelu (erf), bit 2: gelu (tanh)
} p;
#include "common.glsl"

shared float As[BK * (BM + PAD)];
shared float Bs[BK * (BN + PAD)];

void main() {
  const uint NT = (BM / TM) * (BN / TN);
  uint tid = gl_LocalInvocationID.x;
  uint tc = tid % (BN / TN), tr = tid / (BN / TN);
  uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN, z = gl_WorkGroupID.z;
  uint abase = p.base_a + z * p.sab, bbase = p.base_b + z * p.sbb;
  bool a_kfast = p.sak == 1u, b_nfast = p.sbn == 1u;
  float acc[TM][TN];
  for (uint i = 0; i < TM; i++) for (uint j = 0; j < TN; j++) acc[i][j] = 0.0;
  for (uint k0 = 0; k0 < p.K; k0 += BK) {
    for (uint i = tid; i < BM * BK; i += NT) {
      uint mm, kk;
      if (a_kfast) { mm = i / BK; kk = i % BK; } else { kk = i / BM; mm = i % BM; }
      uint gm = m0 + mm, gk = k0 + kk;
      As[kk * (BM + PAD) + mm] = (gm < p.M && gk < p.K) ? a[abase + gm * p.sam + gk * p.sak] : 0.0;
    }
    for (uint i = tid; i < BN * BK; i += NT) {
      uint nn, kk;
      if (b_nfast) { kk = i / BN; nn = i % BN; } else { nn = i / BK; kk = i % BK; }
      uint gn = n0 + nn, gk = k0 + kk;
      Bs[kk * (BN + PAD) + nn] = (gn < p.N && gk < p.K) ? b[bbase + gk * p.sbk + gn * p.sbn] : 0.0;
    }
    barrier();
    for (uint kk = 0; kk < BK; kk++) {
      float ra[TM], rb[TN];
      for (uint i = 0; i < TM; i++) ra[i] = As[kk * (BM + PAD) + tr + i * (BM / TM)];
      for (uint j = 0; j < TN; j++) rb[j] = Bs[kk * (BN + PAD) + tc + j * (BN / TN)];
      for (uint i = 0; i < TM; i++)
        for (uint j = 0; j < TN; j++) acc[i][j] = fma(ra[i], rb[j], acc[i][j]);
    }
    barrier();
  }
  uint cbase = p.base_c + z * p.scb;
  for (uint i = 0; i < TM; i++) {
    uint gm = m0 + tr + i * (BM / TM);
    if (gm >= p.M) continue;
    for (uint j = 0; j < TN; j++) {
      uint gn = n0 + tc + j * (BN / TN);
      if (gn >= p.N) continue;
      uint ci = cbase + gm * p.N + gn;
      float v = p.alpha * acc[i][j];
      if (p.beta != 0.0) v += p.beta * c[ci];
      if ((p.flags & 1u) != 0u) v += bias[p.base_bias + gn];
      if ((p.flags & 2u) != 0u) v = gelu_erf(v);
      else if ((p.flags & 4u) != 0u) v = gelu_tanh(v);
      c[ci] = v;
    }
  }
}
