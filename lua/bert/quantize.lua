--- bert.quantize: int8 inference for every linear layer (dynamic quantisation).
--
--   model:quantize("int8")   -- after loading weights and moving nothing more: CPU models
--   model:quantize(nil)      -- back to float32
--
-- Every 2-D float32 tensor a module holds (Linear weights, the attention's
-- query/key/value weights and their fused [3H x H] view, a tied decoder's
-- table) is marked with F.set_int8: F.linear with that weight then runs the
-- int8 kernel (csrc/cpu/qlinear.c: int8 weights per output channel,
-- activations quantised per row at each call, int32 sums), quantising the
-- weight on its first use, so an embedding table that only F.embedding
-- reads is never quantised.  The float32 weights stay: the model still
-- saves and loads as float32 (save_pretrained writes the original weights;
-- quantize again after loading, which gives the same int8 model), and
-- quantize(nil) returns to them.  Inference only: backward through a
-- quantised linear is an error.  Marks follow the tensor objects: moving or
-- re-flattening the model afterwards makes new tensors, which run float32
-- again, so quantise last.
local bert = require("bert.core")

local M = {}

M.kinds = {int8 = true}

local TensorMT = getmetatable(bert.zeros({1}))

-- Every tensor that the module tree under root holds directly (parameters
-- and plain fields such as fused views), each once.
local function held_tensors(root)
  local out, seen = {}, {}
  local function add(t)
    if getmetatable(t) == TensorMT and not seen[t] then
      seen[t] = true
      out[#out + 1] = t
    end
  end
  local function visit(m)
    for _, key in ipairs(m.p_order) do add(m.p[key]) end
    for _, v in pairs(m) do add(v) end
    for _, name in ipairs(m.m_order) do visit(m.m[name]) end
  end
  visit(root)
  return out
end

--- quantize(model, kind) -> model: kind "int8" marks every 2-D float32
-- weight for int8 linears; nil (or "none") unmarks them.  Returns the model,
-- with model.quantized = kind (or nil).
function M.quantize(model, kind)
  if kind == "none" then kind = nil end
  if kind ~= nil and not M.kinds[kind] then
    error(string.format("quantize: unknown kind %s (expected \"int8\", or nil for float32)",
      type(kind) == "string" and ('"' .. kind .. '"') or tostring(kind)), 3)
  end
  local weights = {}
  for _, t in ipairs(held_tensors(model)) do
    if t:dim() == 2 and t:dtype() == "float32" then
      if kind and t:device() ~= "cpu" then
        error("quantize: the model is on " .. t:device() .. "; int8 runs on the CPU", 3)
      end
      weights[#weights + 1] = t
    end
  end
  for _, t in ipairs(weights) do bert.F.set_int8(t, kind ~= nil) end
  model.quantized = kind
  return model
end

--- The weights F.linear has run as int8 so far: count and bytes held.
function M.stats(model)
  local n, bytes = 0, 0
  for _, t in ipairs(held_tensors(model)) do
    local q = t:dim() == 2 and bert.F.int8_of(t)
    if type(q) == "userdata" then n, bytes = n + 1, bytes + q:nbytes() end
  end
  return {weights = n, bytes = bytes}
end

return M
