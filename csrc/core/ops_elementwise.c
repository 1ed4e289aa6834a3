/*
** Elementwise ops, the device-independent half: names, type rules,
** broadcasting and the result's shape, checked once here for every
** backend; the loops are the backends' (cpu/ops_elementwise.c,
** vulkan/vk_elementwise.c).
**
** Type rules: float32 op anything -> float32; int32 op int32 -> int32,
** except true division (float32); comparisons give int32 0/1 masks.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/ops.h"

static const char *const binop_names[] = {
#define X(ID, name, cmp) #name,
  BERT_BINARY_OPS(X)
#undef X
};
static const unsigned char binop_cmp[] = {
#define X(ID, name, cmp) cmp,
  BERT_BINARY_OPS(X)
#undef X
};
static const char *const unop_names[] = {
#define X(ID, name, keeps_int) #name,
  BERT_UNARY_OPS(X)
#undef X
};
static const unsigned char unop_keeps_int[] = {
#define X(ID, name, keeps_int) keeps_int,
  BERT_UNARY_OPS(X)
#undef X
};

const char *bert_binop_name(bert_binop op) { return binop_names[op]; }
const char *bert_unop_name(bert_unop op) { return unop_names[op]; }
int bert_binop_is_comparison(bert_binop op) { return binop_cmp[op]; }
int bert_unop_keeps_int(bert_unop op) { return unop_keeps_int[op]; }

int bert_broadcast_shape(int na, const int64_t *a, int nb, const int64_t *b,
                         int *nout, int64_t *out) {
  char b1[160], b2[160];
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int ia = na - n + i, ib = nb - n + i;
    int64_t sa = ia >= 0 ? a[ia] : 1, sb = ib >= 0 ? b[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      bert_set_error("shapes %s and %s cannot be broadcast (dimension %d: %lld vs %lld)",
                     bert_shape_str(b1, sizeof b1, na, a), bert_shape_str(b2, sizeof b2, nb, b),
                     i + 1, (long long)sa, (long long)sb);
      return -1;
    }
    out[i] = sa == 1 ? sb : sa;
  }
  *nout = n;
  return 0;
}

/* dst (given: checked and retained) or a new tensor on be, with the
** broadcast shape of the inputs. */
static bert_tensor *prepare_out(const bert_backend *be, const char *fname, bert_tensor *dst,
                                bert_dtype dt, int n, const bert_tensor *const *ins) {
  char b1[160], b2[160];
  int nd = ins[0]->ndim;
  int64_t shape[BERT_MAX_DIMS];
  memcpy(shape, ins[0]->shape, sizeof shape);
  for (int i = 1; i < n; i++) {
    int64_t tmp[BERT_MAX_DIMS];
    int nt;
    if (bert_broadcast_shape(nd, shape, ins[i]->ndim, ins[i]->shape, &nt, tmp) != 0) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s: %s", fname, bert_last_error());
      bert_set_error("%s", msg);
      return NULL;
    }
    nd = nt;
    memcpy(shape, tmp, sizeof tmp);
  }
  if (dst == NULL) return be->empty(dt, nd, shape);
  int same = dst->ndim == nd;
  for (int i = 0; same && i < nd; i++) same = dst->shape[i] == shape[i];
  if (!same) {
    bert_set_error("%s: in-place result %s must have the broadcast shape %s", fname,
                   bert_shape_str(b1, sizeof b1, dst->ndim, dst->shape),
                   bert_shape_str(b2, sizeof b2, nd, shape));
    return NULL;
  }
  if (dst->dtype != dt) {
    bert_set_error("%s: in-place result is %s but the operation gives %s", fname,
                   bert_dtype_name(dst->dtype), bert_dtype_name(dt));
    return NULL;
  }
  if (bert_has_overlap(dst)) {
    bert_set_error("%s: cannot write in place into an expanded tensor", fname);
    return NULL;
  }
  bert_tensor_retain(dst);
  return dst;
}

/* Runs a kernel that fills out; releases out on failure. */
static bert_tensor *finish(bert_tensor *out, int rc) {
  if (rc != 0) { bert_tensor_release(out); return NULL; }
  if (out) bert_bump_version(out);
  return out;
}

