/*
** Lua binding of the optimizer kernels (optim.h) as bert.core.optim_kernels.
** These are the low-level, one-parameter-per-call entry points used by
** lua/bert/optim.lua; scalars are positional so that ~200 calls per step
** stay cheap.  Misuse raises an error naming the kernel and argument.
**
**   adamw(p, g, m, v, lr, beta1, beta2, eps, wd, bias_correction, step)
**   lamb(p, g, m, v, lr, beta1, beta2, eps, wd, bias_correction, step, adapt) -> trust
**     (a number; for device tensors a one-element device tensor, so no step waits on it)
**   sgd(p, g, buf|nil, lr, momentum, dampening, wd, nesterov, first)
**   sumsq(t | {t, ...}) -> sum of squares (double)
**   scale_(t | {t, ...}, s)
*/
#include <math.h>
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

static const luaL_Reg kernels[] = {
  {"adamw", k_adamw},
  {"lamb", k_lamb},
  {"sgd", k_sgd},
  {"sumsq", k_sumsq},
  {"scale_", k_scale_},
  {NULL, NULL}
};

void lbert_open_optim(lua_State *L) {
  luaL_newlib(L, kernels);
  lua_setfield(L, -2, "optim_kernels");
}
