-- `require("bert")` from the repository root, after `make`, with no LUA_PATH:
-- Lua's default path ends with ./?.lua, so this file is found there; it puts
-- the clone's lua/ and build/ (BERT_BUILD) first on the search paths and
-- loads the package itself, lua/bert/init.lua.  An installed bert (make
-- install, a rock) comes earlier on the default path and is used instead.
local root = debug.getinfo(1, "S").source:match("^@(.-)bert%.lua$") or "./"
package.path = root .. "lua/?.lua;" .. root .. "lua/?/init.lua;" .. package.path
package.cpath = root .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
if not package.searchpath("bert.core", package.cpath) then
  error(string.format("bert: %s%s/bert/core.so is not built: run `make` in %s", root,
    os.getenv("BERT_BUILD") or "build", root == "./" and "the repository root" or root), 2)
end
local init = assert(package.searchpath("bert", package.path))
return assert(loadfile(init))("bert", init)
