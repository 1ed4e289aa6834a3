--- bert.onnx.lower: how a model's modules become ONNX nodes.  The export
-- walks the model's own module tree (the one bert.model built, whatever
-- the family) and lowers each module by its class: a lowering is
-- registered per class of the model definition (bert.models.blocks,
-- bert.models.heads, a family's own classes), and a subclass without one
-- of its own uses its parent's, as its forward does.  So the ONNX graph
-- reads the same structure, names and settings (activation, position
-- kind, summary token, relative buckets...) as the Lua forward.
local graph = require("bert.onnx.graph")

local M = {}

M.modules = {}   -- class -> function(ex, module, ...) -> value names
M.models = {}    -- class -> function(ex, model): declares the graph outputs

-- the lowering registered for obj's class or its nearest ancestor
local function lowering(registry, obj)
  local cls = getmetatable(obj)
  while cls do
    local f = rawget(registry, cls)
    if f then return f end
    cls = cls.super
  end
  return nil
end
M.lowering = lowering

local Exporter = {}
Exporter.__index = Exporter

--- An exporter of model: its graph (ex.g) and what error messages call it.
function M.exporter(model)
  local arch = model.architecture or model.class_name or getmetatable(model).__name
  local family = model.family
  local what = tostring(arch)
  if family then
    what = string.format("%s (family %s, head %s)", arch, family.model_type, tostring(family.architectures[arch]))
  end
  return setmetatable({g = graph.new(), model = model, what = what}, Exporter)
end

--- Raises the one-line error for what cannot be exported, naming the model.
function Exporter:unsupported(why)
  error(string.format("onnx.export: %s is not supported: %s", self.what, why), 0)
end

function Exporter:lower(module, ...)
  local f = lowering(M.modules, module)
  if not f then self:unsupported("no ONNX form for its " .. tostring(getmetatable(module).__name) .. " module") end
  return f(self, module, ...)
end

-- {============================================================ standard pieces

--- x · weightᵀ + bias (bias optional), weight [out, in] as a Linear holds it.
function Exporter:affine(weight, bias, x)
  local g = self.g
  local y = g:op("MatMul", {x, g:param(weight, true)})
  if bias then y = g:op("Add", {y, g:param(bias)}) end
  return y
end

function Exporter:linear(lin, x) return self:affine(lin.p.weight, lin.p.bias, x) end

--- LayerNorm(x + residual) when residual is given, as F.layer_norm.
function Exporter:layer_norm(ln, x, residual)
  local g = self.g
  if residual then x = g:op("Add", {x, residual}) end
  return g:op("LayerNormalization", {x, g:param(ln.p.weight), g:param(ln.p.bias)}, {axis = -1, epsilon = ln.eps})
end

-- Hugging Face's activation names (blocks.activation's) as standard ops
local activations = {
  gelu = function(g, x)   -- 0.5 x (1 + erf(x / sqrt 2))
    local e = g:op("Erf", {g:op("Div", {x, g:float(math.sqrt(2))})})
    return g:op("Mul", {g:op("Mul", {x, g:float(0.5)}), g:op("Add", {e, g:float(1)})})
  end,
  gelu_new = function(g, x)   -- 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    local x3 = g:op("Mul", {g:op("Mul", {x, x}), x})
    local inner = g:op("Mul", {g:op("Add", {x, g:op("Mul", {x3, g:float(0.044715)})}), g:float(math.sqrt(2 / math.pi))})
    return g:op("Mul", {g:op("Mul", {x, g:float(0.5)}), g:op("Add", {g:op("Tanh", {inner}), g:float(1)})})
  end,
  relu = function(g, x) return g:op("Relu", {x}) end,
  tanh = function(g, x) return g:op("Tanh", {x}) end,
}
activations.gelu_fast = activations.gelu_new

function Exporter:activation(name, x)
  local f = activations[name]
  if not f then self:unsupported("activation " .. tostring(name)) end
  return f(self.g, x)
end

function Exporter:linear_act(lin, act, x) return self:activation(act, self:linear(lin, x)) end

--- Declares the graph's inputs [batch, choices, sequence] (multiple
-- choice); the model reads them flattened to [batch * choices, sequence].
function Exporter:with_choices()
  self.g.input_dims = {"batch", "choices", "sequence"}
  self.flat = {}
end

--- A graph input as the model reads it: [B, T] (a multiple-choice model's
-- flattened, see with_choices).
function Exporter:input(name)
  local g = self.g
  if not self.flat then return g:input(name) end
  if not self.flat[name] then
    local T = g:op("Slice", {g:op("Shape", {g:input(name)}), g:int64s({2}), g:int64s({3})})
    self.flat[name] = g:op("Reshape", {g:input(name), g:op("Concat", {g:int64s({-1}), T}, {axis = 0})})
  end
  return self.flat[name]
end

--- The attention mask as float [B, T] (1 token, 0 padding).
function Exporter:mask()
  if not self.mask_float then
    self.mask_float = self.g:op("Cast", {self:input("attention_mask")}, {to = graph.FLOAT})
  end
  return self.mask_float
end

--- The key mask as an additive score bias [B, 1, 1, T]: 0 for tokens, -1e9 for padding.
function Exporter:mask_bias()
  if not self.bias then
    local g = self.g
    local bias = g:op("Mul", {g:op("Sub", {g:float(1), self:mask()}), g:float(-1e9)})
    self.bias = g:op("Unsqueeze", {bias, g:int64s({1, 2})})
  end
  return self.bias
end

--- The sequence length T as an int64 [1].
function Exporter:seq_len()
  if not self.T then
    self.T = self.g:op("Slice", {self.g:op("Shape", {self:input("input_ids")}), self.g:int64s({1}), self.g:int64s({2})})
  end
  return self.T
end

--- Positions 0..T-1 as an int64 [T].
function Exporter:positions()
  if not self.range then
    local g = self.g
    self.range = g:op("Range", {g:int64(0), g:op("Squeeze", {self:seq_len(), g:int64s({0})}), g:int64(1)})
  end
  return self.range
end

--- The causal score bias [T, T]: 0 where key j <= query i, -1e9 after.
function Exporter:causal_bias()
  if not self.causal then
    local g = self.g
    local i, j = g:op("Unsqueeze", {self:positions(), g:int64s({1})}), g:op("Unsqueeze", {self:positions(), g:int64s({0})})
    self.causal = g:op("Where", {g:op("Greater", {j, i}), g:float(-1e9), g:float(0)})
  end
  return self.causal
end

--- x [B, T, H] -> [B, H]: the first token's vector.
function Exporter:first_token(x) return self.g:op("Gather", {x, self.g:int64(0)}, {axis = 1}) end

--- x [B, T, H] -> [B, H]: each row's last real token (an all-padding row:
-- its first), as blocks.last_token.
function Exporter:last_token(x)
  local g = self.g
  local count = g:op("ReduceSum", {g:op("Cast", {self:input("attention_mask")}, {to = graph.INT64}), g:int64s({1})},
    {keepdims = 1})                                                              -- [B, 1]
  local last = g:op("Max", {g:op("Sub", {count, g:int64(1)}), g:int64(0)})
  local H = g:op("Slice", {g:op("Shape", {x}), g:int64s({2}), g:int64s({3})})
  local index = g:op("Expand", {g:op("Unsqueeze", {last, g:int64s({2})}),
    g:op("Concat", {g:op("Shape", {last}), H}, {axis = 0})})                     -- [B, 1, H]
  return g:op("Squeeze", {g:op("GatherElements", {x, index}, {axis = 1}), g:int64s({1})})
end
-- }============================================================

return M
