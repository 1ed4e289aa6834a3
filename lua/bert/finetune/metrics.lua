--- bert.finetune.metrics: classification, tagging and SQuAD metrics.
--
-- Classification: accuracy, per-class, binary and macro F1, Matthews
-- correlation, a confusion matrix that prints.  Regression: Pearson and
-- Spearman correlation (ties at mean ranks).  Tagging: entity chunks read the conlleval way (IOB1, IOB2, and
-- the E-/S- tags of IOBES), micro precision/recall/F1 over exact
-- (type, start, end) matches, token accuracy.  SQuAD: the official answer
-- normalisation, exact match and token F1, the maximum over gold answers,
-- v2.0 no-answer questions.
--
-- Every rate is a fraction in [0, 1], the SQuAD scores included (the
-- official script prints percentages; we print them, never store them).
local class = require("bert.nn.class")
local M = {}

-- {============================================================ classification

--- Fraction of positions where pred[i] == gold[i].
function M.accuracy(pred, gold)
  assert(#pred == #gold, "accuracy: prediction and gold lists differ in length")
  if #gold == 0 then return 0 end
  local right = 0
  for i = 1, #gold do if pred[i] == gold[i] then right = right + 1 end end
  return right / #gold
end

local function f1_of(tp, fp, fn)
  local p = tp + fp > 0 and tp / (tp + fp) or 0
  local r = tp + fn > 0 and tp / (tp + fn) or 0
  local f = p + r > 0 and 2 * p * r / (p + r) or 0
  return p, r, f
end

--- Per-class precision/recall/F1 and their unweighted mean.  The classes
-- averaged are those present in the gold or the predicted lists (as
-- scikit-learn's `average="macro"`), unless opts.labels lists them.
-- Returns macro_f1, per_class {[label] = {precision, recall, f1, support}}.
function M.macro_f1(pred, gold, opts)
  assert(#pred == #gold, "macro_f1: prediction and gold lists differ in length")
  opts = opts or {}
  local tp, fp, fn, support, seen, classes = {}, {}, {}, {}, {}, {}
  local function add(c)
    if not seen[c] then seen[c] = true classes[#classes + 1] = c tp[c], fp[c], fn[c], support[c] = 0, 0, 0, 0 end
  end
  if opts.labels then for _, c in ipairs(opts.labels) do add(c) end end
  for i = 1, #gold do
    local g, p = gold[i], pred[i]
    if not opts.labels then add(g) add(p) end
    if seen[g] then support[g] = support[g] + 1 end
    if g == p then
      if seen[g] then tp[g] = tp[g] + 1 end
    else
      if seen[p] then fp[p] = fp[p] + 1 end
      if seen[g] then fn[g] = fn[g] + 1 end
    end
  end
  local per, sum = {}, 0
  for _, c in ipairs(classes) do
    local p, r, f = f1_of(tp[c], fp[c], fn[c])
    per[c] = {precision = p, recall = r, f1 = f, support = support[c]}
    sum = sum + f
  end
  return #classes > 0 and sum / #classes or 0, per
end

--- Matthews correlation coefficient (CoLA's metric), for two classes or
-- more (Gorodkin's R_K, as scikit-learn's matthews_corrcoef): 0 when
-- every prediction or every gold label is one class (the denominator is 0).
function M.matthews_corrcoef(pred, gold)
  assert(#pred == #gold, "matthews_corrcoef: prediction and gold lists differ in length")
  local n = #gold
  if n == 0 then return 0 end
  local t, p, right = {}, {}, 0   -- per class: gold count, predicted count
  for i = 1, n do
    t[gold[i]] = (t[gold[i]] or 0) + 1
    p[pred[i]] = (p[pred[i]] or 0) + 1
    if pred[i] == gold[i] then right = right + 1 end
  end
  local tp, tt, pp = 0, 0, 0
  for c, tc in pairs(t) do tp = tp + tc * (p[c] or 0) tt = tt + tc * tc end
  for _, pc in pairs(p) do pp = pp + pc * pc end
  local den = math.sqrt(n * n - pp) * math.sqrt(n * n - tt)
  if den == 0 then return 0 end
  return (right * n - tp) / den
end

--- F1 of one class (the positive label: MRPC's "1"), as GLUE reports it.
function M.binary_f1(pred, gold, positive)
  assert(#pred == #gold, "binary_f1: prediction and gold lists differ in length")
  local tp, fp, fn = 0, 0, 0
  for i = 1, #gold do
    local g, q = gold[i] == positive, pred[i] == positive
    if g and q then tp = tp + 1 elseif q then fp = fp + 1 elseif g then fn = fn + 1 end
  end
  local _, _, f = f1_of(tp, fp, fn)
  return f
end

--- Pearson's r of two number lists (NaN when either is constant).
function M.pearson(x, y)
  assert(#x == #y, "pearson: the two lists differ in length")
  local n = #x
  if n < 2 then return 0 / 0 end
  local function constant(v) for i = 2, n do if v[i] ~= v[1] then return false end end return true end
  if constant(x) or constant(y) then return 0 / 0 end   -- exactly: rounding must not make it 1e-16
  local mx, my = 0, 0
  for i = 1, n do mx, my = mx + x[i], my + y[i] end
  mx, my = mx / n, my / n
  local sxy, sxx, syy = 0, 0, 0
  for i = 1, n do
    local dx, dy = x[i] - mx, y[i] - my
    sxy, sxx, syy = sxy + dx * dy, sxx + dx * dx, syy + dy * dy
  end
  if sxx == 0 or syy == 0 then return 0 / 0 end
  return sxy / math.sqrt(sxx * syy)
end

--- Ranks 1..n of a number list, tied values sharing their mean rank.
function M.ranks(x)
  local order = {}
  for i = 1, #x do order[i] = i end
  table.sort(order, function(a, b) if x[a] ~= x[b] then return x[a] < x[b] end return a < b end)
  local r, i = {}, 1
  while i <= #order do
    local j = i
    while j < #order and x[order[j + 1]] == x[order[i]] do j = j + 1 end
    for k = i, j do r[order[k]] = (i + j) / 2 end
    i = j + 1
  end
  return r
end

--- Spearman's rho: Pearson's r of the ranks, ties at their mean rank (as
-- scipy.stats.spearmanr).
function M.spearman(x, y)
  assert(#x == #y, "spearman: the two lists differ in length")
  return M.pearson(M.ranks(x), M.ranks(y))
end

local Confusion = class("Confusion")

--- Confusion matrix: rows are gold labels, columns predictions.
-- labels: the label names in order; pred/gold: lists of label names (or
-- 1-based indices into labels).
function M.confusion(pred, gold, labels)
  assert(#pred == #gold, "confusion: prediction and gold lists differ in length")
  local index = {}
  for i, l in ipairs(labels) do index[l] = i end
  local m = {}
  for i = 1, #labels do
    m[i] = {}
    for j = 1, #labels do m[i][j] = 0 end
  end
  for i = 1, #gold do
    local g = index[gold[i]] or (math.type(gold[i]) == "integer" and gold[i])
    local p = index[pred[i]] or (math.type(pred[i]) == "integer" and pred[i])
    if not (g and p and m[g] and m[g][p]) then
      error(string.format("confusion: item %d: label %s or %s is not in the label list", i,
        tostring(gold[i]), tostring(pred[i])), 2)
    end
    m[g][p] = m[g][p] + 1
  end
  return setmetatable({labels = labels, counts = m}, Confusion)
end

--- The matrix as text: a header of predicted labels, one row per gold label.
function Confusion:format()
  local labels, m = self.labels, self.counts
  local w = #"gold\\pred"
  for _, l in ipairs(labels) do w = math.max(w, #tostring(l)) end
  local cw = {}
  for j, l in ipairs(labels) do
    cw[j] = #tostring(l)
    for i = 1, #labels do cw[j] = math.max(cw[j], #tostring(m[i][j])) end
  end
  local lines = {}
  local head = {string.format("%-" .. w .. "s", "gold\\pred")}
  for j, l in ipairs(labels) do head[#head + 1] = string.format("%" .. cw[j] .. "s", tostring(l)) end
  lines[1] = table.concat(head, "  ")
  for i, l in ipairs(labels) do
    local row = {string.format("%-" .. w .. "s", tostring(l))}
    for j = 1, #labels do row[#row + 1] = string.format("%" .. cw[j] .. "d", m[i][j]) end
    lines[#lines + 1] = table.concat(row, "  ")
  end
  return table.concat(lines, "\n")
end
Confusion.__tostring = Confusion.format

--- A JSON-friendly copy: {labels = {...}, counts = {{...}, ...}}.
function Confusion:totable() return {labels = self.labels, counts = self.counts} end
-- }============================================================

-- {============================================================ tagging (conlleval)

-- "B-PER" -> "B", "PER"; "O" -> "O", ""; a bare "PER" (no prefix) -> "I", "PER"
-- as conlleval does with its default raw-tag handling of unknown prefixes.
local function split_tag(t)
  if t == nil or t == "O" or t == "" then return "O", "" end
  local prefix, ty = t:match("^([BIES])[-_](.+)$")
  if prefix then return prefix, ty end
  return "I", t
end
M.split_tag = split_tag

-- conlleval's endOfChunk / startOfChunk, without the bracket tags.
local function chunk_end(prev_tag, tag, prev_type, ty)
  if prev_tag == "E" or prev_tag == "S" then return true end
  if prev_tag == "B" and (tag == "B" or tag == "S" or tag == "O") then return true end
  if prev_tag == "I" and (tag == "B" or tag == "S" or tag == "O") then return true end
  if prev_tag ~= "O" and prev_type ~= ty then return true end
  return false
end

local function chunk_start(prev_tag, tag, prev_type, ty)
  if tag == "B" or tag == "S" then return true end
  if (prev_tag == "E" or prev_tag == "S" or prev_tag == "O") and (tag == "E" or tag == "I") then return true end
  if tag ~= "O" and prev_type ~= ty then return true end
  return false
end

--- Entity chunks of a tag sequence, read the conlleval way, which serves
-- IOB1 (CoNLL-2003's original files: I-X opens an entity unless it
-- continues one of the same type; B-X only separates two adjacent
-- entities of one type), IOB2 (every entity opens with B-X; a stray I-X
-- opens one too, as conlleval and seqeval's default mode do) and IOBES.
-- Returns a list of {type, start, stop} with 1-based inclusive positions.
-- opts.strict = true: IOB2 read strictly (seqeval mode="strict"): an I-X
-- that does not continue a B-X/I-X of type X opens no entity.
function M.chunks(tags, opts)
  local strict = opts and opts.strict
  local out = {}
  local prev_tag, prev_type = "O", ""
  local open_start, open_type, valid = nil, nil, true
  for i = 1, #tags + 1 do
    local tag, ty
    if i <= #tags then tag, ty = split_tag(tags[i]) else tag, ty = "O", "" end
    if open_start and chunk_end(prev_tag, tag, prev_type, ty) then
      if valid then out[#out + 1] = {open_type, open_start, i - 1} end
      open_start = nil
    end
    if chunk_start(prev_tag, tag, prev_type, ty) then
      open_start, open_type = i, ty
      valid = not strict or tag == "B" or tag == "S"
    end
    prev_tag, prev_type = tag, ty
  end
  return out
end

--- Converts IOB1 tags to IOB2 (B- on every entity's first token).
function M.iob1_to_iob2(tags)
  local out = {}
  for i, t in ipairs(tags) do
    local prefix, ty = split_tag(t)
    if prefix == "I" then
      local pp, pt = split_tag(tags[i - 1])
      if i == 1 or pp == "O" or pt ~= ty then prefix = "B" end
    end
    out[i] = prefix == "O" and "O" or (prefix .. "-" .. ty)
  end
  return out
end

--- True when the label set looks like entity tags (B-/I-/E-/S- prefixes).
function M.is_entity_scheme(labels)
  for _, l in ipairs(labels) do
    if type(l) == "string" and l:match("^[BIES][-_].") then return true end
  end
  return false
end

--- Entity-level evaluation over sentences: gold and pred are lists of tag
-- lists (the same lengths).  Micro-averaged over all entities, as
-- conlleval: an entity counts when its type and both ends match.
-- Returns {precision, recall, f1, accuracy (token), found, gold, correct,
-- tokens, per_type = {[type] = {precision, recall, f1, found, gold, correct}}}.
function M.entity_scores(pred, gold, opts)
  assert(#pred == #gold, "entity_scores: prediction and gold lists differ in length")
  local found, expected, correct, tokens, right = 0, 0, 0, 0, 0
  local per = {}
  local function stat(ty)
    per[ty] = per[ty] or {found = 0, gold = 0, correct = 0}
    return per[ty]
  end
  for s = 1, #gold do
    local g, p = gold[s], pred[s]
    if #g ~= #p then
      error(string.format("entity_scores: sentence %d: %d gold tags, %d predicted", s, #g, #p), 2)
    end
    for i = 1, #g do
      tokens = tokens + 1
      if g[i] == p[i] then right = right + 1 end
    end
    local gc, pc = M.chunks(g, opts), M.chunks(p, opts)
    local gold_set = {}
    for _, c in ipairs(gc) do
      gold_set[c[1] .. "\0" .. c[2] .. "\0" .. c[3]] = true
      stat(c[1]).gold = stat(c[1]).gold + 1
    end
    expected = expected + #gc
    found = found + #pc
    for _, c in ipairs(pc) do
      local st = stat(c[1])
      st.found = st.found + 1
      if gold_set[c[1] .. "\0" .. c[2] .. "\0" .. c[3]] then
        correct = correct + 1
        st.correct = st.correct + 1
      end
    end
  end
  local p, r, f = f1_of(correct, found - correct, expected - correct)
  for _, st in pairs(per) do
    st.precision, st.recall, st.f1 = f1_of(st.correct, st.found - st.correct, st.gold - st.correct)
  end
  return {precision = p, recall = r, f1 = f, accuracy = tokens > 0 and right / tokens or 0,
          found = found, gold = expected, correct = correct, tokens = tokens, per_type = per}
end

--- conlleval's report as text.
function M.format_entity_scores(r)
  local lines = {
    string.format("processed %d tokens with %d phrases; found: %d phrases; correct: %d.",
      r.tokens, r.gold, r.found, r.correct),
    string.format("accuracy: %6.2f%%; precision: %6.2f%%; recall: %6.2f%%; FB1: %6.2f",
      100 * r.accuracy, 100 * r.precision, 100 * r.recall, 100 * r.f1),
  }
  local types = {}
  for ty in pairs(r.per_type) do types[#types + 1] = ty end
  table.sort(types)
  for _, ty in ipairs(types) do
    local s = r.per_type[ty]
    lines[#lines + 1] = string.format("%17s: precision: %6.2f%%; recall: %6.2f%%; FB1: %6.2f  %d",
      ty, 100 * s.precision, 100 * s.recall, 100 * s.f1, s.found)
  end
  return table.concat(lines, "\n")
end
-- }============================================================

-- {============================================================ SQuAD

-- Code points of a UTF-8 string; a byte that does not start a valid
-- sequence counts as one character (its byte value + 0x110000, so it is
-- neither a letter nor a space).
local function codepoints(s)
  local out, i, n = {}, 1, #s
  while i <= n do
    local c = s:byte(i)
    local len = c < 0x80 and 1 or c >= 0xF0 and c < 0xF8 and 4 or c >= 0xE0 and 3 or c >= 0xC2 and c < 0xE0 and 2 or 0
    local cp
    if len == 1 then
      cp = c
    elseif len > 1 and i + len - 1 <= n then
      cp = c & (0x7F >> len)
      for k = 1, len - 1 do
        local b = s:byte(i + k)
        if b < 0x80 or b > 0xBF then cp = nil break end
        cp = (cp << 6) | (b & 0x3F)
      end
    end
    if cp then
      out[#out + 1] = cp
      i = i + len
    else
      out[#out + 1] = 0x110000 + c
      i = i + 1
    end
  end
  return out
end
M.codepoints = codepoints

-- Python's str.lower() for the scripts answers are written in: ASCII,
-- Latin-1, Latin Extended-A, Greek and Cyrillic.
local function lower_cp(c)
  if c >= 65 and c <= 90 then return c + 32 end
  if c < 0xC0 then return c end
  if (c >= 0xC0 and c <= 0xDE and c ~= 0xD7) then return c + 32 end
  if c >= 0x100 and c <= 0x17F then
    if c == 0x130 then return 0x69 end
    if c == 0x178 then return 0xFF end
    if (c >= 0x139 and c <= 0x148) or (c >= 0x179 and c <= 0x17E) then
      return c % 2 == 1 and c + 1 or c
    end
    if c ~= 0x138 and c ~= 0x149 and c ~= 0x17F and c % 2 == 0 then return c + 1 end
    return c
  end
  if c >= 0x391 and c <= 0x3AB and c ~= 0x3A2 then return c + 32 end
  if c >= 0x410 and c <= 0x42F then return c + 32 end
  if c >= 0x400 and c <= 0x40F then return c + 80 end
  return c
end

-- string.punctuation
local PUNCT = {}
for ch in ("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"):gmatch(".") do PUNCT[ch:byte()] = true end

local function is_space(c)
  return c == 32 or (c >= 9 and c <= 13) or (c >= 0x1C and c <= 0x1F) or c == 0x85 or c == 0xA0
    or c == 0x1680 or (c >= 0x2000 and c <= 0x200A) or c == 0x2028 or c == 0x2029
    or c == 0x202F or c == 0x205F or c == 0x3000
end

-- Python's regex \w on str: letters, digits and underscore of any script.
-- Approximated: ASCII alphanumerics and _, and non-ASCII code points that
-- are not spaces, Latin-1 symbols, general punctuation, CJK punctuation or
-- undecodable bytes.
local function is_word(c)
  if c < 128 then
    return (c >= 48 and c <= 57) or (c >= 65 and c <= 90) or (c >= 97 and c <= 122) or c == 95
  end
  if c >= 0x110000 or is_space(c) then return false end
  if c >= 0xA0 and c <= 0xBF then return c == 0xAA or c == 0xB5 or c == 0xBA or c == 0xB2 or c == 0xB3 or c == 0xB9 end
  if c == 0xD7 or c == 0xF7 then return false end
  if c >= 0x2000 and c <= 0x206F then return false end
  if c >= 0x3000 and c <= 0x303F then return false end
  return true
end

local function encode_cps(cps, i, j)
  local parts = {}
  for k = i, j do
    local c = cps[k]
    parts[#parts + 1] = c >= 0x110000 and string.char(c - 0x110000) or utf8.char(c)
  end
  return table.concat(parts)
end

--- The official SQuAD normalisation, as a list of tokens: lowercase, drop
-- ASCII punctuation, drop the whole words a/an/the, split on whitespace.
function M.answer_tokens(s)
  local cps = {}
  for _, c in ipairs(codepoints(s)) do
    c = lower_cp(c)
    if not (c < 128 and PUNCT[c]) then cps[#cps + 1] = c end
  end
  -- \b(a|an|the)\b -> " "
  local n = #cps
  local out, i = {}, 1
  while i <= n do
    local matched = nil
    if (i == 1 or not is_word(cps[i - 1])) then
      for _, art in ipairs({{116, 104, 101}, {97, 110}, {97}}) do   -- the, an, a
        local ok = i + #art - 1 <= n
        for k = 1, #art do if not ok then break end ok = cps[i + k - 1] == art[k] end
        if ok and (i + #art > n or not is_word(cps[i + #art])) then matched = #art break end
      end
    end
    if matched then
      out[#out + 1] = 32
      i = i + matched
    else
      out[#out + 1] = cps[i]
      i = i + 1
    end
  end
  local tokens, start = {}, nil
  for k = 1, #out + 1 do
    local c = out[k]
    if c == nil or is_space(c) then
      if start then tokens[#tokens + 1] = encode_cps(out, start, k - 1) start = nil end
    elseif not start then
      start = k
    end
  end
  return tokens
end

--- normalize_answer from the official script: the tokens joined by spaces.
function M.normalize_answer(s) return table.concat(M.answer_tokens(s), " ") end

--- Exact match (0 or 1) of one prediction against one gold answer.
function M.exact_match(pred, gold)
  return M.normalize_answer(pred) == M.normalize_answer(gold) and 1 or 0
end

--- Token-bag F1 of one prediction against one gold answer; when either
-- normalises to nothing, 1 if both do, else 0 (SQuAD v2.0).
function M.squad_f1(pred, gold)
  local p, g = M.answer_tokens(pred), M.answer_tokens(gold)
  if #p == 0 or #g == 0 then return (#p == 0 and #g == 0) and 1 or 0 end
  local count = {}
  for _, t in ipairs(g) do count[t] = (count[t] or 0) + 1 end
  local common = 0
  for _, t in ipairs(p) do
    if (count[t] or 0) > 0 then common = common + 1 count[t] = count[t] - 1 end
  end
  if common == 0 then return 0 end
  local precision, recall = common / #p, common / #g
  return 2 * precision * recall / (precision + recall)
end

--- The best exact match and F1 of a prediction over a list of gold answer
-- texts.  Gold answers that normalise to nothing are dropped; none left
-- means the question has no answer (gold {""}).
function M.squad_scores(pred, golds)
  local kept = {}
  for _, g in ipairs(golds) do if M.normalize_answer(g) ~= "" then kept[#kept + 1] = g end end
  if #kept == 0 then kept = {""} end
  local em, f1 = 0, 0
  for _, g in ipairs(kept) do
    em = math.max(em, M.exact_match(pred, g))
    f1 = math.max(f1, M.squad_f1(pred, g))
  end
  return em, f1
end

--- Evaluates predictions {[id] = text} against examples (a list of
-- {id, answers = {{text = ...}, ...}} or {id, answers = {"text", ...}}).
-- A question without a prediction scores 0.  Returns fractions (0..1, as
-- every metric in the files; printed as percentages):
-- {exact_match, f1, total, has_answer_exact, has_answer_f1, has_answer_total,
--  no_answer_exact, no_answer_f1, no_answer_total} (the split only when
-- both kinds occur).
function M.squad(predictions, examples)
  local em_sum, f1_sum = 0, 0
  local split = {has = {0, 0, 0}, no = {0, 0, 0}}
  for _, ex in ipairs(examples) do
    local golds = {}
    for _, a in ipairs(ex.answers or {}) do golds[#golds + 1] = type(a) == "table" and a.text or a end
    local pred = predictions[ex.id]
    local em, f1 = 0, 0
    if pred ~= nil then em, f1 = M.squad_scores(pred, golds) end
    em_sum, f1_sum = em_sum + em, f1_sum + f1
    local has = false
    for _, g in ipairs(golds) do if M.normalize_answer(g) ~= "" then has = true break end end
    local s = has and split.has or split.no
    s[1], s[2], s[3] = s[1] + em, s[2] + f1, s[3] + 1
  end
  local n = #examples
  local r = {exact_match = n > 0 and em_sum / n or 0, f1 = n > 0 and f1_sum / n or 0, total = n}
  if split.has[3] > 0 and split.no[3] > 0 then
    r.has_answer_exact, r.has_answer_f1, r.has_answer_total = split.has[1] / split.has[3], split.has[2] / split.has[3], split.has[3]
    r.no_answer_exact, r.no_answer_f1, r.no_answer_total = split.no[1] / split.no[3], split.no[2] / split.no[3], split.no[3]
  end
  return r
end
-- }============================================================

return M
