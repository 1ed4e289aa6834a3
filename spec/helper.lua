-- Loaded by busted before the specs (see .busted): checks that bert.core
-- comes from the build tree and adds tensor assertions.
local build = os.getenv("BERT_BUILD") or "build"
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. build .. "/?.so;" .. package.cpath
local found = package.searchpath("bert.core", package.cpath)
assert(found and found:find("^%./" .. build:gsub("%-", "%%-") .. "/"),
  "bert.core must come from ./" .. build .. ", found " .. tostring(found))

local say = require("say")
local luassert = require("luassert")

-- Flattens a nested table or tensor into a list of numbers plus its shape.
local function flatten(x, out, shape, depth)
  if type(x) == "number" then out[#out + 1] = x; return end
  shape[depth] = shape[depth] or #x
  for i = 1, #x do flatten(x[i], out, shape, depth + 1) end
end

local function as_list(x)
  if type(x) == "userdata" then x = x:totable() end
  local out, shape = {}, {}
  flatten(x, out, shape, 1)
  return out, shape
end

-- assert.tensor_near(expected, actual, tol): same element count and
-- |e - a| <= tol * (1 + |e|) elementwise; NaN matches NaN.
local function tensor_near(state, args)
  local e, es = as_list(args[1])
  local a, as = as_list(args[2])
  local tol = args[3] or 1e-5
  if #e ~= #a then
    state.failure_message = string.format("element counts differ: expected %d, got %d", #e, #a)
    return false
  end
  for i = 1, #e do
    local ok = (e[i] ~= e[i] and a[i] ~= a[i]) or e[i] == a[i] or
               math.abs(e[i] - a[i]) <= tol * (1 + math.abs(e[i]))
    if not ok then
      state.failure_message = string.format("element %d: expected %.9g, got %.9g (tol %g)", i, e[i], a[i], tol)
      return false
    end
  end
  return true
end

say:set("assertion.tensor_near.positive", "Expected tensors to be near.\n%s")
say:set("assertion.tensor_near.negative", "Expected tensors not to be near.\n%s")
luassert:register("assertion", "tensor_near", tensor_near,
  "assertion.tensor_near.positive", "assertion.tensor_near.negative")
