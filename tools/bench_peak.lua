-- The machine's fp32 FMA peak for the thread count in use (and for 1 thread):
-- the denominator of the "fraction of peak" that bench.lua and bench_gemm.lua print.
--   lua5.4 tools/bench_peak.lua [--threads N] [--trials N]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
require("bert.cli").help(arg, [[
usage: lua5.4 tools/bench_peak.lua [--threads N] [--trials N]
fp32 FMA peak (GFLOP/s) of this machine: 12 independent FMA chains per thread in
registers, the widest vector ISA the compiler targets, best of N trials (default 5).
Threads default to bert's thread count. Prints one JSON line.
On a shared machine the figure is low (other processes take cycles): measure
on a quiet machine and pass it to the benchmarks as BERT_PEAK_GFLOPS.]])
local bert = require("bert")
local cjson = require("cjson")
local peak = dofile("tools/peak.lua")

local threads, trials = bert.get_num_threads(), 5
local i = 1
while i <= #arg do
  local v = math.tointeger(tonumber(arg[i + 1]))
  if arg[i] == "--threads" and v and v >= 1 then threads = v
  elseif arg[i] == "--trials" and v and v >= 1 then trials = v
  else
    io.stderr:write("bench_peak: bad argument '" .. tostring(arg[i]) .. " " .. tostring(arg[i + 1]) ..
                    "' (usage: --threads N, --trials N; N >= 1)\n")
    os.exit(2)
  end
  i = i + 2
end
local gf, isa, source = peak.measure(threads, trials)
local gf1 = threads == 1 and gf or peak.measure(1, trials)
print(cjson.encode({threads = threads, peak_gflops = gf, peak_gflops_1thread = gf1, isa = isa,
                    source = source, cpus = bert.backend_info().cpus}))
