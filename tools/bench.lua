-- One training or inference step of any family, timed: prints one JSON line.
--   lua5.4 tools/bench.lua [--model base | FAMILY-SIZE (roberta-base, albert-base, deberta-base...)] [--batch 8] [--seq 128] [--mode train|infer]
--                          [--steps 3] [--threads N] [--gemm openblas|onednn] [--device cpu|vulkan] [--recompute 1]
-- train: the family's pretraining class (BertForPreTraining: MLM + NSP;
-- ALBERT: MLM + SOP; the others their masked LM) with 15% of positions
-- masked (MLM head on the masked positions only), backward, global-norm clipping at 1.0,
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

-- --model FAMILY-SIZE (albert-base) or a bare size (BERT's): the family's
-- pretraining class where it has one (MLM + NSP/SOP), else its masked LM
bert.manual_seed(0)
local resolved, rerr = bert.models.resolve(opts.model)
if not resolved or not resolved.size then
  io.stderr:write("bench: --model: " .. tostring(rerr or "expected FAMILY-SIZE") .. "\n")
  os.exit(2)
end
local family = bert.models.family(resolved.family)
-- the family's pretraining class, else its MLM, else its language model (ELMo: both directions
-- predict every token)
local causal = false
local ok_arch, arch = pcall(bert.models.architecture_for, family, "pretraining")
if not ok_arch then ok_arch, arch = pcall(bert.models.architecture_for, family, "masked_lm") end
if not ok_arch then arch, causal = bert.models.architecture_for(family, "causal_lm"), true end
local model = bert.model(arch, resolved.size)
local c = model.arch or model.config   -- the config in BERT's key names
local B, T, V = opts.batch, opts.seq, c.vocab_size
local pair_head = model.config.model_type == "bert" or model.config.model_type == "albert"
local ids = bert.randint(0, V, {B, T}, {seed = 1})
local tt = bert.zeros({B, T}, "int32")
local mask = bert.ones({B, T}, "int32")
local sel = bert.rand({B, T}, {seed = 2}):lt(causal and 2 or 0.15)   -- a language model: every token
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
-- prepared once, so a data phase does not occur in this benchmark (the
-- Trainer's profile has one: BERT_PROFILE=1 experiments/pretrain.lua).
-- BERT_PROFILE=1 also prints each phase's time per op (and the backward's
-- per kind of node) on stderr: see bert.profile.
local phase = {forward = 0, backward = 0, optimizer = 0}
local function timed(name, f)
  local t0 = bert.wall_time()
  local r = bert.profile.phase(name, function() local out = f(); sync(); return out end)
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
                           labels = labels, next_sentence_label = pair_head and nsp or nil}
    end)
    timed("optimizer", function() opt:zero_grad() end)
    timed("backward", function() out.loss:backward() end)
    timed("optimizer", function()   -- clipping at norm 1, inside the update (as the Trainer does)
      opt:step{grad_scale = bert.optim.clip_scale(bert.optim.grad_norm(opt), 1.0)}
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

-- Forward FLOPs (bert.models.flops): the MLM head on the masked rows in
-- training, on every row in inference.
local tokens = B * T
local fwd = require("bert.models.flops").forward(model, B, T,
  {mlm_rows = opts.mode == "train" and masked or tokens, pair_head = pair_head})
local flops = opts.mode == "train" and 3 * fwd or fwd

step()   -- warm up (allocations, page faults)
collectgarbage()
phase = {forward = 0, backward = 0, optimizer = 0}
bert.profile.report()   -- BERT_PROFILE: drop the warm-up step's figures
local t0 = bert.wall_time()
for _ = 1, opts.steps do step() end
local dt = (bert.wall_time() - t0) / opts.steps
-- the fraction of the machine's fp32 FMA peak (CPU only; BERT_PEAK_GFLOPS overrides)
local peak_gf
if opts.device ~= "vulkan" then peak_gf = dofile("tools/peak.lua").measure(bert.get_num_threads()) end
print(cjson.encode({
  impl = "bert-lua", model = opts.model, architecture = arch, mode = opts.mode, batch = B, seq = T,
  threads = bert.get_num_threads(), gemm = bert.backend_info().gemm, device = opts.device,
  sec_per_step = dt, tokens_per_s = tokens / dt, gflops = flops / dt / 1e9,
  peak_rss_mb = peak_rss_mb(), recompute = model.recompute or false,
  phase_fraction = {forward = phase.forward / opts.steps / dt, backward = phase.backward / opts.steps / dt,
                    optimizer = phase.optimizer / opts.steps / dt,
                    other = 1 - (phase.forward + phase.backward + phase.optimizer) / opts.steps / dt},
  peak_gflops = peak_gf, peak_fraction = peak_gf and flops / dt / 1e9 / peak_gf or nil,
}))
if bert.profile.enabled then io.stderr:write(bert.profile.format(bert.profile.report(), opts.steps)) end
