#version 450
// Fused AdamW over a contiguous range (the CPU kernel's arithmetic, optim.c):
//   m = b1 m + c1 g;  v = b2 v + c2 g^2;  p = p * decay - step * m / (sqrt(v) * isb2 + eps)
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer Pp { float pp[]; };
layout(std430, binding = 1) readonly buffer G { float g[]; };
layout(std430, binding = 2) buffer M { float m[]; };
layout(std430, binding = 3) buffer V { float v[]; };
layout(push_constant) uniform P { uint bp, bg, bm, bv; uint n; float b1, c1, b2, c2, isb2, eps, decay, step; } p;

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  if (i >= p.n) return;
  float gi = g[p.bg + i];
  float mi = p.b1 * m[p.bm + i] + p.c1 * gi;
  float vi = p.b2 * v[p.bv + i] + p.c2 * (gi * gi);
  m[p.bm + i] = mi;
  v[p.bv + i] = vi;
  float den = sqrt(vi) * p.isb2 + p.eps;
  pp[p.bp + i] = pp[p.bp + i] * p.decay - p.step * (mi / den);
}
