/*
** Shared declarations of the Lua binding layer (csrc/lua/).  The C core
** in csrc/ knows nothing of Lua; these files translate between the two.
*/
#ifndef LBERT_H
#define LBERT_H

#include <lua.h>
#include <lauxlib.h>

#include "core/tensor.h"

#define BERT_TENSOR_MT "bert.Tensor"

/* Each binding file registers its functions into the module table that
** is on top of the stack, leaving the stack as it found it. */
void lbert_open_tensor(lua_State *L);
void lbert_open_io(lua_State *L);
void lbert_open_tokenizer(lua_State *L);
void lbert_open_autograd(lua_State *L);
void lbert_open_nn(lua_State *L);
void lbert_open_optim(lua_State *L);
void lbert_open_data(lua_State *L);
void lbert_open_vulkan(lua_State *L);
void lbert_open_dist(lua_State *L);
void lbert_dist_info(lua_State *L);   /* pushes backend_info().distributed */

/* Tensor userdata helpers (l_tensor.c). */
bert_tensor *lbert_check_tensor(lua_State *L, int arg);
bert_tensor *lbert_test_tensor(lua_State *L, int arg);
/* The opt-in of bindings that touch host memory themselves (every op goes
** through its core front-end instead, which says whether a device runs it):
** a reader gets a host copy of a device tensor, which takes the argument's
** place on the stack; a writer refuses a device tensor, naming fname. */
bert_tensor *lbert_check_host_copy(lua_State *L, int arg, const char *fname);
bert_tensor *lbert_check_host(lua_State *L, int arg, const char *fname);
void lbert_push_tensor(lua_State *L, bert_tensor *t);   /* takes ownership */
void lbert_gc_after_backward(lua_State *L);              /* returns dead tensors' blocks */
int lbert_core_error(lua_State *L, const char *fname);  /* raises bert_last_error */
/* Pushes a core result (owned), or raises the core's error naming fname. */
int lbert_push_result(lua_State *L, bert_tensor *t, const char *fname);
/* A 1-based (negative: from the end) Lua dim at arg -> 0-based, for ndim
** dims (+extra for positions one past the end, as unsqueeze takes). */
int lbert_check_dim(lua_State *L, int arg, int ndim, int extra);

/* Raises "fname: unknown option 'k' (the options: a, b)" for a key of the
** options table at idx that known (NULL-terminated) does not list: a
** misspelt option would otherwise take its default silently. */
void lbert_check_options(lua_State *L, int idx, const char *fname, const char *const known[]);

#endif
