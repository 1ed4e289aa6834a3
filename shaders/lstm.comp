#version 450
#extension GL_GOOGLE_include_directive : require
// One LSTM layer's passes (csrc/vulkan/vk_lstm.c records them, step by
// step, between its GEMMs; the LSTM_* modes of vk_opcodes.h), one thread
// per element of a [rows, width] grid.  The state rows are kept longest
// sequence first: at step s rows 0 .. n - 1 run, row i holding sequence
// b = order[i] at position pos = s (len_b - 1 - s when reversed).
// Layouts (float offsets in the push constants):
//   Y    [B, T*O + O + H]: y, h_n, c_n per sequence (backward: their gradients)
//   WS   G [B*T, 4H] (pre-activations x w_ih^T, then the activated gates),
//        C [B*T, H] at oC, R [B*T, H] at oR (projected), P [B*T, O] at oP
//        (proj_clip: before clipping), Hp [B*T, O] at oHp (each position's
//        recurrent input)
//   WK   hs [B, O] at 0, cs [B, H] at oCS, z [n, 4H] at oZ (the step's
//        h w_hh^T; backward: the gate gradients), rr [n, H] at oRR (r;
//        backward: dr), dh [n, O] at oDH; backward: hs, cs hold dh, dc
//   DA   backward: dA [B*T, 4H], then dh of every position [B*T, O] at oDHA
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer Yb { float y[]; };
layout(std430, binding = 1) buffer WSb { float ws[]; };
layout(std430, binding = 2) buffer WKb { float wk[]; };
layout(std430, binding = 3) buffer H0b { float h0[]; };
layout(std430, binding = 4) buffer C0b { float c0[]; };
layout(std430, binding = 5) readonly buffer Mb { int meta[]; };   // order [B], lengths [B]
layout(std430, binding = 6) buffer DAb { float da[]; };
layout(std430, binding = 7) readonly buffer Bb { float bias[]; };
layout(push_constant) uniform P {
  uint by, bws, bwk, bh0, bc0, bm, bda, bb;
  uint mode, flags, B, T, H, O, s, n;
  uint oC, oR, oP, oHp, oCS, oZ, oRR, oDH, oDHA;
  float clip, pclip;
} p;
#include "common.glsl"
#include "vk_opcodes.h"

float sigm(float x) { return 1.0 / (1.0 + exp(-x)); }
float tanh_s(float x) { return tanh(clamp(x, -15.0, 15.0)); }
float clampc(float x, float c) { return c > 0.0 ? clamp(x, -c, c) : x; }

