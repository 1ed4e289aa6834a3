/*
** Fused neural-network ops, on any device: each entry point checks its
** arguments (core/nn.c), runs the forward kernel of the tensors' backend
** (core/backend.h: cpu/linear.c, ..., vulkan/vk_nn.c, ...) and records one
** autograd node whose backward calls the backend's backward kernel.  Pure
** C; the Lua binding is csrc/lua/l_nn.c.  All return a new tensor, or NULL
** with bert_last_error() set ("linear: input [4 x 7] and weight [3 x 8]: ...").
*/
#ifndef BERT_NN_H
#define BERT_NN_H

#include "core/tensor.h"
#include "core/types.h"

/* y = x @ W^T + b.  x [..., in], W [out, in] (HF layout), b [out] or NULL.
** One GEMM over all rows with the bias written first (beta = 1). */
bert_tensor *bert_linear(bert_tensor *x, bert_tensor *w, bert_tensor *b);

/* y = LayerNorm(x + residual) over the last dim: (s - mean) * rstd * gamma
** + beta, biased variance, rstd = 1 / sqrt(var + eps).  gamma, beta [H] or
** NULL (ones / zeros); residual NULL or x's shape.  Saves mean and rstd. */
bert_tensor *bert_layer_norm(bert_tensor *x, bert_tensor *gamma, bert_tensor *beta,
                             double eps, bert_tensor *residual);

/* y = RMSNorm(x) over the last dim (Zhang & Sennrich 2019; T5, LLaMA):
** x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps), no centring and no
** bias.  weight [H] (required), eps > 0 and finite.  Saves rstd. */
bert_tensor *bert_rms_norm(bert_tensor *x, bert_tensor *weight, double eps);

/* One LSTM layer, one direction, all T steps (gates i, f, g, o as
** PyTorch's nn.LSTM): x [B, T, I]; w_ih [4H, I], w_hh [4H, O], b [4H] or
** NULL (PyTorch's bias_ih + bias_hh); w_hr [P, H] or NULL projects h to
** O = P (PyTorch's proj_size), else O = H; h0 [B, O] and c0 [B, H] or NULL
** (zeros).  lengths: int32 [B] in [0, T] or NULL (all T): sequence b runs
** over its positions 0 .. lengths[b] - 1 only, left to right, or right to
** left when reverse; its outputs at the other positions are 0 and its
** final state is that after its last real step (h0, c0 when empty).
** o->clip > 0 clamps every cell state to [-clip, clip] (ELMo's cell_clip),
** o->proj_clip > 0 every projected h (output and recurrent state; ELMo's
** proj_clip, w_hr required); 0: none.  Returns one tensor [B, T*O + O + H]:
** per sequence the outputs y [T, O], then h_n [O], then c_n [H] (the
** binding splits it). */
bert_tensor *bert_lstm(bert_tensor *x, bert_tensor *h0, bert_tensor *c0, bert_tensor *w_ih, bert_tensor *w_hh,
                       bert_tensor *b, bert_tensor *w_hr, bert_tensor *lengths, const bert_lstm_opts *o);

/* y = gelu(x + b) over the last dim (b [N] or NULL): exact erf GELU, or the
** tanh approximation ("gelu_new") when tanh_mode.  Uses vectorised erf /
** tanh approximations (absolute error ~1e-7). */
bert_tensor *bert_bias_gelu(bert_tensor *x, bert_tensor *b, int tanh_mode);

/* Inverted dropout: keeps each element with probability 1 - p and scales it
** by 1 / (1 - p).  The keep mask comes from Philox counters reserved from
** the default generator and is regenerated in backward (nothing stored).
** p == 0 or !training: returns a new reference to x itself. */
bert_tensor *bert_dropout(bert_tensor *x, double p, int training);

/* weight[ids]: ids int32 [...], weight [V, H] -> [..., H]. */
bert_tensor *bert_embedding(bert_tensor *ids, bert_tensor *weight);

/* Scaled dot-product attention, flash-style (online softmax over key
** tiles; only the output and the per-row log-sum-exp are kept).
**   q [B, A, Tq, d], k and v [B, A, Tk, d], any strides.
**   mask: NULL; a [B, Tk] keep mask (int32 or float, 1 keep, 0 pad) turned
**   into the additive bias (1 - mask) * mask_value (HF: finfo.min, older
**   HF / TF: -10000); or a float additive bias [B, 1, 1, Tk].
**   causal: query i sees keys j <= i only (top-left aligned when Tq != Tk,
**   as torch's is_causal); the key-padding mask still applies.
**   cu_seqlens: packed sequences (FlashAttention's varlen): q, k, v
**   [total, A, d] and an int32 [B + 1] of offsets 0 = o_0 <= ... <= o_B =
**   total; sequence b (rows o_b .. o_{b+1} - 1) attends within itself.
**   Result [total, A, d].  No mask with it.  max_seqlen is filled in by
**   bert_attention (the longest sequence) for the backends.
**   dropout_p applies to the probabilities when training (varlen: the
**   draws of the padded op over the sequences padded to the longest).
**   scale <= 0 selects 1 / sqrt(d).
** Result [B, A, Tq, d]: a transposed view of [B, Tq, A, d] memory (the
** layer's context [B, Tq, H] is then a free reshape).  The options:
** bert_attention_opts (core/types.h). */
bert_tensor *bert_attention(bert_tensor *q, bert_tensor *k, bert_tensor *v,
                            const bert_attention_opts *opts);

/* Dropout on the packed rows of a padded batch: x [N, W] holds rows
** rows[n] (flat b * T + j) of a [B, T, W] tensor, and each takes the mask
** bert_dropout would draw for that row of the [B, T, W] tensor, so packed
** and padded runs drop the same units.  CPU only. */
bert_tensor *bert_dropout_rows(bert_tensor *x, double p, int training, bert_tensor *rows, int64_t B, int64_t T);

/* Self-attention straight from one fused projection: qkv [B, T, 3H] (q, k,
** v its thirds, heads of d = H / heads each) or, with opts->cu_seqlens,
** [total, 3H].  The result is bert_attention's on the three [B, heads, T,
** d] views; the gradient of qkv is written in one [B, T, 3H] buffer by the
** backward itself (no zeroed buffer and three adds, as three narrowed views
** cost).  Backends without that backward get the views and bert_attention. */
bert_tensor *bert_attention_qkv(bert_tensor *qkv, int64_t heads, const bert_attention_opts *opts);

/* DeBERTa's disentangled attention, fused (attention_rel.c):
** S = scale (q k^T + q Kr[row]^T + k Qr[row]^T) + mask bias, softmax,
** dropout, @ v.  kr, qr [A, R, d] (either NULL: no c2p / p2c term);
** rows int32 [Tq, Tk] in [0, R).  opts as bert_attention (keep masks only).
** No [B, A, Tq, Tk] tensor is kept. */
bert_tensor *bert_attention_rel(bert_tensor *q, bert_tensor *k, bert_tensor *v, bert_tensor *kr,
                                bert_tensor *qr, bert_tensor *rows, const bert_attention_opts *opts);

/* Fused log-softmax + NLL.  logits [..., C], labels int32 [...] (same
** leading shape).  Rows whose label is ignore_index contribute nothing.
** reduction: 0 "none" ([...] per-row losses), 1 "mean" (over non-ignored
** rows; 0 when all are ignored), 2 "sum". */
bert_tensor *bert_cross_entropy(bert_tensor *logits, bert_tensor *labels, int64_t ignore_index,
                                bert_reduction reduction);

#endif
