-- Builds a pretraining corpus from several sources: deduplicated, with every
-- evaluation text cut out, and a fixed held-out part for language-model
-- evaluation (bits per byte).  tools/fetch_english.sh runs it for
-- `--corpus english`:
--
--   lua5.4 tools/build_corpus.lua --output data/english --eval-dir data \
--     --source brown=data/brown/brown.txt --source sotu=data/english/sources/sotu.jsonl ... \
--     --heldout-from sotu,... [--heldout-per-mille 25] [--eval-sets glue,squad,...]
--
-- A source is NAME=PATH or NAME@LANG=PATH, PATH in BERT's plain format
-- (documents get the ids NAME:1, NAME:2, ...) or .jsonl, a {"id": "...",
-- "sentences": [...]} per document, with an optional "lang" that overrides
-- the source's LANG.  The order of --source is the priority: where text
-- repeats, the earlier source keeps it.
--
-- Languages (tools/fetch_multilingual.sh): with --by-language the training
-- and held-out parts are written per language, OUTPUT/train/LANG.txt and
-- OUTPUT/heldout/LANG.txt, and stats.json counts each language;
-- --languages L1,L2 keeps only documents of those languages (the others are
-- counted as skipped).  A document without a language is "und".
--
-- Normalisation (every comparison below): ASCII lowercased, the Unicode
-- General Punctuation block (curly quotes, dashes, ellipsis...), Latin-1
-- punctuation and CJK punctuation (U+3000-U+303F) turned to spaces, each
-- character of a script written without spaces between words (CJK
-- ideographs, kana, Thai, Lao, Myanmar, Khmer) made a word of its own, then
-- words are the maximal runs of ASCII letters/digits and non-ASCII bytes.
-- "Atlanta's" and Brown's "Atlanta 's" are both "atlanta s"; case and
-- punctuation never matter; a Chinese sentence of 5 characters has 5 words.
--
-- Each document goes through, in order:
--   1. duplicate documents: a document whose normalised text (all its
--      sentences) equals an earlier document's is dropped whole;
--   2. evaluation exclusion, exact: a sentence of 5 or more words whose
--      normalised text equals an evaluation text, or one of its sentences
--      (bert.data.corpus.split_sentences), is dropped;
--   3. evaluation exclusion, 13-gram (GPT-3's contamination rule, Brown et
--      al. 2020, appendix C): every word 13-gram of the document (across
--      sentence boundaries) is looked up among the 13-grams of the
--      evaluation texts; every sentence a shared 13-gram touches is dropped;
--   4. duplicate sentences: a sentence of 5 or more words already kept in
--      another document is dropped (repeats inside one document, such as a
--      psalm's refrain, stay);
--   5. a document left without sentences is dropped.
-- Sentences and 13-grams are looked up in hash tables (13-grams as 64-bit
-- polynomial hashes of per-word random 64-bit values; a false match is
-- about 1e-12 likely per lookup), so the build is linear in the text.
--
-- Evaluation texts (--eval-dir DIR, --eval-sets, all of these by default);
-- a missing set is an error (sh tools/fetch_data.sh SET fetches it):
--   glue    DIR/glue/*/*.tsv: every field of 3 or more words, every row
--   blimp   DIR/blimp/data/*.jsonl: sentence_good, sentence_bad
--   squad   DIR/squad/*.json: contexts, questions, answers
--   wnut17  DIR/wnut17/*: the token column, a sentence per blank-line block
--   ud      DIR/ud/*/*.conllu: the "# text = " lines
--   xnli    DIR/xnli/*.tsv, pawsx  DIR/pawsx/*.tsv: as glue (every language)
--
-- Held-out part: a document of a --heldout-from source goes there when a
-- hash of "SOURCE/ID" (FNV-1a, 64-bit, mixed) modulo 1000 is below
-- --heldout-per-mille: a fixed choice per document, independent of the
-- other documents.  Only sources that no built-in corpus contains should be
-- named (not brown or kjv: models are pretrained on those too).  The
-- held-out documents pass the steps above after the sources not named in
-- --heldout-from and before the training documents of those named, so a
-- sentence of 5+ words never appears both in the held-out part and in the
-- training part, nor in a held-out document and brown or kjv.
--
-- Outputs in --output, each written to a temporary file and renamed (the
-- renames come after all are written, stats.json last): english.txt
-- (training part) and heldout.txt, plain format, documents in source order;
-- stats.json: per source the input, training and held-out documents,
-- sentences, words (whitespace-separated) and bytes (UTF-8 lines with their
-- newlines), what each step removed (sentences, and documents touched), per
-- evaluation set too, the held-out ids; totals; removed.tsv: a line per
-- removed sentence or duplicate document (reason, source, id, the
-- evaluation sets matched or the "SOURCE/ID" kept instead, the sentence).
-- --name changes the file name english.txt.
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath

local cli = require("bert.cli")
local cjson = require("cjson")
local corpus = require("bert.data.corpus")
local fs = require("bert.fs")

local ALL_SETS = {"glue", "blimp", "squad", "wnut17", "ud", "xnli", "pawsx"}
local MIN_WORDS = 5      -- exact-match and sentence-dedup threshold
local N = 13             -- the n of the n-gram rule

local p = cli.parser("build_corpus.lua", "Build a deduplicated pretraining corpus with the evaluation texts " ..
  "excluded and a fixed held-out part (see the comment at the top of this file).")
p:option("--source", "NAME=PATH (plain format or .jsonl), in priority order; repeatable"):count("+")
p:option("--heldout-from", "Comma-separated source names the held-out documents may come from, each NAME or " ..
  "NAME=PER_MILLE (its own share)", "")
p:option("--heldout-per-mille", "Held-out share of those sources' documents, per mille", "25")
  :convert(cli.integer("--heldout-per-mille", 0, 1000))
p:option("--min-heldout-bytes", "Fail when the held-out part is smaller", "0"):convert(cli.integer("--min-heldout-bytes", 0))
p:option("--eval-dir", "Where the evaluation sets live", "data")
p:option("--eval-sets", "Comma-separated evaluation sets to exclude (" .. table.concat(ALL_SETS, ",") ..
  "; 'none' for none)", table.concat(ALL_SETS, ","))
p:option("--output", "Output directory", "data/english")
p:option("--name", "File name of the training part", "english.txt")
p:flag("--by-language", "Write the training and held-out parts per language: OUTPUT/train/LANG.txt, OUTPUT/heldout/LANG.txt")
p:option("--languages", "Comma-separated languages to keep (default: all)")
p:flag("--quiet", "No summary")
local args = p:parse()

local function die(msg)
  io.stderr:write("build_corpus: ", msg, "\n")
  os.exit(1)
end

local function split_list(s)
  local out = {}
  for x in s:gmatch("[^,%s]+") do out[#out + 1] = x end
  return out
end

local clock0 = os.time()
local cpu0 = os.clock()

---------------------------------------------------------- normalisation

-- a 3-byte UTF-8 character: spaces around it when its script has no spaces
-- between words, a space for CJK punctuation, itself otherwise
local function spaced(c)
  local b1, b2, b3 = c:byte(1, 3)
  local cp = ((b1 & 0x0F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
  if cp >= 0x3000 and cp <= 0x303F then return " " end
  if (cp >= 0x0E00 and cp <= 0x0EFF) or (cp >= 0x1000 and cp <= 0x109F) or (cp >= 0x1780 and cp <= 0x17FF)
     or (cp >= 0x3040 and cp <= 0x30FF) or (cp >= 0x3400 and cp <= 0x4DBF) or (cp >= 0x4E00 and cp <= 0x9FFF)
     or (cp >= 0xF900 and cp <= 0xFAFF) then
    return " " .. c .. " "
  end
  return c
end

local function words_of(s)
  s = s:lower():gsub("\226\128[\128-\191]", " "):gsub("\194[\160-\191]", " ")
    :gsub("[\224-\239][\128-\191][\128-\191]", spaced)
  local ws = {}
  for w in s:gmatch("[%w\128-\255]+") do ws[#ws + 1] = w end
  return ws
end

local function count_words(s)
  local n = 0
  for _ in s:gmatch("%S+") do n = n + 1 end
  return n
end

-- per-word random 64-bit values (deterministic: a fixed seed)
math.randomseed(0x5eed, 0x13)
local WORDV = setmetatable({}, {__index = function(t, w)
  local v = math.random(0) | 1
  t[w] = v
  return v
end})
local B = 0x100000001b3          -- multiplier of the polynomial hash (wraps)
local BN = 1                     -- B^N
for _ = 1, N do BN = BN * B end

-- calls f(h, i) for each N-gram of the word-value list vs, i its first index
local function each_gram(vs, f)
  local n = #vs
  if n < N then return end
  local h = 0
  for i = 1, N do h = h * B + vs[i] end
  f(h, 1)
  for i = N + 1, n do
    h = h * B + vs[i] - vs[i - N] * BN
    f(h, i - N + 1)
  end
end

local function hash64(s)          -- FNV-1a, then splitmix64's finaliser
  local h = 0xcbf29ce484222325
  for i = 1, #s do h = (h ~ s:byte(i)) * 0x100000001b3 end
  h = (h ~ (h >> 30)) * 0xbf58476d1ce4e5b9
  h = (h ~ (h >> 27)) * 0x94d049bb133111eb
  return h ~ (h >> 31)
end

------------------------------------------------------- evaluation texts

local function read_file(path)
  local s, err = fs.read_file(path)
  if not s then die(err) end
  return s
end

local function lines(text)
  return (text .. "\n"):gmatch("([^\n]*)\r?\n")
end

local function files_in(dir, suffix)   -- sorted, suffix matched literally
  local names = fs.listdir(dir)
  local out = {}
  for _, n in ipairs(names or {}) do
    if suffix == nil or n:sub(-#suffix) == suffix then out[#out + 1] = dir .. "/" .. n end
  end
  return out
end

local function subdirs(dir)
  local out = {}
  for _, n in ipairs(fs.listdir(dir) or {}) do
    if fs.isdir(dir .. "/" .. n) then out[#out + 1] = dir .. "/" .. n end
  end
  return out
end

local function tsv_texts(paths, emit)
  for _, path in ipairs(paths) do
    for line in lines(read_file(path)) do
      for field in (line .. "\t"):gmatch("([^\t]*)\t") do
        if #words_of(field) >= 3 then emit(field) end   -- CJK fields: a word per character
      end
    end
  end
end

local function tsvs_under(dir)           -- DIR/*.tsv and DIR/*/*.tsv
  local paths = files_in(dir, ".tsv")
  for _, d in ipairs(subdirs(dir)) do
    for _, f in ipairs(files_in(d, ".tsv")) do paths[#paths + 1] = f end
  end
  return paths
end

local READERS = {}
function READERS.glue(dir, emit) local p_ = tsvs_under(dir .. "/glue"); tsv_texts(p_, emit); return #p_ end
function READERS.xnli(dir, emit) local p_ = tsvs_under(dir .. "/xnli"); tsv_texts(p_, emit); return #p_ end
function READERS.pawsx(dir, emit) local p_ = tsvs_under(dir .. "/pawsx"); tsv_texts(p_, emit); return #p_ end
function READERS.blimp(dir, emit)
  local paths = files_in(dir .. "/blimp/data", ".jsonl")
  for _, path in ipairs(paths) do
    for line in lines(read_file(path)) do
      if line:find("%S") then
        local ok, rec = pcall(cjson.decode, line)
        if not ok or type(rec) ~= "table" then die(path .. ": not JSON lines") end
        for _, k in ipairs({"sentence_good", "sentence_bad"}) do
          if type(rec[k]) == "string" then emit(rec[k]) end
        end
      end
    end
  end
  return #paths
end
function READERS.squad(dir, emit)
  local paths = files_in(dir .. "/squad", ".json")
  for _, path in ipairs(paths) do
    local ok, js = pcall(cjson.decode, read_file(path))
    if not ok or type(js) ~= "table" or type(js.data) ~= "table" then die(path .. ": not SQuAD JSON") end
    for _, article in ipairs(js.data) do
      for _, para in ipairs(article.paragraphs or {}) do
        if type(para.context) == "string" then emit(para.context) end
        for _, qa in ipairs(para.qas or {}) do
          if type(qa.question) == "string" then emit(qa.question) end
          for _, a in ipairs(qa.answers or {}) do
            if type(a.text) == "string" then emit(a.text) end
          end
        end
      end
    end
  end
  return #paths
end
function READERS.wnut17(dir, emit)
  local paths = {}
  for _, path in ipairs(files_in(dir .. "/wnut17")) do
    local base = path:match("[^/]*$")
    if not (base:match("%.md$") or base:match("%.txt$") or base == "SHA256SUMS" or base:match("^README")) then
      paths[#paths + 1] = path
    end
  end
  for _, path in ipairs(paths) do
    local toks = {}
    for line in lines(read_file(path) .. "\n") do
      local t = line:match("^([^\t]+)")
      if t and t:find("%S") then toks[#toks + 1] = t
      elseif #toks > 0 then emit(table.concat(toks, " ")); toks = {} end
    end
  end
  return #paths
end
function READERS.ud(dir, emit)
  local paths = {}
  for _, d in ipairs(subdirs(dir .. "/ud")) do
    for _, f in ipairs(files_in(d, ".conllu")) do paths[#paths + 1] = f end
  end
  for _, path in ipairs(paths) do
    for line in lines(read_file(path)) do
      local t = line:match("^# text = (.*)$")
      if t then emit(t) end
    end
  end
  return #paths
end

local sets = {}
if args.eval_sets ~= "none" then sets = split_list(args.eval_sets) end
if #sets > 62 then die("at most 62 evaluation sets") end
local EXACT, GRAMS = {}, {}          -- normalised sentence / 13-gram hash -> bit mask of sets
local set_stats = {}
for bit, name in ipairs(sets) do
  local reader = READERS[name]
  if not reader then die("unknown evaluation set " .. name .. " (known: " .. table.concat(ALL_SETS, ", ") .. ")") end
  local m = 1 << (bit - 1)
  local st = {texts = 0, exact_keys = 0, ngrams = 0}
  local function add_exact(ws)
    if #ws >= MIN_WORDS then
      local k = table.concat(ws, " ")
      local old = EXACT[k]
      if not old then st.exact_keys = st.exact_keys + 1 end
      EXACT[k] = (old or 0) | m
    end
  end
  local nfiles = reader(args.eval_dir, function(text)
    st.texts = st.texts + 1
    local ws = words_of(text)
    add_exact(ws)
    local sents = corpus.split_sentences(text)
    if #sents > 1 then
      for _, s in ipairs(sents) do add_exact(words_of(s)) end
    end
    local vs = {}
    for i, w in ipairs(ws) do vs[i] = WORDV[w] end
    each_gram(vs, function(h)
      local old = GRAMS[h]
      if not old then st.ngrams = st.ngrams + 1 end
      GRAMS[h] = (old or 0) | m
    end)
  end)
  if nfiles == 0 or st.texts == 0 then
    die(string.format("evaluation set %s not found under %s/%s (sh tools/fetch_data.sh %s)",
      name, args.eval_dir, name, name))
  end
  st.files = nfiles
  set_stats[name] = st
end

-------------------------------------------------------------- sources

local function read_source(name, path, lang)
  local docs = {}
  if path:match("%.jsonl$") then
    local n = 0
    for line in lines(read_file(path)) do
      n = n + 1
      if line:find("%S") then
        local ok, rec = pcall(cjson.decode, line)
        if not ok or type(rec) ~= "table" or type(rec.sentences) ~= "table" then
          die(string.format("%s:%d: expected {\"id\": ..., \"sentences\": [...]}", path, n))
        end
        local sents = {}
        for _, s in ipairs(rec.sentences) do
          if type(s) == "string" then
            s = s:gsub("%s+", " "):match("^ ?(.-) ?$")
            if s ~= "" then sents[#sents + 1] = s end
          end
        end
        local doc_lang = type(rec.lang) == "string" and rec.lang ~= "" and rec.lang or lang
        if #sents > 0 then docs[#docs + 1] = {id = tostring(rec.id or (#docs + 1)), sentences = sents, lang = doc_lang} end
      end
    end
  else
    local d, err = corpus.read(path)
    if not d then die(err) end
    for i, sents in ipairs(d) do docs[i] = {id = name .. ":" .. i, sentences = sents, lang = lang} end
  end
  return docs
end

local function new_count() return {documents = 0, sentences = 0, words = 0, bytes = 0} end
local function count_doc(c, sents)
  c.documents = c.documents + 1
  for _, s in ipairs(sents) do
    c.sentences = c.sentences + 1
    c.words = c.words + count_words(s)
    c.bytes = c.bytes + #s + 1
  end
end

local heldout_from = {}   -- source name -> its held-out share, per mille
for _, spec in ipairs(split_list(args.heldout_from)) do
  local n, pm = spec:match("^([^=]+)=?(.*)$")
  pm = pm == "" and args.heldout_per_mille or math.tointeger(tonumber(pm))
  if not pm or pm < 0 or pm > 1000 then die("--heldout-from " .. spec .. ": expected NAME or NAME=PER_MILLE (0..1000)") end
  heldout_from[n] = pm
end

local keep_lang
if args.languages then
  keep_lang = {}
  for _, l in ipairs(split_list(args.languages)) do keep_lang[l] = true end
end

local sources, by_name = {}, {}
for _, spec in ipairs(args.source) do
  local name, path = spec:match("^([^=]+)=(.+)$")
  if not name then die("--source " .. spec .. ": expected NAME=PATH or NAME@LANG=PATH") end
  local lang
  name, lang = name:match("^([^@]+)@?(.*)$")
  lang = lang ~= "" and lang or "und"
  if by_name[name] then die("source " .. name .. " given twice") end
  local docs, skipped = read_source(name, path, lang), 0
  if keep_lang then
    local kept = {}
    for _, d in ipairs(docs) do
      if keep_lang[d.lang] then kept[#kept + 1] = d else skipped = skipped + 1 end
    end
    docs = kept
  end
  local src = {name = name, path = path, docs = docs, skipped_language_documents = skipped, input = new_count(),
               train = new_count(), heldout = new_count(), heldout_ids = {},
               removed = {duplicate_documents = 0, duplicate_document_sentences = 0,
                          duplicate_sentences = 0, eval_exact_sentences = 0, eval_exact_documents = 0,
                          eval_13gram_sentences = 0, eval_13gram_documents = 0, emptied_documents = 0},
               by_eval = {}}
  for _, s in ipairs(sets) do src.by_eval[s] = {exact_sentences = 0, ["13gram_sentences"] = 0} end
  for _, d in ipairs(src.docs) do count_doc(src.input, d.sentences) end
  sources[#sources + 1] = src
  by_name[name] = src
end
for n in pairs(heldout_from) do
  if not by_name[n] then die("--heldout-from " .. n .. ": no such source") end
end

----------------------------------------------------------- processing

local SEEN_DOC, SEEN_SENT = {}, {}   -- normalised document / sentence -> first document number
local DOCREF = {}                    -- document number -> "SOURCE/ID"
local REMOVED = {}                   -- lines of removed.tsv
local docno = 0

local function log_removed(reason, src, doc, where, sentence)
  REMOVED[#REMOVED + 1] = table.concat({reason, src.name, doc.id, where, (sentence:gsub("[\t\r\n]", " "))}, "\t")
end

local function set_names(mask)
  local out = {}
  for bit, name in ipairs(sets) do
    if mask & (1 << (bit - 1)) ~= 0 then out[#out + 1] = name end
  end
  return table.concat(out, ",")
end

local function credit(src, mask, key)
  for bit, name in ipairs(sets) do
    if mask & (1 << (bit - 1)) ~= 0 then
      local e = src.by_eval[name]
      e[key] = e[key] + 1
      set_stats[name]["removed_" .. key] = (set_stats[name]["removed_" .. key] or 0) + 1
    end
  end
end

-- Runs steps 1-5 on a document; returns the kept sentences (or nil).
local function process(src, doc)
  docno = docno + 1
  local sents, r = doc.sentences, src.removed
  local norms, nw, vs, owner = {}, {}, {}, {}
  for i, s in ipairs(sents) do
    local ws = words_of(s)
    norms[i], nw[i] = table.concat(ws, " "), #ws
    for _, w in ipairs(ws) do
      vs[#vs + 1] = WORDV[w]
      owner[#vs] = i
    end
  end
  DOCREF[docno] = src.name .. "/" .. doc.id
  local dkey = table.concat(norms, "\n")            -- 1. duplicate documents
  if SEEN_DOC[dkey] then
    r.duplicate_documents = r.duplicate_documents + 1
    r.duplicate_document_sentences = r.duplicate_document_sentences + #sents
    log_removed("duplicate_document", src, doc, DOCREF[SEEN_DOC[dkey]], sents[1])
    return nil
  end
  SEEN_DOC[dkey] = docno
  local drop = {}                                   -- i -> reason
  local hit_exact, hit_gram = false, false
  for i = 1, #sents do                              -- 2. exact evaluation texts
    local m = nw[i] >= MIN_WORDS and EXACT[norms[i]]
    if m then
      drop[i] = "exact"; hit_exact = true
      r.eval_exact_sentences = r.eval_exact_sentences + 1
      credit(src, m, "exact_sentences")
      log_removed("eval_exact", src, doc, set_names(m), sents[i])
    end
  end
  local gmask = {}                                  -- 3. shared 13-grams
  each_gram(vs, function(h, i)
    local m = GRAMS[h]
    if m then
      for k = owner[i], owner[i + N - 1] do
        if drop[k] == nil or drop[k] == "13gram" then
          drop[k] = "13gram"
          gmask[k] = (gmask[k] or 0) | m
        end
      end
    end
  end)
  for k = 1, #sents do
    local m = gmask[k]
    if m then
      hit_gram = true
      r.eval_13gram_sentences = r.eval_13gram_sentences + 1
      credit(src, m, "13gram_sentences")
      log_removed("eval_13gram", src, doc, set_names(m), sents[k])
    end
  end
  if hit_exact then r.eval_exact_documents = r.eval_exact_documents + 1 end
  if hit_gram then r.eval_13gram_documents = r.eval_13gram_documents + 1 end
  local kept = {}
  for i, s in ipairs(sents) do                      -- 4. duplicate sentences
    if not drop[i] then
      local first = nw[i] >= MIN_WORDS and SEEN_SENT[norms[i]]
      if first and first ~= docno then
        r.duplicate_sentences = r.duplicate_sentences + 1
        log_removed("duplicate_sentence", src, doc, DOCREF[first], s)
      else
        if nw[i] >= MIN_WORDS then SEEN_SENT[norms[i]] = docno end
        kept[#kept + 1] = s
      end
    end
  end
  if #kept == 0 then                                -- 5. nothing left
    r.emptied_documents = r.emptied_documents + 1
    return nil
  end
  return kept
end

for _, src in ipairs(sources) do                    -- which documents are held out
  for _, d in ipairs(src.docs) do
    d.heldout = heldout_from[src.name] and ((hash64(src.name .. "/" .. d.id) >> 1) % 1000) < heldout_from[src.name]
  end
end
local function pass(filter)
  for _, src in ipairs(sources) do
    for _, d in ipairs(src.docs) do
      if filter(src, d) then d.kept = process(src, d) or false end
    end
  end
end
pass(function(src) return not heldout_from[src.name] end)
pass(function(src, d) return heldout_from[src.name] and d.heldout end)
pass(function(src, d) return heldout_from[src.name] and not d.heldout end)

-------------------------------------------------------------- outputs

if not fs.isdir(args.output) and not fs.mkdir(args.output) then die("cannot create " .. args.output) end
local train_docs, held_docs = {}, {}
local by_lang, lang_order = {}, {}   -- LANG -> {train = docs, heldout = docs, counts}
for _, src in ipairs(sources) do
  for _, d in ipairs(src.docs) do
    if d.kept then
      local L = by_lang[d.lang]
      if not L then
        L = {train = {}, heldout = {}, count = {train = new_count(), heldout = new_count()}}
        by_lang[d.lang] = L
        lang_order[#lang_order + 1] = d.lang
      end
      if d.heldout then
        held_docs[#held_docs + 1] = d.kept
        L.heldout[#L.heldout + 1] = d.kept
        count_doc(src.heldout, d.kept)
        count_doc(L.count.heldout, d.kept)
        src.heldout_ids[#src.heldout_ids + 1] = d.id
      else
        train_docs[#train_docs + 1] = d.kept
        L.train[#L.train + 1] = d.kept
        count_doc(src.train, d.kept)
        count_doc(L.count.train, d.kept)
      end
    end
  end
end
table.sort(lang_order)

local total = {input = new_count(), train = new_count(), heldout = new_count(), removed = {}}
for _, src in ipairs(sources) do
  for _, part in ipairs({"input", "train", "heldout"}) do
    for k, v in pairs(src[part]) do total[part][k] = total[part][k] + v end
  end
  for k, v in pairs(src.removed) do total.removed[k] = (total.removed[k] or 0) + v end
end
if total.heldout.bytes < args.min_heldout_bytes then
  die(string.format("the held-out part has %d bytes, fewer than --min-heldout-bytes %d",
    total.heldout.bytes, args.min_heldout_bytes))
end
if #train_docs == 0 then die("nothing left for the training part") end

-- a small JSON writer with sorted keys (stable, diffable stats)
local function encode(v, indent)
  indent = indent or ""
  if type(v) ~= "table" then return (cjson.encode(v):gsub("\\/", "/")) end
  local inner = indent .. "  "
  if #v > 0 or next(v) == nil then
    local parts = {}
    for i, x in ipairs(v) do parts[i] = encode(x, inner) end
    if #parts == 0 then return "[]" end
    if type(v[1]) ~= "table" then return "[" .. table.concat(parts, ", ") .. "]" end
    return "[\n" .. inner .. table.concat(parts, ",\n" .. inner) .. "\n" .. indent .. "]"
  end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for i, k in ipairs(keys) do parts[i] = encode(k) .. ": " .. encode(v[k], inner) end
  return "{\n" .. inner .. table.concat(parts, ",\n" .. inner) .. "\n" .. indent .. "}"
end

local stats = {
  name = args.name,
  rules = {
    normalisation = "ASCII lowercase; U+2000-U+203F, U+00A0-U+00BF and U+3000-U+303F as spaces; each CJK, kana, Thai, Lao, Myanmar, Khmer character a word; words = runs of ASCII letters/digits and non-ASCII bytes",
    duplicate_documents = "normalised document text equal to an earlier document's: document dropped",
    eval_exact = "sentence of >= " .. MIN_WORDS .. " words equal to a normalised evaluation text or evaluation sentence: dropped",
    eval_13gram = "every sentence touched by a word " .. N .. "-gram (across sentence boundaries) that occurs in an evaluation text: dropped",
    duplicate_sentences = "sentence of >= " .. MIN_WORDS .. " words already kept in another document: dropped",
    heldout = "documents of heldout_from whose hash64(SOURCE/ID) >> 1 mod 1000 < per_mille; deduplicated after the other sources and before the training documents of these",
  },
  heldout = {from = heldout_from, per_mille = args.heldout_per_mille},
  eval_sets = set_stats, eval_dir = args.eval_dir, by_language = args.by_language == true, languages = {},
  sources = {}, order = {}, total = total,
  seconds = os.time() - clock0,
}
for i, src in ipairs(sources) do
  stats.order[i] = src.name
  stats.sources[src.name] = {path = src.path, input = src.input, train = src.train, heldout = src.heldout,
                             skipped_language_documents = src.skipped_language_documents,
                             removed = src.removed, removed_by_eval_set = src.by_eval,
                             heldout_ids = src.heldout_ids}
end

local function write_tmp(path, text)
  local f, err = io.open(path, "wb")
  if not f then die(err) end
  f:write(text)
  local ok, cerr = f:close()
  if not ok then os.remove(path) die(cerr) end
end
local function plain(docs)
  local out = {}
  for i, doc in ipairs(docs) do
    if i > 1 then out[#out + 1] = "" end
    for _, s in ipairs(doc) do out[#out + 1] = s end
  end
  return table.concat(out, "\n") .. "\n"
end
for _, l in ipairs(lang_order) do stats.languages[l] = by_lang[l].count end
local outs = {}
if args.by_language then
  for _, sub in ipairs({"train", "heldout"}) do
    if not fs.isdir(args.output .. "/" .. sub) and not fs.mkdir(args.output .. "/" .. sub) then
      die("cannot create " .. args.output .. "/" .. sub)
    end
  end
  for _, l in ipairs(lang_order) do
    if not l:match("^[%w%-_]+$") then die("language '" .. l .. "': expected letters, digits, '-' or '_'") end
    local L = by_lang[l]
    if #L.train > 0 then outs[#outs + 1] = {args.output .. "/train/" .. l .. ".txt", plain(L.train)} end
    if #L.heldout > 0 then outs[#outs + 1] = {args.output .. "/heldout/" .. l .. ".txt", plain(L.heldout)} end
  end
else
  outs[1] = {args.output .. "/" .. args.name, plain(train_docs)}
  outs[2] = {args.output .. "/heldout.txt", plain(held_docs)}
end
for _, o in ipairs({
  {args.output .. "/removed.tsv", "reason\tsource\tid\tmatched\tsentence\n" ..
    table.concat(REMOVED, "\n") .. (#REMOVED > 0 and "\n" or "")},
  {args.output .. "/stats.json", encode(stats) .. "\n"},   -- last: its presence marks a finished build
}) do outs[#outs + 1] = o end
for _, o in ipairs(outs) do write_tmp(o[1] .. ".tmp", o[2]) end
for _, o in ipairs(outs) do
  local ok, err = os.rename(o[1] .. ".tmp", o[1])
  if not ok then
    for _, q in ipairs(outs) do os.remove(q[1] .. ".tmp") end
    die(err)
  end
end

if not args.quiet then
  local function row(label, c)
    return string.format("%-10s %6d docs %8d sents %9d words %11d bytes", label, c.documents, c.sentences, c.words, c.bytes)
  end
  print(string.format("build_corpus: %d evaluation sets (%s)", #sets, table.concat(sets, ",")))
  for _, name in ipairs(sets) do
    local st = set_stats[name]
    print(string.format("  %-7s %7d texts %7d exact keys %8d 13-grams; removed %d sentences exact, %d by 13-gram",
      name, st.texts, st.exact_keys, st.ngrams, st.removed_exact_sentences or 0, st.removed_13gram_sentences or 0))
  end
  for _, src in ipairs(sources) do
    local r = src.removed
    print(row(src.name, src.input) .. "  input")
    print(string.format("  removed: %d duplicate docs, %d duplicate sentences, eval exact %d sentences (%d docs), " ..
      "eval 13-gram %d sentences (%d docs), %d docs emptied", r.duplicate_documents, r.duplicate_sentences,
      r.eval_exact_sentences, r.eval_exact_documents, r.eval_13gram_sentences, r.eval_13gram_documents,
      r.emptied_documents))
    print("  " .. row("train", src.train))
    if heldout_from[src.name] then print("  " .. row("heldout", src.heldout)) end
  end
  if args.by_language then
    for _, l in ipairs(lang_order) do
      print(row(l, by_lang[l].count.train) .. (#by_lang[l].heldout > 0 and
        string.format("  (held out: %d docs)", by_lang[l].count.heldout.documents) or ""))
    end
    print(row("total", total.train) .. "  -> " .. args.output .. "/train/*.txt")
    print(row("heldout", total.heldout) .. "  -> " .. args.output .. "/heldout/*.txt")
  else
    print(row("total", total.train) .. "  -> " .. outs[1][1])
    print(row("heldout", total.heldout) .. "  -> " .. outs[2][1])
  end
  print(string.format("build_corpus: %d s (%.1f s CPU)", os.time() - clock0, os.clock() - cpu0))
end
