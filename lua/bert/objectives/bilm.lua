--- ELMo's objective (Peters et al., 2018) in this encoder: a left-to-right
-- and a right-to-left LM trained side by side, two causal stacks sharing
-- the embeddings and the softmax (the bilm family, lua/bert/models/bilm.lua);
-- loss = the mean of the two directions' next-token cross-entropies.  Data:
-- the packed full-sentence shards, read unmasked (as clm).
--
-- --model SIZE or bert-SIZE trains bilm-SIZE: two stacks of half BERT-SIZE's
-- depth each, so that the pair has the encoder parameters and compute per
-- token of the BERT it is compared with; a config.json (model_type bert or
-- bilm) gives each stack its sizes.  The saved checkpoint (BiLMLMHeadModel) fine-tunes with
-- the concatenation of the two top layers (width 2H) as the representation.
local bert = require("bert")
local clm = require("bert.objectives.clm")

local M = {}

M.metrics = {"bilm_accuracy", "bilm_perplexity", "bilm_forward_perplexity", "bilm_backward_perplexity"}

function M.data() return "none" end

--- The bilm size for --model: a bare size or bert-SIZE gives bilm-SIZE.
local function bilm_size(args, ctx)
  local resolved = args.model and bert.models.resolve(args.model)
  if resolved and resolved.size and (resolved.family == "bert" or resolved.family == "bilm") then
    return resolved.size
  end
  if ctx and (ctx.family == "bilm" or ctx.family == "bert") and type(ctx.size) == "string" then
    return ctx.size   -- a config.json: each stack as it says
  end
  return nil
end

M.masks = false   -- every real token is a target: no masking flag applies

function M.check(args)
  local causal = clm.causal_unsupported(args)
  if causal then return causal end
  local resolved = args.model and bert.models.resolve(args.model)
  if resolved and resolved.family and resolved.family ~= "bert" and resolved.family ~= "bilm" then
    return string.format("--model %s with --objective bilm: the two-stack model is built from BERT's sizes " ..
      "(give a size, bert-SIZE, bilm-SIZE or a bilm config.json)", args.model)
  end
  return nil
end

function M.build(ctx)
  local size = bilm_size(ctx.args, ctx)
  if not size then
    error(string.format("--objective bilm: --model %s is not a size or a bilm config.json", tostring(ctx.args.model)), 0)
  end
  local overrides = {model_type = "bilm", is_decoder = true}
  for k, v in pairs(ctx.config_overrides or {}) do overrides[k] = v end
  local ok, model = pcall(bert.model, "BiLMLMHeadModel", size, overrides)
  if not ok then error(tostring(model), 0) end
  local lm_forward = model.forward   -- unmask shard batches on the way in (see clm)
  model.forward = function(self, batch) return lm_forward(self, clm.lm_inputs(batch)) end
  return model, "BiLMLMHeadModel"
end

function M.step_metrics(_, out)
  local acc_f, n_f = bert.train.accuracy(out.logits, out.targets)
  local acc_b, n_b = bert.train.accuracy(out.backward_logits, out.backward_targets)
  return {bilm_accuracy = (acc_f * n_f + acc_b * n_b) / math.max(1, n_f + n_b)}
end

function M.eval_init() return {right_f = 0, right_b = 0, nll_f = 0, nll_b = 0, total_f = 0, total_b = 0} end

function M.eval_batch(_, model, batch, s)
  local out = model:forward(batch)
  local CE = bert.F.cross_entropy
  for _, d in ipairs({{"f", out.logits, out.targets}, {"b", out.backward_logits, out.backward_targets}}) do
    local k, logits, targets = d[1], d[2], d[3]
    if targets:numel() > 0 then
      s["right_" .. k] = s["right_" .. k] + logits:argmax(-1):eq(targets):sum():item()
      s["nll_" .. k] = s["nll_" .. k] + CE(logits, targets, {reduction = "sum"}):item()
      s["total_" .. k] = s["total_" .. k] + targets:numel()
    end
  end
end

--- Held-out next-token (forward) and previous-token (backward) accuracy
-- and perplexity, both directions pooled and each alone.
function M.eval_finish(_, s)
  local f, b = math.max(s.total_f, 1), math.max(s.total_b, 1)
  local all = math.max(s.total_f + s.total_b, 1)
  return {
    bilm_accuracy = (s.right_f + s.right_b) / all,
    bilm_perplexity = math.exp((s.nll_f + s.nll_b) / all),
    bilm_forward_accuracy = s.right_f / f,
    bilm_backward_accuracy = s.right_b / b,
    bilm_forward_perplexity = math.exp(s.nll_f / f),
    bilm_backward_perplexity = math.exp(s.nll_b / b),
    bilm_loss = (s.nll_f + s.nll_b) / all,
    predicted_tokens = math.tointeger(s.total_f + s.total_b) or (s.total_f + s.total_b),
  }
end

function M.describe(_, final)
  return string.format("held-out accuracy %.4f, perplexity %.1f (left-to-right %.1f, right-to-left %.1f)",
    final.bilm_accuracy, final.bilm_perplexity, final.bilm_forward_perplexity, final.bilm_backward_perplexity)
end

return M
