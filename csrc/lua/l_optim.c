/*
** Lua binding of the optimizer kernels (optim.h) as bert.core.optim_kernels.
** These are the low-level, one-parameter-per-call entry points used by
** lua/bert/optim.lua; scalars are positional so that ~200 calls per step
** stay cheap.  Misuse raises an error naming the kernel and argument.
**
**   adamw(p, g, m, v, lr, beta1, beta2, eps, wd, bias_correction, step)
**   lamb(p, g, m, v, lr, beta1, beta2, eps, wd, bias_correction, step, adapt) -> trust
**     (a number; for device tensors a one-element device tensor, so no step waits on it)
**   adamw_multi({p...}, {g...}, {m...}, {v...}, {wd...}, {step...}, lr, beta1, beta2, eps, bias_correction
**               [, grad_scale])
**   lamb_multi({p...}, {g...}, {m...}, {v...}, {wd...}, {step...}, {adapt...}, lr, beta1, beta2, eps,
**              bias_correction [, grad_scale]) -> {trust...}
**     (host tensors only: one call and one pass of the pool over every parameter; the
**     gradients are read multiplied by grad_scale, default 1: clipping without a pass)
**   sgd(p, g, buf|nil, lr, momentum, dampening, wd, nesterov, first)
**   sumsq(t | {t, ...}) -> sum of squares (double)
**   scale_(t | {t, ...}, s)
**   zero_grad_(t | {t, ...})   (zero_grad: streaming stores, see optim.h)
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lbert.h"
#include "core/optim.h"
#include "core/backend.h"

/* A finite number at arg, or an error naming the kernel and argument. */
static double check_finite(lua_State *L, int arg, const char *fn, const char *what) {
  if (lua_type(L, arg) != LUA_TNUMBER)
    luaL_error(L, "%s: argument #%d (%s): expected a number, got %s", fn, arg, what,
               luaL_typename(L, arg));
  double x = lua_tonumber(L, arg);
  if (!isfinite(x))
    luaL_error(L, "%s: argument #%d (%s): %f is not finite", fn, arg, what, x);
  return x;
}

static bert_tensor *check_tensor_arg(lua_State *L, int arg, const char *fn, const char *what) {
  bert_tensor *t = lbert_test_tensor(L, arg);
  if (t == NULL)
    luaL_error(L, "%s: argument #%d (%s): expected a bert.Tensor, got %s", fn, arg, what,
               luaL_typename(L, arg));
  return t;
}

static void read_adam(lua_State *L, const char *fn, bert_adam_cfg *cfg) {
  cfg->lr = check_finite(L, 5, fn, "lr");
  cfg->beta1 = check_finite(L, 6, fn, "beta1");
  cfg->beta2 = check_finite(L, 7, fn, "beta2");
  cfg->eps = check_finite(L, 8, fn, "eps");
  cfg->weight_decay = check_finite(L, 9, fn, "weight_decay");
  cfg->bias_correction = lua_toboolean(L, 10);
  if (!lua_isinteger(L, 11))
    luaL_error(L, "%s: argument #11 (step): expected an integer, got %s", fn,
               lua_type(L, 11) == LUA_TNUMBER ? "a float" : luaL_typename(L, 11));
  cfg->step = (int64_t)lua_tointeger(L, 11);
}

static int k_adamw(lua_State *L) {
  static const char *fn = "adamw";
  bert_tensor *p = check_tensor_arg(L, 1, fn, "param");
  bert_tensor *g = check_tensor_arg(L, 2, fn, "grad");
  bert_tensor *m = check_tensor_arg(L, 3, fn, "exp_avg");
  bert_tensor *v = check_tensor_arg(L, 4, fn, "exp_avg_sq");
  bert_adam_cfg cfg;
  read_adam(L, fn, &cfg);
  if (bert_adamw_step(p, g, m, v, &cfg) != 0) return lbert_core_error(L, fn);
  return 0;
}

static int k_lamb(lua_State *L) {
  static const char *fn = "lamb";
  bert_tensor *p = check_tensor_arg(L, 1, fn, "param");
  bert_tensor *g = check_tensor_arg(L, 2, fn, "grad");
  bert_tensor *m = check_tensor_arg(L, 3, fn, "exp_avg");
  bert_tensor *v = check_tensor_arg(L, 4, fn, "exp_avg_sq");
  bert_adam_cfg cfg;
  read_adam(L, fn, &cfg);
  int adapt = lua_toboolean(L, 12);
  bert_tensor *t = NULL;
  if (bert_lamb_step(p, g, m, v, &cfg, adapt, &t) != 0) return lbert_core_error(L, fn);
  if (!bert_is_host(t)) {   /* the ratio stays on the device: a one-element tensor, read when wanted */
    lbert_push_tensor(L, t);
    return 1;
  }
  lua_pushnumber(L, bert_f32(t)[0]);
  bert_tensor_release(t);
  return 1;
}


/* {====================================================== many tensors per call */

typedef struct {
  int n;
  bert_tensor **t[4];      /* p, g, m, v */
  double *wd;
  int64_t *step;
  int *adapt;
} multi_args;

