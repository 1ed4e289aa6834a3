--- bert.finetune.tagging: token classification (POS, NER) for
-- BertForTokenClassification.
--
-- Words are joined by single spaces and tokenized once; each sub-token is
-- assigned to the word its character offset falls in.  The first sub-token
-- of a word carries the word's tag, every other position -100 (continuation
-- sub-tokens, [CLS], [SEP], padding), as in the BERT paper and Hugging
-- Face's label_all_tokens = False.  Predictions are read at first
-- sub-tokens.  A word with no sub-token in the window (cut by max_length,
-- or made only of characters the normalizer deletes) gets the fallback tag:
-- "O" when the label set has it, else the training set's most frequent tag;
-- it still counts in the scores.
local bert = require("bert")
local batch = require("bert.finetune.batch")
local metrics = require("bert.finetune.metrics")
local util = require("bert.finetune.util")

local M = {}

M.architecture = "BertForTokenClassification"

--- Aligns one encoding with its words.  word_start[w] / word_stop[w] are
-- the characters (0-based, exclusive stop) of word w in the joined text.
-- Returns first[w] = the 1-based token position of word w's first
-- sub-token (nil when it has none), and owner[i] = the word of token i.
function M.align(enc, word_start, word_stop)
  local first, owner = {}, {}
  local w = 1
  for i = 1, #enc.ids do
    local off = enc.offsets[i]
    local special = enc.special_tokens_mask and enc.special_tokens_mask[i] == 1
    if not special and off and off[2] > off[1] then
      local s = off[1]
      while w <= #word_start and word_stop[w] <= s do w = w + 1 end
      -- a token belongs to the word it overlaps: SentencePiece pieces ("▁word")
      -- have offsets that start at the space before their word, as in HF
      if w <= #word_start and off[2] > word_start[w] then
        owner[i] = w
        if first[w] == nil then first[w] = i end
      end
    end
  end
  return first, owner
end

--- Character spans of words joined by single spaces.
function M.word_spans(words)
  local starts, stops, at = {}, {}, 0
  for w, word in ipairs(words) do
    starts[w] = at
    at = at + util.char_len(word)
    stops[w] = at
    at = at + 1
  end
  return starts, stops
end

--- Encodes sentences {words, tags?}: {ids, type_ids, labels (per token,
-- -100 except at first sub-tokens), first (word -> token position),
-- n_words, index}.  opts: max_length (128), labels (the tag list).
function M.encode(tok, sentences, opts)
  opts = opts or {}
  local L = opts.max_length or 128
  local index = {}
  for i, l in ipairs(opts.labels or {}) do index[l] = i - 1 end
  local texts = {}
  for i, s in ipairs(sentences) do texts[i] = table.concat(s.words, " ") end
  local encs = tok:encode_batch(texts, {max_length = L, truncation = true})
  local out = {}
  for i, e in ipairs(encs) do
    local s = sentences[i]
    local starts, stops = M.word_spans(s.words)
    local first = M.align(e, starts, stops)
    local f = {ids = e.ids, type_ids = e.type_ids, first = first, n_words = #s.words, index = i}
    if s.tags and opts.labels then
      local labels = {}
      for k = 1, #e.ids do labels[k] = -100 end
      for w = 1, #s.words do
        local id = index[s.tags[w]]
        if id == nil then
          local where = s.source and s.line and (s.source .. ":" .. (s.line + w - 1)) or ("sentence " .. i)
          error(string.format("%s: tag '%s' is not in the label set %s", where, tostring(s.tags[w]),
            util.format_set(opts.labels)), 0)
        end
        if first[w] then labels[first[w]] = id end
      end
      f.labels = labels
    end
    out[i] = f
  end
  return out
end

--- The fallback tag id for words without a sub-token.
function M.fallback(labels, counts)
  for i, l in ipairs(labels) do if l == "O" then return i - 1 end end
  local best, n = 0, -1
  if counts then
    for i, l in ipairs(labels) do if (counts[l] or 0) > n then best, n = i - 1, counts[l] or 0 end end
  end
  return best
end

--- Predicted tag ids per word: a list (one per feature) of lists (one per word).
-- Also returns the probability of each predicted tag.
function M.predict_features(model, features, opts)
  opts = opts or {}
  local fallback = opts.fallback or 0
  local out, scores = {}, {}
  for _, b, list in batch.each(features, opts.batch_size or 64, {pad_id = opts.pad_id, targets = false, progress = opts.progress}) do
    local res = model:forward(b)
    local probs = res.logits:softmax(-1)
    local best, arg = probs:max(-1)
    local ids, p = arg:totable(), best:totable()
    -- packed (varlen): one row per real token, feature k's from offsets[k]
    local offsets = res.packing and res.packing.offsets:totable()
    for k, f in ipairs(list) do
      local words, sc = {}, {}
      for w = 1, f.n_words do
        local pos = f.first[w]
        if not pos then words[w], sc[w] = fallback, 0
        elseif offsets then words[w], sc[w] = ids[offsets[k] + pos], p[offsets[k] + pos]
        else words[w], sc[w] = ids[k][pos], p[k][pos] end
      end
      out[#out + 1] = words
      scores[#scores + 1] = sc
    end
  end
  return out, scores
end

--- Evaluates on sentences and their features: {accuracy (word level),
-- entity precision/recall/f1 when the tags are B-/I- entity tags, n_words,
-- uncovered (words without a sub-token)}; details {predictions, report}.
function M.evaluate(model, features, sentences, opts)
  opts = opts or {}
  local labels = opts.labels
  model:evaluate()
  -- under mpirun each rank predicts a slice of the features (bert.distributed)
  local pred_ids = bert.no_grad(function()
    return require("bert.distributed").split_map(#features, function(first, last)
      return (M.predict_features(model, first == 1 and last == #features and features
                                        or table.move(features, first, last, 1, {}), opts))
    end, function(i) return features[i].n_words end)
  end)
  local gold, pred = {}, {}
  local right, total, uncovered = 0, 0, 0
  for k, f in ipairs(features) do
    local s = sentences[f.index]
    local g, p = {}, {}
    for w = 1, f.n_words do
      g[w] = s.tags[w]
      p[w] = labels[pred_ids[k][w] + 1]
      if g[w] == p[w] then right = right + 1 end
      if not f.first[w] then uncovered = uncovered + 1 end
    end
    total = total + f.n_words
    gold[k], pred[k] = g, p
  end
  local result = {accuracy = total > 0 and right / total or 0, n_words = total, uncovered = uncovered}
  local details = {predictions = pred, gold = gold}
  if metrics.is_entity_scheme(labels) then
    local r = metrics.entity_scores(pred, gold)
    result.entity_precision, result.entity_recall, result.entity_f1 = r.precision, r.recall, r.f1
    details.report = metrics.format_entity_scores(r)
    details.entities = r
  end
  return result, details
end

return M
