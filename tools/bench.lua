-- One training or inference step of any family, timed: prints one JSON line.
--   lua5.4 tools/bench.lua [--model base | FAMILY-SIZE (roberta-base, albert-base, deberta-base...)] [--batch 8] [--seq 128] [--mode train|infer]
--                          [--steps 3] [--threads N] [--gemm openblas|onednn] [--device cpu|vulkan] [--recompute 1]
--                          [--int8] [--share 0] [--vocab-size N] [--warmup-steps 1]
-- train: the family's pretraining class (BertForPreTraining: MLM + NSP;
-- ALBERT: MLM + SOP; the others their masked LM) with 15% of positions
-- masked (MLM head on the masked positions only), backward, global-norm clipping at 1.0,
-- AdamW — the same work as `torch_bert.py --mode train --gather`.
-- infer: a forward with prediction_logits for every position (`--mode infer`);
-- --int8: every linear layer int8 (model:quantize("int8"), inference only).
-- The share of the step outside the GEMMs (linear and matmul, forward and
-- backward) comes from the per-op profile (bert.profile, installed before
-- bert loads); it is printed on stderr against the target of issue 33 (at
-- most 15% for base and large, 25% for mini and small) and in the JSON line.
-- --share 0 times without the profile's wrappers (and prints no share).
-- --vocab-size N: the model with an N-token vocabulary, so that two families
-- compare at one vocabulary (DeBERTa-v3 has 128,100 tokens
-- against BERT's 30,522; in inference the decoder is half DeBERTa's FLOPs).
-- --warmup-steps N: untimed steps first.  One is enough for BERT's shapes;
-- DeBERTa-mini's 128k-token logits took until the fourth step to stop
-- taking fresh (huge-page faulting) memory at one thread on 2026-12-06.
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cli = require("bert.cli")   -- argparse only: the profile below must wrap bert before it loads
local p = cli.parser("bench.lua", "Times BERT training or inference steps; prints one JSON line (seconds per " ..
  "step, tokens/s, GFLOP/s and its fraction of the FMA peak, peak RSS, the share of the step outside GEMMs) and " ..
  "that share against its target on stderr.")
p:option("--model", "base, large, ... or FAMILY-SIZE (roberta-base, albert-base, deberta-mini, ...)", "base")
p:option("--batch", "Sequences per step", "8"):convert(cli.integer("--batch", 1, 65536))
p:option("--seq", "Tokens per sequence", "128"):convert(cli.integer("--seq", 1, 65536))
p:option("--mode", "train (forward, backward, AdamW) or infer (a forward)", "train"):choices({"train", "infer"})
p:option("--steps", "Timed steps", "3"):convert(cli.integer("--steps", 1, 100000))
p:option("--warmup-steps", "Untimed steps first (allocations, page faults; a large vocabulary's logits may " ..
  "take a few steps to find their blocks in the allocator's cache)", "1"):convert(cli.integer("--warmup-steps", 1, 1000))
p:option("--gemm", "The CPU GEMM provider"):choices({"openblas", "onednn"})
p:option("--device", "Where the model runs", "cpu"):choices({"cpu", "vulkan"})
p:option("--recompute", "1: every encoder layer recomputes its activations in backward", "0"):choices({"0", "1"})
p:flag("--int8", "Every linear layer int8 (inference on the CPU only)")
p:option("--share", "0: time without the per-op profile's wrappers (and print no share)", "1"):choices({"0", "1"})
p:option("--vocab-size", "The family's model with an N-token vocabulary (to compare families at one vocabulary)")
  :convert(cli.integer("--vocab-size", 2))
cli.add(p, "threads")
local opts = p:parse()
opts.int8 = opts.int8 and 1 or 0
opts.share, opts.recompute = tonumber(opts.share), tonumber(opts.recompute)
local cjson = require("cjson")

if opts.int8 == 1 and (opts.mode ~= "infer" or opts.device ~= "cpu") then
  io.stderr:write("bench: --int8 runs inference on the CPU (--mode infer, --device cpu)\n")
  os.exit(2)
