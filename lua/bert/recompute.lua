--- Activation recomputation (gradient checkpointing).
-- bert.recompute(fn, ...) returns fn(...) (one tensor) computed without
-- recording fn's graph, so none of its intermediate activations are kept.
-- The backward pass runs fn again on the same inputs, with the graph on and
-- the random stream rewound to where the forward found it (so dropout draws
-- the same masks), and backpropagates through that. The parameters fn uses
-- get their gradients from this inner pass. The tensor arguments are kept
-- until then.
local core = require("bert.core")

local M = {}

local pending = {}   -- node id -> {fn, args, n, seed, offset}
local next_id = 0

local function is_tensor(x) return type(x) == "userdata" and getmetatable(x) == getmetatable(core.zeros({1})) end

-- the backward of a recompute node (called from C with the node's id)
core.recompute_dispatcher(function(id, grad)
  local e = pending[id]
  pending[id] = nil
  if e == nil then error("recompute: the inputs of this recomputation are gone (backward ran twice?)") end
  local args, inputs = {}, {}
  for k = 1, e.n do
    local a = e.args[k]
    if is_tensor(a) and a:requires_grad() then
      local d = a:detach()
      d:requires_grad(true)
      inputs[#inputs + 1] = d
      a = d
    end
    args[k] = a
  end
  local seed, offset = core.rng_state()
  core.set_rng_state(e.seed, e.offset)
  local was = core.grad_enabled()
  core.set_grad_enabled(true)
  local ok, y = pcall(e.fn, table.unpack(args, 1, e.n))
  core.set_grad_enabled(was)
  core.set_rng_state(seed, offset)
  if not ok then error(y, 0) end
  if not is_tensor(y) then error("recompute: the function returned " .. type(y) .. " on the second run, not a tensor") end
  if y:requires_grad() then y:backward(grad) end
  local grads = {}
  for k, d in ipairs(inputs) do grads[k] = d:grad() or false end
  return grads
end)

--- bert.recompute(fn, ...) -> fn(...), its activations recomputed in backward.
function M.recompute(fn, ...)
  if type(fn) ~= "function" and not (type(fn) == "table" and getmetatable(fn) and getmetatable(fn).__call) then
    error("bert.recompute: argument #1 must be a function or a callable module, got " .. type(fn), 2)
  end
  for _, id in ipairs(core.recompute_dead()) do pending[id] = nil end
  local n = select("#", ...)
  local args = {...}
  local inputs = {}
  for k = 1, n do
    if is_tensor(args[k]) and args[k]:requires_grad() then inputs[#inputs + 1] = args[k] end
  end
  -- nothing to differentiate through the arguments (or no graph wanted): a
  -- plain call (the parameters inside still record as usual)
  if #inputs == 0 or not core.grad_enabled() then return fn(...) end
  local seed, offset = core.rng_state()
  local y = core.no_grad(fn, ...)
  if not is_tensor(y) then
    error("bert.recompute: the function must return one tensor, got " .. type(y), 2)
  end
  next_id = next_id + 1
  pending[next_id] = {fn = fn, args = args, n = n, seed = seed, offset = offset}
  core.recompute_attach(y, inputs, next_id)
  return y
end

--- recompute.wrap(module) -> module: its forward(x, ...) runs through
-- bert.recompute from now on (the first argument is the recomputed input;
-- the others, e.g. an attention mask, are passed as they are);
-- recompute.unwrap(module) restores it.
function M.wrap(module)
  if type(module) ~= "table" or type(module.forward) ~= "function" then
    error("recompute.wrap: argument #1 must be a module with a forward method", 2)
  end
  if rawget(module, "forward") then return module end   -- already wrapped
  local forward = module.forward
  module.forward = function(self, x, ...)
    local rest, nrest = {...}, select("#", ...)
    return M.recompute(function(h) return forward(self, h, table.unpack(rest, 1, nrest)) end, x)
  end
  return module
end

function M.unwrap(module)
  if type(module) == "table" then rawset(module, "forward", nil) end
  return module
end

-- The unit of recomputation in a model: a module whose class sets
-- recompute_unit = true, or by name an encoder layer or block.
local function is_unit(module)
  local mt = getmetatable(module) or {}
  if module.recompute_unit then return true end
  local cls = mt.__name or ""
  return cls:match("Encoder") ~= nil and (cls:match("Layer$") ~= nil or cls:match("Block$") ~= nil)
end

--- recompute.set(model, flag) -> number of layers (un)wrapped: with flag,
-- every encoder layer of the model recomputes its activations in backward.
function M.set(model, flag)
  local n = 0
  local function visit(m)
    for _, name in ipairs(m.m_order or {}) do
      local child = m.m[name]
      if is_unit(child) then
        if flag then M.wrap(child) else M.unwrap(child) end
        n = n + 1
      else
        visit(child)
      end
    end
  end
  visit(model)
  return n
end

-- for the specs: recomputations whose backward has not run yet
function M.pending_count()
  for _, id in ipairs(core.recompute_dead()) do pending[id] = nil end
  local c = 0
  for _ in pairs(pending) do c = c + 1 end
  return c
end

return M
