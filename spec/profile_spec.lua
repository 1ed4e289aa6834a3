-- BERT_PROFILE: the step's phases and each phase's ops (bert.profile), run
-- in a child process since the wrapping happens when bert loads.
local bert = require("bert")

local function run(cmd)
  local f = assert(io.popen(cmd .. " 2>&1"))
  local out = f:read("a")
  local ok = f:close()
  return ok, out
end

describe("bert.profile", function()
  it("is a plain call when BERT_PROFILE is not set", function()
    if os.getenv("BERT_PROFILE") then return end
    local profile = require("bert.profile")
    assert.is_false(profile.enabled)
    local a, b = profile.phase("forward", function(x, y) return y, x end, 1, 2)
    assert.equal(2, a); assert.equal(1, b)
    assert.same({}, profile.report().phases)
  end)

  it("breaks bench.lua's train step into phases and ops that add up", function()
    local ok, out = run("BERT_PROFILE=1 BERT_PEAK_GFLOPS=100 lua5.4 tools/bench.lua --model tiny --batch 2 --seq 16 --steps 2 --threads 1")
    assert.is_true(ok, out)
    local per_step = tonumber(out:match("profile: ([%d.]+) ms per step over 2 steps"))
    assert.is_number(per_step, out)
    local phases, sum = {}, 0
    for name, ms, pct in out:gmatch("\n(%a+)%s+([%d.]+) ms%s+([%d.]+)%%") do
      phases[name] = tonumber(pct)
      sum = sum + tonumber(ms)
    end
    assert.is_number(phases.forward, out)
    assert.is_number(phases.backward, out)
    assert.is_number(phases.optimizer, out)
    assert.is_true(math.abs(sum - per_step) <= 0.01 * per_step + 0.2, out)
    -- forward ops are the C functions' names, the backward's the node kinds
    local fwd = out:match("\nforward.-\nbackward") or out:match("\nforward.-\noptimizer")
    assert.truthy(out:match("\n  F%.linear%s+[%d.]+ ms"), out)
    assert.truthy(out:match("\n  linear%s+[%d.]+ ms"), out)
    assert.truthy(out:match("\n  optim_kernels%.adamw_multi%s+[%d.]+ ms"), out)
    assert.is_string(fwd)
  end)

  it("counts each backward node kind once over the outermost passes", function()
    local code = [[
      package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
      package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
      local bert = require("bert")
      local x = bert.randn({4, 3}, {seed = 1}); x:requires_grad(true)
      for _ = 1, 3 do (x * x):sum():backward() end
      local p = bert.backward_profile()
      print(p.mul and p.mul.calls, p.sum and p.sum.calls, next(bert.backward_profile()) == nil)
    ]]
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write(code)
    f:close()
    local ok, out = run("BERT_PROFILE=1 lua5.4 " .. path)
    os.remove(path)
    assert.is_true(ok, out)
    assert.equal("3\t3\ttrue", out:match("[^\n]+"))
    -- without BERT_PROFILE a tool switches it on itself (tools/bench.lua's share of the step):
    -- before, the backward's GEMMs were missing from that share (70% "outside GEMMs" for BERT-mini)
    local on = code:gsub("local x =", "bert.set_backward_profiling(true)\n      local x =")
    path = os.tmpname()
    f = assert(io.open(path, "w"))
    f:write(on)
    f:close()
    ok, out = run("env -u BERT_PROFILE lua5.4 " .. path)
    os.remove(path)
    assert.is_true(ok, out)
    assert.equal("3\t3\ttrue", out:match("[^\n]+"))
  end)
end)
