-- tools/bench_peak.lua: the FMA peak helper builds, runs and reports a sane figure.
local cjson = require("cjson")

local function run(args)
  local p = assert(io.popen("lua5.4 tools/bench_peak.lua " .. args .. " 2>&1; echo \"rc=$?\""))
  local out = p:read("*a")
  p:close()
  return out, tonumber(out:match("rc=(%d+)%s*$"))
end

describe("tools/bench_peak.lua", function()
  it("measures a positive fp32 FMA peak for one thread", function()
    local out, rc = run("--threads 1 --trials 1")
    assert.are.equal(0, rc, out)
    local r = cjson.decode(out:match("^(%b{})"))
    assert.are.equal(1, r.threads)
    assert.is_true(r.peak_gflops > 1 and r.peak_gflops < 1e5, out)
    assert.are.equal(r.peak_gflops, r.peak_gflops_1thread)
    assert.truthy(r.isa == "avx512" or r.isa == "avx2+fma", out)
  end)

  it("refuses a bad thread count by name", function()
    local out, rc = run("--threads 0")
    assert.are.equal(1, rc)
    assert.truthy(out:find("bench_peak.lua: option --threads: expected an integer from 1 to 1024, got '0'", 1, true),
      out)
  end)
end)
