-- GEMM throughput on the Vulkan device (called by tools/bench_gemm.lua --device vulkan).
-- Times batches of GEMMs recorded into one submission, waiting once.
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local run_directly = arg and arg[0] and arg[0]:find("bench_gemm_vulkan%.lua$")
if run_directly then
  require("bert.cli").help(arg, [[
usage: lua5.4 tools/bench_gemm.lua --device vulkan [--repeat N] [--big]
   or: lua5.4 tools/bench_gemm_vulkan.lua [REPEAT]
GEMM throughput on the Vulkan device (batches of GEMMs in one submission).]])
end
local bert = require("bert")
local function bench(reps, extra_shapes)
  local info = bert.backend_info().vulkan
  if not info.available then print("vulkan: not available: " .. tostring(info.reason)); return end
  print(string.format("vulkan device: %s (%s), maxStorageBufferRange %d, shared %d, subgroup %d",
    info.device, info.type, info.max_storage_buffer_range, info.max_shared_memory, info.subgroup_size))
  local shapes = {
    {1024, 768, 768, "NT", "attention projection"},
    {1024, 3072, 768, "NT", "FFN up"},
    {1024, 768, 3072, "NT", "FFN down"},
    {128, 128, 64, "NT", "per-head Q@K^T"},
  }
  for _, s in ipairs(extra_shapes or {}) do shapes[#shapes + 1] = s end
  print(string.format("%-9s %-22s %-16s %10s %10s", "device", "role", "M x N x K", "ms", "GFLOP/s"))
  for _, s in ipairs(shapes) do
    local M, N, K, layout, role = s[1], s[2], s[3], s[4], s[5]
    local a = bert.randn({M, K}, {seed = 1}):to("vulkan")
    local b = layout == "NT" and bert.randn({N, K}, {seed = 2}):to("vulkan"):t()
                              or bert.randn({K, N}, {seed = 2}):to("vulkan")
    local flop = 2 * M * N * K
    local r = math.max(reps, math.min(200, math.floor((info.type == "cpu" and 2e10 or 2e12) / flop)))
    a:matmul(b):free()
    bert.vulkan.sync()
    local best = math.huge
    for _ = 1, 3 do
      local t0 = bert.wall_time()
      for _ = 1, r do a:matmul(b):free() end
      bert.vulkan.sync()
      best = math.min(best, (bert.wall_time() - t0) / r)
    end
    print(string.format("%-9s %-22s %-16s %10.3f %10.1f", "vulkan", role,
      string.format("%dx%dx%d", M, N, K), best * 1e3, flop / best / 1e9))
  end
end

if run_directly then return bench(tonumber(arg[1]) or 10) end
return bench
