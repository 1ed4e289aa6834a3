--- bert.finetune.qa: extractive question answering (SQuAD v1.1 / v2.0)
-- for BertForQuestionAnswering.
--
-- Windows: `[CLS] question [SEP] context window [SEP]`, produced by the
-- tokenizer with truncation = "only_second", return_overflowing_tokens and
-- `stride` = doc_stride, which here is the OVERLAP in tokens between
-- consecutive windows (Hugging Face's run_qa.py meaning, not Google's step
-- between window starts).  Questions longer than max_query_length tokens
-- are cut.  Training targets per window: the token span of the first gold
-- answer when it lies entirely inside the window's context, else [CLS]
-- (position 0) for both start and end; unanswerable questions also point
-- at [CLS].
--
-- Post-processing (per question, over all its windows): the n_best
-- highest start and end logits among context tokens, pairs with
-- start <= end and at most max_answer_length tokens, score = start + end
-- logit; the best span is mapped back to characters of the original
-- context through the token offsets.  SQuAD v2.0: the null score is the
-- smallest start[CLS] + end[CLS] over the windows, and the answer is ""
-- when null - best > null_threshold.
local bert = require("bert")
local batch = require("bert.finetune.batch")
local metrics = require("bert.finetune.metrics")
local util = require("bert.finetune.util")

local M = {}

M.architecture = "BertForQuestionAnswering"

M.defaults = {max_length = 384, doc_stride = 128, max_query_length = 64, n_best = 20,
  max_answer_length = 30, null_threshold = 0}

-- Cuts a question to its first max_query_length tokens (by characters).
local function clip_question(tok, question, max_q)
  local e = tok:encode(question, nil, {add_special_tokens = false})
  if #e.ids <= max_q then return question end
  local stop = e.offsets[max_q][2]
  local pos = util.char_positions(question)
  return question:sub(1, pos[stop] - 1)
end

--- Token span [s, e] (1-based positions in the window) of characters
-- [cs, ce) when the window's context covers them, else nil.
function M.token_span(enc, cs, ce)
  local c0, c1
  for i = 1, #enc.ids do
    if enc.sequence_ids[i] == 1 then
      c0 = c0 or i
      c1 = i
    end
  end
  if not c0 then return nil end
  if enc.offsets[c0][1] > cs or enc.offsets[c1][2] < ce then return nil end
  local s, e = c0, c1
  for i = c0, c1 do
    if enc.offsets[i][1] <= cs then s = i else break end
  end
  for i = c1, c0, -1 do
    if enc.offsets[i][2] >= ce then e = i else break end
  end
  if e < s then return nil end
  return s, e
end

