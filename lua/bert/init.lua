--- bert: BERT-family Transformer encoders for Lua 5.4.
-- The tensor core, GEMM providers and file formats are C (`bert.core`);
-- this facade re-exports them and loads the Lua submodules on first use.
local core = require("bert.core")

local M = {}
for name, value in pairs(core) do M[name] = value end

-- Submodules load lazily, so `require("bert")` stays cheap and a script
-- pays only for what it uses.
local submodules = {
  tokenizer = "bert.tokenizer",
}

return setmetatable(M, {
  __index = function(self, key)
    local path = submodules[key]
    if path == nil then return nil end
    local mod = require(path)
    rawset(self, key, mod)
    return mod
  end,
})
