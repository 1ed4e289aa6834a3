--- The ONNX lowering of bert.models.heads: each head's outputs under the
-- names its forward gives them (logits, prediction_logits, start_logits...),
-- at every position (the forward's path without labels).
local heads = require("bert.models.heads")
local lower = require("bert.onnx.lower")

local M = {}
local models = lower.models
local B, T = "batch", "sequence"

--- The MLM head over h: dense, activation, LayerNorm, decoder + bias.
local function mlm_logits(ex, mlm, h)
  local x = ex:layer_norm(mlm.norm, ex:linear_act(mlm.dense, mlm.act, h))
  return ex:affine(mlm.decoder_owner.p[mlm.decoder_key], mlm.bias_owner.p[mlm.bias_key], x)
end
M.mlm_logits = mlm_logits

models[heads.masked_lm_class] = function(ex, model)
  local h = ex:lower(model.base).last_hidden_state
  ex.g:output("logits", mlm_logits(ex, model.mlm, h), {B, T, model.arch.vocab_size})
end

models[heads.pretraining_class] = function(ex, model)
  local base = ex:lower(model.base)
  ex.g:output("prediction_logits", mlm_logits(ex, model.mlm, base.last_hidden_state), {B, T, model.arch.vocab_size})
  local pair = ex:linear(model.pair, base.pooler_output)
  -- under the family's name (ALBERT's sop_logits) and the common one, as the forward
  if model.pair_output ~= "seq_relationship_logits" then ex.g:output(model.pair_output, pair, {B, 2}) end
  ex.g:output("seq_relationship_logits", pair, {B, 2})
end

-- the sequence summary: the pooler's output or the backbone's summary token
-- (the first; a causal model's last real one), through the family's own
-- dense layer when it has one
local function summary(ex, model, base)
  local spec = model.summary_spec
  local x = spec.source == "pooled" and base.pooler_output or base.summary
  if model.pre then
    local act = spec.pre.act
    if type(act) == "function" then act = act(model.arch) end
    x = ex:linear_act(model.pre, act, x)
  end
  return ex:linear(model.out, x)
end

-- logits [B, num_labels]; num_labels = 1 is regression, the same graph
models[heads.sequence_classification_class] = function(ex, model)
  ex.g:output("logits", summary(ex, model, ex:lower(model.base)), {B, model.num_labels})
end

models[heads.token_classification_class] = function(ex, model)
  local base = ex:lower(model.base)
  ex.g:output("logits", ex:linear(model.classifier, base.last_hidden_state), {B, T, model.num_labels})
end

models[heads.question_answering_class] = function(ex, model)
  local g = ex.g
  local both = ex:linear(model.qa, ex:lower(model.base).last_hidden_state)   -- [B, T, 2]
  -- padding at PAD_LOGIT, as the forward's masked_fill: logit * m + (1 - m) * PAD_LOGIT
  local m = ex:mask()
  local pad = g:op("Mul", {g:op("Sub", {g:float(1), m}), g:float(heads.PAD_LOGIT)})
  local function masked(i) return g:op("Add", {g:op("Mul", {g:op("Gather", {both, g:int64(i)}, {axis = 2}), m}), pad}) end
  g:output("start_logits", masked(0), {B, T})
  g:output("end_logits", masked(1), {B, T})
end

-- ELECTRA's (and DeBERTa-v3's) discriminator: a replaced? logit per token [B, T]
models[heads.replaced_token_detection_class] = function(ex, model)
  local g = ex.g
  local h = ex:lower(model.base).last_hidden_state
  local scores = ex:linear(model.prediction, ex:linear_act(model.dense, model.act, h))   -- [B, T, 1]
  g:output("logits", g:op("Squeeze", {scores, g:int64s({2})}), {B, T})
end

-- inputs [B, C, T], each choice scored over its sequence summary: logits [B, C]
models[heads.multiple_choice_class] = function(ex, model)
  ex:with_choices()
  local g = ex.g
  local scores = summary(ex, model, ex:lower(model.base))                      -- [B * C, 1]
  local C = g:op("Slice", {g:op("Shape", {g:input("input_ids")}), g:int64s({1}), g:int64s({2})})
  g:output("logits", g:op("Reshape", {scores, g:op("Concat", {g:int64s({-1}), C}, {axis = 0})}), {B, "choices"})
end

-- a left-to-right LM (config is_decoder: causal attention): every position's next-token logits
models[heads.causal_lm_class] = function(ex, model)
  ex.g:output("logits", mlm_logits(ex, model.mlm, ex:lower(model.base).last_hidden_state), {B, T, model.arch.vocab_size})
end

return M
