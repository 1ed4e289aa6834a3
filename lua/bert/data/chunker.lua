--- bert.data.chunker: a statistical phrase finder for ERNIE 1.0's
-- phrase-level masking (mask_mode "phrase" in bert.data.pretraining).
--
--   local chunker = require("bert.data.chunker")
--   local phrases = chunker.learn{documents = train_docs, tokenizer = tok}
--   assert(phrases:save("runs/x/phrases.txt"))            -- atomic
--   local again = assert(chunker.load("runs/x/phrases.txt", {vocab_size = tok:vocab_size()}))
--   phrases:count(), phrases.list[i] = {ids = {...}, count = n, score = s, text = "new york"}
--
-- ERNIE 1.0 (Sun et al. 2019) chunks sentences into phrases with a
-- linguistic chunker.  This one needs no outside tool: it learns
-- collocations from the training documents as Mikolov et al. 2013
-- ("Distributed representations of words and phrases", word2phrase) do.
-- Two adjacent units a b (words, later phrases) join when
--     score(a, b) = (count(a b) - min_count) * N / (count(a) * count(b))
-- passes `threshold` (N: the units in the corpus), count(a b) >= min_count
-- and they hold at most max_words words together; each pass rewrites the
-- corpus with the joined units (greedily, left to right), so a second pass
-- finds phrases of three and four words.  Phrases never hold a word
-- without a letter or digit (punctuation) and never cross a sentence.
-- The threshold 10 (word2phrase uses 100 on much larger corpora) was
-- chosen on Brown: 5,153 phrases covering 20% of the words, names and
-- frequent chunks alike; at 100 only 2.6% of the words, mostly names.
--
-- Everything is in token ids: a word is a first piece and its
-- continuation pieces (word_continuation), a phrase the ids of its words,
-- exactly as they occur in tokenised text.  The masker finds them by hash
-- (csrc/data/phrases.c).
--
-- The file is text, one phrase a line: ids (space-separated), count, score
-- and the decoded text, tab-separated, between a header line and an end
-- line that counts the phrases; load refuses anything else naming the file
-- and the line.
local core = require("bert.core")
local fs = require("bert.fs")

local M = {}

M.HEADER = "# bert phrase table 1"
M.defaults = {min_count = 5, threshold = 10, passes = 2, max_words = 4, max_phrases = 50000}

local WORDPIECE, BYTE_BPE, METASPACE = "##", "\196\160", "\226\150\129"   -- ##x, Ġx, ▁x

local function is_special_form(t) return t:match("^%[.*%]$") or t:match("^<.*>$") end

