/*
** Optimizers: fused update loops over one parameter tensor per call (the Lua side, lua/bert/optim.lua, loops over
** the parameters).  Pure C, no Lua.
**
** Every kernel takes contiguous float32 tensors of equal element count
** (shapes may differ: only numel must agree) whose memory does not
** overlap; it returns 0, or -1 with bert_set_error and nothing written.
** The arithmetic is float32 per element, with the per-step scalars
** (bias corrections, step sizes) computed in double and rounded once, so
** an update depends only on its inputs: never on the thread count.
** Reductions (norms) sum fixed-size blocks in double, then the blocks in
** order, so they too are independent of the thread count.
*/
#ifndef BERT_OPTIM_H
#define BERT_OPTIM_H

#include <stdint.h>

#include "core/tensor.h"
#include "core/types.h"

/* The hyperparameters, bert_adam_cfg and bert_sgd_cfg: core/types.h. */

/* AdamW, per element (torch.optim.AdamW's order; with bias_correction
** off and eps = 1e-6 this is BERT's AdamWeightDecayOptimizer, eps added
** outside the square root):
**   m  = b1*m + (1-b1)*g
**   v  = b2*v + (1-b2)*g*g
**   bc1 = 1 - b1^step, bc2 = 1 - b2^step   (both 1 when bias_correction is 0)
**   p  = p*(1 - lr*wd) - (lr/bc1) * m / (sqrt(v)/sqrt(bc2) + eps)        */
int bert_adamw_step(bert_tensor *p, const bert_tensor *g, bert_tensor *m, bert_tensor *v,
                    const bert_adam_cfg *cfg);

/* LAMB (You et al. 2019, as NVIDIA apex FusedLAMB without its global
** gradient clipping), per tensor:
**   m, v as in AdamW;  u = (m/bc1) / (sqrt(v/bc2) + eps) + wd*p
**   r = |p| / |u| when adapt and both norms are > 0, else 1
**   p = p - lr*r*u
** adapt = 0 gives plain decoupled Adam steps (ALBERT excludes the
** no-decay parameters from layer adaptation).  *trust_out (may be NULL)
** receives r as a one-element tensor on the parameters' device (a device
** keeps it there: no host wait per tensor). */
int bert_lamb_step(bert_tensor *p, const bert_tensor *g, bert_tensor *m, bert_tensor *v,
                   const bert_adam_cfg *cfg, int adapt, bert_tensor **trust_out);

/* SGD with momentum, per element (torch.optim.SGD):
**   d = g + wd*p                              (coupled weight decay)
**   momentum > 0:  buf = first ? d : momentum*buf + (1-dampening)*d
**                  d   = nesterov ? d + momentum*buf : buf
**   p = p - lr*d
** buf may be NULL when momentum is 0. */
int bert_sgd_step(bert_tensor *p, const bert_tensor *g, bert_tensor *buf, const bert_sgd_cfg *cfg);

/* {====================================================== one pass over many tensors
** The same AdamW and LAMB updates over a list of n parameters in one call
** and one pass of the thread pool (a flat parameter arena is one long
** list of adjacent segments).  Host (CPU) tensors only.  Per element the
** arithmetic is exactly the one-tensor kernels' (the same per-segment
** scalars, the same LAMB block sums), so results are bit-identical to n
** one-tensor calls.  cfg's weight_decay and step are ignored: they come
** per parameter from wd[i] and step[i].  Every tensor is checked as in the
** one-tensor calls, and no two of the 4n may share memory; on error
** nothing is written.  grad_scale (finite, > 0) multiplies every gradient
** element as it is read, in float: the update equals scaling the gradients
** in place first (global-norm clipping) and then stepping, bit for bit,
** without the extra pass over them; the gradients are left as they were. */
int bert_adamw_multi(int n, bert_tensor *const *p, bert_tensor *const *g, bert_tensor *const *m,
                     bert_tensor *const *v, const double *wd, const int64_t *step,
                     const bert_adam_cfg *cfg, double grad_scale);
/* LAMB over n parameters: adapt[i] as bert_lamb_step's adapt; trust[i]
** receives parameter i's trust ratio (rounded to float, as the
** one-tensor call returns it). */
int bert_lamb_multi(int n, bert_tensor *const *p, bert_tensor *const *g, bert_tensor *const *m,
                    bert_tensor *const *v, const double *wd, const int64_t *step, const int *adapt,
                    const bert_adam_cfg *cfg, double grad_scale, double *trust);

/* The host kernels behind them, over raw segments (no checks). */
typedef struct bert_optim_seg {
  float *p, *m, *v;
  const float *g;
  int64_t n;
  double weight_decay;
  int64_t step;
  int adapt;               /* LAMB */
  double trust;            /* LAMB: out */
  double grad_scale;       /* g is read as grad_scale * g (g itself is not written) */
} bert_optim_seg;
int cpu_adamw_multi(bert_optim_seg *segs, int n, const bert_adam_cfg *cfg);
int cpu_lamb_multi(bert_optim_seg *segs, int n, const bert_adam_cfg *cfg);
/* }====================================================== */

/* Sum of squares of a float32 tensor (any strides): float partial sums of
** 64 squares each, accumulated in double (relative error ~1e-7). */
int bert_sumsq(const bert_tensor *t, double *out);

/* t *= s in place (contiguous float32). */
int bert_scale_(bert_tensor *t, double s);

/* t = 0 (float32): zero_grad.  Contiguous host tensors are written with
** streaming stores (not kept in the cache: nothing reads a gradient again
** before the next backward); others as fill_(t, 0). */
int bert_zero_grad_(bert_tensor *t);
int cpu_zero_grad_(bert_tensor *t);   /* the host kernel behind it (no checks) */

#endif
