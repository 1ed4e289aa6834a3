#version 450
#extension GL_GOOGLE_include_directive : require
// Tiled fp32 GEMM: C[z][m][n] = alpha * sum_k A(m,k) B(k,n) + beta * C + bias[n],
// then GELU (flags bit 1: erf, bit 2: tanh).  A and B are read through
// arbitrary element strides, so every transpose case is a choice of strides.
// Tiles are specialization constants: BM x BN per workgroup, BK deep,
// TM x TN outputs per invocation (multiples of 4), (BM/TM)*(BN/TN)
// invocations.  Each invocation owns a contiguous TM x TN block, so its
// operands come from shared memory as vec4 loads (TM/4 + TN/4 loads for
// TM*TN FMAs per k); the next K tile is prefetched into registers while
// the current one is multiplied (double buffering through registers).
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 16;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;
const uint PAD = 4;
const uint NT = (BM / TM) * (BN / TN);
const uint LA = (BM * BK + NT - 1) / NT;   // A elements each invocation stages per tile
const uint LB = (BN * BK + NT - 1) / NT;
const uint SA = (BM + PAD) / 4;            // row length of the k-major tiles, in vec4
const uint SB = (BN + PAD) / 4;

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
  uint ldc;              // C's row stride (N, or more for a window of a wider C)
} p;
#include "common.glsl"

shared vec4 As[BK * SA];   // As[k][m]
shared vec4 Bs[BK * SB];   // Bs[k][n]

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint tc = tid % (BN / TN), tr = tid / (BN / TN);
  uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN, z = gl_WorkGroupID.z;
  uint abase = p.base_a + z * p.sab, bbase = p.base_b + z * p.sbb;
  bool a_kfast = p.sak == 1u, b_nfast = p.sbn == 1u;
  float ra[LA], rb[LB];
  vec4 acc[TM][TN / 4];
  for (uint i = 0; i < TM; i++) for (uint j = 0; j < TN / 4; j++) acc[i][j] = vec4(0.0);

  // stage tile k0 into registers: consecutive invocations read consecutive
  // addresses along the operand's unit-stride dim
  #define LOAD_TILES(k0)                                                              \
    for (uint l = 0; l < LA; l++) {                                                   \
      uint i = tid + l * NT, mm, kk;                                                  \
      if (a_kfast) { mm = i / BK; kk = i % BK; } else { kk = i / BM; mm = i % BM; }   \
      uint gm = m0 + mm, gk = (k0) + kk;                                              \
      ra[l] = (i < BM * BK && gm < p.M && gk < p.K) ? a[abase + gm * p.sam + gk * p.sak] : 0.0; \
    }                                                                                 \
    for (uint l = 0; l < LB; l++) {                                                   \
      uint i = tid + l * NT, nn, kk;                                                  \
      if (b_nfast) { kk = i / BN; nn = i % BN; } else { nn = i / BK; kk = i % BK; }   \
      uint gn = n0 + nn, gk = (k0) + kk;                                              \
      rb[l] = (i < BN * BK && gn < p.N && gk < p.K) ? b[bbase + gk * p.sbk + gn * p.sbn] : 0.0; \
    }

  LOAD_TILES(0u)
  for (uint k0 = 0; k0 < p.K; k0 += BK) {
    for (uint l = 0; l < LA; l++) {
      uint i = tid + l * NT, mm, kk;
      if (a_kfast) { mm = i / BK; kk = i % BK; } else { kk = i / BM; mm = i % BM; }
      if (i < BM * BK) As[kk * SA + mm / 4][mm % 4] = ra[l];
    }
    for (uint l = 0; l < LB; l++) {
      uint i = tid + l * NT, nn, kk;
      if (b_nfast) { kk = i / BN; nn = i % BN; } else { nn = i / BK; kk = i % BK; }
      if (i < BN * BK) Bs[kk * SB + nn / 4][nn % 4] = rb[l];
    }
    barrier();
    if (k0 + BK < p.K) { LOAD_TILES(k0 + BK) }   // next tile in flight during the FMAs
    for (uint kk = 0; kk < BK; kk++) {
      vec4 va[TM / 4], vb[TN / 4];
      for (uint i = 0; i < TM / 4; i++) va[i] = As[kk * SA + tr * (TM / 4) + i];
      for (uint j = 0; j < TN / 4; j++) vb[j] = Bs[kk * SB + tc * (TN / 4) + j];
      for (uint i = 0; i < TM; i++) {
        float x = va[i / 4][i % 4];
        for (uint j = 0; j < TN / 4; j++) acc[i][j] = fma(vec4(x), vb[j], acc[i][j]);
      }
    }
    barrier();
  }
  uint cbase = p.base_c + z * p.scb;
  for (uint i = 0; i < TM; i++) {
    uint gm = m0 + tr * TM + i;
    if (gm >= p.M) continue;
    for (uint j = 0; j < TN; j++) {
      uint gn = n0 + tc * TN + j;
      if (gn >= p.N) continue;
      uint ci = cbase + gm * p.ldc + gn;
      float v = p.alpha * acc[i][j / 4][j % 4];
      if (p.beta != 0.0) v += p.beta * c[ci];
      if ((p.flags & 1u) != 0u) v += bias[p.base_bias + gn];
      if ((p.flags & 2u) != 0u) v = gelu_erf(v);
      else if ((p.flags & 4u) != 0u) v = gelu_tanh(v);
      c[ci] = v;
    }
  }
}
