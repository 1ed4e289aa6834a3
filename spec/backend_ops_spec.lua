-- Every op and its gradient on every backend against the CPU, over seeded
-- random shapes, views and special values (tools/test_backend_ops.lua; its
-- command line runs the long mode).  A case passes when both agree, both
-- refuse, or the device says the op is not supported on it.
local bert = require("bert")
local T = dofile("tools/test_backend_ops.lua")

local info = bert.backend_info().vulkan
if not info.available then
  describe("backend ops", function() pending(require("spec.support.optional").no_vulkan()) end)
  return
end

describe("backend ops (quick mode)", function()
  it("every op agrees with the cpu on vulkan, or refuses as it does, or is not supported there", function()
    local report = T.run({seed = 1, cases = 16, device = "vulkan"})
    assert.same({}, report.failures)
    local ops, agree, total = 0, 0, 0
    for name, c in pairs(report.ops) do
      ops = ops + 1
      local n = c.agree + c["both refuse"] + c.unsupported
      assert.equal(16, n, name)
      -- every op was exercised: computed somewhere, or refused by the device as such
      assert.is_true(c.agree > 0 or c.unsupported > 0, name .. ": no case computed a value")
      agree, total = agree + c.agree, total + n
    end
    assert.equal(#T.OPS, ops)
    assert.is_true(agree > total / 2, agree .. " of " .. total .. " cases agree")
  end)

  it("compares NaN, infinities and finite values", function()
    local a = bert.tensor({1, 0 / 0, math.huge, 2})
    assert.equal("ok", T.compare(a, a:clone(), 1e-6))
    assert.truthy(T.compare(bert.tensor({1, 5, math.huge, 2}), a, 1e-6):find("NaN"))
    assert.truthy(T.compare(bert.tensor({1, 0 / 0, -math.huge, 2}), a, 1e-6):find("inf"))
    assert.truthy(T.compare(bert.tensor({1, 0 / 0, math.huge, 2.01}), a, 1e-6):find("element 4"))
    assert.truthy(T.compare(bert.tensor({1, 2}, "int32"), bert.tensor({1, 2}), 0):find("dtypes"))
  end)

  it("fails a different value, a value where the cpu refuses, and another device error", function()
    local x = {base = bert.tensor({1, 2, 3}), view = function(t) return t end}
    local wrong = {name = "wrong", f = function(_, t) return t:device() == "vulkan" and t + 1 or t * 1 end}
    assert.equal("fail", (T.run_case(wrong, {x}, "vulkan")))
    local lax = {name = "lax", f = function(_, t) if t:device() == "cpu" then error("refused") end return t * 1 end}
    assert.equal("fail", (T.run_case(lax, {x}, "vulkan")))
    local odd = {name = "odd", f = function(_, t) if t:device() ~= "cpu" then error("kernel broke") end return t * 1 end}
    assert.equal("fail", (T.run_case(odd, {x}, "vulkan")))
    local gap = {name = "gap", f = function(_, t)
      if t:device() ~= "cpu" then error("gap: not supported on device vulkan") end
      return t * 1
    end}
    assert.equal("unsupported", (T.run_case(gap, {x}, "vulkan")))
    local both = {name = "both", f = function() error("bad argument") end}
    assert.equal("both refuse", (T.run_case(both, {x}, "vulkan")))
    local grad = {name = "grad", grad = true,
                  f = function(_, t) return t:device() == "vulkan" and t * t or t * 2 end}
    local y = {base = bert.tensor({2, 2, 2}), view = function(t) return t end}   -- same values, other gradient
    assert.equal("fail", (T.run_case(grad, {y}, "vulkan")))
  end)
end)
