-- Finite-difference gradient checks for the autograd specs.
--
-- gradcheck(f, inputs, opts): f(inputs...) returns a tensor; the check
-- reduces it to a scalar with fixed random weights R (sum(out * R)), runs
-- backward, and compares every input's analytic gradient with central
-- differences computed in float32 by perturbing one element at a time.
-- Inputs that are not float32 tensors (ids, masks) are passed through.
local bert = require("bert")

local G = {}

local function flat_get(t, i) return t:view(-1):get(i) end
local function flat_set(t, i, v) bert.no_grad(function() t:view(-1):set(v, i) end) end

function G.gradcheck(f, inputs, opts)
  opts = opts or {}
  local eps = opts.eps or 1e-2
  local atol, rtol = opts.atol or 2e-3, opts.rtol or 2e-2
  local max_checks = opts.max_checks or 60   -- elements checked per input
  local which = opts.inputs                  -- indices of inputs to check (default: all float)

  local function weights_for(out)
    return bert.randn(out:shape(), {seed = 12345})
  end
  local probe = bert.no_grad(function() return f(table.unpack(inputs)) end)
  local R = weights_for(probe)
  local function loss_of() return bert.no_grad(function()
    return (f(table.unpack(inputs)) * R):sum():item()
  end) end

  local check = {}
  for k, x in ipairs(inputs) do
    local want = which == nil or which[k]
    if want and type(x) == "userdata" and x:dtype() == "float32" then
      check[#check + 1] = k
      x:requires_grad(true)
      x:zero_grad()
    end
  end
  local loss = (f(table.unpack(inputs)) * R):sum()
  loss:backward()
  local worst = 0
  for _, k in ipairs(check) do
    local x = inputs[k]
    local g = x:grad()
    assert(g, "input " .. k .. " received no gradient")
    local n = x:numel()
    local step = math.max(1, n // max_checks)
    for i = 1, n, step do
      local orig = flat_get(x, i)
      flat_set(x, i, orig + eps)
      local lp = loss_of()
      flat_set(x, i, orig - eps)
      local lm = loss_of()
      flat_set(x, i, orig)
      local numeric = (lp - lm) / (2 * eps)
      local analytic = flat_get(g, i)
      local err = math.abs(numeric - analytic)
      if err > atol + rtol * math.abs(numeric) then
        error(string.format("gradient mismatch for input %d element %d: analytic %.6g, numeric %.6g",
          k, i, analytic, numeric), 2)
      end
      worst = math.max(worst, err)
    end
    x:requires_grad(false)
  end
  return worst
end

return G
