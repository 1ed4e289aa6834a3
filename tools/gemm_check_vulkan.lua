-- Device correctness checks without busted (for GPU machines): the Vulkan
-- GEMM against the CPU for odd sizes and all transpose cases (small sizes
-- take the 64x64 tiles, 1100x1300 the 128x128 ones on a GPU), the fused
-- bias + GELU epilogue, a batched matmul, and a BERT-tiny training step
-- (loss and every gradient) against the CPU.  Prints one JSON line per check.
--   BERT_BUILD=build lua5.4 tools/gemm_check_vulkan.lua
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
require("bert.cli").help(arg, [[
usage: lua5.4 tools/gemm_check_vulkan.lua
Vulkan GEMM correctness against the CPU: odd sizes, every transpose, both tile sizes, a BERT-tiny step.]])
local bert = require("bert")
local F = bert.F
local info = bert.backend_info().vulkan
if not info.available then print('{"error": "vulkan not available"}'); os.exit(1) end
local function rel(got, want)
  got = got:to("cpu")
  return (got - want):abs():max():item() / (want:abs():max():item() + 1e-6)
end
local failed = false
local function report(name, err, tol)
  local ok = err <= tol
  failed = failed or not ok
  print(string.format('{"check": "%s", "max_rel_err": %.3g, "ok": %s}', name, err, tostring(ok)))
end

local worst = 0
for _, s in ipairs({{1, 1, 1}, {7, 5, 3}, {65, 33, 129}, {130, 67, 70}, {257, 45, 131}, {1100, 77, 1300}}) do
  local M, K, N = s[1], s[2], s[3]
  local a, b = bert.randn({M, K}, {seed = M}), bert.randn({K, N}, {seed = N})
  local want = a:matmul(b)
  local at, bt = a:t():contiguous(), b:t():contiguous()
  for _, c in ipairs({{a, b, false, false}, {at, b, true, false}, {a, bt, false, true}, {at, bt, true, true}}) do
    local A = c[3] and c[1]:to("vulkan"):t() or c[1]:to("vulkan")
    local B = c[4] and c[2]:to("vulkan"):t() or c[2]:to("vulkan")
    worst = math.max(worst, rel(A:matmul(B), want))
  end
end
report("gemm odd sizes x 4 transposes", worst, 1e-4)

local x, w, bias = bert.randn({300, 200}, {seed = 5}), bert.randn({190, 200}, {seed = 6}), bert.randn({190}, {seed = 7})
local e1 = rel(bert.vulkan.gemm(x:to("vulkan"), w:to("vulkan"), {tb = true, bias = bias:to("vulkan")}), F.linear(x, w, bias))
local e2 = rel(bert.vulkan.gemm(x:to("vulkan"), w:to("vulkan"), {tb = true, bias = bias:to("vulkan"), gelu = true}),
               F.linear(x, w, bias):gelu())
report("gemm fused bias and gelu", math.max(e1, e2), 1e-4)
local ba, bb = bert.randn({4, 3, 37, 29}, {seed = 8}), bert.randn({3, 29, 41}, {seed = 9})
report("batched matmul", rel(ba:to("vulkan"):matmul(bb:to("vulkan")), ba:matmul(bb)), 1e-4)

-- a BERT-tiny training step, cpu vs vulkan
local B, T = 2, 16
local ids = bert.randint(0, 100, {B, T}, {seed = 1})
local mask = bert.ones({B, T}, "int32")
for j = 12, 16 do mask:set(0, 2, j) end
local labels = bert.full({B, T}, -100):int()
for _, p in ipairs({{1, 3}, {1, 5}, {2, 2}, {2, 7}, {1, 10}}) do labels:set(ids:get(p[1], p[2]), p[1], p[2]) end
local batch = {input_ids = ids, attention_mask = mask, labels = labels, token_type_ids = bert.zeros({B, T}, "int32"),
               next_sentence_label = bert.tensor({0, 1}, "int32")}
local models, losses = {}, {}
for _, device in ipairs({"cpu", "vulkan"}) do
  bert.manual_seed(0)
  local m = bert.model("BertForPreTraining", "tiny")
  m:training()
  if device == "vulkan" then m:to("vulkan") end
  bert.set_rng_state(7, 0)
  local out = m:forward(batch)
  out.loss:backward()
  models[device], losses[device] = m, out.loss:item()
end
local gerr = 0
local pc, pd = models.cpu:named_parameters(), models.vulkan:named_parameters()
for i, e in ipairs(pc) do
  local gc, gd = e.param:grad(), pd[i].param:grad():to("cpu")
  gerr = math.max(gerr, (gd - gc):abs():max():item() / (gc:abs():max():item() + 1e-3))
end
report("bert-tiny train step loss", math.abs(losses.cpu - losses.vulkan) / losses.cpu, 1e-4)
report("bert-tiny train step gradients", gerr, 1e-3)
os.exit(failed and 1 or 0)
