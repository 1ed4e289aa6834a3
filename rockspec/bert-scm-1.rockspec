rockspec_format = "3.0"
package = "bert"
version = "scm-1"
source = { url = "git+file://." }
description = {
  summary = "BERT-family Transformer encoders for Lua 5.4, written in C",
  detailed = [[
Tensors, encoder layers, losses, optimizers, tokenizers and data pipelines
for pretraining and fine-tuning BERT-style models from Lua scripts, with
matmuls on OpenBLAS or oneDNN.]],
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
  -- CFLAGS is left to the Makefile (-O3 -march=native): LuaRocks' own
  -- default (-O2) would build a slower module than `make`.
  build_variables = {
    LIBFLAG = "$(LIBFLAG)",
    LUA_INCDIR = "$(LUA_INCDIR)",
    LUA = "$(LUA)",
  },
  install_variables = {
    LIBDIR = "$(LIBDIR)",
    LUADIR = "$(LUADIR)",
  },
}
test = { type = "busted" }
