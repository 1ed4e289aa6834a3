--- bert.data.pretraining: MLM + NSP/SOP pretraining data.
--
--   local info = pretraining.create_shards{documents = docs, tokenizer = tok,
--     output = "runs/x/data", objective = "nsp" | "sop" | "none",
--     masking = "static" | "dynamic", max_seq_length = 128,
--     max_predictions_per_seq = 20, masked_lm_prob = 0.15, short_seq_prob = 0.1,
--     dupe_factor = 10 (static) / 1 (dynamic), whole_word_mask = false,
--     mask_mode = "tokens" | "span" | "ngram" | "phrase", max_span = 10 (span) / 3 (ngram),
--     span_p = 0.2, phrases = (phrase: a bert.data.chunker table), seed = 12345,
--     instances_per_shard = 50000}
--   --> {dir, instances, objective, masking, shards, tokens, predictions}
--   local loader = assert(pretraining.Loader{dir = ..., batch_size = 8,
--     seq_len = 128, masking = "dynamic" | "static", seed = 1, shuffle = true})
--   local batch = loader:next()   -- input_ids, token_type_ids, attention_mask,
--                                 -- labels ([B, T] int32, -100 off targets),
--                                 -- next_sentence_label ([B]; not for "none")
--   loader:state() / loader:set_state(s) / loader:close()
--   -- data parallelism: shard_first = 0-based first row, shard_rows = rows of
--   -- each global batch of batch_size that this loader returns
--   -- (bert.distributed.shard(batch_size) gives both)
--   pretraining.rechunk(batch, len) -> the batch's rows cut into pieces of len tokens
--   pretraining.unigram_counts(dir) -> int32 tensor [vocab]
--   pretraining.split_documents(docs, {heldout = 0.05, seed = 1}) -> train, eval
--   pretraining.read(dir) -> instances (s:stats(), s:get(i)) for inspection
--
-- Instances follow google-research/bert create_pretraining_data.py
-- (objective "nsp"), ALBERT's sentence order ("sop": label 1 = swapped) and
-- RoBERTa FULL-SENTENCES ("none": sentences packed up to the length across
-- documents, a separator between documents, one segment).  NSP labels are
-- Hugging Face's: 0 = IsNext, 1 = NotNext.  Masking is Google's
-- create_masked_lm_predictions; "static" draws masks at creation
-- (dupe_factor copies), "dynamic" draws them in the loader from
-- (seed, global sample index).  mask_mode "span" masks SpanBERT's spans
-- (lengths in words with whole_word_mask, else tokens, geometric with p =
-- span_p up to max_span), "ngram" ALBERT's n-grams (n in 1..max_span, p(n)
-- proportional to 1/n); "phrase" ERNIE 1.0's phrases (whole words, and a
-- run of words that forms a phrase of opts.phrases as one unit; the table
-- is saved in the shard set as phrases.txt, for the dynamic loader); all
-- at the same rate and never over special tokens (csrc/data/instances.c).  The C side is csrc/data/ (shard format in
-- csrc/data/shard.c); dir/meta.json describes a shard set.
local cjson = require("cjson")
local core = require("bert.core")
local chunker = require("bert.data.chunker")
local fs = require("bert.fs")
local options = require("bert.options")
local class = require("bert.nn.class")
local C = core.data

local M = {}

------------------------------------------------------------- helpers

local function argerr(fname, msg) error(fname .. ": " .. msg, 3) end

local function check_opt(fname, opts, key, kind, pred, desc)
  local v = opts[key]
  if v == nil then return end
  if type(v) ~= kind or (kind == "number" and v ~= v) then
    argerr(fname, string.format("option '%s' expected %s, got %s", key, kind, type(v)))
  end
  if pred and not pred(v) then
    argerr(fname, string.format("option '%s' must be %s, got %s", key, desc, tostring(v)))
  end
end

