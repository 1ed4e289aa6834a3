-- `make demo`: a short tour of what bert can do today.  The pretraining
-- work replaces this with the real main job (pretrain, then fine-tune).
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
require("bert.cli").help(arg, [[
usage: lua5.4 tools/demo.lua   (make tour)
A short tour of the tensor library: views, broadcasting, attention, safetensors.]])
local bert = require("bert")

local info = bert.backend_info()
print(string.format("bert %s: GEMM provider %s (available: %s), %d threads, OpenBLAS core %s",
  bert.version, info.gemm, table.concat(info.gemm_providers, ", "), info.threads, info.openblas_core))

-- Tensors, views and broadcasting.
local x = bert.arange(12):float():view(3, 4)
print("\nx = arange(12):view(3, 4)")
print(x)
print("\nrows standardised with broadcasting: (x - x:mean(2, true)) / x:var(2, true):sqrt()")
print((x - x:mean(2, true)) / x:var(2, true):sqrt())

-- Scaled dot-product attention for one head, written with tensor ops.
local T, d = 4, 8
local q, k, v = bert.randn({T, d}, {seed = 1}), bert.randn({T, d}, {seed = 2}), bert.randn({T, d}, {seed = 3})
local mask = bert.tensor({0, 0, 0, 1}, "int32")          -- last key is padding
local scores = q:matmul(k:t()):div(math.sqrt(d)):masked_fill(mask, -1e9)
local probs = scores:softmax(-1)
print("\nattention probabilities (last key masked out):")
print(probs)
print("rows sum to", probs:sum(2):totable()[1], "output shape", table.concat(probs:matmul(v):shape(), " x "))

-- safetensors round trip, when the I/O module is present.
if bert.save_safetensors then
  local path = os.tmpname()
  assert(bert.save_safetensors(path, {x = x, probs = probs}))
  local back = assert(bert.load_safetensors(path))
  print(string.format("\nsafetensors round trip: max |x - loaded x| = %g", (back.x - x):abs():max():item()))
  os.remove(path)
end

-- One GEMM benchmark line per provider: the attention projection of BERT-base.
print("\nGEMM 1024 x 768 x 768 (BERT-base projection, 1024 tokens):")
local a, w = bert.randn({1024, 768}, {seed = 1}), bert.randn({768, 768}, {seed = 2})
for _, p in ipairs(bert.gemm_providers()) do
  bert.set_gemm(p)
  a:matmul(w:t())
  local reps, t0 = 20, bert.wall_time()
  for _ = 1, reps do a:matmul(w:t()):free() end
  local dt = (bert.wall_time() - t0) / reps
  print(string.format("  %-8s %7.2f ms  %6.1f GFLOP/s", p, dt * 1e3, 2 * 1024 * 768 * 768 / dt / 1e9))
end