static void multi_free(multi_args *a) {
  for (int w = 0; w < 4; w++) free(a->t[w]);
  free(a->wd);
  free(a->step);
  free(a->adapt);
}

/* The list at arg, with n elements (n < 0: set n from it). */
static int list_len(lua_State *L, int arg, const char *fn, const char *what, int n) {
  if (!lua_istable(L, arg))
    return luaL_error(L, "%s: argument #%d (%s): expected a list, got %s", fn, arg, what,
                      luaL_typename(L, arg));
  lua_Integer len = luaL_len(L, arg);
  if (n >= 0 && len != n)
    return luaL_error(L, "%s: argument #%d (%s) has %d elements, the parameter list %d", fn, arg,
                      what, (int)len, n);
  if (len > 1000000)
    return luaL_error(L, "%s: argument #%d (%s): %d parameters is too many", fn, arg, what, (int)len);
  return (int)len;
}

/* Reads the lists at args 1..6 (and 7, the adapt flags, for LAMB) into a,
** raw (no metamethod can raise while the arrays are held); returns NULL or
** a message.  The caller frees the arrays, then raises any error. */
static const char *multi_read(lua_State *L, const char *fn, multi_args *a, int with_adapt,
                              char *err, size_t errn) {
  static const char *const what[4] = {"params", "grads", "exp_avgs", "exp_avg_sqs"};
  int n = a->n;
  for (int w = 0; w < 4; w++)
    if ((a->t[w] = malloc((size_t)(n > 0 ? n : 1) * sizeof *a->t[w])) == NULL) return "out of memory";
  a->wd = malloc((size_t)(n > 0 ? n : 1) * sizeof *a->wd);
  a->step = malloc((size_t)(n > 0 ? n : 1) * sizeof *a->step);
  a->adapt = malloc((size_t)(n > 0 ? n : 1) * sizeof *a->adapt);
  if (a->wd == NULL || a->step == NULL || a->adapt == NULL) return "out of memory";
  for (int i = 0; i < n; i++) {
    for (int w = 0; w < 4; w++) {
      lua_rawgeti(L, w + 1, i + 1);
      a->t[w][i] = lbert_test_tensor(L, -1);
      lua_pop(L, 1);
      if (a->t[w][i] == NULL) {
        snprintf(err, errn, "%s: argument #%d (%s): element %d is not a bert.Tensor", fn, w + 1, what[w], i + 1);
        return err;
      }
    }
    lua_rawgeti(L, 5, i + 1);
    int ok = lua_type(L, -1) == LUA_TNUMBER;
    a->wd[i] = lua_tonumber(L, -1);
    lua_pop(L, 1);
    if (!ok) {
      snprintf(err, errn, "%s: argument #5 (weight_decays): element %d is not a number", fn, i + 1);
      return err;
    }
    lua_rawgeti(L, 6, i + 1);
    ok = lua_isinteger(L, -1);
    a->step[i] = (int64_t)lua_tointeger(L, -1);
    lua_pop(L, 1);
    if (!ok) {
      snprintf(err, errn, "%s: argument #6 (steps): element %d is not an integer", fn, i + 1);
      return err;
    }
    if (with_adapt) {
      lua_rawgeti(L, 7, i + 1);
      a->adapt[i] = lua_toboolean(L, -1);
      lua_pop(L, 1);
    }
  }
  return NULL;
}

static void read_adam_at(lua_State *L, int base, const char *fn, bert_adam_cfg *cfg) {
  cfg->lr = check_finite(L, base, fn, "lr");
  cfg->beta1 = check_finite(L, base + 1, fn, "beta1");
  cfg->beta2 = check_finite(L, base + 2, fn, "beta2");
  cfg->eps = check_finite(L, base + 3, fn, "eps");
  cfg->bias_correction = lua_toboolean(L, base + 4);
  cfg->weight_decay = 0;
  cfg->step = 1;
}

static int k_multi(lua_State *L, int lamb) {
  const char *fn = lamb ? "lamb_multi" : "adamw_multi";
  static const char *const what[6] = {"params", "grads", "exp_avgs", "exp_avg_sqs", "weight_decays", "steps"};
  multi_args a = {0};
  a.n = list_len(L, 1, fn, what[0], -1);
  for (int w = 1; w < 6; w++) list_len(L, w + 1, fn, what[w], a.n);
  if (lamb) list_len(L, 7, fn, "adapt", a.n);
  bert_adam_cfg cfg;
  read_adam_at(L, lamb ? 8 : 7, fn, &cfg);
  int scale_arg = lamb ? 13 : 12;
  double grad_scale = lua_isnoneornil(L, scale_arg) ? 1.0 : check_finite(L, scale_arg, fn, "grad_scale");
  char err[256];
  const char *msg = multi_read(L, fn, &a, lamb, err, sizeof err);
  double *trust = NULL;
  int rc = 0;
  if (msg == NULL && lamb && (trust = malloc((size_t)(a.n > 0 ? a.n : 1) * sizeof *trust)) == NULL)
    msg = "out of memory";
  if (msg == NULL)
    rc = lamb ? bert_lamb_multi(a.n, a.t[0], a.t[1], a.t[2], a.t[3], a.wd, a.step, a.adapt, &cfg, grad_scale,
                                trust)
              : bert_adamw_multi(a.n, a.t[0], a.t[1], a.t[2], a.t[3], a.wd, a.step, &cfg, grad_scale);
  multi_free(&a);
  if (msg != NULL) {
    free(trust);
    return luaL_error(L, "%s", msg == err ? err : lua_pushfstring(L, "%s: %s", fn, msg));
  }
  if (rc != 0) {
    free(trust);
    return lbert_core_error(L, fn);
  }
  if (!lamb) return 0;
  lua_createtable(L, a.n, 0);
  for (int i = 0; i < a.n; i++) {
    lua_pushnumber(L, trust[i]);
    lua_rawseti(L, -2, i + 1);
  }
  free(trust);
  return 1;
}

