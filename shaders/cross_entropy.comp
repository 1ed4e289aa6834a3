#version 450
#extension GL_GOOGLE_include_directive : require
// Fused log-softmax + NLL over rows of C logits, labels int32 (ignore_index skipped).
// mode 0: per-row loss into loss[r] (one workgroup per row)
// mode 1: reduce: out[0] = sum (or mean over the count rows not ignored) of loss[0..R) (one workgroup)
// mode 2: backward: dlogits[r] = (softmax - onehot) * g[0] * (1 / count for mean)
// count: the rows not ignored, counted by the host when it checked the labels.
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer O { float o[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer L { int lab[]; };
layout(std430, binding = 3) readonly buffer G { float g[]; };
// r0: the first row of this dispatch's window of x and o (labels are bound whole, Rall rows)
layout(push_constant) uniform P { uint bo, bx, bl, bg; uint R, C, mode, mean; int ignore; uint r0, Rall; float count; } p;
#include "common.glsl"
shared float red[256];

float sum256(float v) {
  uint t = gl_LocalInvocationID.x;
  red[t] = v;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) { if (t < s) red[t] += red[t + s]; barrier(); }
  float r = red[0];
  barrier();
  return r;
}

float max256(float v) {
  uint t = gl_LocalInvocationID.x;
  red[t] = v;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) { if (t < s) red[t] = max(red[t], red[t + s]); barrier(); }
  float r = red[0];
  barrier();
  return r;
}

void main() {
  uint t = gl_LocalInvocationID.x;
  if (p.mode == 1u) {
    float s = 0.0;
    for (uint r = t; r < p.R; r += 256u) s += x[p.bx + r];
    s = sum256(s);
    if (t == 0u) o[p.bo] = p.mean != 0u ? (p.count > 0.0 ? s / p.count : 0.0) : s;
    return;
  }
  uint r = group_linear();
  if (r >= p.R) return;
  int label = lab[p.bl + p.r0 + r];
  uint row = p.bx + r * p.C;
  float m = -1.0 / 0.0;
  for (uint j = t; j < p.C; j += 256u) m = max(m, x[row + j]);
  m = max256(m);
  float s = 0.0;
  for (uint j = t; j < p.C; j += 256u) s += exp(x[row + j] - m);
  s = sum256(s);
  float lse = m + log(s);
  bool skip = label == p.ignore || label < 0 || uint(label) >= p.C;
  if (p.mode == 0u) {
    if (t == 0u) o[p.bo + r] = skip ? 0.0 : lse - x[row + uint(label)];
    return;
  }
  float scale = g[p.bg];
  if (p.mean != 0u) scale = p.count > 0.0 ? scale / p.count : 0.0;
  for (uint j = t; j < p.C; j += 256u) {
    float d = skip ? 0.0 : (exp(x[row + j] - lse) - (int(j) == label ? 1.0 : 0.0)) * scale;
    o[p.bo + r * p.C + j] = d;
  }
}
