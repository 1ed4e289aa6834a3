--- Embedding: rows of weight [num, dim] picked by int32 ids (0-based).
local bert = require("bert.core")
local class = require("bert.nn.class")
local Module = require("bert.nn.Module")

local Embedding = class("Embedding", Module)

--- Embedding(num, dim[, {std = 0.02, padding_idx = nil}]): the padding row
-- starts at zero, as in Hugging Face's initialisation.
function Embedding:__init(num, dim, opts)
  Module.__init(self)
  opts = opts or {}
  self.num, self.dim = num, dim
  self:add_parameter("weight", {num, dim}, {normal = opts.std or 0.02, zero_row = opts.padding_idx})
end

function Embedding:forward(ids)
  return bert.F.embedding(ids, self.p.weight)
end

return Embedding
