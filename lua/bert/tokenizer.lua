-- bert.tokenizer: BERT WordPiece and byte-level BPE tokenizers (C core),
-- Hugging Face file formats, training.
--
--   local tok = tokenizer.load("vocab.txt" | dir | "tokenizer.json")
--   local enc = tok:encode("text", "optional pair", {max_length = 128,
--                 truncation = true, padding = "max_length"})
--   enc.ids, enc.type_ids, enc.attention_mask, enc.special_tokens_mask,
--   enc.tokens, enc.offsets ({start, stop}: 0-based start, exclusive stop,
--   in characters of the original string, as Hugging Face), enc.word_ids
--   (false for special and padding tokens), enc.overflowing (when
--   return_overflowing_tokens is set).
--
-- Invalid UTF-8: each bad byte counts as one character U+FFFD (deleted by
-- the BERT normalizer, kept as EF BF BD bytes by byte-level BPE).
local cjson = require("cjson")
local core = require("bert.core").tokenizer
local fs = require("bert.fs")

local M = {}
local methods = core.methods

local BERT_SPECIALS = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
local ROBERTA_SPECIALS = {"<s>", "<pad>", "</s>", "<unk>", "<mask>"}

---------------------------------------------------------------- helpers

local read_file = fs.read_file

local is_dir = fs.isdir

local exists = fs.exists

local write_atomic = fs.write_atomic

local function jnull(v) if v == cjson.null then return nil end return v end

-- Special tokens present in the vocabulary (a token -> id function).
local function find_specials(list, lookup, lstrip)
  local added = {}
  for _, s in ipairs(list) do
    local id = lookup(s)
    if id then
      added[#added + 1] = {content = s, id = id, special = true,
                           lstrip = lstrip and lstrip[s] or false}
    end
  end
  return added
end

local function bert_template(cls, sep)
  return {
    single = {{ids = {cls}, tokens = {"[CLS]"}, type_id = 0}, {seq = 0, type_id = 0},
              {ids = {sep}, tokens = {"[SEP]"}, type_id = 0}},
    pair = {{ids = {cls}, type_id = 0}, {seq = 0, type_id = 0}, {ids = {sep}, type_id = 0},
            {seq = 1, type_id = 1}, {ids = {sep}, type_id = 1}},
  }
end

local function roberta_template(cls, sep)
  return {
    single = {{ids = {cls}, type_id = 0}, {seq = 0, type_id = 0}, {ids = {sep}, type_id = 0}},
    pair = {{ids = {cls}, type_id = 0}, {seq = 0, type_id = 0}, {ids = {sep}, type_id = 0},
            {ids = {sep}, type_id = 0}, {seq = 1, type_id = 0}, {ids = {sep}, type_id = 0}},
    kind = "roberta", cls = cls, sep = sep,
  }
end

-- Builds the core tokenizer; keeps a light config (no vocab) for save().
local function build(cfg)
  local ok, tok = pcall(core.new, cfg)
  if not ok then return nil, tok end
  cfg.vocab, cfg.vocab_list, cfg.merges = nil, nil, nil
  return tok
end

local function wordpiece_config(vocab_list, opts)
  opts = opts or {}
  local index = {}
  for i, t in ipairs(vocab_list) do index[t] = i - 1 end
  local cfg = {
    model = "wordpiece", vocab_list = vocab_list, unk_token = "[UNK]",
    continuing_subword_prefix = "##", max_input_chars_per_word = 100,
    normalizer = {clean_text = true, handle_chinese_chars = true,
                  lowercase = opts.lowercase ~= false, strip_accents = opts.strip_accents},
    pre_tokenizer = "bert", decoder = "wordpiece", decoder_prefix = "##", cleanup = true,
    added_tokens = find_specials(BERT_SPECIALS, function(s) return index[s] end),
    pad_id = index["[PAD]"] or 0,
  }
  if index["[CLS]"] and index["[SEP]"] then
    cfg.post = bert_template(index["[CLS]"], index["[SEP]"])
  end
  return cfg
end

