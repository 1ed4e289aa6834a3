/*
** Opcodes, modes and flag bits shared by the Vulkan kernels' C side
** (vk_*.c) and their shaders (glslc -I csrc/vulkan): plain #defines that
** read the same in C and GLSL.  The per-op opcodes of eltwise.comp come
** from the op list (core/op_list.h) through tools/gen_op_glsl.c, which
** writes build/gen/bert_ops.glsl from these bases.
*/
#ifndef BERT_VK_OPCODES_H
#define BERT_VK_OPCODES_H

/* eltwise.comp: binary op k is opcode k; unary op k is ELT_UNARY + k and
** its backward ELT_UNARY_GRAD + k; then fill and copy. */
#define ELT_UNARY       32u
#define ELT_FILL        64u
#define ELT_COPY        65u
#define ELT_UNARY_GRAD  80u
/* eltwise flags: which operands are int32 */
#define ELT_A_INT   1u
#define ELT_B_INT   2u
#define ELT_OUT_INT 4u

/* nn_misc.comp: one small fused kernel per mode */
#define MISC_BIAS_GELU          0u   /* o = gelu(x + b[i % N]) */
#define MISC_BIAS_GELU_BACKWARD 1u   /* o = dy * gelu'(x + b[i % N]), dy in the ids binding */
#define MISC_EMBED_GATHER       2u   /* o[r, j] = w[ids[r], j] */
#define MISC_EMBED_SCATTER      3u   /* w[ids[r], j] += dy[r, j] */
#define MISC_COLUMN_SUMS        4u   /* o[j] = sum_r x[r, j] */
#define MISC_DROPOUT            5u   /* o = x * keep(i) * scale (Philox, as the CPU) */
/* nn_misc flags */
#define MISC_HAS_BIAS   1u
#define MISC_TANH       2u
#define MISC_LATER_WIN  8u    /* gather: a later window of the table, other rows left alone */
#define MISC_ACCUMULATE 16u   /* column sums: add into o (later row windows) */

/* lstm.comp: one pass of a step of vk_lstm.c per mode, and its flags */
#define LSTM_INIT      0u   /* the state rows from h0, c0; h_n, c_n of empty sequences */
#define LSTM_GATES     1u   /* a step's gates, cell and r = o * tanh(c) */
#define LSTM_PROJ      2u   /* a step's projected h: saved, clipped, written out */
#define LSTM_BINIT     3u   /* backward: the state gradients from those of h_n, c_n */
#define LSTM_DH        4u   /* backward: a step's dh (masked where the projection was clipped) */
#define LSTM_GATES_BWD 5u   /* backward: a step's gate gradients and the cell's */
#define LSTM_BFINAL    6u   /* backward: the gradients of h0, c0 */
#define LSTM_REVERSE   1u
#define LSTM_PROJECTED 2u
#define LSTM_HAS_H0    4u
#define LSTM_HAS_C0    8u
#define LSTM_HAS_BIAS  16u

/* reduce.comp: the first four are bert_redop's order (sum, mean, max, min) */
#define RED_SUM         0u
#define RED_MEAN        1u
#define RED_MAX         2u
#define RED_MIN         3u
#define RED_SOFTMAX     4u
#define RED_LOG_SOFTMAX 5u
#define RED_SUMSQ       6u

/* No shader loop runs more than this many iterations per invocation: Mesa's
** lavapipe stops a loop after 65,535, and long loops are slow on GPUs too.
** Work beyond it is split into more dispatches or passes by the host. */
#define VK_MAX_LOOP 32768u

/* attention_bwd.comp's mode: dQ (and D) per query row, or dK and dV per key
** row over the query window mode >> ATTN_BWD_WINDOW (VK_MAX_LOOP queries
** each), windows after the first added to the ones before */
#define ATTN_BWD_Q      1u
#define ATTN_BWD_KV     2u
#define ATTN_BWD_WINDOW 2u

#endif
