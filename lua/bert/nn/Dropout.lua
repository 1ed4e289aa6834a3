--- Dropout: zeroes elements with probability p while training, scaling the
-- rest by 1/(1-p); the identity in evaluation mode.  Masks come from the
-- counter-based generator, so a seed replays them exactly.
local bert = require("bert.core")
local class = require("bert.nn.class")
local Module = require("bert.nn.Module")

local Dropout = class("Dropout", Module)

function Dropout:__init(p)
  Module.__init(self)
  assert(type(p) == "number" and p >= 0 and p < 1, "Dropout: p must be in [0, 1), got " .. tostring(p))
  self.prob = p
end

function Dropout:forward(x)
  return bert.F.dropout(x, self.prob, self.is_training)
end

return Dropout
