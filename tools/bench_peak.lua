-- The machine's fp32 FMA peak for the thread count in use (and for 1 thread):
-- the denominator of the "fraction of peak" that bench.lua and bench_gemm.lua print.
--   lua5.4 tools/bench_peak.lua [--threads N] [--trials N]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cli = require("bert.cli")
local p = cli.parser("bench_peak.lua", "fp32 FMA peak (GFLOP/s) of this machine: 12 independent FMA chains per " ..
  "thread in registers, the widest vector ISA the compiler targets, best of N trials (default 5). Prints one " ..
  "JSON line.", "On a shared machine the figure is low (other processes take cycles): measure on a quiet machine " ..
  "and pass it to the benchmarks as BERT_PEAK_GFLOPS.")
cli.add(p, "threads", {help = "Threads to measure (default: bert's thread count)"})
p:option("--trials", "Trials (the best is kept)", "5"):convert(cli.integer("--trials", 1, 100000))
local o = p:parse()
local bert = require("bert")
local cjson = require("cjson")
local peak = dofile("tools/peak.lua")

local threads, trials = o.threads or bert.get_num_threads(), o.trials
local gf, isa, source = peak.measure(threads, trials)
local gf1 = threads == 1 and gf or peak.measure(1, trials)
print(cjson.encode({threads = threads, peak_gflops = gf, peak_gflops_1thread = gf1, isa = isa,
                    source = source, cpus = bert.backend_info().cpus}))
