--- bert.evaluate.blimp: BLiMP (Warstadt et al. 2020), 67 paradigms of 1000
-- minimal pairs each (a grammatical sentence and an ungrammatical one that
-- differs minimally), scored zero-shot: a pair is right when the model's
-- score of the good sentence is strictly higher than the bad one's (a tie
-- is wrong).  The scores come from bert.evaluate.lm (pseudo-log-likelihood
-- for masked LMs, log-likelihood for causal ones, the sum of both
-- directions for a biLM), so any pretraining checkpoint is evaluated, beside
-- the paper's own models (5-gram, LSTM, Transformer-XL, GPT-2).
--
--   local blimp = require("bert.evaluate.blimp")
--   local r = blimp.run("runs/mini-brown", nil, {pairs = 100})   -- a directory, a model (with tok) or a scorer
--   print(blimp.markdown(r))
--
-- Files (opts.dir, default data/blimp): data/UID.jsonl, one pair a line
-- ({sentence_good, sentence_bad, field, linguistics_term, UID, ...}), and
-- models_summary.jsonl, the paper's accuracies: one line per paradigm
-- ({UID, linguistics_term, ngram, lstm, txl, gpt2}), one per phenomenon with
-- UID "overall", and the grand overall (UID and linguistics_term "overall").
--
-- Aggregation, as the paper's: a phenomenon's accuracy is the mean of its
-- paradigms' accuracies, the overall accuracy the mean over the paradigms
-- (with 1000 pairs each, or opts.pairs each, these equal the pooled
-- fractions; `pooled` is given too, the fraction of all pairs right).  The
-- phenomena are the paper's 12: a paradigm goes under the linguistics_term
-- the summary gives it (the data files call animate_subject_passive and
-- animate_subject_trans "s-selection", the paper counts them under
-- argument_structure); without the summary, under its file's term (13).
--
-- Functions:
--   M.read_paradigm(path, opts) -> {uid, term, field, pairs = {{good, bad}, ...}, file}
--   M.read(dir, opts) -> list of paradigms (sorted by UID)
--   M.read_summary(path) -> {paradigms = {UID -> scores}, phenomena = {term -> scores}, overall = scores}
--     (scores {ngram, lstm, txl, gpt2} as fractions, and term: the line's linguistics_term)
--   M.evaluate(score, paradigms, opts) -> result (score: sentences -> log-probs)
--   M.run(scorer_or_model_or_dir, tok, opts) -> result
--     {overall, pooled, n_pairs, n_paradigms, seconds (reading included; scoring_seconds
--      without), sentences (scored, after
--      removing duplicates), tokens_per_second (through the encoder, when the
--      scorer reports), kind, paper = {overall = scores, ...},
--      phenomena = {{term, accuracy, paradigms, pairs, paper}, ...} (sorted),
--      paradigms = {{uid, term, file_term, field, accuracy, right, pairs, paper}, ...} (sorted)}
--   M.markdown(result) -> text (three tables: overall, per phenomenon, per paradigm)
-- opts: dir, pairs (the first N pairs of each paradigm; default all),
-- paradigms (a list of UIDs to keep), summary (false: no paper columns),
-- chunk (sentences per scorer call, default 16384), progress (function(done,
-- total, seconds) after each chunk), and the scorer's opts (bert.evaluate.lm).
local cjson = require("cjson")
local fs = require("bert.fs")

local M = {}

M.MODELS = {"ngram", "lstm", "txl", "gpt2"}
M.MODEL_NAMES = {ngram = "5-gram", lstm = "LSTM", txl = "TXL", gpt2 = "GPT-2"}

-- {============================================================ reading

-- each non-blank line of a JSONL file as a table; errors name the file and line
local function jsonl(path, where)
  local text, err = fs.read_file(path)
  if not text then error(string.format("%s: cannot read %s: %s", where, path, tostring(err)), 0) end
  local out, n = {}, 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if line:match("%S") then
      local ok, v = pcall(cjson.decode, line)
      if not ok then error(string.format("%s: %s:%d: invalid JSON (%s)", where, path, n, tostring(v)), 0) end
      if type(v) ~= "table" then error(string.format("%s: %s:%d: expected a JSON object", where, path, n), 0) end
      out[#out + 1] = {value = v, line = n}
    end
  end
  return out
end

local function need_string(v, key, path, line, where)
  local s = v[key]
  if type(s) ~= "string" then
    error(string.format("%s: %s:%d: field '%s' must be a string, got %s", where, path, line, key,
      s == nil and "nothing" or (s == cjson.null and "null" or type(s))), 0)
  end
  return s
end

--- One paradigm file: {uid, term, field, pairs = {{good, bad, line}, ...},
-- file}.  opts.pairs: keep the first N pairs.  Every line must carry
-- sentence_good, sentence_bad, UID and linguistics_term (strings), the same
-- UID and term throughout; errors name the file and the line.
function M.read_paradigm(path, opts)
  opts = opts or {}
  local where = "blimp.read_paradigm"
  if type(path) ~= "string" then error(where .. ": argument #1 (path) expected a string, got " .. type(path), 2) end
  local rows = jsonl(path, where)
  local p = {file = path, pairs = {}}
  local limit = opts.pairs or math.huge
  for _, r in ipairs(rows) do
    if #p.pairs >= limit then break end
    local v, line = r.value, r.line
    local good = need_string(v, "sentence_good", path, line, where)
    local bad = need_string(v, "sentence_bad", path, line, where)
    local uid = need_string(v, "UID", path, line, where)
    local term = need_string(v, "linguistics_term", path, line, where)
    if p.uid == nil then
      p.uid, p.term, p.field = uid, term, type(v.field) == "string" and v.field or nil
    elseif uid ~= p.uid or term ~= p.term then
      error(string.format("%s: %s:%d: UID/linguistics_term '%s'/'%s' differ from the file's first line's '%s'/'%s'",
        where, path, line, uid, term, p.uid, p.term), 0)
    end
    p.pairs[#p.pairs + 1] = {good, bad, line}
  end
  if #p.pairs == 0 then error(string.format("%s: %s holds no pairs", where, path), 0) end
  return p
end

--- Every paradigm of a BLiMP directory (dir/data/*.jsonl, sorted by UID).
-- opts: pairs, paradigms (UIDs to keep: each must have its file).
function M.read(dir, opts)
  opts = opts or {}
  local where = "blimp.read"
  dir = (dir or "data/blimp"):gsub("/+$", "")
  local data = dir .. "/data"
  local files = {}
  if opts.paradigms then
    for _, uid in ipairs(opts.paradigms) do
      local path = data .. "/" .. uid .. ".jsonl"
      if not fs.exists(path) then error(string.format("%s: no file %s for paradigm '%s'", where, path, uid), 0) end
      files[#files + 1] = path
    end
  else
    local names, err = fs.listdir(data)
    if not names then error(string.format("%s: cannot list %s: %s", where, data, tostring(err)), 0) end
    for _, n in ipairs(names) do
      if n:match("%.jsonl$") then files[#files + 1] = data .. "/" .. n end
    end
    if #files == 0 then error(string.format("%s: %s holds no .jsonl files", where, data), 0) end
  end
  local out = {}
  for i, f in ipairs(files) do out[i] = M.read_paradigm(f, opts) end
  table.sort(out, function(a, b) return a.uid < b.uid end)
  return out
end

--- The paper's accuracies (models_summary.jsonl).
function M.read_summary(path)
  local where = "blimp.read_summary"
  if type(path) ~= "string" then error(where .. ": argument #1 (path) expected a string, got " .. type(path), 2) end
  local s = {paradigms = {}, phenomena = {}}
  for _, r in ipairs(jsonl(path, where)) do
    local v, line = r.value, r.line
    local uid = need_string(v, "UID", path, line, where)
    local term = need_string(v, "linguistics_term", path, line, where)
    local scores = {term = term}
    for _, m in ipairs(M.MODELS) do
      if type(v[m]) ~= "number" then
        error(string.format("%s: %s:%d: field '%s' must be a number, got %s", where, path, line, m, type(v[m])), 0)
      end
      scores[m] = v[m]
    end
    if uid == "overall" and term == "overall" then s.overall = scores
    elseif uid == "overall" then s.phenomena[term] = scores
    else s.paradigms[uid] = scores end
  end
  return s
end
-- }============================================================

-- {============================================================ scoring

--- Scores the paradigms' pairs with score (a function: list of sentences ->
-- list of log-probs, and optionally stats as bert.evaluate.lm's scorers
-- give them).  Identical sentences are scored once.  opts: chunk, progress,
-- summary (a read_summary table, or false), kind (reported).
function M.evaluate(score, paradigms, opts)
  opts = opts or {}
  if type(score) ~= "function" then
    error("blimp.evaluate: argument #1 (score) expected a function, got " .. type(score), 2)
  end
  local wall = require("bert").wall_time
  local t0 = wall()
  -- the distinct sentences, in order of first appearance
  local index, list = {}, {}
  for _, p in ipairs(paradigms) do
    for _, pair in ipairs(p.pairs) do
      for k = 1, 2 do
        local s = pair[k]
        if not index[s] then list[#list + 1] = s index[s] = #list end
      end
    end
  end
  local values, enc_tokens, scored_tokens = {}, 0, 0
  local chunk = opts.chunk or 16384
  for s = 1, #list, chunk do
    local part = table.move(list, s, math.min(#list, s + chunk - 1), 1, {})
    local lp, stats = score(part)
    if type(lp) ~= "table" or #lp ~= #part then
      error(string.format("blimp.evaluate: the scorer returned %s values for %d sentences",
        type(lp) == "table" and tostring(#lp) or type(lp), #part), 0)
    end
    for i, v in ipairs(lp) do
      if type(v) ~= "number" then
        error(string.format("blimp.evaluate: the scorer's value %d ('%s') is a %s, not a number", i, part[i], type(v)), 0)
      end
      values[s + i - 1] = v
    end
    if type(stats) == "table" then
      enc_tokens = enc_tokens + (stats.encoder_tokens or 0)
      scored_tokens = scored_tokens + (stats.scored_tokens or 0)
    end
    if opts.progress then opts.progress(s + #part - 1, #list, wall() - t0) end
  end
  local summary = opts.summary or {paradigms = {}, phenomena = {}}
  local r = {paradigms = {}, phenomena = {}, n_pairs = 0, n_paradigms = #paradigms, sentences = #list,
             kind = opts.kind, paper = {overall = summary.overall}}
  local right_all, by_term, terms = 0, {}, {}
  for _, p in ipairs(paradigms) do
    local right = 0
    for _, pair in ipairs(p.pairs) do
      -- strictly higher: a tie (a model blind to the difference) is wrong
      if values[index[pair[1]]] > values[index[pair[2]]] then right = right + 1 end
    end
    local paper = summary.paradigms[p.uid]
    -- the paper's grouping where it has one: its summary files animate_subject_*
    -- under argument_structure, which the data files call s-selection
    local term = paper and paper.term or p.term
    local row = {uid = p.uid, term = term, file_term = p.term, field = p.field, right = right, pairs = #p.pairs,
                 accuracy = right / #p.pairs, paper = paper}
    r.paradigms[#r.paradigms + 1] = row
    r.n_pairs, right_all = r.n_pairs + #p.pairs, right_all + right
    if not by_term[term] then by_term[term] = {} terms[#terms + 1] = term end
    table.insert(by_term[term], row)
  end
  table.sort(terms)
  local sum = 0
  for _, row in ipairs(r.paradigms) do sum = sum + row.accuracy end
  r.overall = #r.paradigms > 0 and sum / #r.paradigms or 0
  r.pooled = r.n_pairs > 0 and right_all / r.n_pairs or 0
  for _, term in ipairs(terms) do
    local rows, acc, pairs = by_term[term], 0, 0
    for _, row in ipairs(rows) do acc, pairs = acc + row.accuracy, pairs + row.pairs end
    r.phenomena[#r.phenomena + 1] = {term = term, accuracy = acc / #rows, paradigms = #rows, pairs = pairs,
                                     paper = summary.phenomena[term]}
  end
  r.seconds = wall() - t0
  r.encoder_tokens, r.scored_tokens = enc_tokens, scored_tokens
  if enc_tokens > 0 and r.seconds > 0 then r.tokens_per_second = enc_tokens / r.seconds end
  return r
end

--- The whole evaluation.  scorer_or_model_or_dir: a scoring function, a
-- model (with tok), or a checkpoint / run directory (loaded by
-- bert.evaluate.lm.load; tok may then be nil).  See the module comment for
-- opts and the result.
function M.run(src, tok, opts)
  opts = opts or {}
  local lm = require("bert.evaluate.lm")
  local dir = (opts.dir or "data/blimp"):gsub("/+$", "")
  local score, kind = src, opts.kind
  if type(src) == "string" then
    local model, t, info = lm.load(src, {kind = opts.kind, tokenizer = opts.tokenizer})
    tok, kind = tok or t, info.kind
    score = lm.scorer(model, tok, opts)
  elseif type(src) == "table" then
    local info
    score, info = lm.scorer(src, tok, opts)
    kind = info.kind
  elseif type(src) ~= "function" then
    error("blimp.run: argument #1 expected a scoring function, a model or a directory, got " .. type(src), 2)
  end
  local t0 = require("bert").wall_time()
  local summary = false
  if opts.summary ~= false then
    local path = type(opts.summary) == "string" and opts.summary or dir .. "/models_summary.jsonl"
    summary = M.read_summary(path)
  end
  local paradigms = M.read(dir, opts)
  local r = M.evaluate(score, paradigms, {chunk = opts.chunk, progress = opts.progress, summary = summary or nil,
                                          kind = kind})
  r.scoring_seconds, r.seconds = r.seconds, require("bert").wall_time() - t0   -- with reading the files
  return r
end
-- }============================================================

-- {============================================================ reporting

local function pct(x) return x and string.format("%.1f", 100 * x) or "–" end

local function paper_cells(p)
  local cells = {}
  for i, m in ipairs(M.MODELS) do cells[i] = pct(p and p[m]) end
  return table.concat(cells, " | ")
end

local function header(first)
  local names = {}
  for i, m in ipairs(M.MODELS) do names[i] = M.MODEL_NAMES[m] end
  return string.format("| %s | pairs | this model | %s |\n|---|---:|---:|%s\n", first, table.concat(names, " | "),
    string.rep("---:|", #M.MODELS))
end

--- Markdown: the overall accuracy, then per phenomenon and per paradigm,
-- each beside the paper's four models (accuracies in %).
function M.markdown(r)
  local out = {}
  out[#out + 1] = string.format("BLiMP: %d pairs in %d paradigms%s, %.0f s%s; accuracy = mean over paradigms " ..
    "(pooled over pairs: %s%%).\n\n", r.n_pairs, r.n_paradigms, r.kind and (", " .. r.kind .. " LM scores") or "",
    r.seconds or 0, r.tokens_per_second and string.format(" (%.0f tokens/s)", r.tokens_per_second) or "",
    pct(r.pooled))
  out[#out + 1] = header("")
  out[#out + 1] = string.format("| overall | %d | %s | %s |\n\n", r.n_pairs, pct(r.overall),
    paper_cells(r.paper and r.paper.overall))
  out[#out + 1] = header("phenomenon")
  for _, p in ipairs(r.phenomena) do
    out[#out + 1] = string.format("| %s | %d | %s | %s |\n", p.term, p.pairs, pct(p.accuracy), paper_cells(p.paper))
  end
  out[#out + 1] = "\n" .. header("paradigm")
  for _, p in ipairs(r.paradigms) do
    out[#out + 1] = string.format("| %s | %d | %s | %s |\n", p.uid, p.pairs, pct(p.accuracy), paper_cells(p.paper))
  end
  return table.concat(out)
end
-- }============================================================

return M
