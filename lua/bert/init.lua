--- bert: BERT-family Transformer encoders for Lua 5.4.
-- The tensor core, autograd, fused kernels and file formats are C
-- (`bert.core`); this facade re-exports them and loads the Lua submodules
-- on first use, so `require("bert")` stays cheap.
local core = require("bert.core")
-- BERT_PROFILE: time every C op per phase of the step (bert.profile); the
-- wrapping must come before any module keeps a reference to a C function
if os.getenv("BERT_PROFILE") then require("bert.profile").install(core) end

local M = {}

local submodules = {
  tokenizer = "bert.tokenizer",
  optim = "bert.optim",
  nn = "bert.nn",
  models = "bert.models",
  config = "bert.models.config",
  checkpoint = "bert.checkpoint",
  train = "bert.train",
  data = "bert.data",
  finetune = "bert.finetune",
  pipeline = "bert.pipeline",
  profile = "bert.profile",
}

-- the C tables of the same names (core.tokenizer, core.data) stay reachable
-- through bert.core; the Lua modules wrap them.  Names starting with "_" are
-- test hooks, left in bert.core only.
for name, value in pairs(core) do
  if submodules[name] == nil and name:sub(1, 1) ~= "_" then M[name] = value end
end
M.core = core
require("bert.tensor")   -- topk, sort: Lua methods over the C ops

setmetatable(M, {
  __index = function(self, key)
    local path = submodules[key]
    if path == nil then return nil end
    local mod = require(path)
    rawset(self, key, mod)
    return mod
  end,
})

--- bert.recompute(fn, ...) -> fn(...) without keeping its activations:
-- backward runs fn again (see bert.recompute)
function M.recompute(fn, ...) return require("bert.recompute").recompute(fn, ...) end

--- bert.from_pretrained(dir[, opts]) -> model, info (see bert.checkpoint)
function M.from_pretrained(dir, opts) return M.checkpoint.from_pretrained(dir, opts) end

--- bert.model(architecture, size_or_config[, overrides]): a fresh model of
-- any family, e.g. bert.model("BertForPreTraining", "tiny", {vocab_size = 1000}),
-- bert.model("RobertaForMaskedLM", "base").
function M.model(arch, spec, overrides) return M.models.new(arch, spec, overrides) end

return M
