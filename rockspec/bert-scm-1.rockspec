rockspec_format = "3.0"
package = "bert"
version = "scm-1"
source = { url = "git+file://." }
description = {
  summary = "BERT-family Transformer encoders for Lua 5.4, written in C",
  detailed = [[
Tensors, encoder layers, losses, optimizers, tokenizers and data pipelines
for pretraining and fine-tuning BERT-style models from Lua scripts, with
matmuls on OpenBLAS or oneDNN; and the `bert` command (pretrain, finetune,
evaluate, predict, ablate, export, fetch).]],
  license = "MIT",
}
-- lua-cjson and argparse: Debian's packages (make deps) register with
-- LuaRocks as provided (tools/deps.sh), so an offline build finds them.
dependencies = { "lua >= 5.4", "lua-cjson >= 2.1", "argparse >= 0.7" }
-- Debian puts cblas.h under a multiarch directory LuaRocks does not search;
-- the Makefile finds it with pkg-config, so only the libraries are checked.
external_dependencies = {
  OPENBLAS = { library = "openblas" },
  UTF8PROC = { library = "utf8proc" },
}
build = {
  type = "make",
  makefile = "Makefile",
  build_target = "all",
  install_target = "install",
  -- LuaRocks' CFLAGS (its -O2 default, or the user's config) pass through,
  -- with the Makefile's -O3 -march=native after them: the rock's module is
  -- as fast as `make`'s.
  build_variables = {
    CFLAGS = "$(CFLAGS) -O3 -march=native",
    LIBFLAG = "$(LIBFLAG)",
    LUA_INCDIR = "$(LUA_INCDIR)",
    LUA = "$(LUA)",
  },
  -- bin/bert goes to BINDIR and the scripts it runs to BINDIR/../share/bert,
  -- inside the rock's own directory, where LuaRocks' wrapper runs it from.
  install_variables = {
    LIBDIR = "$(LIBDIR)",
    LUADIR = "$(LUADIR)",
    BINDIR = "$(BINDIR)",
  },
}
test = { type = "busted" }
