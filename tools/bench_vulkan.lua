-- BERT forward (inference) on the Vulkan device, timed: prints one JSON line.
--   lua5.4 tools/bench_vulkan.lua [--model base] [--batch 8] [--seq 128] [--steps 3]
-- A training step on Vulkan: tools/bench.lua --device vulkan --mode train.
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cli = require("bert.cli")
local p = cli.parser("bench_vulkan.lua", "BERT inference on the Vulkan device, timed; prints one JSON line.")
p:option("--model", "The model size (BertModel)", "base")
p:option("--batch", "Sequences per step", "8"):convert(cli.integer("--batch", 1, 65536))
p:option("--seq", "Tokens per sequence", "128"):convert(cli.integer("--seq", 1, 65536))
p:option("--steps", "Timed steps (after one untimed; the best is kept)", "3"):convert(cli.integer("--steps", 1, 100000))
local opts = p:parse()
local bert = require("bert")
local device = require("bert.nn.device")

local info = bert.backend_info().vulkan
if not info.available then print('{"error": "vulkan not available"}'); os.exit(0) end
bert.manual_seed(0)
local model = bert.model("BertModel", opts.model)
model:evaluate()
device.to(model, "vulkan")
local B, T = opts.batch, opts.seq
local ids = bert.randint(0, model.config.vocab_size, {B, T}, {seed = 1}):to("vulkan")
local mask = bert.ones({B, T}, "int32"):to("vulkan")
local function step()
  return bert.no_grad(function() return model:forward{input_ids = ids, attention_mask = mask}.last_hidden_state end)
end
step()
bert.vulkan.sync()
local best = math.huge
for _ = 1, opts.steps do
  local t0 = bert.wall_time()
  local out = step()
  local _ = out:sum():item()   -- waits for the device
  best = math.min(best, bert.wall_time() - t0)
end
print(string.format('{"device": "%s", "model": "%s", "mode": "infer", "batch": %d, "seq": %d, "step_s": %.4f, "tokens_per_s": %.1f, "dispatches": %d}',
  info.device, opts.model, B, T, best, B * T / best, bert.vulkan.dispatches()))
