--- Activation recomputation (gradient checkpointing).
-- bert.recompute(fn, ...) returns fn(...) (one tensor) computed without
-- recording fn's graph, so none of its intermediate activations are kept.
-- The backward pass runs fn again on the same inputs, with the graph on and
-- the random stream rewound to where the forward found it (so dropout draws
-- the same masks), and backpropagates through that. The parameters fn uses
-- get their gradients from this inner pass. The tensor arguments are kept
-- until then. A plain table argument (no metatable: a layer's extra, such
-- as DeBERTa's relative embeddings) is looked into one level deep: the
-- tensors in it are inputs too, and get their gradients through the node.
local core = require("bert.core")

local M = {}

local pending = {}   -- node id -> {fn, args, n, inputs, seed, offset}
local next_id = 0

local function is_tensor(x) return type(x) == "userdata" and getmetatable(x) == getmetatable(core.zeros({1})) end
local function is_plain_table(x) return type(x) == "table" and getmetatable(x) == nil end

-- the tensors among args[1..n] (and in their plain tables) that require grad, each once
local function grad_inputs(args, n)
  local inputs, seen = {}, {}
  local function add(t)
    if is_tensor(t) and t:requires_grad() and not seen[t] then
      seen[t] = true
      inputs[#inputs + 1] = t
    end
  end
  for k = 1, n do
    local a = args[k]
    if is_plain_table(a) then
      for _, v in pairs(a) do add(v) end
    else
      add(a)
    end
  end
  return inputs
end

-- the backward of a recompute node (called from C with the node's id)
core.recompute_dispatcher(function(id, grad)
  local e = pending[id]
  pending[id] = nil
  if e == nil then error("recompute: the inputs of this recomputation are gone (backward ran twice?)") end
  local detached, leaves = {}, {}   -- input -> a fresh leaf over its data
  for k, t in ipairs(e.inputs) do
    local d = t:detach()
    d:requires_grad(true)
    detached[t], leaves[k] = d, d
  end
  local function swap(a) return detached[a] or a end
  local args = {}
  for k = 1, e.n do
    local a = e.args[k]
    if is_plain_table(a) then
      local copy = {}
      for key, v in pairs(a) do copy[key] = swap(v) end
      a = copy
    elseif a ~= nil then
      a = swap(a)
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
  for k, d in ipairs(leaves) do grads[k] = d:grad() or false end
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
  local inputs = grad_inputs(args, n)
  -- nothing to differentiate through the arguments (or no graph wanted): a
  -- plain call (the parameters inside still record as usual)
  if #inputs == 0 or not core.grad_enabled() then return fn(...) end
  local seed, offset = core.rng_state()
  local y = core.no_grad(fn, ...)
  if not is_tensor(y) then
    error("bert.recompute: the function must return one tensor, got " .. type(y), 2)
  end
  next_id = next_id + 1
  pending[next_id] = {fn = fn, args = args, n = n, inputs = inputs, seed = seed, offset = offset}
  core.recompute_attach(y, inputs, next_id)
  return y
end

--- recompute.wrap(module) -> module: its forward(...) runs through
-- bert.recompute from now on (every argument as bert.recompute takes it:
-- the hidden states, DeBERTa's relative embeddings in extra and its
-- decoder's query states are inputs; a mask is passed as it is);
-- recompute.unwrap(module) restores it.
function M.wrap(module)
  if type(module) ~= "table" or type(module.forward) ~= "function" then
    error("recompute.wrap: argument #1 must be a module with a forward method", 2)
  end
  if rawget(module, "forward") then return module end   -- already wrapped
  local forward = module.forward
  module.forward = function(self, ...)
    return M.recompute(function(...) return forward(self, ...) end, ...)
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
