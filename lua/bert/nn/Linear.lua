--- Linear: y = x·Wᵀ + b with W stored [out, in], as Hugging Face does.
local bert = require("bert.core")
local class = require("bert.nn.class")
local Module = require("bert.nn.Module")

local Linear = class("Linear", Module)

--- Linear(in_features, out_features[, {bias = true, std = 0.02}])
function Linear:__init(in_features, out_features, opts)
  Module.__init(self)
  opts = opts or {}
  assert(math.type(in_features) == "integer" and in_features > 0,
    "Linear: in_features must be a positive integer, got " .. tostring(in_features))
  assert(math.type(out_features) == "integer" and out_features > 0,
    "Linear: out_features must be a positive integer, got " .. tostring(out_features))
  self.in_features, self.out_features = in_features, out_features
  self:add_parameter("weight", {out_features, in_features}, {normal = opts.std or 0.02})
  if opts.bias ~= false then self:add_parameter("bias", {out_features}, "zeros") end
end

--- F.linear runs int8 once the weight is marked (model:quantize("int8")).
function Linear:forward(x)
  return bert.F.linear(x, self.p.weight, self.p.bias)
end

return Linear