--- The ids of the pieces that continue a word, sorted, by the vocabulary's
-- convention: WordPiece's ##x, or, for byte-level BPE (Ġx) and
-- SentencePiece (▁x), every piece that does not start a word (special
-- tokens such as [CLS] or <s> are never continuations).  V: ids below it.
function M.word_continuation(tok, V)
  local vocab = tok:get_vocab()
  local n = {[WORDPIECE] = 0, [BYTE_BPE] = 0, [METASPACE] = 0}
  for t in pairs(vocab) do
    for prefix in pairs(n) do if t:sub(1, #prefix) == prefix then n[prefix] = n[prefix] + 1 end end
  end
  local style = WORDPIECE
  if n[BYTE_BPE] > n[style] then style = BYTE_BPE end
  if n[METASPACE] > n[style] then style = METASPACE end
  local ids = {}
  for t, id in pairs(vocab) do
    if id < V then
      local starts = t:sub(1, #style) == style
      local cont
      if style == WORDPIECE then cont = starts else cont = not starts and not is_special_form(t) end
      if cont then ids[#ids + 1] = id end
    end
  end
  table.sort(ids)
  return ids
end

local function argerr(fname, msg) error(fname .. ": " .. msg, 3) end

------------------------------------------------------------- phrases

local Phrases = {}
Phrases.__index = Phrases

local function new_phrases(list, info)
  return setmetatable({list = list, info = info or {}}, Phrases)
end

--- Is v a phrase table of this module?
function M.is_phrases(v) return getmetatable(v) == Phrases end

--- The number of phrases.
function Phrases:count() return #self.list end

--- The C table the masker reads (bert.core.data.phrases), made once.
function Phrases:handle()
  if not self.c then
    local ids = {}
    for i, p in ipairs(self.list) do ids[i] = p.ids end
    self.c = core.data.phrases(ids)
  end
  return self.c
end

--- A fingerprint of the phrases in order (16 hex digits): shard sets
-- record it, so that a phrase file changed under them is noticed.
function Phrases:checksum() return self:handle():checksum() end

--- The file's text (see the module comment).
function Phrases:serialize()
  local out = {M.HEADER}
  if self.info.comment then out[#out + 1] = "# " .. self.info.comment end
  out[#out + 1] = "# ids\tcount\tscore\ttext"
  for _, p in ipairs(self.list) do
    out[#out + 1] = string.format("%s\t%d\t%.6g\t%s", table.concat(p.ids, " "), p.count, p.score,
      (tostring(p.text or ""):gsub("[%c]", " ")))
  end
  out[#out + 1] = string.format("# end: %d phrases", #self.list)
  return table.concat(out, "\n") .. "\n"
end

--- Writes the table to path atomically: true, or nil, message.
function Phrases:save(path)
  return fs.write_atomic(path, self:serialize())
end

--- Reads a phrase file: the table, or nil and a message naming the file
-- (and the line) when it is missing or damaged.  opts.vocab_size: ids must
-- be below it.
function M.load(path, opts)
  if type(path) ~= "string" then argerr("chunker.load", "argument #1 (path) expected a string, got " .. type(path)) end
  opts = opts or {}
  local V = opts.vocab_size
  if V ~= nil and math.type(V) ~= "integer" then
    argerr("chunker.load", "option 'vocab_size' expected an integer, got " .. tostring(V))
  end
  local text, err = fs.read_file(path)
  if not text then return nil, "chunker.load: cannot read " .. path .. ": " .. tostring(err) end
  local list, seen, lineno, ended, comment = {}, {}, 0, nil, nil
  local function bad(msg) return nil, string.format("chunker.load: %s:%d: %s", path, lineno, msg) end
  for line in text:gmatch("([^\n]*)\n") do
    lineno = lineno + 1
    if ended then return bad("text after the end line") end
    if lineno == 1 then
      if line ~= M.HEADER then return bad("not a phrase table (expected '" .. M.HEADER .. "')") end
    elseif line:sub(1, 1) == "#" then
      local n = line:match("^# end: (%d+) phrases$")
      if n then
        if tonumber(n) ~= #list then return bad(string.format("the end line counts %s phrases, the file holds %d", n, #list)) end
        ended = true
      elseif lineno == 2 then
        comment = line:sub(3)
      end
    else
      local ids_s, count_s, score_s, phrase_text = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)$")
      if not ids_s then return bad("expected 4 tab-separated fields (ids, count, score, text)") end
      if not ids_s:match("^%d+ %d+[ %d]*$") or ids_s:match("  ") or ids_s:match(" $") then
        return bad("ids must be two or more token ids separated by single spaces, got '" .. ids_s .. "'")
      end
      local ids = {}
      for d in ids_s:gmatch("%d+") do
        local id = math.tointeger(tonumber(d))
        if not id or (V and id >= V) then
          return bad(string.format("id %s outside the vocabulary (%s)", d, tostring(V)))
        end
        ids[#ids + 1] = id
      end
      if #ids > 64 then return bad(#ids .. " ids, more than 64") end
      local count, score = math.tointeger(tonumber(count_s)), tonumber(score_s)
      if not count or count < 1 then return bad("count must be a positive integer, got '" .. count_s .. "'") end
      if not score or score ~= score or score == math.huge or score == -math.huge then
        return bad("score must be a finite number, got '" .. score_s .. "'")
      end
      if seen[ids_s] then return bad("repeats the phrase of line " .. seen[ids_s]) end
      seen[ids_s] = lineno
      list[#list + 1] = {ids = ids, count = count, score = score, text = phrase_text}
    end
  end
  if text:sub(-1) ~= "\n" and #text > 0 then
    lineno = lineno + 1
    return bad("the last line has no newline (a truncated file?)")
  end
  if not ended then
    return nil, string.format("chunker.load: %s:%d: no '# end: N phrases' line (a truncated file?)", path, lineno)
  end
  return new_phrases(list, {comment = comment})
end

--- A table from a list of phrases {ids = {...}, count = n, score = s,
-- text = "..."} (count, score and text optional), for tests and tools.
function M.from_list(list)
  if type(list) ~= "table" then argerr("chunker.from_list", "argument #1 expected a list, got " .. type(list)) end
  local out = {}
  for i, p in ipairs(list) do
    if type(p) ~= "table" or type(p.ids) ~= "table" then
      argerr("chunker.from_list", "phrase " .. i .. " expected a table with ids")
    end
    out[i] = {ids = p.ids, count = p.count or 1, score = p.score or 0, text = p.text or ""}
  end
  local t = new_phrases(out)
  t:handle()   -- checks the ids now
  return t
end

--- A run's phrase table at path: loaded when the file exists, else learned
-- from opts.documents with opts.tokenizer (and opts's learning options)
-- and saved there atomically, so that a resumed run and every shard set
-- of the run use the same phrases; with opts.repair a damaged file is
-- learned again (the same documents give the same table).  Returns the
-- table and a line saying what was done, or nil and a message naming the
-- file.
function M.ensure(path, opts)
  local why
  if fs.exists(path) then
    local t, err = M.load(path, {vocab_size = opts.tokenizer:vocab_size()})
    if t then return t, string.format("loaded %d phrases from %s", t:count(), path) end
    if not opts.repair then return nil, err end
    why = err
  end
  local t0 = core.wall_time()
  local t = M.learn(opts)
  local ok, err = t:save(path)
  if not ok then return nil, "chunker.ensure: cannot write " .. path .. ": " .. tostring(err) end
  return t, string.format("%slearned %d phrases in %.1f s (%.1f%% of the training words inside one), saved as %s",
    why and ("repaired (" .. why .. "): ") or "", t:count(), core.wall_time() - t0, 100 * t.info.coverage, path)
end

------------------------------------------------------------- learning

--- Learns a phrase table from documents (lists of sentence strings):
-- opts = {documents, tokenizer, min_count = 5, threshold = 10, passes = 2,
-- max_words = 4, max_phrases = 50000}.  The phrases are ordered by score,
-- highest first.
function M.learn(opts)
  local F = "chunker.learn"
  if type(opts) ~= "table" then argerr(F, "argument #1 (options) expected a table, got " .. type(opts)) end
  local docs, tok = opts.documents, opts.tokenizer
  if type(docs) ~= "table" then argerr(F, "option 'documents' expected a list of documents, got " .. type(docs)) end
  if type(tok) ~= "table" and type(tok) ~= "userdata" then
    argerr(F, "option 'tokenizer' expected a bert.tokenizer object, got " .. type(tok))
  end
  local o = {}
  for k, def in pairs(M.defaults) do
    local v = opts[k]
    if v == nil then v = def end
    if type(v) ~= "number" or v ~= v or v < (k == "threshold" and 0 or 1) or (k ~= "threshold" and math.type(v) ~= "integer"
        and v ~= math.floor(v)) then
      argerr(F, string.format("option '%s' must be %s, got %s", k,
        k == "threshold" and "a number >= 0" or "a positive integer", tostring(v)))
    end
    o[k] = k == "threshold" and v or math.tointeger(v)
  end
  if o.max_words < 2 then argerr(F, "option 'max_words' must be at least 2, got " .. o.max_words) end

  -- words: interned token-id sequences; a unit is a run of words (a word
  -- at first), interned by its word indices
  local V = tok:vocab_size()
  local cont = {}
  for _, id in ipairs(M.word_continuation(tok, V)) do cont[id] = true end
  local has_text = {}   -- per id: does the piece hold a letter or digit?
  local function piece_has_text(id)
    local v = has_text[id]
    if v == nil then
      local t = tok:id_to_token(id) or ""
      t = t:gsub("^##", ""):gsub("^" .. BYTE_BPE, ""):gsub("^" .. METASPACE, "")
      v = not is_special_form(t) and (t:find("[%w\128-\255]") ~= nil)
      has_text[id] = v
    end
    return v
  end
  local word_index, word_ids, word_ok = {}, {}, {}
  local unit_index, unit_words, unit_ok = {}, {}, {}
  local function unit_of_words(words)
    local key = table.concat(words, ",")
    local u = unit_index[key]
    if not u then
      u = #unit_words + 1
      unit_index[key], unit_words[u] = u, words
      local ok = true
      for _, w in ipairs(words) do ok = ok and word_ok[w] end
      unit_ok[u] = ok
    end
    return u
  end
  local sentences, word_unit = {}, {}
  local function add_sentence(ids)
    local s, i, n = {}, 1, #ids
    while i <= n do
      local j = i
      while j < n and cont[ids[j + 1]] do j = j + 1 end
      -- most words are one piece: their id is the key (no string made), else "id id ..."
      local key = i == j and ids[i] or table.concat(ids, " ", i, j)
      local w = word_index[key]
      if not w then
        w = #word_ids + 1
        word_index[key] = w
        local list, ok = {}, false
        for k = i, j do list[#list + 1] = ids[k]; ok = ok or piece_has_text(ids[k]) end
        word_ids[w], word_ok[w] = list, ok
        word_unit[w] = unit_of_words({w})
      end
      s[#s + 1] = word_unit[w]
      i = j + 1
    end
    if #s > 1 then sentences[#sentences + 1] = s end
  end
  local texts = {}
  local function flush()
    if #texts == 0 then return end
    for _, e in ipairs(tok:encode_batch(texts, {add_special_tokens = false})) do add_sentence(e.ids) end
    texts = {}
  end
  for d, doc in ipairs(docs) do
    if type(doc) ~= "table" then argerr(F, string.format("document %d expected a list of sentence strings, got %s", d, type(doc))) end
    for s, sent in ipairs(doc) do
      if type(sent) ~= "string" then argerr(F, string.format("document %d sentence %d expected string, got %s", d, s, type(sent))) end
      texts[#texts + 1] = sent
      if #texts >= 4096 then flush() end
    end
  end
  flush()

  local SHIFT = 1 << 31
  local function count_units()
    local c, total = {}, 0
    for _, s in ipairs(sentences) do
      for _, u in ipairs(s) do c[u] = (c[u] or 0) + 1 end
      total = total + #s
    end
    return c, total
  end
  local score_of = {}   -- unit -> the score of the join that made it
  for _ = 1, o.passes do
    local c, N = count_units()
    local pair = {}
    for _, s in ipairs(sentences) do
      for i = 1, #s - 1 do
        local a, b = s[i], s[i + 1]
        if unit_ok[a] and unit_ok[b] and #unit_words[a] + #unit_words[b] <= o.max_words then
          local k = a * SHIFT + b
          pair[k] = (pair[k] or 0) + 1
        end
      end
    end
    local accepted, any = {}, false
    for k, n in pairs(pair) do
      if n >= o.min_count then
        local a, b = k // SHIFT, k % SHIFT
        local score = (n - o.min_count) * N / (c[a] * c[b])
        if score >= o.threshold then accepted[k] = score; any = true end
      end
    end
    if not any then break end
    for si, s in ipairs(sentences) do   -- rewrite: joined pairs, greedily left to right
      local out, i = {}, 1
      while i <= #s do
        local a, b = s[i], s[i + 1]
        local score = b and accepted[a * SHIFT + b]
        if score then
          local words = {}
          for _, w in ipairs(unit_words[a]) do words[#words + 1] = w end
          for _, w in ipairs(unit_words[b]) do words[#words + 1] = w end
          local u = unit_of_words(words)
          score_of[u] = math.max(score_of[u] or 0, score)
          out[#out + 1] = u
          i = i + 2
        else
          out[#out + 1] = a
          i = i + 1
        end
      end
      sentences[si] = out
    end
  end

  -- the phrases: units of two or more words still seen min_count times
  local c, N = count_units()
  local words_total, words_joined = 0, 0   -- the share of words inside a phrase, for the record
  for u, n in pairs(c) do
    local w = #unit_words[u]
    words_total = words_total + n * w
    if w >= 2 then words_joined = words_joined + n * w end
  end
  local list = {}
  for u, words in ipairs(unit_words) do
    if #words >= 2 and (c[u] or 0) >= o.min_count then
      local ids = {}
      for _, w in ipairs(words) do for _, id in ipairs(word_ids[w]) do ids[#ids + 1] = id end end
      if #ids <= 64 then
        list[#list + 1] = {ids = ids, count = c[u], score = score_of[u] or 0, key = table.concat(ids, " ")}
      end
    end
  end
  table.sort(list, function(x, y)
    if x.score ~= y.score then return x.score > y.score end
    return x.key < y.key
  end)
  for i = #list, o.max_phrases + 1, -1 do list[i] = nil end
  for _, p in ipairs(list) do
    p.key = nil
    p.text = tok:decode(p.ids)
  end
  local coverage = words_joined / math.max(1, words_total)
  return new_phrases(list, {coverage = coverage, comment = string.format(
    "learned by bert.data.chunker from %d words in %d sentences (%.1f%% of them inside a phrase): " ..
    "min_count %d, threshold %g, passes %d, max_words %d",
    words_total, #sentences, 100 * coverage, o.min_count, o.threshold, o.passes, o.max_words)})
end

return M
