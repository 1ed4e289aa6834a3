-- The machine's fp32 FMA peak (GFLOP/s) for a thread count, measured by the C
-- helper tools/fma_peak.c (built here on first use into <build>/tools/), so
-- benchmark figures can be given as a fraction of the machine they ran on.
--   local peak = dofile("tools/peak.lua"); local gf, isa = peak.measure(2)
-- BERT_PEAK_GFLOPS=<n> skips the measurement (e.g. a figure taken on a quiet
-- machine, reused while the machine is shared).
local M = {}

local function sh_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

function M.helper()
  local dir = (os.getenv("BERT_BUILD") or "build") .. "/tools"
  local exe = dir .. "/fma_peak"
  local cc = os.getenv("CC") or "cc"
  local cmd = string.format("mkdir -p %s && %s -O2 -march=native -pthread tools/fma_peak.c -o %s",
                            sh_quote(dir), cc, sh_quote(exe))
  if not os.execute(cmd) then error("peak.helper: building tools/fma_peak.c failed: " .. cmd, 2) end
  return exe
end

-- Returns GFLOP/s, the ISA measured ("avx512", "avx2+fma") and where the figure came from.
function M.measure(threads, trials)
  threads = math.tointeger(threads) or 1
  if threads < 1 then error("peak.measure: threads must be >= 1 (got " .. tostring(threads) .. ")", 2) end
  local env = os.getenv("BERT_PEAK_GFLOPS")
  if env then
    local v = tonumber(env)
    if not v or v <= 0 then error("peak.measure: BERT_PEAK_GFLOPS must be a positive number (got '" .. env .. "')", 2) end
    return v, "given", "BERT_PEAK_GFLOPS"
  end
  local exe = M.helper()
  local p = assert(io.popen(string.format("%s %d %d", sh_quote(exe), threads, trials or 5)))
  local line = p:read("l")
  p:close()
  local n, gf, isa = (line or ""):match("^(%d+) ([%d.]+) (%S+)")
  if not gf then error("peak.measure: unexpected output from " .. exe .. ": " .. tostring(line), 2) end
  return tonumber(gf), isa, "measured"
end

-- run as a script: the peak for the thread counts given (default 1)
if arg and type(arg[0]) == "string" and (arg[0] == "peak.lua" or arg[0]:match("/peak%.lua$")) then
  if arg[1] == "--help" or arg[1] == "-h" then
    print("usage: lua5.4 tools/peak.lua [THREADS...]\n"
      .. "The fp32 FMA peak (GFLOP/s) per thread count; the module behind tools/bench_peak.lua.")
    os.exit(0)
  end
  for _, a in ipairs(#arg > 0 and arg or {"1"}) do
    local n = math.tointeger(tonumber(a))
    if not n or n < 1 then io.stderr:write("peak.lua: thread count must be a whole number >= 1, got '" .. a .. "'\n"); os.exit(2) end
    local gf, isa = M.measure(n)
    print(string.format("%d threads: %.1f GFLOP/s (%s)", n, gf, isa))
  end
end

return M
