--- bert.data.multilingual: a corpus in several languages, mixed for
-- pretraining with the smoothed language sampling of mBERT and XLM-R, and
-- what a shared vocabulary costs each language.
--
--   ml.rates(counts, alpha)          -> {LANG = q}: q_l = p_l^alpha / sum_k p_k^alpha with
--                                       p_l = n_l / sum_k n_k (Conneau & Lample 2019; mBERT used
--                                       alpha = 0.7, XLM-R 0.3); alpha 1 keeps the corpus' own
--                                       shares, alpha 0 gives every language the same share
--   ml.read(dir)                     -> {LANG = documents}, sorted languages: DIR/train/*.txt as
--                                       tools/fetch_multilingual.sh writes them; nil, msg
--   ml.mix(by_lang, alpha, seed)     -> documents, plan: each language's documents taken in a
--                                       seeded order, cycling (over-sampling) or stopping early
--                                       (under-sampling), until its sentences are q_l of the
--                                       corpus' total; the documents shuffled together
--   ml.prepare(dir, alpha, seed)     -> the path of DIR/mix/alpha-A-seed-S.txt (written once,
--                                       atomically) and its plan; ml.path(dir, alpha, seed) the path
--   ml.fertility(tok, by_lang, opts) -> {LANG = {sentences, words, chars, tokens, unknown, byte_pieces,
--                                       tokens_per_word, tokens_per_char, unknown_rate, byte_rate}}
--                                       (byte_pieces: <0xNN> byte-fallback tokens)
--   ml.fertility_table(f)            -> the same as text, a line per language
--
-- Counts n_l are sentences (XLM counts sentences too): words would make
-- every unspaced language (Chinese, Japanese, Thai) look tiny.
local corpus = require("bert.data.corpus")
local fs = require("bert.fs")

local M = {}

local function sorted_keys(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end

function M.rates(counts, alpha)
  if type(counts) ~= "table" then error("multilingual.rates: argument #1 (counts) expected a table", 2) end
  if type(alpha) ~= "number" or alpha < 0 or alpha > 1 or alpha ~= alpha then
    error("multilingual.rates: alpha must be a number in [0, 1], got " .. tostring(alpha), 2)
  end
  local total = 0
  for lang, n in pairs(counts) do
    if type(n) ~= "number" or n < 0 then
      error(string.format("multilingual.rates: the count of '%s' must be a non-negative number, got %s", lang,
        tostring(n)), 2)
    end
    total = total + n
  end
  if total == 0 then error("multilingual.rates: every count is 0", 2) end
  local q, z = {}, 0
  for lang, n in pairs(counts) do
    q[lang] = n > 0 and (n / total) ^ alpha or 0
    z = z + q[lang]
  end
  for lang in pairs(q) do q[lang] = q[lang] / z end
  return q
end

function M.read(dir)
  local names = fs.listdir(dir .. "/train")
  if not names then return nil, dir .. "/train: not found (sh tools/fetch_data.sh multilingual builds it)" end
  local by_lang, langs = {}, {}
  for _, name in ipairs(names) do
    local lang = name:match("^(.+)%.txt$")
    if lang then
      local docs, err = corpus.read(dir .. "/train/" .. name)
      if not docs then return nil, err end
      if #docs > 0 then by_lang[lang] = docs langs[#langs + 1] = lang end
    end
  end
  table.sort(langs)
  if #langs == 0 then return nil, dir .. "/train: no LANG.txt files" end
  return by_lang, langs
end

-- a small deterministic generator (xorshift64*), so that a mix is the same
-- on every machine and Lua build
local function rng(seed)
  local s = (seed * 0x9E3779B97F4A7C15) ~ 0x2545F4914F6CDD1D
  if s == 0 then s = 1 end
  return function(n)   -- 1..n
    s = s ~ (s << 13); s = s ~ (s >> 7); s = s ~ (s << 17)
    return ((s >> 1) % n) + 1
  end
end

local function shuffle(list, draw)
  for i = #list, 2, -1 do
    local j = draw(i)
    list[i], list[j] = list[j], list[i]
  end
end

local function sentences_of(docs)
  local n = 0
  for _, d in ipairs(docs) do n = n + #d end
  return n
end

function M.mix(by_lang, alpha, seed)
  seed = seed or 1
  local counts = {}
  for lang, docs in pairs(by_lang) do counts[lang] = sentences_of(docs) end
  local q = M.rates(counts, alpha)
  local total = 0
  for _, n in pairs(counts) do total = total + n end
  local draw = rng(seed)
  local out, plan = {}, {languages = {}, alpha = alpha, seed = seed, total_sentences = 0}
  for _, lang in ipairs(sorted_keys(by_lang)) do
    local docs = by_lang[lang]
    local target = math.max(1, math.floor(q[lang] * total + 0.5))
    local order = {}
    for i = 1, #docs do order[i] = i end
    shuffle(order, draw)
    local got, taken, k = 0, 0, 0
    while got < target and #docs > 0 do
      k = k % #docs + 1
      if k == 1 and taken > 0 then shuffle(order, draw) end   -- a new pass, a new order
      local d = docs[order[k]]
      out[#out + 1] = d
      got, taken = got + #d, taken + 1
    end
    plan.languages[lang] = {sentences = counts[lang], documents = #docs, share = counts[lang] / total,
      rate = q[lang], target_sentences = target, sentences_taken = got, documents_taken = taken,
      passes = got / counts[lang]}
    plan.total_sentences = plan.total_sentences + got
  end
  shuffle(out, draw)
  return out, plan
end

local function fmt_alpha(a) return (string.format("%.4f", a):gsub("0+$", ""):gsub("%.$", "")) end

function M.path(dir, alpha, seed)
  return string.format("%s/mix/alpha-%s-seed-%d.txt", dir, fmt_alpha(alpha), seed or 1)
end

function M.prepare(dir, alpha, seed)
  seed = seed or 1
  local path = M.path(dir, alpha, seed)
  local plan_path = path:gsub("%.txt$", ".json")
  local cjson = require("cjson")
  if fs.exists(path) and fs.exists(plan_path) then
    local ok, plan = pcall(cjson.decode, fs.read_file(plan_path) or "")
    if ok and type(plan) == "table" then return path, plan end
  end
  local by_lang, err = M.read(dir)
  if not by_lang then return nil, err end
  local docs, plan = M.mix(by_lang, alpha, seed)
  if not fs.isdir(dir .. "/mix") and not fs.mkdir(dir .. "/mix") then return nil, "cannot create " .. dir .. "/mix" end
  local ok, werr = corpus.write(path, docs)
  if not ok then return nil, werr end
  ok, werr = fs.write_atomic(plan_path, cjson.encode(plan) .. "\n")
  if not ok then return nil, werr end
  return path, plan
end

-- characters of a string without its spaces (UTF-8 code points)
local function chars(s)
  local bare = s:gsub("%s", "")
  return utf8.len(bare) or #bare
end

function M.fertility(tok, by_lang, opts)
  opts = opts or {}
  local max = opts.max_sentences or 2000
  local unk = tok:token_to_id("[UNK]") or tok:token_to_id("<unk>")
  -- byte-fallback pieces <0x00>..<0xFF>: characters outside the vocabulary's alphabet
  local byte_piece = {}
  for b = 0, 255 do
    local id = tok:token_to_id(string.format("<0x%02X>", b))
    if id then byte_piece[id] = true end
  end
  local out = {}
  for _, lang in ipairs(sorted_keys(by_lang)) do
    local r = {sentences = 0, words = 0, chars = 0, tokens = 0, unknown = 0, byte_pieces = 0}
    -- the first sentences of every document in turn: a sample across documents
    local docs, row = by_lang[lang], 1
    while r.sentences < max do
      local any = false
      for _, d in ipairs(docs) do
        local s = d[row]
        if s then
          any = true
          local ids = tok:encode(s, {add_special_tokens = false}).ids
          r.sentences, r.tokens = r.sentences + 1, r.tokens + #ids
          for _ in s:gmatch("%S+") do r.words = r.words + 1 end
          r.chars = r.chars + chars(s)
          for _, id in ipairs(ids) do
            if id == unk then r.unknown = r.unknown + 1 end
            if byte_piece[id] then r.byte_pieces = r.byte_pieces + 1 end
          end
          if r.sentences >= max then break end
        end
      end
      if not any then break end
      row = row + 1
    end
    r.tokens_per_word = r.words > 0 and r.tokens / r.words or 0 / 0
    r.tokens_per_char = r.chars > 0 and r.tokens / r.chars or 0 / 0
    r.unknown_rate = r.tokens > 0 and r.unknown / r.tokens or 0 / 0
    r.byte_rate = r.tokens > 0 and r.byte_pieces / r.tokens or 0 / 0
    out[lang] = r
  end
  return out
end

function M.fertility_table(f)
  local lines = {string.format("%-8s %9s %9s %9s %12s %12s %9s %9s", "language", "sentences", "words", "tokens",
    "tokens/word", "tokens/char", "unknown", "bytes")}
  for _, lang in ipairs(sorted_keys(f)) do
    local r = f[lang]
    lines[#lines + 1] = string.format("%-8s %9d %9d %9d %12.2f %12.2f %8.2f%% %8.2f%%", lang, r.sentences, r.words,
      r.tokens, r.tokens_per_word, r.tokens_per_char, 100 * r.unknown_rate, 100 * r.byte_rate)
  end
  return table.concat(lines, "\n")
end

return M