--- Encodes examples {id, question, context, answers} into window
-- features: {ids, type_ids, context_first, context_last (the window's
-- first and last context token, 1-based; nil without one), char_offsets
-- (flat: token i covers characters [char_offsets[2i-1], char_offsets[2i])
-- of its text), example (index), window, start_position, end_position
-- (0-based; 0 = [CLS])}.  opts: max_length, doc_stride, max_query_length;
-- training: windows without char_offsets, which only post-processing
-- reads.  The offsets are kept flat and left out of training windows
-- because every garbage collection walks the features: SQuAD's 27k
-- windows with an {a, b} table per token were a 490 MB Lua heap, and
-- collecting it made a BERT-mini's training steps and evaluations 2-3x
-- slower.
function M.encode(tok, examples, opts)
  opts = opts or {}
  local L = opts.max_length or M.defaults.max_length
  local stride = opts.doc_stride or M.defaults.doc_stride
  local max_q = opts.max_query_length or M.defaults.max_query_length
  local out = {}
  for i, ex in ipairs(examples) do
    local q = clip_question(tok, ex.question, max_q)
    local qlen = #tok:encode(q, nil, {add_special_tokens = false}).ids
    local room = L - qlen - 3
    if room < 2 then
      error(string.format("qa.encode: question '%s': max_length %d leaves no room for the context", ex.id, L), 0)
    end
    local enc = tok:encode(q, ex.context, {max_length = L, truncation = "only_second",
      stride = math.min(stride, room - 1), return_overflowing_tokens = true})
    local windows = {enc}
    for _, o in ipairs(enc.overflowing or {}) do windows[#windows + 1] = o end
    local cs, ce
    local ans = ex.answers and ex.answers[1]
    if ans and not ex.is_impossible then
      cs = ans.answer_start
      ce = cs + util.char_len(ans.text)
    end
    for w, e in ipairs(windows) do
      local f = {ids = e.ids, type_ids = e.type_ids, example = i, window = w}
      for k = 1, #e.ids do
        if e.sequence_ids[k] == 1 then
          f.context_first = f.context_first or k
          f.context_last = k
        end
      end
      if not opts.training then
        local flat = {}
        for k, o in ipairs(e.offsets) do flat[2 * k - 1], flat[2 * k] = o[1], o[2] end
        f.char_offsets = flat
      end
      if ex.answers then
        local s, t
        if cs then s, t = M.token_span(e, cs, ce) end
        f.start_position = s and s - 1 or 0
        f.end_position = t and t - 1 or 0
      end
      out[#out + 1] = f
    end
  end
  return out
end

-- Indices (1-based) of the n largest values among positions first..last
-- (none when first is nil: a window without context tokens).
local function top_n(values, first, last, n)
  local idx = {}
  for i = first or 1, first and last or 0 do idx[#idx + 1] = i end
  table.sort(idx, function(a, b)
    if values[a] ~= values[b] then return values[a] > values[b] end
    return a < b
  end)
  for i = #idx, n + 1, -1 do idx[i] = nil end
  return idx
end

--- Turns per-window logits into answers.  features: as from encode (with
-- `example` and `char_offsets`); start_logits / end_logits: one Lua list per
-- feature.  opts: n_best, max_answer_length, version_2, null_threshold.
-- Returns predictions {[id] = text} and details {[id] = {nbest = {{text,
-- start, stop, score, probability}}, null_score, best_score, diff}}.
function M.postprocess(examples, features, start_logits, end_logits, opts)
  opts = opts or {}
  local n_best = opts.n_best or M.defaults.n_best
  local max_len = opts.max_answer_length or M.defaults.max_answer_length
  local threshold = opts.null_threshold or M.defaults.null_threshold
  local by_example = {}
  for k, f in ipairs(features) do
    local list = by_example[f.example]
    if not list then list = {} by_example[f.example] = list end
    list[#list + 1] = k
  end
  local predictions, details = {}, {}
  for i, ex in ipairs(examples) do
    local pos = util.char_positions(ex.context)
    local cands, null = {}, nil
    local seen = {}
    for _, k in ipairs(by_example[i] or {}) do
      local f, sl, el = features[k], start_logits[k], end_logits[k]
      local n0 = sl[1] + el[1]
      if null == nil or n0 < null then null = n0 end
      local first, last, offsets = f.context_first, f.context_last, f.char_offsets
      local starts, ends = top_n(sl, first, last, n_best), top_n(el, first, last, n_best)
      for _, s in ipairs(starts) do
        for _, e in ipairs(ends) do
          if e >= s and e - s + 1 <= max_len then
            local a, b = offsets[2 * s - 1], offsets[2 * e]
            local score = sl[s] + el[e]
            local key = a .. ":" .. b
            if seen[key] == nil or cands[seen[key]].score < score then
              local c = {start = a, stop = b, score = score, text = util.char_sub(ex.context, pos, a, b)}
              if seen[key] then cands[seen[key]] = c else cands[#cands + 1] = c seen[key] = #cands end
            end
          end
        end
      end
    end
    table.sort(cands, function(x, y)
      if x.score ~= y.score then return x.score > y.score end
      return x.start < y.start
    end)
    for j = #cands, n_best + 1, -1 do cands[j] = nil end
    if #cands > 0 then
      local m, z = cands[1].score, 0
      for _, c in ipairs(cands) do z = z + math.exp(c.score - m) end
      for _, c in ipairs(cands) do c.probability = math.exp(c.score - m) / z end
    end
    local best = cands[1]
    local text = best and best.text or ""
    local d = {nbest = cands, null_score = null, best_score = best and best.score or nil}
    if opts.version_2 then
      d.diff = best and (null - best.score) or math.huge
      if d.diff > threshold then text = "" end
    end
    d.best_text = best and best.text or ""
    predictions[ex.id] = text
    details[ex.id] = d
  end
  return predictions, details
end

--- The null-score threshold that maximises F1 on examples (SQuAD v2.0's
-- find_best_thresh): each question answers "" when its diff (null - best)
-- exceeds the threshold.  Returns threshold, best f1 (percent).
function M.best_threshold(examples, details)
  local items, base = {}, 0
  for _, ex in ipairs(examples) do
    local d = details[ex.id]
    local golds = {}
    for _, a in ipairs(ex.answers or {}) do golds[#golds + 1] = a.text end
    local _, f_null = metrics.squad_scores("", golds)
    local _, f_ans = metrics.squad_scores(d.best_text, golds)
    -- with threshold -inf every question answers "": start from there
    base = base + f_null
    items[#items + 1] = {diff = d.diff or math.huge, gain = f_ans - f_null}
  end
  table.sort(items, function(a, b) return a.diff > b.diff end)
  -- raising the threshold past an item's diff switches it to its answer
  local best_t, best_f, cur = -math.huge, base, base
  for j = #items, 1, -1 do
    cur = cur + items[j].gain
    local t = items[j].diff
    if j > 1 and items[j - 1].diff == t then goto continue end
    if cur > best_f then best_f, best_t = cur, t end
    ::continue::
  end
  -- a threshold equal to a diff keeps that answer (diff > t fails): use it
  local n = math.max(#examples, 1)
  return best_t, best_f / n
end

--- Runs the model over features: start and end logits, one list per feature.
function M.logits(model, features, opts)
  opts = opts or {}
  local starts, ends = {}, {}
  for _, b in batch.each(features, opts.batch_size or 64, {pad_id = opts.pad_id, targets = false, progress = opts.progress}) do
    local out = model:forward(b)
    for _, row in ipairs(out.start_logits:totable()) do starts[#starts + 1] = row end
    for _, row in ipairs(out.end_logits:totable()) do ends[#ends + 1] = row end
  end
  -- padding positions beyond a feature's length are never context tokens
  return starts, ends
end

-- M.logits, each rank of a data-parallel job (bert.distributed) running a
-- slice of the features; every rank gets all the rows, each cut to its
-- feature's length (the positions post-processing reads).
local function logits_split(model, features, opts)
  local dist = require("bert.distributed")
  if not dist.active() then return M.logits(model, features, opts) end
  local rows = dist.split_map(#features, function(first, last)
    local s, e = M.logits(model, table.move(features, first, last, 1, {}), opts)
    for k = 1, #s do
      local n = #features[first + k - 1].ids
      table.move(e[k], 1, n, n + 1, s[k])   -- start logits, then end logits
    end
    return s
  end, function(i) return 2 * #features[i].ids end, "float32")
  local starts, ends = {}, {}
  for i, row in ipairs(rows) do
    local n = #features[i].ids
    starts[i], ends[i] = table.move(row, 1, n, 1, {}), table.move(row, n + 1, 2 * n, 1, {})
  end
  return starts, ends
end

--- Evaluates: {exact_match, f1, n (questions), ...} and details
-- {predictions, answers (per id post-processing)}.
function M.evaluate(model, features, examples, opts)
  opts = opts or {}
  model:evaluate()
  local s, e = bert.no_grad(function() return logits_split(model, features, opts) end)
  local preds, det = M.postprocess(examples, features, s, e, opts)
  local r = metrics.squad(preds, examples)
  local result = {exact_match = r.exact_match, f1 = r.f1, n = r.total}
  for _, k in ipairs({"has_answer_exact", "has_answer_f1", "no_answer_exact", "no_answer_f1"}) do result[k] = r[k] end
  if opts.version_2 then
    local t, f = M.best_threshold(examples, det)
    result.best_threshold, result.best_threshold_f1 = t ~= -math.huge and t or -1e9, f
  end
  return result, {predictions = preds, answers = det}
end

return M