local function bpe_config(vocab, merges, opts)
  opts = opts or {}
  local cfg = {
    model = "bpe", vocab = vocab, merges = merges,
    pre_tokenizer = "byte_level", add_prefix_space = opts.add_prefix_space or false,
    trim_offsets = true, decoder = "byte_level",
    added_tokens = find_specials(ROBERTA_SPECIALS, function(s) return vocab[s] end,
                                 {["<mask>"] = true}),
    pad_id = vocab["<pad>"] or 0,
  }
  if vocab["<|endoftext|>"] then
    cfg.added_tokens[#cfg.added_tokens + 1] =
      {content = "<|endoftext|>", id = vocab["<|endoftext|>"], special = true}
  end
  if vocab["<s>"] and vocab["</s>"] then
    cfg.post = roberta_template(vocab["<s>"], vocab["</s>"])
  end
  return cfg
end

---------------------------------------------------------------- readers

local function read_vocab_txt(path)
  local s, err = read_file(path)
  if not s then return nil, err end
  local list = {}
  for line in (s .. (s:sub(-1) == "\n" and "" or "\n")):gmatch("([^\n]*)\n") do
    list[#list + 1] = line:gsub("%s+$", "")   -- HF trims the end
  end
  if #list == 0 then return nil, path .. ": empty vocabulary" end
  return list
end

local function read_merges_txt(path)
  local s, err = read_file(path)
  if not s then return nil, err end
  local flat, n = {}, 0
  for line in (s .. (s:sub(-1) == "\n" and "" or "\n")):gmatch("([^\n]*)\n") do
    n = n + 1
    line = line:gsub("\r$", "")
    if line:sub(1, 8) ~= "#version" then
      local a, b = line:match("^([^ ]+) ([^ ]+)$")
      if not a then
        return nil, string.format("%s:%d: expected two tokens separated by one space, got %q",
                                  path, n, line)
      end
      flat[#flat + 1] = a; flat[#flat + 1] = b
    end
  end
  return flat
end

local function load_vocab_txt(path, opts)
  local list, err = read_vocab_txt(path)
  if not list then return nil, err end
  local tok, e = build(wordpiece_config(list, opts))
  if not tok then return nil, path .. ": " .. e end
  return tok
end

local function load_bpe_files(vpath, mpath, opts)
  local s, err = read_file(vpath)
  if not s then return nil, err end
  local ok, vocab = pcall(cjson.decode, s)
  if not ok or type(vocab) ~= "table" then
    return nil, vpath .. ": invalid JSON: " .. tostring(vocab)
  end
  for k, v in pairs(vocab) do
    if type(v) ~= "number" or math.type(v) ~= "integer" and v ~= math.floor(v) then
      return nil, string.format("%s: key %q: expected an integer id", vpath, tostring(k))
    end
  end
  local merges, merr = read_merges_txt(mpath)
  if not merges then return nil, merr end
  local tok, e = build(bpe_config(vocab, merges, opts))
  if not tok then return nil, mpath .. ": " .. e end
  return tok
end

local function json_template(t, specials)
  local items = {}
  for _, it in ipairs(t) do
    if it.Sequence then
      items[#items + 1] = {seq = it.Sequence.id == "B" and 1 or 0, type_id = it.Sequence.type_id or 0}
    elseif it.SpecialToken then
      local sp = specials[it.SpecialToken.id]
      if not sp then return nil, "special token " .. tostring(it.SpecialToken.id) .. " not in special_tokens" end
      items[#items + 1] = {ids = sp.ids, type_id = it.SpecialToken.type_id or 0}
    end
  end
  return items
end

local function load_tokenizer_json(path)
  local s, err = read_file(path)
  if not s then return nil, err end
  local ok, j = pcall(cjson.decode, s)
  if not ok or type(j) ~= "table" then return nil, path .. ": invalid JSON: " .. tostring(j) end
  local m = jnull(j.model)
  if type(m) ~= "table" then return nil, path .. ": key 'model' missing" end
  local function bad(key, what) return nil, string.format("%s: key '%s': %s", path, key, what) end
  local cfg = {}
  local mtype = m.type or (m.merges and "BPE") or "WordPiece"
  if type(m.vocab) ~= "table" then return bad("model.vocab", "expected an object") end
  if mtype == "WordPiece" then
    cfg.model = "wordpiece"
    cfg.unk_token = jnull(m.unk_token) or "[UNK]"
    cfg.continuing_subword_prefix = jnull(m.continuing_subword_prefix) or "##"
    cfg.max_input_chars_per_word = jnull(m.max_input_chars_per_word) or 100
    cfg.vocab = m.vocab
  elseif mtype == "BPE" then
    cfg.model = "bpe"
    cfg.vocab = m.vocab
    cfg.unk_token = jnull(m.unk_token)
    local p = jnull(m.continuing_subword_prefix)
    if p and p ~= "" then return bad("model.continuing_subword_prefix", "not supported") end
    if jnull(m.end_of_word_suffix) and m.end_of_word_suffix ~= "" then
      return bad("model.end_of_word_suffix", "not supported")
    end
    local flat = {}
    for i, mg in ipairs(m.merges or {}) do
      local a, b
      if type(mg) == "table" then a, b = mg[1], mg[2]
      elseif type(mg) == "string" then a, b = mg:match("^([^ ]+) ([^ ]+)$") end
      if type(a) ~= "string" or type(b) ~= "string" then
        return bad("model.merges[" .. i .. "]", "expected [a, b] or \"a b\"")
      end
      flat[#flat + 1] = a; flat[#flat + 1] = b
    end
    cfg.merges = flat
  else
    return bad("model.type", "unsupported model " .. tostring(mtype))
  end
  local n = jnull(j.normalizer)
  if n then
    if n.type == "BertNormalizer" then
      cfg.normalizer = {clean_text = n.clean_text ~= false,
                        handle_chinese_chars = n.handle_chinese_chars ~= false,
                        strip_accents = jnull(n.strip_accents), lowercase = n.lowercase ~= false}
    elseif n.type == "Lowercase" then
      cfg.normalizer = {clean_text = false, handle_chinese_chars = false,
                        strip_accents = false, lowercase = true}
    else
      return bad("normalizer.type", "unsupported normalizer " .. tostring(n.type))
    end
  end
  local p = jnull(j.pre_tokenizer)
  if p then
    if p.type == "BertPreTokenizer" then cfg.pre_tokenizer = "bert"
    elseif p.type == "ByteLevel" then
      cfg.pre_tokenizer = "byte_level"
      cfg.add_prefix_space = p.add_prefix_space == true
      cfg.use_regex = p.use_regex ~= false
    elseif p.type == "WhitespaceSplit" then cfg.pre_tokenizer = "whitespace_split"
    else return bad("pre_tokenizer.type", "unsupported pre-tokenizer " .. tostring(p.type)) end
  end
  local lookup = function(t) return m.vocab[t] end
  local pp = jnull(j.post_processor)
  if pp then
    if pp.type == "TemplateProcessing" then
      local sp = {}
      for k, v in pairs(pp.special_tokens or {}) do sp[k] = v end
      local single, e1 = json_template(pp.single or {}, sp)
      if not single then return bad("post_processor.single", e1) end
      local pair, e2 = json_template(pp.pair or {}, sp)
      if not pair then return bad("post_processor.pair", e2) end
      cfg.post = {single = single, pair = pair}
    elseif pp.type == "BertProcessing" then
      cfg.post = bert_template(pp.cls[2], pp.sep[2])
    elseif pp.type == "RobertaProcessing" then
      cfg.post = roberta_template(pp.cls[2], pp.sep[2])
      cfg.trim_offsets = pp.trim_offsets ~= false
      cfg.post_add_prefix_space = pp.add_prefix_space ~= false
    elseif pp.type == "ByteLevel" then
      cfg.trim_offsets = pp.trim_offsets ~= false
      cfg.post_add_prefix_space = cfg.add_prefix_space
    else
      return bad("post_processor.type", "unsupported post-processor " .. tostring(pp.type))
    end
  end
  local d = jnull(j.decoder)
  if d then
    if d.type == "WordPiece" then
      cfg.decoder = "wordpiece"; cfg.decoder_prefix = d.prefix or "##"; cfg.cleanup = d.cleanup ~= false
    elseif d.type == "ByteLevel" then cfg.decoder = "byte_level" end
  end
  cfg.added_tokens = {}
  for _, a in ipairs(jnull(j.added_tokens) or {}) do
    cfg.added_tokens[#cfg.added_tokens + 1] = {
      content = a.content, id = a.id, special = a.special == true, lstrip = a.lstrip == true,
      rstrip = a.rstrip == true, single_word = a.single_word == true,
      normalized = a.normalized == true}
  end
  local pad = jnull(j.padding)
  if type(pad) == "table" then
    cfg.pad_id = pad.pad_id; cfg.pad_type_id = pad.pad_type_id
  else
    cfg.pad_id = lookup("[PAD]") or lookup("<pad>") or 0
  end
  local tok, e = build(cfg)
  if not tok then return nil, path .. ": " .. e end
  return tok
end

---------------------------------------------------------------- public

--- Loads a tokenizer: a vocab.txt, a tokenizer.json, or a directory with
-- tokenizer.json, vocab.json + merges.txt, or vocab.txt.  opts (vocab.txt):
-- {lowercase = true, strip_accents = nil}; (BPE files) {add_prefix_space}.
-- Returns the tokenizer, or nil and a message.
function M.load(path, opts)
  if type(path) ~= "string" then
    error("load: argument #1 (path) expected string, got " .. type(path), 2)
  end
  if is_dir(path) then
    local d = path:gsub("/+$", "")
    if exists(d .. "/tokenizer.json") then return load_tokenizer_json(d .. "/tokenizer.json") end
    if exists(d .. "/vocab.json") and exists(d .. "/merges.txt") then
      return load_bpe_files(d .. "/vocab.json", d .. "/merges.txt", opts)
    end
    if exists(d .. "/vocab.txt") then return load_vocab_txt(d .. "/vocab.txt", opts) end
    return nil, path .. ": no tokenizer.json, vocab.json + merges.txt or vocab.txt"
  end
  if not exists(path) then return nil, path .. ": No such file or directory" end
  if path:match("%.json$") then
    if path:match("vocab%.json$") then
      local mp = path:gsub("vocab%.json$", "merges.txt")
      return load_bpe_files(path, mp, opts)
    end
    return load_tokenizer_json(path)
  end
  return load_vocab_txt(path, opts)
end

--- Trains a tokenizer.  opts: kind = "wordpiece" | "bpe", files = {...} or
-- iterator = function returning strings, vocab_size, min_frequency,
-- special_tokens, limit_alphabet, lowercase (wordpiece), initial_alphabet
-- (bpe: all 256 byte symbols, default true).  Returns tok or nil, msg.
function M.train(opts)
  if type(opts) ~= "table" then
    error("train: argument #1 (options) expected table, got " .. type(opts), 2)
  end
  local kind = opts.kind or "wordpiece"
  if kind ~= "wordpiece" and kind ~= "bpe" then
    error("train: option 'kind' must be 'wordpiece' or 'bpe', got " .. tostring(kind), 2)
  end
  if opts.files == nil and opts.iterator == nil then
    error("train: needs 'files' (a list of paths) or 'iterator' (a function)", 2)
  end
  local wp = kind == "wordpiece"
  local specials = opts.special_tokens or (wp and BERT_SPECIALS or ROBERTA_SPECIALS)
  local tr = core.trainer{
    kind = kind, vocab_size = opts.vocab_size or 30000,
    min_frequency = opts.min_frequency or (wp and 2 or 0),
    limit_alphabet = opts.limit_alphabet or (wp and 1000 or 0),
    lowercase = opts.lowercase ~= false, strip_accents = opts.strip_accents,
    special_tokens = specials, initial_alphabet = opts.initial_alphabet ~= false,
  }
  if opts.files ~= nil then
    if type(opts.files) ~= "table" then
      error("train: option 'files' expected table, got " .. type(opts.files), 2)
    end
    for _, f in ipairs(opts.files) do
      local ok, err = tr:feed_file(f)
      if not ok then return nil, err end
    end
  end
  if opts.iterator ~= nil then
    if type(opts.iterator) ~= "function" then
      error("train: option 'iterator' expected function, got " .. type(opts.iterator), 2)
    end
    -- feed about 1 MB at a time: each feed call has a fixed cost (a word
    -- table to merge), which a line-by-line iterator would pay per line
    local chunk, size = {}, 0
    for s in opts.iterator do
      if type(s) ~= "string" then
        error("train: the iterator returned a " .. type(s) .. ", expected strings", 2)
      end
      chunk[#chunk + 1] = s
      size = size + #s + 1
      if size >= 1 << 20 then
        tr:feed(table.concat(chunk, "\n") .. "\n")
        chunk, size = {}, 0
      end
    end
    if #chunk > 0 then tr:feed(table.concat(chunk, "\n") .. "\n") end
  end
  local vocab_list, merges = tr:finish()
  if wp then
    return build(wordpiece_config(vocab_list, opts))
  end
  local vocab = {}
  for i, t in ipairs(vocab_list) do vocab[t] = i - 1 end
  return build(bpe_config(vocab, merges, opts))
end

---------------------------------------------------------------- methods

--- Decodes a list of id lists.
function methods.decode_batch(self, batch, opts)
  if type(batch) ~= "table" then
    error("decode_batch: argument #2 (batch) expected table, got " .. type(batch), 2)
  end
  local out = {}
  for i, ids in ipairs(batch) do out[i] = self:decode(ids, opts) end
  return out
end

--- token -> id map of the whole vocabulary (added tokens included).
function methods.get_vocab(self)
  local v = {}
  for i, t in ipairs(self:vocab_list()) do if t then v[t] = i - 1 end end
  for _, a in ipairs(self:config().added_tokens or {}) do v[a.content] = a.id end
  return v
end

local function json_str(s) return cjson.encode(s) end

local function vocab_json(list)
  local parts = {}
  for i, t in ipairs(list) do
    if t then parts[#parts + 1] = json_str(t) .. ": " .. (i - 1) end
  end
  return "{\n  " .. table.concat(parts, ",\n  ") .. "\n}"
end

local function template_json(items)
  local out = {}
  for _, it in ipairs(items) do
    if it.seq then
      out[#out + 1] = string.format('{"Sequence": {"id": "%s", "type_id": %d}}',
                                    it.seq == 1 and "B" or "A", it.type_id or 0)
    else
      out[#out + 1] = string.format('{"SpecialToken": {"id": "id%d", "type_id": %d}}',
                                    it.ids[1], it.type_id or 0)
    end
  end
  return "[" .. table.concat(out, ", ") .. "]"
end

local function tokenizer_json(self)
  local c = self:config()
  local list = self:vocab_list()
  local b = {'{\n"version": "1.0",\n"truncation": null,\n"padding": null,\n"added_tokens": ['}
  local at = {}
  for _, a in ipairs(c.added_tokens or {}) do
    at[#at + 1] = string.format('{"id": %d, "content": %s, "single_word": %s, "lstrip": %s, ' ..
      '"rstrip": %s, "normalized": %s, "special": %s}', a.id, json_str(a.content),
      tostring(a.single_word == true), tostring(a.lstrip == true), tostring(a.rstrip == true),
      tostring(a.normalized == true), tostring(a.special ~= false))
  end
  b[#b + 1] = table.concat(at, ",\n") .. "],\n"
  local n = c.normalizer
  if n then
    local sa = n.strip_accents
    b[#b + 1] = string.format('"normalizer": {"type": "BertNormalizer", "clean_text": %s, ' ..
      '"handle_chinese_chars": %s, "strip_accents": %s, "lowercase": %s},\n',
      tostring(n.clean_text ~= false), tostring(n.handle_chinese_chars ~= false),
      sa == nil and "null" or tostring(sa), tostring(n.lowercase ~= false))
  else b[#b + 1] = '"normalizer": null,\n' end
  if c.pre_tokenizer == "bert" then
    b[#b + 1] = '"pre_tokenizer": {"type": "BertPreTokenizer"},\n'
  elseif c.pre_tokenizer == "byte_level" then
    b[#b + 1] = string.format('"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": %s, ' ..
      '"trim_offsets": true, "use_regex": %s},\n', tostring(c.add_prefix_space == true),
      tostring(c.use_regex ~= false))
  elseif c.pre_tokenizer == "whitespace_split" then
    b[#b + 1] = '"pre_tokenizer": {"type": "WhitespaceSplit"},\n'
  else b[#b + 1] = '"pre_tokenizer": null,\n' end
  if c.post then
    local sp, seen = {}, {}
    for _, items in ipairs{c.post.single or {}, c.post.pair or {}} do
      for _, it in ipairs(items) do
        if it.ids and not seen[it.ids[1]] then
          seen[it.ids[1]] = true
          local toks = {}
          for k, id in ipairs(it.ids) do toks[k] = json_str(self:id_to_token(id) or "") end
          sp[#sp + 1] = string.format('"id%d": {"id": "id%d", "ids": [%s], "tokens": [%s]}',
            it.ids[1], it.ids[1], table.concat(it.ids, ", "), table.concat(toks, ", "))
        end
      end
    end
    table.sort(sp)
    if c.post.kind == "roberta" then
      b[#b + 1] = string.format('"post_processor": {"type": "RobertaProcessing", "sep": [%s, %d], ' ..
        '"cls": [%s, %d], "trim_offsets": %s, "add_prefix_space": %s},\n',
        json_str(self:id_to_token(c.post.sep) or ""), c.post.sep,
        json_str(self:id_to_token(c.post.cls) or ""), c.post.cls,
        tostring(c.trim_offsets == true), tostring(c.post_add_prefix_space == true))
    else
    b[#b + 1] = string.format('"post_processor": {"type": "TemplateProcessing", "single": %s, ' ..
      '"pair": %s, "special_tokens": {%s}},\n', template_json(c.post.single or {}),
      template_json(c.post.pair or {}), table.concat(sp, ", "))
    end
  elseif c.trim_offsets then
    b[#b + 1] = '"post_processor": {"type": "ByteLevel", "add_prefix_space": false, ' ..
      '"trim_offsets": true, "use_regex": true},\n'
  else b[#b + 1] = '"post_processor": null,\n' end
  if c.decoder == "wordpiece" then
    b[#b + 1] = string.format('"decoder": {"type": "WordPiece", "prefix": %s, "cleanup": %s},\n',
      json_str(c.decoder_prefix or "##"), tostring(c.cleanup ~= false))
  elseif c.decoder == "byte_level" then
    b[#b + 1] = '"decoder": {"type": "ByteLevel", "add_prefix_space": true, ' ..
      '"trim_offsets": true, "use_regex": true},\n'
  else b[#b + 1] = '"decoder": null,\n' end
  if c.model == "wordpiece" then
    b[#b + 1] = string.format('"model": {"type": "WordPiece", "unk_token": %s, ' ..
      '"continuing_subword_prefix": %s, "max_input_chars_per_word": %d, "vocab": %s}\n}\n',
      json_str(c.unk_token or "[UNK]"), json_str(c.continuing_subword_prefix or "##"),
      c.max_input_chars_per_word or 100, vocab_json(list))
  else
    local m, ms = self:merges(), {}
    for i = 1, #m, 2 do ms[#ms + 1] = "[" .. json_str(m[i]) .. ", " .. json_str(m[i + 1]) .. "]" end
    b[#b + 1] = string.format('"model": {"type": "BPE", "dropout": null, "unk_token": %s, ' ..
      '"continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": false, ' ..
      '"byte_fallback": false, "ignore_merges": false, "vocab": %s, "merges": [\n  %s]}\n}\n',
      c.unk_token and json_str(c.unk_token) or "null", vocab_json(list),
      table.concat(ms, ",\n  "))
  end
  return table.concat(b)
end

--- Saves to a directory (vocab.txt or vocab.json + merges.txt, and
-- tokenizer.json) or to a file ending in .json (tokenizer.json).
-- Each file is written to a temp file, then renamed.  true or nil, msg.
function methods.save(self, path)
  if type(path) ~= "string" then
    error("save: argument #2 (path) expected string, got " .. type(path), 2)
  end
  if path:match("%.json$") then return write_atomic(path, tokenizer_json(self)) end
  if not is_dir(path) then
    local ok = os.execute("mkdir -p '" .. path:gsub("'", "'\\''") .. "'")
    if not ok then return nil, path .. ": cannot create directory" end
  end
  local c = self:config()
  local list = self:vocab_list()
  local ok, err
  if c.model == "wordpiece" then
    local lines = {}
    for i, t in ipairs(list) do lines[i] = t or "" end
    ok, err = write_atomic(path .. "/vocab.txt", table.concat(lines, "\n") .. "\n")
  else
    ok, err = write_atomic(path .. "/vocab.json", vocab_json(list) .. "\n")
    if ok then
      local m, lines = self:merges(), {"#version: 0.2"}
      for i = 1, #m, 2 do lines[#lines + 1] = m[i] .. " " .. m[i + 1] end
      ok, err = write_atomic(path .. "/merges.txt", table.concat(lines, "\n") .. "\n")
    end
  end
  if not ok then return nil, err end
  return write_atomic(path .. "/tokenizer.json", tokenizer_json(self))
end

M.Tokenizer = methods
return M