static int k_adamw_multi(lua_State *L) { return k_multi(L, 0); }
static int k_lamb_multi(lua_State *L) { return k_multi(L, 1); }
/* }====================================================== */

static int k_sgd(lua_State *L) {
  static const char *fn = "sgd";
  bert_tensor *p = check_tensor_arg(L, 1, fn, "param");
  bert_tensor *g = check_tensor_arg(L, 2, fn, "grad");
  bert_tensor *buf = lua_isnoneornil(L, 3) ? NULL : check_tensor_arg(L, 3, fn, "momentum_buffer");
  bert_sgd_cfg cfg;
  cfg.lr = check_finite(L, 4, fn, "lr");
  cfg.momentum = check_finite(L, 5, fn, "momentum");
  cfg.dampening = check_finite(L, 6, fn, "dampening");
  cfg.weight_decay = check_finite(L, 7, fn, "weight_decay");
  cfg.nesterov = lua_toboolean(L, 8);
  cfg.first = lua_toboolean(L, 9);
  if (bert_sgd_step(p, g, buf, &cfg) != 0) return lbert_core_error(L, fn);
  return 0;
}

/* Calls fn on the tensor at arg, or on each tensor of the list at arg. */
static int each_tensor(lua_State *L, const char *fn, int (*f)(lua_State *, bert_tensor *, void *),
                       void *ud) {
  if (lua_istable(L, 1)) {
    lua_Integer n = luaL_len(L, 1);
    for (lua_Integer i = 1; i <= n; i++) {
      lua_geti(L, 1, i);
      bert_tensor *t = lbert_test_tensor(L, -1);
      if (t == NULL)
        return luaL_error(L, "%s: argument #1: element %d is %s, not a bert.Tensor", fn, (int)i,
                          luaL_typename(L, -1));
      if (f(L, t, ud) != 0) {
        const char *msg = bert_last_error();
        size_t fl = strlen(fn);
        if (strncmp(msg, fn, fl) == 0 && msg[fl] == ':') msg += fl + 1 + (msg[fl + 1] == ' ');
        return luaL_error(L, "%s: argument #1: element %d: %s", fn, (int)i, msg);
      }
      lua_pop(L, 1);
    }
    return 0;
  }
  bert_tensor *t = lbert_test_tensor(L, 1);
  if (t == NULL)
    return luaL_error(L, "%s: argument #1: expected a bert.Tensor or a list of them, got %s", fn,
                      luaL_typename(L, 1));
  if (f(L, t, ud) != 0) return lbert_core_error(L, fn);
  return 0;
}

static int add_sumsq(lua_State *L, bert_tensor *t, void *ud) {
  (void)L;
  double s;
  if (bert_sumsq(t, &s) != 0) return -1;
  *(double *)ud += s;
  return 0;
}

static int k_sumsq(lua_State *L) {
  double total = 0;
  each_tensor(L, "sumsq", add_sumsq, &total);
  lua_pushnumber(L, total);
  return 1;
}

static int do_scale(lua_State *L, bert_tensor *t, void *ud) {
  (void)L;
  return bert_scale_(t, *(double *)ud);
}

static int k_scale_(lua_State *L) {
  double s = check_finite(L, 2, "scale_", "factor");
  each_tensor(L, "scale_", do_scale, &s);
  return 0;
}

static int do_zero(lua_State *L, bert_tensor *t, void *ud) {
  (void)L;
  (void)ud;
  return bert_zero_grad_(t);
}

static int k_zero_grad_(lua_State *L) {
  each_tensor(L, "zero_grad_", do_zero, NULL);
  return 0;
}

static const luaL_Reg kernels[] = {
  {"zero_grad_", k_zero_grad_},
  {"adamw", k_adamw},
  {"lamb", k_lamb},
  {"adamw_multi", k_adamw_multi},
  {"lamb_multi", k_lamb_multi},
  {"sgd", k_sgd},
  {"sumsq", k_sumsq},
  {"scale_", k_scale_},
  {NULL, NULL}
};

void lbert_open_optim(lua_State *L) {
  luaL_newlib(L, kernels);
  lua_setfield(L, -2, "optim_kernels");
}