end
-- the profile's wrappers go in before any module keeps a C function
if opts.share ~= 0 then
  local profile = require("bert.profile")
  local core = require("bert.core")
  profile.install(core)
  profile.enabled = true
  core.set_backward_profiling(true)   -- the backward's nodes too, as BERT_PROFILE would
end
local bert = require("bert")
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
local vocab_size = opts.vocab_size
local model = bert.model(arch, resolved.size, vocab_size and {vocab_size = vocab_size} or nil)
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
  if opts.int8 == 1 then model:quantize("int8") end   -- each weight quantised in the warm-up step
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

for _ = 1, opts.warmup_steps do step() end   -- warm up (allocations, page faults)
collectgarbage()
phase = {forward = 0, backward = 0, optimizer = 0}
bert.profile.report()   -- BERT_PROFILE: drop the warm-up step's figures
local t0 = bert.wall_time()
for _ = 1, opts.steps do step() end
local dt = (bert.wall_time() - t0) / opts.steps
local report = bert.profile.enabled and bert.profile.report()

-- The GEMMs' share of the timed steps: the forward's linear and matmul ops
-- and the backward's nodes of those kinds (the linear node's bias sum
-- included); attention's own share beside it (its per-head tiles are GEMMs
-- of their own, but short ones: the issue counts them outside).
local GEMM_OPS = {["F.linear"] = true, ["F.linear_int8"] = true, [":matmul"] = true, matmul = true}
local GEMM_NODES = {linear = true, matmul = true}
local ATTENTION = {["F.attention"] = true, ["F.attention_qkv"] = true, ["F.attention_rel"] = true,
                   attention = true, attention_qkv = true, attention_rel = true}
local share
if report then
  local gemm, attention = 0, 0
  local function count(list, gemm_names)
    for _, e in ipairs(list) do
      if gemm_names[e.name] then gemm = gemm + e.seconds end
      if ATTENTION[e.name] then attention = attention + e.seconds end
    end
  end
  for _, p in ipairs(report.phases) do
    if p.name ~= "backward" then count(p.ops, GEMM_OPS) end
  end
  count(report.backward_nodes, GEMM_NODES)
  local total = dt * opts.steps
  local targets = {base = 0.15, large = 0.15, mini = 0.25, small = 0.25}
  share = {outside = 1 - gemm / total, attention = attention / total, target = targets[resolved.size]}
end
-- the fraction of the machine's fp32 FMA peak (CPU only; BERT_PEAK_GFLOPS overrides)
local peak_gf
if opts.device ~= "vulkan" then peak_gf = dofile("tools/peak.lua").measure(bert.get_num_threads()) end
print(cjson.encode({
  impl = "bert-lua", model = opts.model, architecture = arch, mode = opts.mode, batch = B, seq = T, vocab_size = V,
  warmup_steps = opts.warmup_steps,
  threads = bert.get_num_threads(), gemm = bert.backend_info().gemm, device = opts.device,
  sec_per_step = dt, tokens_per_s = tokens / dt, gflops = flops / dt / 1e9,
  peak_rss_mb = peak_rss_mb(), recompute = model.recompute or false,
  phase_fraction = {forward = phase.forward / opts.steps / dt, backward = phase.backward / opts.steps / dt,
                    optimizer = phase.optimizer / opts.steps / dt,
                    other = 1 - (phase.forward + phase.backward + phase.optimizer) / opts.steps / dt},
  peak_gflops = peak_gf, peak_fraction = peak_gf and flops / dt / 1e9 / peak_gf or nil,
  int8 = opts.int8 == 1, outside_gemm_share = share and share.outside, attention_share = share and share.attention,
  outside_gemm_target = share and share.target,
}))
if share then
  io.stderr:write(string.format("outside GEMMs: %.1f%% of the step (%s); attention %.1f%%\n", 100 * share.outside,
    share.target and string.format("target <= %d%% for %s: %s", math.floor(100 * share.target + 0.5), resolved.size,
      share.outside <= share.target and "met" or "not met") or "no target for " .. resolved.size,
    100 * share.attention))
end
if os.getenv("BERT_PROFILE") then io.stderr:write(bert.profile.format(report, opts.steps)) end
