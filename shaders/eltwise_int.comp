#version 450
#extension GL_GOOGLE_include_directive : require
// The elementwise ops whose operands and result are all int32, in int32 as
// the CPU computes them: wrapping add / sub / mul (ialpha: alpha, or the
// fill value), exact comparisons, neg / abs / relu, maximum / minimum, pow
// as the CPU's saturating pow, fill, copy.  Same layout as eltwise.comp.
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

// int32 x^y as the CPU: pow in double, then truncated and saturated
int ipow(int x, int y) {
  if (y == 0 || x == 1) return 1;
  if (x == 0) return y > 0 ? 0 : 2147483647;
  if (y < 0) return x == -1 ? ((y & 1) != 0 ? -1 : 1) : 0;
  float mag = pow(abs(float(x)), float(y));
  bool neg = x < 0 && (y & 1) != 0;
  if (mag >= 2147483648.0) return neg ? -2147483647 - 1 : 2147483647;
  int r = 1, b = x, e = y;
  for (int k = 0; k < 32 && e > 0; k++) {   // |r| < 2^31 here, and b * b is only formed when needed
    if ((e & 1) != 0) r *= b;
    e >>= 1;
    if (e > 0) b *= b;
  }
  return r;
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
  bool binary_op = OP < ELT_UNARY;
  {
    int xi = int(a[p.base_a + ia]), yi = binary_op ? int(b[p.base_b + ib]) : 0, zi = 0;
    switch (OP) {
      case OP_ADD: zi = xi + p.ialpha * yi; break;
      case OP_SUB: zi = xi - p.ialpha * yi; break;
      case OP_MUL: zi = xi * yi; break;
      case OP_POW: zi = ipow(xi, yi); break;
      case OP_MAXIMUM: zi = max(xi, yi); break;
      case OP_MINIMUM: zi = min(xi, yi); break;
      case OP_EQ: zi = xi == yi ? 1 : 0; break;
      case OP_NE: zi = xi != yi ? 1 : 0; break;
      case OP_LT: zi = xi < yi ? 1 : 0; break;
      case OP_LE: zi = xi <= yi ? 1 : 0; break;
      case OP_GT: zi = xi > yi ? 1 : 0; break;
      case OP_GE: zi = xi >= yi ? 1 : 0; break;
      case UN_NEG: zi = -xi; break;
      case UN_ABS: zi = xi < 0 ? -xi : xi; break;
      case UN_RELU: zi = xi > 0 ? xi : 0; break;
      case ELT_FILL: zi = p.ialpha; break;
      default: zi = xi; break;
    }
    o[p.base_o + io] = uint(zi);
    return;
  }
}