/* Integer arithmetic has no value for a fractional or non-finite alpha
** (5 + 2.5 * 5 would silently give 15; NaN converted to an integer is
** undefined behaviour) nor for a negative integer power (0 ^ -1); as in
** torch, these are errors rather than a saturated guess. */
static int check_int_args(bert_binop op, const bert_tensor *b, double alpha) {
  if ((op == BERT_ADD || op == BERT_SUB) &&
      !(alpha == floor(alpha) && fabs(alpha) <= (double)INT32_MAX)) {
    bert_set_error("alpha %g must be an integer within int32 range for int32 tensors "
                   "(convert them to float32 for a fractional alpha)", alpha);
    return -1;
  }
  if (op == BERT_POW) {
    int64_t n = bert_numel(b);
    for (int64_t i = 0; i < n; i++)
      if (bert_get_flat(b, i) < 0) {
        bert_set_error("int32 to a negative integer power (exponent %g) is not an integer "
                       "(convert to float32 first)", bert_get_flat(b, i));
        return -1;
      }
  }
  return 0;
}

bert_tensor *bert_binary(bert_binop op, const bert_tensor *a, const bert_tensor *b,
                         double alpha, bert_tensor *dst) {
  const bert_tensor *args[3] = {a, b, dst};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, BINARY, binop_names[op], dst ? 3 : 2, args)) return NULL;
  bert_dtype to;
  if (binop_cmp[op]) to = BERT_I32;
  else if (op == BERT_DIV) to = BERT_F32;
  else to = (a->dtype == BERT_F32 || b->dtype == BERT_F32) ? BERT_F32 : BERT_I32;
  if (dst && !binop_cmp[op] && dst->dtype == BERT_F32) to = BERT_F32;  /* int into float in place */
  if (to == BERT_I32 && !binop_cmp[op] && check_int_args(op, b, alpha) != 0) return NULL;
  bert_tensor *out = prepare_out(be, binop_names[op], dst, to, 2, args);
  if (out == NULL) return NULL;
  return finish(out, be->binary(op, a, b, alpha, out));
}

bert_tensor *bert_unary(bert_unop op, const bert_tensor *a, bert_tensor *dst) {
  const bert_tensor *args[2] = {a, dst};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, UNARY, unop_names[op], dst ? 2 : 1, args)) return NULL;
  bert_dtype to = (a->dtype == BERT_I32 && unop_keeps_int[op]) ? BERT_I32 : BERT_F32;
  bert_tensor *out = prepare_out(be, unop_names[op], dst, to, 1, args);
  if (out == NULL) return NULL;
  return finish(out, be->unary(op, a, out));
}

bert_tensor *bert_unary_backward(bert_unop op, const bert_tensor *x, const bert_tensor *y,
                                 const bert_tensor *dy) {
  const bert_tensor *args[3] = {x, y, dy};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, UNARY_BACKWARD, unop_names[op], 3, args)) return NULL;
  return be->unary_backward(op, x, y, dy);
}

bert_tensor *bert_masked_fill(const bert_tensor *a, const bert_tensor *mask, double value,
                              bert_tensor *dst) {
  char b1[160], b2[160];
  const bert_tensor *args[3] = {a, mask, dst};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, MASKED_FILL, "masked_fill", dst ? 3 : 2, args)) return NULL;
  /* the mask broadcasts to a, never the other way round */
  int nd;
  int64_t shape[BERT_MAX_DIMS];
  if (bert_broadcast_shape(a->ndim, a->shape, mask->ndim, mask->shape, &nd, shape) != 0 ||
      nd != a->ndim || memcmp(shape, a->shape, (size_t)nd * sizeof(int64_t)) != 0) {
    bert_set_error("masked_fill: mask %s does not broadcast to the tensor %s",
                   bert_shape_str(b1, sizeof b1, mask->ndim, mask->shape),
                   bert_shape_str(b2, sizeof b2, a->ndim, a->shape));
    return NULL;
  }
  bert_tensor *out = prepare_out(be, "masked_fill", dst, a->dtype, 2, args);
  if (out == NULL) return NULL;
  return finish(out, be->masked_fill(a, mask, value, out));
}

bert_tensor *bert_where(const bert_tensor *cond, const bert_tensor *a, const bert_tensor *b) {
  const bert_tensor *args[3] = {cond, a, b};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, WHERE, "where", 3, args)) return NULL;
  bert_dtype to = (a->dtype == BERT_F32 || b->dtype == BERT_F32) ? BERT_F32 : BERT_I32;
  bert_tensor *out = prepare_out(be, "where", NULL, to, 3, args);
  if (out == NULL) return NULL;
  return finish(out, be->where(cond, a, b, out));
}

int bert_fill_(bert_tensor *t, double value) {
  const bert_backend *be;
  const bert_tensor *args[1] = {t};
  if (!BERT_DISPATCH(be, FILL, "fill_", 1, args)) return -1;
  if (bert_has_overlap(t)) {
    bert_set_error("fill_: cannot write into an expanded tensor");
    return -1;
  }
  if (be->fill_(t, value) != 0) return -1;
  bert_bump_version(t);
  return 0;
}
