#version 450
#extension GL_GOOGLE_include_directive : require
// Elementwise ops over up to 4 broadcast dims with arbitrary strides:
// out[i] = a[i] op b[i] (binary), f(a[i]) (unary), alpha (fill), a[i] (copy).
// flags: bit 0 a is int32, bit 1 b is int32, bit 2 out is int32.
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer O { uint o[]; };
layout(std430, binding = 1) readonly buffer A { uint a[]; };
layout(std430, binding = 2) readonly buffer B { uint b[]; };
layout(push_constant) uniform P {
  uint base_o, base_a, base_b;
  uint n, op, flags;
  float alpha;
  uint shape[4];
  int so[4], sa[4], sb[4];
} p;
#include "common.glsl"

float load(uint w, bool is_int) { return is_int ? float(int(w)) : uintBitsToFloat(w); }

float powf_(float x, float y) {
  if (y == 0.0) return 1.0;
  if (x < 0.0) {
    if (floor(y) != y) return uintBitsToFloat(0x7fc00000u);
    float r = pow(-x, y);
    return mod(y, 2.0) == 1.0 ? -r : r;
  }
  if (x == 0.0) return y > 0.0 ? 0.0 : uintBitsToFloat(0x7f800000u);
  return pow(x, y);
}

void main() {
  uint i = group_linear() * 256u + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  uint r = i;
  int io = 0, ia = 0, ib = 0;
  for (int d = 3; d >= 0; d--) {
    uint c = r % p.shape[d];
    r /= p.shape[d];
    io += int(c) * p.so[d];
    ia += int(c) * p.sa[d];
    ib += int(c) * p.sb[d];
  }
  if (p.op == 65u && ((p.flags & 1u) != 0u) && ((p.flags & 4u) != 0u)) { o[p.base_o + io] = a[p.base_a + ia]; return; }
  float x = load(a[p.base_a + ia], (p.flags & 1u) != 0u);
  float y = (p.op < 32u || p.op >= 80u) ? load(b[p.base_b + ib], (p.flags & 2u) != 0u) : 0.0;
  float z;
  switch (p.op) {
    case 0u: z = x + p.alpha * y; break;
    case 1u: z = x - p.alpha * y; break;
    case 2u: z = x * y; break;
    case 3u: z = x / y; break;
    case 4u: z = powf_(x, y); break;
    case 5u: z = max(x, y); break;
    case 6u: z = min(x, y); break;
    case 7u: z = x == y ? 1.0 : 0.0; break;
    case 8u: z = x != y ? 1.0 : 0.0; break;
    case 9u: z = x < y ? 1.0 : 0.0; break;
    case 10u: z = x <= y ? 1.0 : 0.0; break;
    case 11u: z = x > y ? 1.0 : 0.0; break;
    case 12u: z = x >= y ? 1.0 : 0.0; break;
    case 32u: z = -x; break;
    case 33u: z = exp(x); break;
    case 34u: z = log(x); break;
    case 35u: z = sqrt(x); break;
    case 36u: z = inversesqrt(x); break;
    case 37u: z = tanh(clamp(x, -15.0, 15.0)); break;
    case 38u: z = 1.0 / (1.0 + exp(-x)); break;
    case 39u: z = max(x, 0.0); break;
    case 40u: z = gelu_erf(x); break;
    case 41u: z = gelu_tanh(x); break;
    case 42u: z = abs(x); break;
    case 43u: z = erf_approx(x); break;
    // 80 + unary op: the unary's backward, z = dy * f'(x) with x = a, dy = b
    case 80u: z = -y; break;
    case 81u: z = y * exp(x); break;
    case 82u: z = y / x; break;
    case 83u: z = y * 0.5 / sqrt(x); break;
    case 84u: z = y * -0.5 * inversesqrt(x) / x; break;
    case 85u: { float th = tanh(clamp(x, -15.0, 15.0)); z = y * (1.0 - th * th); break; }
    case 86u: { float sg = 1.0 / (1.0 + exp(-x)); z = y * sg * (1.0 - sg); break; }
    case 87u: z = x > 0.0 ? y : 0.0; break;
    case 88u: z = y * gelu_erf_grad(x); break;
    case 89u: z = y * gelu_tanh_grad(x); break;
    case 90u: z = x > 0.0 ? y : (x < 0.0 ? -y : 0.0); break;
    case 91u: z = y * 1.1283791670955126 * exp(-x * x); break;
    case 64u: z = p.alpha; break;
    default: z = x; break;   // 65: copy (with dtype conversion)
  }
  uint w;
  if ((p.flags & 4u) != 0u) {
    // float -> int32 truncates toward zero, saturating; NaN -> 0
    int v = z != z ? 0 : (z >= 2147483647.0 ? 2147483647 : (z <= -2147483648.0 ? -2147483647 - 1 : int(z)));
    w = uint(v);
  } else w = floatBitsToUint(z);
  o[p.base_o + io] = w;
}
