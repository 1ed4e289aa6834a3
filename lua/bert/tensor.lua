--- Tensor methods written over the C ops (added to every tensor by
-- require("bert")):
--
--   local values, indices = logits:topk(5)          -- the 5 largest along the last dim
--   local values, indices = t:topk(k, dim, {largest = false})
--   local sorted, order = t:sort(dim, descending)   -- descending defaults to false
--
-- Dimensions are 1-based (negative from the end, default -1); indices are
-- int32 0-based positions, as argmax gives them.  The positions come from
-- t:sort_indices (C, csrc/cpu/ops_sort.c: stable, NaN largest); the values
-- are t:gather(dim, indices), so the gradient of topk and sort is gather's:
-- it flows back to the selected elements and is zero elsewhere.
local core = require("bert.core")
local Tensor = core.Tensor

--- The k largest (or, with {largest = false}, smallest) elements along dim,
-- in order: values (differentiable) and int32 positions.
function Tensor:topk(k, dim, opts)
  if math.type(k) ~= "integer" then
    error("topk: argument #1 (k) expected an integer, got " .. tostring(k), 2)
  end
  local largest = not (type(opts) == "table" and opts.largest == false)
  -- called as a method inside the closure, so errors name sort_indices
  local ok, idx = pcall(function() return self:sort_indices(dim or -1, k, largest) end)
  if not ok then error("topk: " .. tostring(idx):gsub("^[^:]*:%d+: ", ""):gsub("^sort_indices: ", ""), 2) end
  return self:gather(dim or -1, idx), idx
end

--- The elements along dim in ascending (or, descending = true, descending)
-- order: values (differentiable) and int32 positions.
function Tensor:sort(dim, descending)
  local ok, idx = pcall(function() return self:sort_indices(dim or -1, nil, descending == true) end)
  if not ok then error("sort: " .. tostring(idx):gsub("^[^:]*:%d+: ", ""):gsub("^sort_indices: ", ""), 2) end
  return self:gather(dim or -1, idx), idx
end

return Tensor