local function is_int(v) return math.type(v) == "integer" or (v == math.floor(v)) end
local function positive_int(v) return is_int(v) and v >= 1 end
local function prob(v) return v >= 0 and v <= 1 end

local read_file = fs.read_file

local write_atomic = fs.write_atomic

local SPECIALS = {
  cls = {"[CLS]", "<s>"}, sep = {"[SEP]", "</s>"}, mask = {"[MASK]", "<mask>"},
  pad = {"[PAD]", "<pad>"},
}

-- Special ids and flag strings from a tokenizer.
local function tokenizer_info(fname, tok, whole_word)
  if type(tok) ~= "table" and type(tok) ~= "userdata" then
    argerr(fname, "option 'tokenizer' expected a bert.tokenizer object, got " .. type(tok))
  end
  local ids = {}
  for role, names in pairs(SPECIALS) do
    for _, name in ipairs(names) do
      local id = tok:token_to_id(name)
      if id then ids[role] = id; break end
    end
  end
  for _, role in ipairs({"cls", "sep", "mask"}) do
    if not ids[role] then
      argerr(fname, "the tokenizer has no " .. table.concat(SPECIALS[role], " or ") .. " token")
    end
  end
  ids.pad = ids.pad or 0
  local V = tok:vocab_size()
  for _, id in pairs(ids) do if id >= V then V = id + 1 end end
  local special_ids = {ids.cls, ids.sep, ids.mask, ids.pad}
  -- word boundaries (whole-word and phrase masking): WordPiece's ##x, or
  -- the pieces that do not start a word for byte-level BPE and SentencePiece
  local cont_ids = whole_word and chunker.word_continuation(tok, V) or {}
  return ids, V, special_ids, cont_ids
end

