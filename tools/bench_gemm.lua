-- GEMM throughput for the BERT-base shapes (1024 tokens), per provider.
--   lua5.4 tools/bench_gemm.lua [--repeat N] [--threads N] [--rounds N] [--device cpu|vulkan] [--big]
-- --rounds N runs every provider N times, alternating (the machine drifts:
-- compare providers within a round).
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cli = require("bert.cli")
local p = cli.parser("bench_gemm.lua", "GEMM throughput (GFLOP/s) for the BERT-base shapes, per provider, and as " ..
  "a fraction of the machine's fp32 FMA peak for the same thread count (tools/bench_peak.lua; " ..
  "BERT_PEAK_GFLOPS=<n> gives the peak instead of measuring it).")
p:option("--repeat", "GEMMs per timing (at least; small shapes run more)", "10")
  :convert(cli.integer("--repeat", 1, 100000))
cli.add(p, "threads")
p:option("--rounds", "Run every provider N times, alternating (the machine drifts: compare providers within a round)",
  "1"):convert(cli.integer("--rounds", 1, 100000))
p:option("--device", "Where the GEMMs run (vulkan: tools/bench_gemm_vulkan.lua)", "cpu"):choices({"cpu", "vulkan"})
p:flag("--big", "With --device vulkan: add a 4096^3 GEMM")
local o = p:parse()
local bert = require("bert")

local reps, threads, device, big, rounds = o["repeat"], o.threads, o.device, o.big, o.rounds
if threads then bert.set_num_threads(threads) end
if device == "vulkan" then   -- tools/bench_gemm_vulkan.lua; --big adds 4096^3
  dofile("tools/bench_gemm_vulkan.lua")(reps, big and {{4096, 4096, 4096, "NN", "square 4096"}} or nil)
  os.exit(0)
end

-- {M, N, K, layout, role}: C[M,N] = A[M,K] @ op(B); "NT" multiplies by a
-- [N,K] weight transposed as a view, as a Linear layer does.
-- "NN" and "TN" are a Linear's backward: dX = dY @ W, and dW = dY^T @ X with
-- dY^T a transposed view (the step accumulates dW with beta = 1; a matmul
-- writes a fresh C).
local shapes = {
  {1024, 768, 768, "NT", "attention projection"},
  {1024, 3072, 768, "NT", "FFN up"},
  {1024, 768, 3072, "NT", "FFN down"},
  {1024, 768, 3072, "NN", "FFN up dX"},
  {1024, 3072, 768, "NN", "FFN down dX"},
  {768, 768, 1024, "TN", "projection dW"},
  {3072, 768, 1024, "TN", "FFN up dW"},
  {768, 3072, 1024, "TN", "FFN down dW"},
  {1024, 2304, 768, "NT", "fused q/k/v"},
  {1024, 768, 2304, "NN", "fused q/k/v dX"},
  {2304, 768, 1024, "TN", "fused q/k/v dW"},
  {160, 30522, 768, "NT", "MLM decoder (masked)"},
  {30522, 768, 160, "TN", "MLM decoder dW"},
  {128, 128, 64, "NT", "per-head Q@K^T"},
  {128, 64, 128, "NN", "per-head P@V"},
}

local function now() return os.clock() end
local clock = now
-- os.clock is CPU time summed over threads; wall time needs the C side.
if bert.wall_time then clock = bert.wall_time end

local info = bert.backend_info()
local peak_gf, peak_isa, peak_src = dofile("tools/peak.lua").measure(info.threads)
print(string.format("threads %d, cpus %d, OpenBLAS core %s, FMA peak %.1f GFLOP/s (%s, %s)",
  info.threads, info.cpus, info.openblas_core, peak_gf, peak_isa, peak_src))
print(string.format("%-9s %-22s %-16s %10s %10s %8s", "provider", "role", "M x N x K", "ms", "GFLOP/s", "of peak"))
for round = 1, rounds do
  if rounds > 1 then print("round " .. round) end
  for _, provider in ipairs(bert.gemm_providers()) do
    bert.set_gemm(provider)
    for _, s in ipairs(shapes) do
      local M, N, K, layout, role = s[1], s[2], s[3], s[4], s[5]
      local a = layout == "TN" and bert.randn({K, M}, {seed = 1}):t() or bert.randn({M, K}, {seed = 1})
      local b = layout == "NT" and bert.randn({N, K}, {seed = 2}):t() or bert.randn({K, N}, {seed = 2})
      local r = reps * math.max(1, math.floor(1e9 / (2 * M * N * K) / reps))
      a:matmul(b) -- warm up
      local best = math.huge
      for _ = 1, 3 do
        local t0 = clock()
        for _ = 1, r do a:matmul(b):free() end
        best = math.min(best, (clock() - t0) / r)
      end
      local gf = 2 * M * N * K / best / 1e9
      print(string.format("%-9s %-22s %-16s %10.3f %10.1f %7.0f%%", provider, role,
        string.format("%dx%dx%d", M, N, K), best * 1e3, gf, 100 * gf / peak_gf))
    end
  end
end
