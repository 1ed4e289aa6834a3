-- Gradient checks that run on any device: finite differences on the CPU
-- (spec.support.gradcheck); on a device, its gradients against the CPU's
-- for the same function and inputs (which the CPU run checks by finite
-- differences).
--
-- check(device, make, inputs, opts): make(on) returns f(inputs...), where
-- on(t) moves a tensor f captures (a mask, offsets) to the device under
-- test; inputs are CPU tensors.
local bert = require("bert")
local G = require("spec.support.gradcheck")

local M = {}

-- the gradients of sum(f(inputs) * R) (R fixed) with respect to each input, on dev
function M.grads(dev, make, inputs)
  local on = function(t) return t:to(dev) end
  local xs = {}
  -- fresh leaves (t:to() of a tensor already there is the tensor itself)
  for i, x in ipairs(inputs) do xs[i] = on(x:clone()):requires_grad(true) end
  local out = make(on)(table.unpack(xs))
  local R = on(bert.randn(out:shape(), {seed = 12345}))
  ;(out * R):sum():backward()
  local gs = {}
  for i, x in ipairs(xs) do gs[i] = x:grad():to("cpu") end
  return gs, out:to("cpu")
end

function M.check(device, make, inputs, opts)
  if device == "cpu" then return G.gradcheck(make(function(t) return t end), inputs, opts) end
  local gd, od = M.grads(device, make, inputs)
  local gc, oc = M.grads("cpu", make, inputs)
  local tol = (opts and opts.device_tol) or 2e-5
  assert((od - oc):abs():max():item() <= tol, "outputs differ between " .. device .. " and cpu")
  for i = 1, #inputs do
    local diff = (gd[i] - gc[i]):abs():max():item()
    assert(diff <= tol, string.format("gradient of input %d differs between %s and cpu by %g", i, device, diff))
  end
end

return M