void main() {
  uint idx = group_linear() * 256u + gl_LocalInvocationID.x;
  uint H = p.H, O = p.O, T = p.T, row = T * O + O + H;
  bool init = p.mode == LSTM_INIT || p.mode == LSTM_BINIT || p.mode == LSTM_BFINAL;
  // LSTM_GATES: max(O, H) too, the threads past H copying the rest of a projected state
  uint width = init || p.mode == LSTM_GATES ? max(O, H) : p.mode == LSTM_PROJ || p.mode == LSTM_DH ? O : H;
  uint i = idx / width, j = idx % width;
  if (i >= (init ? p.B : p.n)) return;
  uint b = uint(meta[p.bm + i]), len = uint(meta[p.bm + p.B + b]);
  uint yb = p.by + b * row;   // sequence b's packed outputs
  if (init) {
    if (p.mode == LSTM_INIT) {
      if (j < O) {
        float v = (p.flags & LSTM_HAS_H0) != 0u ? h0[p.bh0 + b * O + j] : 0.0;
        wk[p.bwk + i * O + j] = v;
        if (len == 0u) y[yb + T * O + j] = v;
      }
      if (j < H) {
        float v = (p.flags & LSTM_HAS_C0) != 0u ? c0[p.bc0 + b * H + j] : 0.0;
        wk[p.bwk + p.oCS + i * H + j] = v;
        if (len == 0u) y[yb + T * O + O + j] = v;
      }
    } else if (p.mode == LSTM_BINIT) {
      if (j < O) wk[p.bwk + i * O + j] = y[yb + T * O + j];
      if (j < H) wk[p.bwk + p.oCS + i * H + j] = y[yb + T * O + O + j];
    } else {   // LSTM_BFINAL: h0, c0 bound to their gradients
      if (j < O && (p.flags & LSTM_HAS_H0) != 0u) h0[p.bh0 + b * O + j] = wk[p.bwk + i * O + j];
      if (j < H && (p.flags & LSTM_HAS_C0) != 0u) c0[p.bc0 + b * H + j] = wk[p.bwk + p.oCS + i * H + j];
    }
    return;
  }
  bool rev = (p.flags & LSTM_REVERSE) != 0u, proj = (p.flags & LSTM_PROJECTED) != 0u;
  uint pos = rev ? len - 1u - p.s : p.s, at = b * T + pos, G4 = 4u * H;
  bool last = p.s + 1u == len;
  uint g = p.bws + at * G4 + j, z = p.bwk + p.oZ + i * G4 + j;
  if (p.mode == LSTM_GATES) {
    // the recurrent input, read before this thread replaces it (unprojected)
    if (j < O) ws[p.bws + p.oHp + at * O + j] = wk[p.bwk + i * O + j];
    if (j >= H) return;
    bool hb = (p.flags & LSTM_HAS_BIAS) != 0u;
    float ig = sigm(ws[g] + wk[z] + (hb ? bias[p.bb + j] : 0.0));
    float fg = sigm(ws[g + H] + wk[z + H] + (hb ? bias[p.bb + H + j] : 0.0));
    float gg = tanh_s(ws[g + 2u * H] + wk[z + 2u * H] + (hb ? bias[p.bb + 2u * H + j] : 0.0));
    float og = sigm(ws[g + 3u * H] + wk[z + 3u * H] + (hb ? bias[p.bb + 3u * H + j] : 0.0));
    uint cs = p.bwk + p.oCS + i * H + j;
    precise float cn = fg * wk[cs] + ig * gg;   // the expression backward recomputes, bit for bit
    cn = clampc(cn, p.clip);
    ws[g] = ig; ws[g + H] = fg; ws[g + 2u * H] = gg; ws[g + 3u * H] = og;
    ws[p.bws + p.oC + at * H + j] = cn;
    wk[cs] = cn;
    float r = og * tanh_s(cn);
    if (proj) {
      ws[p.bws + p.oR + at * H + j] = r;
      wk[p.bwk + p.oRR + i * H + j] = r;
    } else {
      y[yb + pos * O + j] = r;
      wk[p.bwk + i * O + j] = r;
      if (last) y[yb + T * O + j] = r;
    }
    if (last) y[yb + T * O + O + j] = cn;
  } else if (p.mode == LSTM_PROJ) {
    uint hs = p.bwk + i * O + j;
    float v = wk[hs];
    if (p.pclip > 0.0) {
      ws[p.bws + p.oP + at * O + j] = v;
      v = clamp(v, -p.pclip, p.pclip);
    }
    wk[hs] = v;
    y[yb + pos * O + j] = v;
    if (last) y[yb + T * O + j] = v;
  } else if (p.mode == LSTM_DH) {
    float v = wk[p.bwk + i * O + j] + y[yb + pos * O + j];
    // as torch.clamp: the gradient passes where |h| <= proj_clip before clipping
    if (p.pclip > 0.0 && !(abs(ws[p.bws + p.oP + at * O + j]) <= p.pclip)) v = 0.0;
    wk[p.bwk + p.oDH + i * O + j] = v;
    if (proj) da[p.bda + p.oDHA + at * O + j] = v;
  } else {   // LSTM_GATES_BWD
    float ig = ws[g], fg = ws[g + H], gg = ws[g + 2u * H], og = ws[g + 3u * H];
    float c = ws[p.bws + p.oC + at * H + j];
    uint q = rev ? pos + 1u : pos - 1u;   // the position before (wraps past 0 when pos is 0)
    bool first = p.s == 0u;
    float cp = !first ? ws[p.bws + p.oC + (b * T + q) * H + j]
             : (p.flags & LSTM_HAS_C0) != 0u ? c0[p.bc0 + b * H + j] : 0.0;
    float dr = proj ? wk[p.bwk + p.oRR + i * H + j] : wk[p.bwk + p.oDH + i * O + j];
    float tc = tanh_s(c);
    uint cs = p.bwk + p.oCS + i * H + j;
    float dc = wk[cs] + dr * og * (1.0 - tc * tc);
    precise float pre = fg * cp + ig * gg;
    if (p.clip > 0.0 && !(abs(pre) <= p.clip)) dc = 0.0;
    float a0 = dc * gg * ig * (1.0 - ig), a1 = dc * cp * fg * (1.0 - fg);
    float a2 = dc * ig * (1.0 - gg * gg), a3 = dr * tc * og * (1.0 - og);
    uint d = p.bda + at * G4 + j;
    wk[z] = a0; wk[z + H] = a1; wk[z + 2u * H] = a2; wk[z + 3u * H] = a3;
    da[d] = a0; da[d + H] = a1; da[d + 2u * H] = a2; da[d + 3u * H] = a3;
    wk[cs] = dc * fg;
  }
}