local function flag_bytes(V, list)
  local b = {}
  for i = 1, V do b[i] = 0 end
  for _, id in ipairs(list) do b[id + 1] = 1 end
  local parts = {}
  for i = 1, V, 4096 do
    parts[#parts + 1] = string.char(table.unpack(b, i, math.min(V, i + 4095)))
  end
  return table.concat(parts)
end

local function read_meta(fname, dir)
  if type(dir) ~= "string" then argerr(fname, "option 'dir' expected string, got " .. type(dir)) end
  local text, err = read_file(dir .. "/meta.json")
  if not text then return nil, dir .. ": no meta.json (" .. tostring(err) .. ")" end
  local ok, meta = pcall(cjson.decode, text)
  if not ok or type(meta) ~= "table" or meta.format ~= "bert-shards" or type(meta.shards) ~= "table" then
    return nil, dir .. "/meta.json: not a shard set description"
  end
  return meta
end

local function open_instances(dir, meta)
  local paths = {}
  for i, sh in ipairs(meta.shards) do paths[i] = dir .. "/" .. sh.file end
  local inst, err = C.read_shards(paths)
  if not inst then return nil, err end
  local st = inst:stats()
  if st.instances ~= meta.instances or st.vocab_size ~= meta.vocab_size then
    return nil, dir .. ": the shards do not match meta.json"
  end
  return inst
end

-- The masking mode options of create_shards and Loader, checked: mode,
-- max_span, span_p (nil where not given).
local MASK_MODES = {tokens = true, span = true, ngram = true, phrase = true}
local function mask_mode_opts(fname, opts)
  local mode = opts.mask_mode
  if mode ~= nil and not MASK_MODES[mode] then
    argerr(fname, "option 'mask_mode' must be 'tokens', 'span', 'ngram' or 'phrase', got " .. tostring(mode))
  end
  if opts.phrases ~= nil and not chunker.is_phrases(opts.phrases) then
    argerr(fname, "option 'phrases' expected a phrase table (bert.data.chunker), got " .. type(opts.phrases))
  end
  check_opt(fname, opts, "max_span", "number", function(v) return is_int(v) and v >= 1 and v <= 64 end,
            "an integer in 1..64")
  check_opt(fname, opts, "span_p", "number", function(v) return v > 0 and v <= 1 end, "in (0, 1]")
  return mode, opts.max_span and math.tointeger(opts.max_span), opts.span_p
end

------------------------------------------------------------- creation

local CREATE_OPTIONS = {"documents", "tokenizer", "output", "objective", "masking", "max_seq_length",
  "max_predictions_per_seq", "masked_lm_prob", "short_seq_prob", "dupe_factor", "whole_word_mask", "mask_mode",
  "max_span", "span_p", "phrases", "instances_per_shard", "seed"}

--- Tokenises the documents and writes shards + meta.json under opts.output.
function M.create_shards(opts)
  local F = "create_shards"
  if type(opts) ~= "table" then argerr(F, "argument #1 (options) expected table, got " .. type(opts)) end
  options.check(F, opts, CREATE_OPTIONS)
  if type(opts.documents) ~= "table" then
    argerr(F, "option 'documents' expected a list of documents (lists of sentences), got " ..
      type(opts.documents))
  end
  if type(opts.output) ~= "string" then
    argerr(F, "option 'output' expected string (a directory), got " .. type(opts.output))
  end
  local objective = opts.objective or "nsp"
  if objective ~= "nsp" and objective ~= "sop" and objective ~= "none" then
    argerr(F, "option 'objective' must be 'nsp', 'sop' or 'none', got " .. tostring(objective))
  end
  local masking = opts.masking or "static"
  if masking ~= "static" and masking ~= "dynamic" then
    argerr(F, "option 'masking' must be 'static' or 'dynamic', got " .. tostring(masking))
  end
  check_opt(F, opts, "max_seq_length", "number", function(v) return is_int(v) and v >= 5 end,
            "an integer >= 5")
  check_opt(F, opts, "max_predictions_per_seq", "number", positive_int, "a positive integer")
  check_opt(F, opts, "dupe_factor", "number", positive_int, "a positive integer")
  check_opt(F, opts, "instances_per_shard", "number", positive_int, "a positive integer")
  check_opt(F, opts, "masked_lm_prob", "number", prob, "in [0, 1]")
  check_opt(F, opts, "short_seq_prob", "number", prob, "in [0, 1]")
  check_opt(F, opts, "seed", "number", is_int, "an integer")
  local max_len = math.tointeger(opts.max_seq_length or 128)
  local whole_word = opts.whole_word_mask and true or false
  local mask_mode, max_span, span_p = mask_mode_opts(F, opts)
  mask_mode = mask_mode or "tokens"
  max_span = max_span or (mask_mode == "ngram" and 3 or 10)
  span_p = span_p or 0.2
  local phrase = mask_mode == "phrase"
  if phrase and not opts.phrases then
    argerr(F, "mask_mode 'phrase' needs option 'phrases' (a table from bert.data.chunker.learn or load)")
  end
  local ids, V, special_ids, cont_ids = tokenizer_info(F, opts.tokenizer, whole_word or phrase)
  local cfg = {
    objective = objective, max_seq_length = max_len,
    short_seq_prob = opts.short_seq_prob or 0.1,
    dupe_factor = math.tointeger(opts.dupe_factor or (masking == "static" and 10 or 1)),
    static_masking = masking == "static", seed = math.tointeger(opts.seed or 12345),
    vocab_size = V, mask_id = ids.mask, cls_id = ids.cls, sep_id = ids.sep,
    masked_lm_prob = opts.masked_lm_prob or 0.15,
    max_predictions_per_seq = math.tointeger(opts.max_predictions_per_seq or 20),
    whole_word_mask = whole_word, mask_mode = mask_mode, max_span = max_span, span_p = span_p,
    special = flag_bytes(V, special_ids),
    continuation = (whole_word or phrase) and flag_bytes(V, cont_ids) or nil,
    phrases = phrase and opts.phrases:handle() or nil,
  }
  -- tokenise, a few thousand sentences at a time
  local corpus = C.corpus()
  local docs, tok = opts.documents, opts.tokenizer
  local d = 1
  while d <= #docs do
    local texts, bounds = {}, {}
    while d <= #docs and #texts < 4096 do
      local doc = docs[d]
      if type(doc) ~= "table" then
        argerr(F, string.format("document %d expected a list of sentence strings, got %s", d, type(doc)))
      end
      local first = #texts + 1
      for s, sent in ipairs(doc) do
        if type(sent) ~= "string" then
          argerr(F, string.format("document %d sentence %d expected string, got %s", d, s, type(sent)))
        end
        texts[#texts + 1] = sent
      end
      bounds[#bounds + 1] = {first, #texts}
      d = d + 1
    end
    local encs = #texts > 0 and tok:encode_batch(texts, {add_special_tokens = false}) or {}
    for _, b in ipairs(bounds) do
      local list = {}
      for i = b[1], b[2] do list[#list + 1] = encs[i].ids end
      corpus:add_document(list)
    end
  end
  local cstats = corpus:stats()
  if cstats.documents == 0 then argerr(F, "the documents hold no tokens") end
  local inst = C.create(corpus, cfg)
  corpus = nil   -- luacheck: ignore (freed by the GC)
  local st = inst:stats()
  local dir = opts.output:gsub("/+$", "")
  local ok, err = core.mkdir(dir)
  if not ok then return nil, err end
  local phrases_meta
  if phrase then   -- the shard set carries its phrase table: the dynamic loader masks with it
    local pok, perr = opts.phrases:save(dir .. "/phrases.txt")
    if not pok then return nil, perr end
    phrases_meta = {file = "phrases.txt", count = opts.phrases:count(), checksum = opts.phrases:checksum()}
  end
  local per = math.tointeger(opts.instances_per_shard or 50000)
  local shards = {}
  local first = 1
  while first <= st.instances do
    local count = math.min(per, st.instances - first + 1)
    local file = string.format("shard-%05d.bin", #shards)
    local wok, werr = inst:write(dir .. "/" .. file, first, count)
    if not wok then return nil, werr end
    shards[#shards + 1] = {file = file, instances = count}
    first = first + count
  end
  local meta = {
    format = "bert-shards", version = 1, objective = objective, masking = masking,
    max_seq_length = max_len, vocab_size = V,
    masked_lm_prob = cfg.masked_lm_prob, max_predictions_per_seq = cfg.max_predictions_per_seq,
    whole_word_mask = whole_word, dupe_factor = cfg.dupe_factor,
    mask_mode = mask_mode, max_span = max_span, span_p = span_p,
    short_seq_prob = cfg.short_seq_prob, seed = cfg.seed,
    special_ids = {cls = ids.cls, sep = ids.sep, mask = ids.mask, pad = ids.pad},
    never_masked_ids = special_ids,
    continuation_ids = (whole_word or phrase) and cont_ids or nil,
    phrases = phrases_meta,
    instances = st.instances, tokens = st.tokens, predictions = st.predictions,
    documents = cstats.documents, sentences = cstats.sentences, corpus_tokens = cstats.tokens,
    label_counts = objective ~= "none" and {st.label0, st.label1} or nil,
    shards = shards,
  }
  local mok, merr = write_atomic(dir .. "/meta.json", cjson.encode(meta))
  if not mok then return nil, merr end
  return {dir = dir, instances = st.instances, objective = objective, masking = masking,
          shards = #shards, tokens = st.tokens, predictions = st.predictions}
end

--- The instances of a shard set, validated (nil, message on bad files):
-- s:stats(), s:get(i) -> {tokens, token_type_ids, label, masked_positions,
-- masked_ids, masked_labels}.
function M.read(dir)
  local meta, err = read_meta("read", dir)
  if not meta then return nil, err end
  return open_instances(dir, meta)
end

--- Counts of the token ids that are prediction targets ([vocab] int32):
-- the masked tokens with static masks, every non-special token with dynamic.
function M.unigram_counts(dir)
  local meta, err = read_meta("unigram_counts", dir)
  if not meta then return nil, err end
  local inst, ierr = open_instances(dir, meta)
  if not inst then return nil, ierr end
  return inst:unigram_counts(flag_bytes(meta.vocab_size, meta.never_masked_ids))
end

--- Splits documents into train and held-out lists by document: a seeded
-- permutation picks round(n * heldout) documents (at least one when
-- heldout > 0 and there are two or more); both keep the input order.
function M.split_documents(documents, opts)
  local F = "split_documents"
  if type(documents) ~= "table" then
    argerr(F, "argument #1 (documents) expected table, got " .. type(documents))
  end
  opts = opts or {}
  if type(opts) ~= "table" then argerr(F, "argument #2 (options) expected table, got " .. type(opts)) end
  check_opt(F, opts, "heldout", "number", function(v) return v >= 0 and v < 1 end, "in [0, 1)")
  check_opt(F, opts, "seed", "number", is_int, "an integer")
  local n, frac = #documents, opts.heldout or 0.05
  local k = math.floor(n * frac + 0.5)
  if frac > 0 and k == 0 and n >= 2 then k = 1 end
  local state = math.tointeger(opts.seed or 1) ~ 0x5deece66d
  local function nextu()   -- splitmix64
    state = state + 0x9e3779b97f4a7c15
    local z = state
    z = (z ~ (z >> 30)) * 0xbf58476d1ce4e5b9
    z = (z ~ (z >> 27)) * 0x94d049bb133111eb
    return z ~ (z >> 31)
  end
  local idx = {}
  for i = 1, n do idx[i] = i end
  for i = n, 2, -1 do
    local j = nextu() % i + 1   -- integer % is floored: 0 .. i-1
    idx[i], idx[j] = idx[j], idx[i]
  end
  local held = {}
  for i = 1, k do held[idx[i]] = true end
  local train, eval = {}, {}
  for i = 1, n do
    if held[i] then eval[#eval + 1] = documents[i] else train[#train + 1] = documents[i] end
  end
  return train, eval
end

--- The batch's [B, T] rows cut into [B * T / len, len] pieces, in order,
-- the pieces that hold only padding left out: every token and its label
-- kept, each piece with positions from 0 (shorter sequences first:
-- --seq-len-schedule).  Only for batches without a per-sequence label
-- (objective "none"); len must divide T.
function M.rechunk(batch, len)
  local F = "rechunk"
  if type(batch) ~= "table" or type(batch.input_ids) ~= "userdata" then
    argerr(F, "argument #1 expected a batch table with input_ids, got " .. type(batch))
  end
  local B, T = batch.input_ids:size(1), batch.input_ids:size(2)
  if math.type(len) ~= "integer" or len < 1 or T % len ~= 0 then
    argerr(F, string.format("argument #2 must be an integer that divides the batch's %d tokens, got %s", T, tostring(len)))
  end
  if len == T then return batch end
  local rows = B * (T // len)
  local keep
  if batch.attention_mask then
    local real = batch.attention_mask:reshape(rows, len):sum(2):gt(0)
    if real:sum():item() < rows then keep = real:nonzero() end
  end
  local out = {}
  for k, t in pairs(batch) do
    if t:dim() ~= 2 or t:size(1) ~= B or t:size(2) ~= T then
      argerr(F, string.format("'%s' [%s] is not per token: a sequence's label cannot be cut into pieces", k,
        table.concat(t:shape(), " x ")))
    end
    out[k] = t:reshape(rows, len)
    if keep then out[k] = out[k]:index_select(1, keep) end
  end
  return out
end

--------------------------------------------------------------- loader

local Loader = class("Loader")

--- pretraining.Loader{dir, batch_size = 8, seq_len = max_seq_length,
-- masking = meta's ("static" | "dynamic"), seed = 1, shuffle = true,
-- prefetch = 4, masked_lm_prob, max_predictions_per_seq, whole_word_mask,
-- mask_mode, max_span, span_p, phrases (dynamic masking; default the shard set's, its
-- phrases.txt for mode "phrase"), shard_first = 0, shard_rows =
-- batch_size (data parallelism: these rows of each global batch, the same
-- samples and masks as in the whole batch)}.  Returns the loader, or
-- nil, message when the files are missing or corrupt.
local LOADER_OPTIONS = {"dir", "batch_size", "seq_len", "shuffle", "seed", "prefetch", "masking", "masked_lm_prob",
  "max_predictions_per_seq", "whole_word_mask", "mask_mode", "max_span", "span_p", "phrases", "shard_first",
  "shard_rows"}

function M.Loader(opts)
  local F = "Loader"
  if type(opts) ~= "table" then argerr(F, "argument #1 (options) expected table, got " .. type(opts)) end
  options.check(F, opts, LOADER_OPTIONS)
  check_opt(F, opts, "batch_size", "number", positive_int, "a positive integer")
  check_opt(F, opts, "seq_len", "number", positive_int, "a positive integer")
  check_opt(F, opts, "prefetch", "number", positive_int, "a positive integer")
  check_opt(F, opts, "seed", "number", is_int, "an integer")
  check_opt(F, opts, "masked_lm_prob", "number", prob, "in [0, 1]")
  check_opt(F, opts, "max_predictions_per_seq", "number", positive_int, "a positive integer")
  check_opt(F, opts, "shard_first", "number", function(v) return is_int(v) and v >= 0 end, "an integer >= 0")
  check_opt(F, opts, "shard_rows", "number", positive_int, "a positive integer")
  if opts.masking ~= nil and opts.masking ~= "static" and opts.masking ~= "dynamic" then
    argerr(F, "option 'masking' must be 'static' or 'dynamic', got " .. tostring(opts.masking))
  end
  local meta, err = read_meta(F, opts.dir)
  if not meta then return nil, err end
  local inst, ierr = open_instances(opts.dir, meta)
  if not inst then return nil, ierr end
  local masking = opts.masking or meta.masking
  local mask_mode, max_span, span_p = mask_mode_opts(F, opts)
  local whole_word = opts.whole_word_mask
  if whole_word == nil then whole_word = meta.whole_word_mask end
  if whole_word and not meta.continuation_ids then
    argerr(F, "whole_word_mask needs shards created with whole_word_mask = true")
  end
  local V = meta.vocab_size
  -- shard sets from before the masking modes hold none: Google's token masking
  mask_mode = mask_mode or meta.mask_mode or "tokens"
  local phrases = opts.phrases
  if mask_mode == "phrase" and masking == "static" then
    mask_mode, phrases = "tokens", nil   -- the masks are in the shards: no table needed
  elseif mask_mode == "phrase" then
    if not meta.continuation_ids then
      argerr(F, "mask_mode 'phrase' needs shards created with word boundaries (mask_mode 'phrase' or whole_word_mask)")
    end
    if not phrases then
      if type(meta.phrases) ~= "table" or type(meta.phrases.file) ~= "string" then
        argerr(F, "mask_mode 'phrase' needs option 'phrases' (these shards were created without a phrase table)")
      end
      local path = opts.dir .. "/" .. meta.phrases.file
      local perr
      phrases, perr = chunker.load(path, {vocab_size = math.tointeger(V)})
      if not phrases then return nil, perr end
      if phrases:count() ~= meta.phrases.count or phrases:checksum() ~= meta.phrases.checksum then
        return nil, path .. ": not the phrase table the shards were made with (meta.json has another count or checksum)"
      end
    end
  end
  local seq_len = math.tointeger(opts.seq_len or meta.max_seq_length)
  if seq_len < meta.max_seq_length then
    argerr(F, string.format("seq_len %d is shorter than the shards' max_seq_length %d",
                            seq_len, meta.max_seq_length))
  end
  local batch = math.tointeger(opts.batch_size or 8)
  if meta.instances < batch then
    argerr(F, string.format("%d instances, fewer than one batch of %d", meta.instances, batch))
  end
  local seed = math.tointeger(opts.seed or 1)
  local shard_first = math.tointeger(opts.shard_first or 0)
  local shard_rows = math.tointeger(opts.shard_rows or batch - shard_first)
  if shard_first + shard_rows > batch then
    argerr(F, string.format("shard rows [%d, %d) outside the batch of %d", shard_first, shard_first + shard_rows, batch))
  end
  local ok, c = pcall(C.loader, inst, {
    shard_first = shard_first, shard_rows = shard_rows,
    batch_size = batch, seq_len = seq_len,
    prefetch = math.tointeger(opts.prefetch or 4), dynamic = masking == "dynamic",
    shuffle = opts.shuffle ~= false, seed = seed, pad_id = meta.special_ids.pad,
    vocab_size = V, mask_id = meta.special_ids.mask,
    masked_lm_prob = opts.masked_lm_prob or meta.masked_lm_prob,
    max_predictions_per_seq = math.tointeger(opts.max_predictions_per_seq or meta.max_predictions_per_seq),
    whole_word_mask = whole_word and true or false,
    mask_mode = mask_mode,
    max_span = max_span or (meta.max_span and math.tointeger(meta.max_span)) or nil,
    span_p = span_p or meta.span_p,
    special = flag_bytes(V, meta.never_masked_ids),
    continuation = (whole_word or phrases) and flag_bytes(V, meta.continuation_ids) or nil,
    phrases = phrases and phrases:handle() or nil,
  })
  if not ok then argerr(F, (tostring(c):gsub("^[^:]*:%d+: ", ""))) end
  return setmetatable({c = c, seed = seed, batch_size = batch, instances = meta.instances,
                       meta = meta, masking = masking}, Loader)
end

local function live(self, fname)
  if not self.c then error("Loader:" .. fname .. ": the loader is closed", 3) end
  return self.c
end

--- The next batch: a table of int32 tensors.
function Loader:next() return live(self, "next"):next() end

--- Batches per epoch (the last partial batch of an epoch is dropped).
function Loader:batches_per_epoch() return live(self, "batches_per_epoch"):batches_per_epoch() end

--- The position of the next batch: {epoch, batch, seed, batch_size, instances}
-- (0-based epoch and batch), plain numbers.
function Loader:state()
  local e, b = live(self, "state"):position()
  return {epoch = e, batch = b, seed = self.seed, batch_size = self.batch_size,
          instances = self.instances}
end

--- Resumes at a state(): the next batch is the one an uninterrupted run
-- would have produced there.
function Loader:set_state(s)
  local c = live(self, "set_state")
  if type(s) ~= "table" or math.type(s.epoch) ~= "integer" or math.type(s.batch) ~= "integer" then
    error("Loader:set_state: argument #1 expected a table from Loader:state()", 2)
  end
  for _, k in ipairs({"seed", "batch_size", "instances"}) do
    if s[k] ~= nil and s[k] ~= self[k] then
      error(string.format("Loader:set_state: state has %s = %s, this loader %s", k,
                          tostring(s[k]), tostring(self[k])), 2)
    end
  end
  local ok, err = pcall(c.seek, c, s.epoch, s.batch)
  if not ok then error("Loader:" .. (tostring(err):gsub("^[^:]*:%d+: ", "")), 2) end
end

--- Stops the worker thread and frees the data (also done by the GC).
function Loader:close()
  if self.c then self.c:close(); self.c = nil end
end
Loader.__close = Loader.close
Loader.__gc = Loader.close

M.Loader_class = Loader
return M
