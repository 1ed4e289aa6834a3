#version 450
#extension GL_GOOGLE_include_directive : require
// Elementwise ops over up to 4 broadcast dims with arbitrary strides:
// out[i] = a[i] op b[i] (binary), f(a[i]) (unary), alpha (fill), a[i] (copy).
// flags: ELT_A_INT, ELT_B_INT, ELT_OUT_INT (int32 values are converted to
// float here; all-int32 ops run in eltwise_int.comp).  NaN follows the
// CPU's C expressions.
layout(local_size_x = 256) in;
// the op as a specialization constant: each op's pipeline keeps only its case
layout(constant_id = 0) const uint OP = 0u;
layout(std430, binding = 0) buffer O { uint o[]; };
layout(std430, binding = 1) readonly buffer A { uint a[]; };
layout(std430, binding = 2) readonly buffer B { uint b[]; };
layout(push_constant) uniform P {
  uint base_o, base_a, base_b;
  uint n, op, flags;
  float alpha;
  int ialpha;
  uint shape[4];
  int so[4], sa[4], sb[4];
} p;
#include "common.glsl"
#include "vk_opcodes.h"
#include "bert_ops.glsl"

float load(uint w, bool is_int) { return is_int ? float(int(w)) : uintBitsToFloat(w); }

#define NAN uintBitsToFloat(0x7fc00000u)
#define INF uintBitsToFloat(0x7f800000u)

bool odd_int(float y) { return floor(y) == y && abs(y) < 16777216.0 && mod(y, 2.0) == 1.0; }
bool neg_sign(float x) { return (floatBitsToUint(x) >> 31) != 0u; }

// C99 powf, special values included (the CPU's powf; y == 2 is x * x there)
float powf_(float x, float y) {
  if (y == 0.0 || x == 1.0) return 1.0;
  if (isnan(x) || isnan(y)) return NAN;
  if (y == 2.0) return x * x;
  if (isinf(y)) {
    float ax = abs(x);
    if (ax == 1.0) return 1.0;
    return (ax > 1.0) == (y > 0.0) ? INF : 0.0;
  }
  bool odd = odd_int(y);
  if (isinf(x)) {
    if (!neg_sign(x)) return y > 0.0 ? INF : 0.0;
    if (y > 0.0) return odd ? -INF : INF;
    return odd ? -0.0 : 0.0;
  }
  if (x == 0.0) {
    if (y > 0.0) return odd ? x : 0.0;
    return odd && neg_sign(x) ? -INF : INF;
  }
  if (x < 0.0) {
    if (floor(y) != y) return NAN;
    float r = pow(-x, y);
    return odd ? -r : r;
  }
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
  if (OP == ELT_COPY && ((p.flags & ELT_A_INT) != 0u) && ((p.flags & ELT_OUT_INT) != 0u)) { o[p.base_o + io] = a[p.base_a + ia]; return; }
  bool ai = (p.flags & ELT_A_INT) != 0u, bi = (p.flags & ELT_B_INT) != 0u, oi = (p.flags & ELT_OUT_INT) != 0u;
  bool binary_op = OP < ELT_UNARY;
  float x = load(a[p.base_a + ia], ai);
  float y = (binary_op || OP >= ELT_UNARY_GRAD) ? load(b[p.base_b + ib], bi) : 0.0;
  float z;
  switch (OP) {
    case OP_ADD: z = x + p.alpha * y; break;
    case OP_SUB: z = x - p.alpha * y; break;
    case OP_MUL: z = x * y; break;
    case OP_DIV: z = x / y; break;
    case OP_POW: z = powf_(x, y); break;
    case OP_MAXIMUM: z = (isnan(x) || x > y) ? x : y; break;
    case OP_MINIMUM: z = (isnan(x) || x < y) ? x : y; break;
    case OP_EQ: z = x == y ? 1.0 : 0.0; break;
    case OP_NE: z = x != y ? 1.0 : 0.0; break;
    case OP_LT: z = x < y ? 1.0 : 0.0; break;
    case OP_LE: z = x <= y ? 1.0 : 0.0; break;
    case OP_GT: z = x > y ? 1.0 : 0.0; break;
    case OP_GE: z = x >= y ? 1.0 : 0.0; break;
    case UN_NEG: z = -x; break;
    case UN_EXP: z = exp(x); break;
    case UN_LOG: z = log(x); break;
    case UN_SQRT: z = sqrt(x); break;
    case UN_RSQRT: z = 1.0 / sqrt(x); break;   // as the cpu: rsqrt(-0) is -inf
    case UN_TANH: z = isnan(x) ? x : tanh(clamp(x, -15.0, 15.0)); break;
    case UN_SIGMOID: z = 1.0 / (1.0 + exp(-x)); break;
    case UN_RELU: z = x > 0.0 ? x : 0.0; break;
    case UN_GELU: z = gelu_erf(x); break;
    case UN_GELU_TANH: z = gelu_tanh(x); break;
    case UN_ABS: z = abs(x); break;
    case UN_ERF: z = erf_approx(x); break;
    case UN_SILU: z = x / (1.0 + exp(-x)); break;
    // UNB_*: the unary's backward, z = dy * f'(x) with x = a, dy = b
    case UNB_NEG: z = -y; break;
    case UNB_EXP: z = y * exp(x); break;
    case UNB_LOG: z = y / x; break;
    case UNB_SQRT: z = y * 0.5 / sqrt(x); break;
    case UNB_RSQRT: { float r = 1.0 / sqrt(x); z = y * -0.5 * r * r * r; break; }
    case UNB_TANH: { float th = isnan(x) ? x : tanh(clamp(x, -15.0, 15.0)); z = y * (1.0 - th * th); break; }
    case UNB_SIGMOID: { float sg = 1.0 / (1.0 + exp(-x)); z = y * sg * (1.0 - sg); break; }
    case UNB_RELU: z = x > 0.0 ? y : 0.0; break;
    case UNB_GELU: z = y * gelu_erf_grad(x); break;
    case UNB_GELU_TANH: z = y * gelu_tanh_grad(x); break;
    case UNB_ABS: z = x > 0.0 ? y : (x < 0.0 ? -y : 0.0); break;
    case UNB_ERF: z = y * 1.1283791670955126 * exp(-x * x); break;
    case UNB_SILU: { float sg = 1.0 / (1.0 + exp(-x)); z = y * sg * (1.0 + x * (1.0 - sg)); break; }
    case ELT_FILL: z = p.alpha; break;
    default: z = x; break;   // ELT_COPY (with dtype conversion)
  }
  uint w;
  if (oi) {
    // float -> int32 truncates toward zero, saturating; NaN -> 0
    int v = z != z ? 0 : (z >= 2147483647.0 ? 2147483647 : (z <= -2147483648.0 ? -2147483647 - 1 : int(z)));
    w = uint(v);
  } else w = floatBitsToUint(z);
  o[p.base_o + io] = w;
}
