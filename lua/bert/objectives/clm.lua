--- Left-to-right language modelling (GPT, Radford et al. 2018) in this
-- encoder: the same layers with a causal mask (config is_decoder = true,
-- as Hugging Face's BertLMHeadModel: query i attends to keys j <= i inside
-- the fused attention kernel), trained to predict token t + 1 at every
-- non-pad position t through BERT's MLM head layers (cls.predictions.*, the
-- decoder tied to the word embeddings).  Data: the packed full-sentence
-- shards of --objective mlm, read unmasked.
--
-- The saved checkpoint is a BertLMHeadModel directory whose config says
-- is_decoder: true, so fine-tuning builds the same causal encoder; its
-- sequence-level heads read the last real token (blocks.last_token), the
-- only position that has seen the whole input.
local bert = require("bert")

local M = {}

M.metrics = {"clm_accuracy", "clm_perplexity"}

function M.data() return "none" end   -- full sentences packed to --seq-len

local function family_of(args)
  local resolved = args.model and bert.models.resolve(args.model)
  return resolved and resolved.family
end

--- nil, or why the fused attention cannot run causal on --device (asked
-- once of the op itself: Vulkan takes the flag only once its kernel does).
function M.causal_unsupported(args)
  if args.device ~= "vulkan" then return nil end
  local info = bert.backend_info().vulkan
  if not (info and info.available) then return nil end   -- pretrain says why there is no device
  local z = bert.zeros({1, 1, 2, 1}):to("vulkan")
  local ok, err = pcall(bert.F.attention, z, z, z, {causal = true})
  if ok then return nil end
  return string.format("--objective %s on --device vulkan: the causal attention kernel is not there yet (%s)",
    args.objective, tostring(err))
end

--- Only families with a left-to-right head (BERT, RoBERTa) can run it.
M.masks = false   -- every real token is a target: no masking flag applies

function M.check(args)
  local causal = M.causal_unsupported(args)
  if causal then return causal end
  local family = family_of(args)
  if family == "bilm" or family == "elmo" then
    return string.format("--model %s with --objective clm: %s is two LMs; use --objective %s", args.model,
      family == "elmo" and "an elmo model" or "a bilm model", family)
  end
  if family then
    local ok, why = pcall(bert.models.architecture_for, family, "causal_lm")
    if not ok then
      return string.format("--model %s with --objective clm: %s (families with one: bert, roberta)",
        args.model, tostring(why))
    end
  end
  return nil
end

--- The model's inputs for a shard batch: the shards hold masked inputs and
-- the original tokens at the masked positions (labels, -100 elsewhere), so
-- the originals are the labels where there are labels, else the inputs.
-- labels = the originals with -100 on padding (the model shifts them).
function M.lm_inputs(batch)
  if batch.labels == nil then return batch end   -- plain inputs: nothing to unmask
  local ids = bert.where(batch.labels:ne(-100), batch.labels, batch.input_ids)
  local inputs = {input_ids = ids, token_type_ids = batch.token_type_ids, attention_mask = batch.attention_mask}
  inputs.labels = batch.attention_mask and ids:masked_fill(batch.attention_mask:eq(0), -100) or ids
  return inputs
end

function M.build(ctx)
  local ok_arch, arch = pcall(bert.models.architecture_for, ctx.family, "causal_lm")
  if not ok_arch then error(tostring(arch) .. " (--objective clm: use a bert or roberta model)", 0) end
  local overrides = {is_decoder = true}
  for k, v in pairs(ctx.config_overrides or {}) do overrides[k] = v end
  local ok, model = pcall(bert.model, arch, ctx.size, overrides)
  if not ok then error(tostring(model), 0) end
  -- the Trainer hands it shard batches: unmask them on the way in (the
  -- class's own forward, and so save_pretrained's files, stay HF's)
  local lm_forward = model.forward
  model.forward = function(self, batch) return lm_forward(self, M.lm_inputs(batch)) end
  return model, arch
end

function M.step_metrics(_, out)
  return {clm_accuracy = bert.train.accuracy(out.logits, out.targets)}
end

function M.eval_init() return {right = 0, total = 0, nll = 0, unigram = 0} end

function M.eval_batch(ctx, model, batch, s)
  local out = model:forward(batch)
  local n = out.targets:numel()
  if n == 0 then return end
  s.right = s.right + out.logits:argmax(-1):eq(out.targets):sum():item()
  s.nll = s.nll + bert.F.cross_entropy(out.logits, out.targets, {reduction = "sum"}):item()
  s.unigram = s.unigram + out.targets:eq(ctx.unigram_id()):sum():item()
  s.total = s.total + n
end

--- Held-out next-token accuracy and perplexity over every predicted token.
function M.eval_finish(_, s)
  local total = math.max(s.total, 1)
  return {
    clm_accuracy = s.right / total,
    clm_perplexity = math.exp(s.nll / total),
    clm_loss = s.nll / total,
    unigram_baseline_accuracy = s.unigram / total,
    predicted_tokens = math.tointeger(s.total) or s.total,
  }
end

function M.describe(_, final)
  return string.format("held-out next-token accuracy %.4f (unigram baseline %.4f), perplexity %.1f",
    final.clm_accuracy, final.unigram_baseline_accuracy, final.clm_perplexity)
end

return M
