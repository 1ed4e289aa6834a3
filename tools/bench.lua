-- One BERT training or inference step, timed: prints one JSON line.
--   lua5.4 tools/bench.lua [--model base] [--batch 8] [--seq 128] [--mode train|infer]
--                          [--steps 3] [--threads N] [--gemm openblas|onednn] [--device cpu|vulkan] [--recompute 1]
-- train: BertForPreTraining forward with 15% of positions masked (MLM head on
-- the masked positions only) + NSP, backward, global-norm clipping at 1.0,
-- AdamW — the same work as `torch_bert.py --mode train --gather`.
-- infer: a forward with prediction_logits for every position (`--mode infer`).
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
require("bert.cli").help(arg, [[
usage: lua5.4 tools/bench.lua [--model NAME] [--batch N] [--seq N] [--mode train|infer] [--steps N]
                           [--threads N] [--gemm openblas|onednn] [--device cpu|vulkan]
Times BERT training or inference steps; prints one JSON line (seconds per step, tokens/s, GFLOP/s and its fraction of the FMA peak, peak RSS).]])
local bert = require("bert")
local cjson = require("cjson")

local opts = {model = "base", batch = 8, seq = 128, mode = "train", steps = 3, device = "cpu"}
local i = 1
while i <= #arg do
  local key = arg[i]:match("^%-%-(.+)$")
  if not key or arg[i + 1] == nil then
    io.stderr:write("usage: lua5.4 tools/bench.lua [--model NAME] [--batch N] [--seq N] [--mode train|infer] [--steps N] [--threads N] [--gemm P]\n")
    os.exit(2)
  end
  opts[key] = tonumber(arg[i + 1]) or arg[i + 1]
  i = i + 2
end
if opts.threads then bert.set_num_threads(opts.threads) end
if opts.gemm then bert.set_gemm(opts.gemm) end

local function peak_rss_mb()
  local f = io.open("/proc/self/status")
  if not f then return nil end
  local kb = f:read("a"):match("VmHWM:%s*(%d+)")
  f:close()
  return kb and tonumber(kb) / 1024
end

bert.manual_seed(0)
local model = bert.model("BertForPreTraining", opts.model)
local c = model.config
local B, T, V, H, L, I = opts.batch, opts.seq, c.vocab_size, c.hidden_size, c.num_hidden_layers, c.intermediate_size
local ids = bert.randint(0, V, {B, T}, {seed = 1})
local tt = bert.zeros({B, T}, "int32")
local mask = bert.ones({B, T}, "int32")
local sel = bert.rand({B, T}, {seed = 2}):lt(0.15)
local labels = bert.where(sel, ids, -100):int()
local nsp = bert.randint(0, 2, {B}, {seed = 3})
local masked = sel:sum():item()
local vulkan = opts.device == "vulkan"
if vulkan then
  local info = bert.backend_info().vulkan
  if not info.available then print('{"error": "vulkan not available: ' .. tostring(info.reason) .. '"}'); os.exit(1) end
  model:to("vulkan")   -- flat parameters and gradients on the device
  ids, tt, mask = ids:to("vulkan"), tt:to("vulkan"), mask:to("vulkan")   -- labels stay: the MLM gather indexes on the host
end
-- the device runs asynchronously: wait for it before reading the clock
local function sync() if vulkan then bert.vulkan.sync() end end

-- wall time per phase of the step (forward, backward, optimizer incl. zero_grad
-- and clipping), summed over the timed steps; the data here is synthetic and
-- prepared once, so a data phase does not occur in this benchmark
local phase = {forward = 0, backward = 0, optimizer = 0}
local function timed(name, f)
  local t0 = bert.wall_time()
  local r = f()
  sync()
  phase[name] = phase[name] + bert.wall_time() - t0
  return r
end

-- --recompute 1: every encoder layer recomputes its activations in backward
if opts.recompute == 1 then model:set_recompute(true) end

local step
if opts.mode == "train" then
  model:training()
  local opt = bert.optim.AdamW(model:named_parameters(), {lr = 1e-4, weight_decay = 0.01})
  step = function()
    local out = timed("forward", function()
      return model:forward{input_ids = ids, token_type_ids = tt, attention_mask = mask,
                           labels = labels, next_sentence_label = nsp}
    end)
    timed("optimizer", function() opt:zero_grad() end)
    timed("backward", function() out.loss:backward() end)
    timed("optimizer", function()
      bert.optim.clip_grad_norm(model:parameters(), 1.0)
      opt:step()
    end)
  end
else
  model:evaluate()
  step = function()
    timed("forward", function()
      return bert.no_grad(function()
        return model:forward{input_ids = ids, token_type_ids = tt, attention_mask = mask}
      end)
    end)
  end
end

-- Forward FLOPs: the encoder's GEMMs, attention's two products, the
-- pooler/NSP, and the MLM head (masked rows in training, all in inference).
local tokens = B * T
local enc = L * (2 * tokens * (4 * H * H + 2 * H * I) + 2 * 2 * B * T * T * H)
local mlm_rows = opts.mode == "train" and masked or tokens
local head = 2 * mlm_rows * (H * H + H * V)
local fwd = enc + head + 2 * B * H * H
local flops = opts.mode == "train" and 3 * fwd or fwd

step()   -- warm up (allocations, page faults)
collectgarbage()
phase = {forward = 0, backward = 0, optimizer = 0}
local t0 = bert.wall_time()
for _ = 1, opts.steps do step() end
local dt = (bert.wall_time() - t0) / opts.steps
-- the fraction of the machine's fp32 FMA peak (CPU only; BERT_PEAK_GFLOPS overrides)
local peak_gf
if opts.device ~= "vulkan" then peak_gf = dofile("tools/peak.lua").measure(bert.get_num_threads()) end
print(cjson.encode({
  impl = "bert-lua", model = opts.model, mode = opts.mode, batch = B, seq = T,
  threads = bert.get_num_threads(), gemm = bert.backend_info().gemm, device = opts.device,
  sec_per_step = dt, tokens_per_s = tokens / dt, gflops = flops / dt / 1e9,
  peak_rss_mb = peak_rss_mb(), recompute = model.recompute or false,
  phase_fraction = {forward = phase.forward / opts.steps / dt, backward = phase.backward / opts.steps / dt,
                    optimizer = phase.optimizer / opts.steps / dt,
                    other = 1 - (phase.forward + phase.backward + phase.optimizer) / opts.steps / dt},
  peak_gflops = peak_gf, peak_fraction = peak_gf and flops / dt / 1e9 / peak_gf or nil,
}))
