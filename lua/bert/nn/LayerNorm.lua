--- LayerNorm over the last dimension; forward(x[, residual]) normalises
-- x + residual in one fused op (BERT's post-LN "add & norm").
local bert = require("bert.core")
local class = require("bert.nn.class")
local Module = require("bert.nn.Module")

local LayerNorm = class("LayerNorm", Module)

function LayerNorm:__init(size, eps)
  Module.__init(self)
  self.size, self.eps = size, eps or 1e-12
  self:add_parameter("weight", {size}, "ones")
  self:add_parameter("bias", {size}, "zeros")
end

function LayerNorm:forward(x, residual)
  return bert.F.layer_norm(x, self.p.weight, self.p.bias, self.eps, residual)
end

return LayerNorm
