--- bert.finetune.classify: sequence classification (single texts and
-- GLUE-style pairs) for BertForSequenceClassification.
--
-- Examples are {text, text_pair?, label}; labels are strings mapped to
-- class ids by their position in the task's label list (0-based).  A
-- regression task (STS-B: opts.regression, labels numbers) has one output
-- trained with MSE, as HF's num_labels = 1 head, and is scored by Pearson
-- and Spearman correlation.
local bert = require("bert")
local batch = require("bert.finetune.batch")
local metrics = require("bert.finetune.metrics")
local util = require("bert.finetune.util")

local M = {}

M.architecture = "BertForSequenceClassification"

-- Characters kept per text before tokenizing: anything past max_length
-- tokens is cut by truncation anyway, so long mails are not tokenized whole.
local function clip(s, max_length)
  local keep = max_length * 24
  if s and #s > keep then return s:sub(1, keep) end
  return s
end

--- Encodes examples: {ids, type_ids, label = class id, index = example}.
-- opts: max_length (128), labels (the label list; an unknown label is an
-- error naming the example's line).
function M.encode(tok, examples, opts)
  opts = opts or {}
  local L = opts.max_length or 128
  local index = {}
  for i, l in ipairs(opts.labels or {}) do index[l] = i - 1 end
  local items = {}
  for i, ex in ipairs(examples) do
    items[i] = ex.text_pair and {clip(ex.text, L), clip(ex.text_pair, L)} or clip(ex.text, L)
  end
  local encs = tok:encode_batch(items, {max_length = L, truncation = true})
  local out = {}
  for i, e in ipairs(encs) do
    local ex = examples[i]
    local f = {ids = e.ids, type_ids = e.type_ids, index = i}
    if opts.regression then
      local y = tonumber(ex.label)
      if y == nil or y ~= y or y == math.huge or y == -math.huge then
        local where = ex.source and ex.line and (ex.source .. ":" .. ex.line) or ("example " .. i)
        error(string.format("%s: regression target '%s' is not a finite number", where, tostring(ex.label)), 0)
      end
      f.label = y + 0.0   -- a float: the batch carries float32 targets
    elseif ex.label ~= nil and opts.labels then
      f.label = index[ex.label]
      if f.label == nil then
        local where = ex.source and ex.line and (ex.source .. ":" .. ex.line) or ("example " .. i)
        error(string.format("%s: label '%s' is not in the label set %s", where, tostring(ex.label),
          util.format_set(opts.labels)), 0)
      end
    end
    out[i] = f
  end
  return out
end

--- Class probabilities [N][C] and predicted ids for features (no labels needed).
function M.predict_features(model, features, opts)
  opts = opts or {}
  local probs, preds = {}, {}
  for _, b in batch.each(features, opts.batch_size or 64, {pad_id = opts.pad_id, targets = false, progress = opts.progress}) do
    local out = model:forward(b)
    if opts.regression then   -- [B, 1] scores: the prediction is the score
      for _, row in ipairs(out.logits:totable()) do preds[#preds + 1] = row[1] probs[#probs + 1] = row end
    else
      for _, row in ipairs(out.logits:softmax(-1):totable()) do
        local best = 1
        for c = 2, #row do if row[c] > row[best] then best = c end end
        probs[#probs + 1] = row
        preds[#preds + 1] = best - 1
      end
    end
  end
  return preds, probs
end

--- Evaluates on encoded features with labels: {accuracy, macro_f1, mcc, n}
-- (and f1 of opts.positive_label when given: MRPC) or, for regression,
-- {pearson, spearman, mse, n}; as the second value, details {confusion,
-- per_class, predictions, gold}.
function M.evaluate(model, features, opts)
  opts = opts or {}
  local labels = opts.labels
  model:evaluate()
  -- under mpirun each rank predicts a slice of the features (bert.distributed)
  local preds = bert.no_grad(function()
    return require("bert.distributed").split_map(#features, function(first, last)
      return (M.predict_features(model, first == 1 and last == #features and features
                                        or table.move(features, first, last, 1, {}), opts))
    end)
  end)
  local gold, pred = {}, {}
  if opts.regression then
    local se = 0
    for i, f in ipairs(features) do gold[i], pred[i] = f.label, preds[i] se = se + (preds[i] - f.label) ^ 2 end
    local r = {pearson = metrics.pearson(pred, gold), spearman = metrics.spearman(pred, gold),
      mse = #features > 0 and se / #features or 0, n = #features}
    -- a constant prediction has no correlation: scored 0, as a floor, not NaN
    if r.pearson ~= r.pearson then r.pearson = 0 end
    if r.spearman ~= r.spearman then r.spearman = 0 end
    r.pearson_spearman = (r.pearson + r.spearman) / 2
    return r, {predictions = pred, gold = gold}
  end
  for i, f in ipairs(features) do
    gold[i] = labels and labels[f.label + 1] or f.label
    pred[i] = labels and labels[preds[i] + 1] or preds[i]
  end
  local macro, per = metrics.macro_f1(pred, gold)
  local result = {accuracy = metrics.accuracy(pred, gold), macro_f1 = macro, mcc = metrics.matthews_corrcoef(pred, gold),
    n = #features}
  if opts.positive_label ~= nil then
    result.f1 = metrics.binary_f1(pred, gold, opts.positive_label)
    result.accuracy_f1 = (result.accuracy + result.f1) / 2
  end
  local details = {per_class = per, predictions = pred, gold = gold}
  if labels then details.confusion = metrics.confusion(pred, gold, labels) end
  return result, details
end

return M
