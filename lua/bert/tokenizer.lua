-- bert.tokenizer: WordPiece, byte-level BPE and SentencePiece Unigram
-- tokenizers (C core), Hugging Face and SentencePiece file formats, training.
--
--   local tok = tokenizer.load("vocab.txt" | dir | "tokenizer.json" | "spiece.model")
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

local ALBERT_SPECIALS = {"<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"}
local META = "\226\150\129"              -- ▁ U+2581

-- Typed access to decoded JSON: a wrong type raises {field =, msg =}, which
-- the loaders turn into "FILE: key 'FIELD': MESSAGE".
local function json_type(v)
  if v == cjson.null or v == nil then return "null" end
  if type(v) == "table" then return next(v) == nil and "an empty object/array"
    or (v[1] ~= nil and "an array" or "an object") end
  if type(v) == "number" then return "a number" end
  if type(v) == "boolean" then return "a boolean" end
  return "a string"
end

local function jerr(field, msg) error({field = field, msg = msg}, 0) end

local function typed(v, want, field)
  v = jnull(v)
  if v == nil then return nil end
  local ok
  if want == "table" then ok = type(v) == "table"
  elseif want == "integer" then ok = math.type(v) == "integer" or (type(v) == "number" and v == math.floor(v) and v >= 0 and v < 2^31)
  else ok = type(v) == want end
  if not ok then
    jerr(field, "expected " .. (want == "table" and "an object or array" or
      (want == "integer" and "an integer" or "a " .. want)) .. ", got " .. json_type(v))
  end
  if want == "integer" then v = math.tointeger(v) or v end
  return v
end

local function need(v, want, field)
  local x = typed(v, want, field)
  if x == nil then jerr(field, "missing") end
  return x
end

-- Runs a loader, turning typed errors into messages naming path and field.
local function guarded(path, f, ...)
  local ok, a, b = pcall(f, ...)
  if ok then return a, b end
  if type(a) == "table" and a.field then
    return nil, string.format("%s: key '%s': %s", path, a.field, a.msg)
  end
  return nil, path .. ": " .. tostring(a)
end

---------------------------------------------------------------- base64

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local B64INV = {}
for i = 1, 64 do B64INV[B64:byte(i)] = i - 1 end

local function b64encode(s)
  local out, n = {}, #s
  for i = 1, n, 3 do
    local a, b, c = s:byte(i, i + 2)
    local v = a * 65536 + (b or 0) * 256 + (c or 0)
    local k = v >> 18 & 63; local l = v >> 12 & 63; local m = v >> 6 & 63; local q = v & 63
    out[#out + 1] = B64:sub(k + 1, k + 1) .. B64:sub(l + 1, l + 1) ..
      (b and B64:sub(m + 1, m + 1) or "=") .. (c and B64:sub(q + 1, q + 1) or "=")
  end
  return table.concat(out)
end

local function b64decode(s, field)
  s = s:gsub("%s", "")
  if #s % 4 ~= 0 then jerr(field, "invalid base64 (length " .. #s .. ")") end
  local out = {}
  for i = 1, #s, 4 do
    local v, pad = 0, 0
    for j = 0, 3 do
      local ch = s:byte(i + j)
      local d = B64INV[ch]
      if ch == 61 then pad = pad + 1; d = 0
      elseif not d or pad > 0 then jerr(field, "invalid base64 character at " .. (i + j)) end
      v = v * 64 + d
    end
    local bytes = string.char(v >> 16 & 255, v >> 8 & 255, v & 255)
    out[#out + 1] = bytes:sub(1, 3 - pad)
  end
  return table.concat(out)
end

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

-- Family of a Unigram vocabulary (special tokens and template), from
-- opts.family or the pieces present.
local FAMILIES = {
  albert = {cls = "[CLS]", sep = "[SEP]", pad = "<pad>", unk = "<unk>", mask = "[MASK]",
            mask_lstrip = true},
  ["deberta-v3"] = {cls = "[CLS]", sep = "[SEP]", pad = "[PAD]", unk = "[UNK]", mask = "[MASK]"},
  xlmr = {cls = "<s>", sep = "</s>", pad = "<pad>", unk = "<unk>", mask = "<mask>",
          mask_lstrip = true, roberta_pair = true},
}

local function detect_family(index, opts)
  if opts.family ~= nil then
    if not FAMILIES[opts.family] then
      error("load: option 'family' must be 'albert', 'deberta-v3' or 'xlmr', got " ..
            tostring(opts.family), 3)
    end
    return opts.family
  end
  if index["[CLS]"] and index["[SEP]"] then return index["[PAD]"] and "deberta-v3" or "albert" end
  if index["<s>"] and index["</s>"] then return "xlmr" end
  return nil
end

local function xlmr_template(cls, sep)
  return {
    single = {{ids = {cls}, type_id = 0}, {seq = 0, type_id = 0}, {ids = {sep}, type_id = 0}},
    pair = {{ids = {cls}, type_id = 0}, {seq = 0, type_id = 0}, {ids = {sep}, type_id = 0},
            {ids = {sep}, type_id = 0}, {seq = 1, type_id = 0}, {ids = {sep}, type_id = 0}},
  }
end

-- ALBERT's preprocess_text as normalizer steps (before the charsmap).
local function albert_steps(lowercase, strip_accents)
  local st = {{kind = "replace", pattern = "``", content = '"'},
              {kind = "replace", pattern = "''", content = '"'}}
  if strip_accents then st[#st + 1] = {kind = "nfkd"}; st[#st + 1] = {kind = "strip_accents"} end
  if lowercase then st[#st + 1] = {kind = "lowercase"} end
  return st
end

-- Config of a Unigram tokenizer.  pieces/scores/types: arrays by id.
-- spm: SentencePiece semantics (a .model file); m: the ModelProto fields.
local function unigram_config(pieces, scores, types, opts, spm, m)
  local index = {}
  for i, p in ipairs(pieces) do if p then index[p] = i - 1 end end
  local fam = detect_family(index, opts)
  local F = fam and FAMILIES[fam] or {}
  local cfg = {
    model = "unigram", vocab_list = pieces, scores = scores, types = types, spm = spm,
    unk_id = m.unk_id, byte_fallback = m.byte_fallback == true, charsmap = m.charsmap,
    add_dummy_prefix = m.add_dummy_prefix ~= false,
    remove_extra_whitespaces = m.remove_extra_whitespaces ~= false,
    escape_whitespaces = m.escape_whitespaces ~= false,
    treat_whitespace_as_suffix = m.treat_whitespace_as_suffix == true,
    normalizers = m.normalizers, pre_tokenizer = m.pre_tokenizer or (not spm and "metaspace" or nil),
    replacement = m.replacement or META, prepend_scheme = m.prepend_scheme or "always",
    split = m.split ~= false, decoder = "metaspace", family = fam,
  }
  if spm and (opts.lowercase or opts.strip_accents or fam == "albert" and opts.family) then
    -- as the slow AlbertTokenizer: preprocess_text before spm
    local lc, sa = opts.lowercase, opts.strip_accents
    if fam == "albert" and opts.family then
      if lc == nil then lc = true end
      if sa == nil then sa = true end
    end
    cfg.normalizers = albert_steps(lc, sa)
  end
  -- special tokens: control pieces, the unk piece, the family's tokens;
  -- a .model loaded without a family never finds them in text (spm_encode
  -- encodes "[MASK]" as its pieces), with one as HF's slow tokenizers do
  local added, seen = {}, {}
  local in_text = not spm or opts.family ~= nil
  local function add(content, id, special, lstrip)
    if id and not seen[id] then
      seen[id] = true
      added[#added + 1] = {content = content, id = id, special = special ~= false,
                           lstrip = lstrip or false, normalized = false, in_text = in_text}
    end
  end
  for i, ty in ipairs(types or {}) do
    if ty == 3 or ty == 2 then
      add(pieces[i], i - 1, true, pieces[i] == F.mask and F.mask_lstrip)
    elseif ty == 4 and not spm then
      add(pieces[i], i - 1, false)
    end
  end
  for _, k in ipairs({"cls", "sep", "pad", "unk", "mask"}) do
    if F[k] then add(F[k], index[F[k]], true, k == "mask" and F.mask_lstrip) end
  end
  for _, a in ipairs(m.added_tokens or {}) do add(a.content, a.id, a.special, a.lstrip) end
  table.sort(added, function(a, b) return a.id < b.id end)
  cfg.added_tokens = added
  cfg.pad_id = F.pad and index[F.pad] or 0
  if m.post then cfg.post = m.post
  elseif F.cls and index[F.cls] and index[F.sep] then
    cfg.post = F.roberta_pair and xlmr_template(index[F.cls], index[F.sep])
      or bert_template(index[F.cls], index[F.sep])
  end
  return cfg
end

-- A SentencePiece .model file (Unigram).  opts.family: 'albert' (also
-- applies ALBERT's lowercasing and accent stripping, as HF's slow
-- AlbertTokenizer does), 'deberta-v3' or 'xlmr' (fairseq's id layout);
-- without it the file is encoded exactly as spm_encode does.
local function load_spm(path, opts)
  opts = opts or {}
  local data, err = read_file(path)
  if not data then return nil, err end
  local m, perr = core.parse_spm(data)
  if not m then return nil, path .. ": " .. perr end
  local pieces, scores, types = m.pieces, m.scores, m.types
  if opts.family == "xlmr" then
    -- XLMRobertaConverter: fairseq's <s> <pad> </s> <unk>, then pieces 3..
    local p2, s2, t2 = {"<s>", "<pad>", "</s>", "<unk>"}, {0, 0, 0, 0}, {3, 3, 3, 2}
    for i = 4, #pieces do
      p2[#p2 + 1] = pieces[i]; s2[#s2 + 1] = scores[i]; t2[#t2 + 1] = types[i] == 2 and 3 or types[i]
    end
    p2[#p2 + 1] = "<mask>"; s2[#s2 + 1] = 0; t2[#t2 + 1] = 3
    pieces, scores, types = p2, s2, t2
    m.unk_id = 3
  else
    for i, ty in ipairs(types) do if ty == 2 then m.unk_id = i - 1 end end
  end
  local cfg = unigram_config(pieces, scores, types, opts, true, m)
  local tok, e = build(cfg)
  if not tok then return nil, path .. ": " .. e end
  return tok
end

local function json_template(t, specials, field)
  local items = {}
  for i, it in ipairs(need(t, "table", field)) do
    local f = field .. "[" .. i .. "]"
    typed(it, "table", f)
    if jnull(it.Sequence) then
      local sq = need(it.Sequence, "table", f .. ".Sequence")
      local id = typed(sq.id, "string", f .. ".Sequence.id")
      items[#items + 1] = {seq = id == "B" and 1 or 0,
                           type_id = typed(sq.type_id, "integer", f .. ".Sequence.type_id") or 0}
    elseif jnull(it.SpecialToken) then
      local st = need(it.SpecialToken, "table", f .. ".SpecialToken")
      local name = need(st.id, "string", f .. ".SpecialToken.id")
      local sp = specials[name]
      if not sp then jerr(f, "special token " .. name .. " not in special_tokens") end
      items[#items + 1] = {ids = sp, type_id = typed(st.type_id, "integer", f .. ".SpecialToken.type_id") or 0}
    else
      jerr(f, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}")
    end
  end
  return items
end

-- HF normalizers (a Sequence of them) as steps of the C chain.  model:
-- "Unigram", or the model whose file it is (Precompiled is for Unigram).
local UNICODE_FORMS = {NFC = "nfc", NFD = "nfd", NFKC = "nfkc", NFKD = "nfkd"}
local function hf_normalizers(n, field, out, cfg, model)
  local t = need(n.type, "string", field .. ".type")
  if t == "Sequence" then
    for i, x in ipairs(need(n.normalizers, "table", field .. ".normalizers")) do
      hf_normalizers(need(x, "table", field .. ".normalizers[" .. i .. "]"),
                     field .. ".normalizers[" .. i .. "]", out, cfg, model)
    end
  elseif t == "Replace" then
    local pat = need(n.pattern, "table", field .. ".pattern")
    local content = need(n.content, "string", field .. ".content")
    if jnull(pat.String) then
      out[#out + 1] = {kind = "replace", pattern = need(pat.String, "string", field .. ".pattern.String"),
                       content = content}
    elseif jnull(pat.Regex) then
      local re = need(pat.Regex, "string", field .. ".pattern.Regex")
      if re ~= " {2,}" or content ~= " " then
        jerr(field .. ".pattern.Regex", "only the regex ' {2,}' -> ' ' is supported, got '" .. re .. "'")
      end
      out[#out + 1] = {kind = "spaces", content = " "}
    else jerr(field .. ".pattern", "expected {\"String\": ...} or {\"Regex\": ...}") end
  elseif t == "Lowercase" then out[#out + 1] = {kind = "lowercase"}
  elseif UNICODE_FORMS[t] then out[#out + 1] = {kind = UNICODE_FORMS[t]}
  elseif t == "Nmt" then out[#out + 1] = {kind = "nmt"}
  elseif t == "StripAccents" then out[#out + 1] = {kind = "strip_accents"}
  elseif t == "Strip" then
    out[#out + 1] = {kind = "strip", left = typed(n.strip_left, "boolean", field .. ".strip_left") ~= false,
                     right = typed(n.strip_right, "boolean", field .. ".strip_right") ~= false}
  elseif t == "Prepend" then
    out[#out + 1] = {kind = "prepend", content = need(n.prepend, "string", field .. ".prepend")}
  elseif t == "Precompiled" and model == "Unigram" then
    local b = typed(n.precompiled_charsmap, "string", field .. ".precompiled_charsmap")
    if b and b ~= "" then
      if cfg.charsmap then jerr(field, "only one Precompiled normalizer is supported") end
      cfg.charsmap = b64decode(b, field .. ".precompiled_charsmap")
      out[#out + 1] = {kind = "precompiled"}
    end
  else
    jerr(field .. ".type", "unsupported normalizer " .. t .. " for a " .. model .. " model" ..
      (t == "BertNormalizer" and " (only as the whole normalizer, not in a Sequence)" or ""))
  end
end

local function metaspace_fields(p, field, cfg)
  cfg.pre_tokenizer = "metaspace"
  cfg.replacement = typed(p.replacement, "string", field .. ".replacement") or META
  local ps = typed(p.prepend_scheme, "string", field .. ".prepend_scheme")
  if ps == nil then
    local aps = typed(p.add_prefix_space, "boolean", field .. ".add_prefix_space")
    ps = aps == false and "never" or "always"
  end
  if ps ~= "always" and ps ~= "first" and ps ~= "never" then
    jerr(field .. ".prepend_scheme", "expected 'always', 'first' or 'never', got '" .. ps .. "'")
  end
  cfg.prepend_scheme = ps
  cfg.split = typed(p.split, "boolean", field .. ".split") ~= false
end

-- {------------------------------------------------ tokenizer.json's sections
-- Each reads one section of a tokenizer.json into cfg (the C tokenizer's
-- configuration), refusing what it does not support with jerr.

-- model.vocab's ids index a table of the vocabulary's size: an id far
-- beyond the number of entries (a typo, or 2^31 - 1) would allocate
-- gigabytes for nothing, so it is refused with the token and the id.
local function dense_vocab(vocab)
  local n = 0
  for _ in pairs(vocab) do n = n + 1 end
  local limit = 4 * n + 65536
  for token, id in pairs(vocab) do
    if type(id) == "number" and id >= limit then   -- JSON's numbers may come as floats
      jerr("model.vocab", string.format("id %.0f of %q is far beyond the vocabulary's %d entries (ids must run " ..
        "0..N-1 with few gaps; the largest accepted here is %d)", id, token, n, limit - 1))
    end
  end
  return vocab
end

local function wordpiece_model(m, cfg)
  cfg.model = "wordpiece"
  cfg.unk_token = typed(m.unk_token, "string", "model.unk_token") or "[UNK]"
  cfg.continuing_subword_prefix = typed(m.continuing_subword_prefix, "string",
                                        "model.continuing_subword_prefix") or "##"
  cfg.max_input_chars_per_word = typed(m.max_input_chars_per_word, "integer",
                                       "model.max_input_chars_per_word") or 100
  cfg.vocab = dense_vocab(need(m.vocab, "table", "model.vocab"))
end

local function bpe_model(m, cfg)
  cfg.model = "bpe"
  cfg.vocab = dense_vocab(need(m.vocab, "table", "model.vocab"))
  cfg.unk_token = typed(m.unk_token, "string", "model.unk_token")
  local p = typed(m.continuing_subword_prefix, "string", "model.continuing_subword_prefix")
  if p and p ~= "" then jerr("model.continuing_subword_prefix", "not supported") end
  local suf = typed(m.end_of_word_suffix, "string", "model.end_of_word_suffix")
  if suf and suf ~= "" then jerr("model.end_of_word_suffix", "not supported") end
  local flat = {}
  for i, mg in ipairs(typed(m.merges, "table", "model.merges") or {}) do
    local a, b
    if type(mg) == "table" then a, b = mg[1], mg[2]
    elseif type(mg) == "string" then a, b = mg:match("^([^ ]+) ([^ ]+)$") end
    if type(a) ~= "string" or type(b) ~= "string" then
      jerr("model.merges[" .. i .. "]", "expected [a, b] or \"a b\"")
    end
    flat[#flat + 1] = a; flat[#flat + 1] = b
  end
  cfg.merges = flat
end

-- A Unigram model's pre-tokenizer (Metaspace, alone or as a one-element
-- Sequence, or WhitespaceSplit) into u.
local function unigram_pre_tokenizer(p, u)
  if not p then
    u.pre_tokenizer = "none"
    return
  end
  local pt = need(p.type, "string", "pre_tokenizer.type")
  local field = "pre_tokenizer"
  if pt == "Sequence" then
    local list = need(p.pretokenizers, "table", "pre_tokenizer.pretokenizers")
    if #list ~= 1 then jerr("pre_tokenizer.pretokenizers", "only a one-element Sequence is supported") end
    p = need(list[1], "table", "pre_tokenizer.pretokenizers[1]")
    field = "pre_tokenizer.pretokenizers[1]"
    pt = need(p.type, "string", field .. ".type")
  end
  if pt == "Metaspace" then metaspace_fields(p, field, u)
  elseif pt == "WhitespaceSplit" then u.pre_tokenizer = "whitespace_split"
  else jerr(field .. ".type", "unsupported pre-tokenizer " .. pt .. " for a Unigram model") end
end

-- A Unigram model with its normalizer and pre-tokenizer: a new cfg.
local function unigram_model(j, m)
  local pieces, scores = {}, {}
  for i, e in ipairs(need(m.vocab, "table", "model.vocab")) do
    local f = "model.vocab[" .. i .. "]"
    typed(e, "table", f)
    pieces[i] = need(e[1], "string", f .. "[1]")
    scores[i] = need(e[2], "number", f .. "[2]")
  end
  if #pieces == 0 then jerr("model.vocab", "expected a non-empty array of [piece, score]") end
  local unk = typed(m.unk_id, "integer", "model.unk_id")
  if unk and unk >= #pieces then
    jerr("model.unk_id", string.format("%d is outside the vocabulary (%d pieces)", unk, #pieces))
  end
  local u = {unk_id = unk, byte_fallback = typed(m.byte_fallback, "boolean", "model.byte_fallback")}
  local n = typed(j.normalizer, "table", "normalizer")
  if n then
    u.normalizers = {}
    hf_normalizers(n, "normalizer", u.normalizers, u, "Unigram")
  end
  unigram_pre_tokenizer(typed(j.pre_tokenizer, "table", "pre_tokenizer"), u)
  u.post = nil
  local cfg = unigram_config(pieces, scores, nil, {}, false, u)
  cfg.unk_id = unk
  return cfg
end

-- A WordPiece or BPE model's splitting pre-tokenizer (alone or in a
-- Sequence) as a step of cfg.pre_tokenizers.
local function split_step(p, field)
  local pt = need(p.type, "string", field .. ".type")
  if pt == "WhitespaceSplit" then return "whitespace_split"
  elseif pt == "Whitespace" then return "whitespace"
  elseif pt == "BertPreTokenizer" then return "bert"
  elseif pt == "Punctuation" then
    local b = typed(p.behavior, "string", field .. ".behavior") or "Isolated"
    if b ~= "Isolated" then
      jerr(field .. ".behavior", "only Punctuation's 'Isolated' behavior is supported, got '" .. b .. "'")
    end
    return "punctuation"
  elseif pt == "Digits" then
    return typed(p.individual_digits, "boolean", field .. ".individual_digits") and "digits_each" or "digits"
  end
  jerr(field .. ".type", "unsupported pre-tokenizer " .. pt ..
    (pt == "ByteLevel" and " inside a Sequence (only as the whole pre-tokenizer)" or ""))
end

-- The normalizer and pre-tokenizer of a WordPiece or BPE model.
local function normalizer_and_pre_tokenizer(j, cfg, model)
  local n = typed(j.normalizer, "table", "normalizer")
  if n then
    local nt = need(n.type, "string", "normalizer.type")
    if nt == "BertNormalizer" then
      cfg.normalizer = {
        clean_text = typed(n.clean_text, "boolean", "normalizer.clean_text") ~= false,
        handle_chinese_chars = typed(n.handle_chinese_chars, "boolean",
                                     "normalizer.handle_chinese_chars") ~= false,
        strip_accents = typed(n.strip_accents, "boolean", "normalizer.strip_accents"),
        lowercase = typed(n.lowercase, "boolean", "normalizer.lowercase") ~= false}
    elseif nt == "Lowercase" then
      cfg.normalizer = {clean_text = false, handle_chinese_chars = false,
                        strip_accents = false, lowercase = true}
    else
      cfg.normalizers = {}
      hf_normalizers(n, "normalizer", cfg.normalizers, cfg, model)
    end
  end
  local p = typed(j.pre_tokenizer, "table", "pre_tokenizer")
  if p then
    local pt = need(p.type, "string", "pre_tokenizer.type")
    if pt == "BertPreTokenizer" then cfg.pre_tokenizer = "bert"
    elseif pt == "ByteLevel" then
      cfg.pre_tokenizer = "byte_level"
      cfg.add_prefix_space = typed(p.add_prefix_space, "boolean", "pre_tokenizer.add_prefix_space") == true
      cfg.use_regex = typed(p.use_regex, "boolean", "pre_tokenizer.use_regex") ~= false
    elseif pt == "WhitespaceSplit" then cfg.pre_tokenizer = "whitespace_split"
    elseif pt == "Sequence" then
      local steps = {}
      for i, x in ipairs(need(p.pretokenizers, "table", "pre_tokenizer.pretokenizers")) do
        local f = "pre_tokenizer.pretokenizers[" .. i .. "]"
        steps[i] = split_step(need(x, "table", f), f)
      end
      if #steps > 8 then jerr("pre_tokenizer.pretokenizers", "more than 8 pre-tokenizers") end
      cfg.pre_tokenizers = steps
    else cfg.pre_tokenizers = {split_step(p, "pre_tokenizer")} end
  end
end

-- The special tokens around a sequence or a pair: cfg.post and the
-- offsets' settings.
local function post_processor(pp, cfg)
  local pt = need(pp.type, "string", "post_processor.type")
  if pt == "TemplateProcessing" then
    local sp = {}
    for k, v in pairs(typed(pp.special_tokens, "table", "post_processor.special_tokens") or {}) do
      local f = "post_processor.special_tokens." .. tostring(k)
      typed(v, "table", f)
      local ids = {}
      for i, id in ipairs(need(v.ids, "table", f .. ".ids")) do
        ids[i] = need(id, "integer", f .. ".ids[" .. i .. "]")
      end
      sp[k] = ids
    end
    cfg.post = {single = json_template(pp.single or {}, sp, "post_processor.single"),
                pair = json_template(pp.pair or {}, sp, "post_processor.pair")}
  elseif pt == "BertProcessing" or pt == "RobertaProcessing" then
    local cls = need(pp.cls, "table", "post_processor.cls")
    local sep = need(pp.sep, "table", "post_processor.sep")
    local c = need(cls[2], "integer", "post_processor.cls[2]")
    local s2 = need(sep[2], "integer", "post_processor.sep[2]")
    if pt == "BertProcessing" then cfg.post = bert_template(c, s2)
    else
      cfg.post = roberta_template(c, s2)
      cfg.trim_offsets = typed(pp.trim_offsets, "boolean", "post_processor.trim_offsets") ~= false
      cfg.post_add_prefix_space = typed(pp.add_prefix_space, "boolean",
                                        "post_processor.add_prefix_space") ~= false
    end
  elseif pt == "ByteLevel" then
    cfg.trim_offsets = typed(pp.trim_offsets, "boolean", "post_processor.trim_offsets") ~= false
    cfg.post_add_prefix_space = cfg.add_prefix_space
  else
    jerr("post_processor.type", "unsupported post-processor " .. pt)
  end
end

-- The decoder: for a Unigram model only whether it falls back to bytes
-- (anywhere in a Sequence); else WordPiece's or ByteLevel's.
local function decoder(d, cfg, unigram)
  if unigram then
    local function scan(x, f)
      local dt = need(x.type, "string", f .. ".type")
      if dt == "Sequence" then
        for i, y in ipairs(need(x.decoders, "table", f .. ".decoders")) do
          scan(need(y, "table", f .. ".decoders[" .. i .. "]"), f .. ".decoders[" .. i .. "]")
        end
      elseif dt == "ByteFallback" then cfg.decoder_byte_fallback = true end
    end
    scan(d, "decoder")
    return
  end
  local dt = need(d.type, "string", "decoder.type")
  if dt == "WordPiece" then
    cfg.decoder = "wordpiece"
    cfg.decoder_prefix = typed(d.prefix, "string", "decoder.prefix") or "##"
    cfg.cleanup = typed(d.cleanup, "boolean", "decoder.cleanup") ~= false
  elseif dt == "ByteLevel" then cfg.decoder = "byte_level" end
end

local function added_tokens(list)
  local added = {}
  for i, a in ipairs(list or {}) do
    local f = "added_tokens[" .. i .. "]"
    typed(a, "table", f)
    added[#added + 1] = {
      content = need(a.content, "string", f .. ".content"), id = need(a.id, "integer", f .. ".id"),
      special = typed(a.special, "boolean", f .. ".special") == true,
      lstrip = typed(a.lstrip, "boolean", f .. ".lstrip") == true,
      rstrip = typed(a.rstrip, "boolean", f .. ".rstrip") == true,
      single_word = typed(a.single_word, "boolean", f .. ".single_word") == true,
      normalized = typed(a.normalized, "boolean", f .. ".normalized") == true}
  end
  return added
end

-- padding's ids, else those of [PAD] or <pad> in the vocabulary, else 0
local function padding(pad, cfg, unigram)
  if pad then
    cfg.pad_id = typed(pad.pad_id, "integer", "padding.pad_id")
    cfg.pad_type_id = typed(pad.pad_type_id, "integer", "padding.pad_type_id")
    return
  end
  local function lookup(t)
    if unigram then
      for i, p in ipairs(cfg.vocab_list) do if p == t then return i - 1 end end
      return nil
    end
    return cfg.vocab[t]
  end
  cfg.pad_id = lookup("[PAD]") or lookup("<pad>") or 0
end
-- }------------------------------------------------

local function parse_tokenizer_json(path, j)
  typed(j, "table", "(top level)")
  local m = need(j.model, "table", "model")
  local cfg = {}
  local mtype = typed(m.type, "string", "model.type") or (jnull(m.merges) and "BPE") or "WordPiece"
  local unigram = mtype == "Unigram"
  if mtype == "WordPiece" then wordpiece_model(m, cfg)
  elseif mtype == "BPE" then bpe_model(m, cfg)
  elseif unigram then cfg = unigram_model(j, m)
  else jerr("model.type", "unsupported model " .. tostring(mtype)) end
  if not unigram then normalizer_and_pre_tokenizer(j, cfg, mtype) end
  local pp = typed(j.post_processor, "table", "post_processor")
  if pp then post_processor(pp, cfg)
  elseif unigram then cfg.post = nil end
  local d = typed(j.decoder, "table", "decoder")
  if d then decoder(d, cfg, unigram) end
  cfg.added_tokens = added_tokens(typed(j.added_tokens, "table", "added_tokens"))
  padding(typed(j.padding, "table", "padding"), cfg, unigram)
  return cfg
end

local function load_tokenizer_json(path)
  local s, err = read_file(path)
  if not s then return nil, err end
  local ok, j = pcall(cjson.decode, s)
  if not ok or type(j) ~= "table" then return nil, path .. ": invalid JSON: " .. tostring(j) end
  local cfg, e = guarded(path, parse_tokenizer_json, path, j)
  if not cfg then return nil, e end
  local tok, e2 = build(cfg)
  if not tok then return nil, path .. ": " .. e2 end
  return tok
end

---------------------------------------------------------------- public

--- Loads a tokenizer: a vocab.txt, a tokenizer.json, a SentencePiece
-- .model, or a directory with tokenizer.json, vocab.json + merges.txt,
-- vocab.txt or spiece.model / spm.model.  opts (vocab.txt):
-- {lowercase = true, strip_accents = nil}; (BPE files) {add_prefix_space};
-- (.model) {family = "albert" | "deberta-v3" | "xlmr", lowercase, strip_accents}.
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
    for _, name in ipairs({"spiece.model", "spm.model", "sentencepiece.bpe.model", "tokenizer.model"}) do
      if exists(d .. "/" .. name) then return load_spm(d .. "/" .. name, opts) end
    end
    return nil, path .. ": no tokenizer.json, vocab.json + merges.txt, vocab.txt or " ..
      "SentencePiece .model"
  end
  if not exists(path) then return nil, path .. ": No such file or directory" end
  if path:match("%.model$") then return load_spm(path, opts) end
  if path:match("%.json$") then
    if path:match("^vocab%.json$") or path:match("/vocab%.json$") then
      local mp = path:gsub("vocab%.json$", "merges.txt")
      return load_bpe_files(path, mp, opts)
    end
    return load_tokenizer_json(path)
  end
  return load_vocab_txt(path, opts)
end

--- Trains a tokenizer.  opts: kind = "wordpiece" | "bpe" | "unigram", files = {...} or
-- iterator = function returning strings, vocab_size, min_frequency,
-- special_tokens, limit_alphabet, lowercase (wordpiece), initial_alphabet
-- (bpe: all 256 byte symbols, default true); unigram: SentencePiece's
-- algorithm (docs/tokenizers.md), special_tokens default <pad> <unk> [CLS]
-- [SEP] [MASK], unk_token, max_piece_length (16), seed_size (1e6),
-- shrinking_factor (0.75), num_sub_iterations (2), lowercase (true),
-- character_coverage (1: every character; spm's rule below 1) and
-- byte_fallback (false; true adds the 256 pieces <0x00>..<0xFF> after the
-- special tokens, inside vocab_size, as spm does).
-- Returns tok or nil, msg.
local TRAIN_OPTIONS = {"kind", "files", "iterator", "vocab_size", "min_frequency", "special_tokens",
  "limit_alphabet", "lowercase", "strip_accents", "initial_alphabet", "add_prefix_space", "unk_token",
  "max_piece_length", "seed_size", "shrinking_factor", "num_sub_iterations", "character_coverage",
  "byte_fallback", "family"}

function M.train(opts)
  if type(opts) ~= "table" then
    error("train: argument #1 (options) expected table, got " .. type(opts), 2)
  end
  -- a misspelt option (model = "bpe" for kind) would otherwise train the default silently
  require("bert.options").check("train", opts, TRAIN_OPTIONS)
  local kind = opts.kind or "wordpiece"
  if kind ~= "wordpiece" and kind ~= "bpe" and kind ~= "unigram" then
    error("train: option 'kind' must be 'wordpiece', 'bpe' or 'unigram', got " .. tostring(kind), 2)
  end
  if opts.files == nil and opts.iterator == nil then
    error("train: needs 'files' (a list of paths) or 'iterator' (a function)", 2)
  end
  local wp, uni = kind == "wordpiece", kind == "unigram"
  local specials = opts.special_tokens or (wp and BERT_SPECIALS or uni and ALBERT_SPECIALS or ROBERTA_SPECIALS)
  local unk = opts.unk_token or "<unk>"
  local vocab_size = opts.vocab_size or (uni and 8000 or 30000)
  for _, k in ipairs{"character_coverage", "byte_fallback"} do
    if opts[k] ~= nil and not uni then
      error("train: option '" .. k .. "' is for kind 'unigram', not '" .. kind .. "'", 2)
    end
  end
  local bytes = opts.byte_fallback and 256 or 0
  if uni then
    local found = false
    for _, s in ipairs(specials) do found = found or s == unk end
    if not found then
      error("train: the unigram unk token '" .. unk .. "' must be one of special_tokens", 2)
    end
    if vocab_size <= #specials + bytes then
      error("train: option 'vocab_size' (" .. vocab_size .. ") must exceed the " .. #specials ..
            " special tokens" .. (bytes > 0 and " and the 256 byte pieces" or ""), 2)
    end
  end
  local tr = core.trainer{
    max_piece_length = opts.max_piece_length, seed_size = opts.seed_size,
    shrinking_factor = opts.shrinking_factor, num_sub_iterations = opts.num_sub_iterations,
    character_coverage = opts.character_coverage,
    kind = kind, vocab_size = uni and vocab_size - #specials - bytes or vocab_size,
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
  local fok, vocab_list, merges = pcall(tr.finish, tr)
  if not fok then
    local msg = tostring(vocab_list):gsub("^finish: ", "")
    -- the C trainer counts pieces without the specials and byte pieces: name the user's size
    local nalpha = msg:match("^vocab_size %d+ is smaller than the (%d+) characters")
    if nalpha and uni then
      msg = string.format("option 'vocab_size' (%d) leaves %d pieces after the %d special tokens%s, " ..
        "fewer than the %s characters of the alphabet (every one is kept)", vocab_size,
        vocab_size - #specials - bytes, #specials, bytes > 0 and " and the 256 byte pieces" or "", nalpha)
    end
    return nil, "train: " .. msg
  end
  if uni then
    -- vocab_list: the pieces by score, merges: their scores
    local list, sc, types, unk_id = {}, {}, {}, nil
    for i, sp in ipairs(specials) do
      list[i] = sp; sc[i] = 0
      types[i] = sp == unk and 2 or 3
      if sp == unk then unk_id = i - 1 end
    end
    for b = 0, bytes - 1 do      -- spm's place and score for them; type byte
      list[#list + 1] = string.format("<0x%02X>", b); sc[#sc + 1] = 0; types[#types + 1] = 6
    end
    for i, p in ipairs(vocab_list) do
      list[#list + 1] = p; sc[#sc + 1] = merges[i]; types[#types + 1] = 1
    end
    -- the chain the C trainer used (tok_train.c, bt_trainer_new)
    local steps = {{kind = "replace", pattern = "\t", content = " "},
                   {kind = "replace", pattern = "\n", content = " "},
                   {kind = "replace", pattern = "\r", content = " "}}
    if opts.lowercase ~= false then steps[#steps + 1] = {kind = "lowercase"} end
    steps[#steps + 1] = {kind = "spaces", content = " "}
    local cfg = unigram_config(list, sc, types, {family = opts.family}, false,
      {unk_id = unk_id, normalizers = steps, pre_tokenizer = "metaspace", byte_fallback = bytes > 0})
    cfg.decoder_byte_fallback = bytes > 0
    return build(cfg)
  end
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


local function post_json(self, c)
    local sp, seen = {}, {}
    for _, items in ipairs{c.post.single or {}, c.post.pair or {}} do
      for _, it in ipairs(items) do
        if it.ids and not seen[it.ids[1]] then
          seen[it.ids[1]] = true
          local toks = {}
          for k, id in ipairs(it.ids) do toks[k] = json_str(self:id_to_token(id) or "") end
          local ids = {}
          for k, id in ipairs(it.ids) do ids[k] = string.format("%d", id) end
          sp[#sp + 1] = string.format('"id%d": {"id": "id%d", "ids": [%s], "tokens": [%s]}',
            it.ids[1], it.ids[1], table.concat(ids, ", "), table.concat(toks, ", "))
        end
      end
    end
    table.sort(sp)
    if c.post.kind == "roberta" then
      return string.format('{"type": "RobertaProcessing", "sep": [%s, %d], ' ..
        '"cls": [%s, %d], "trim_offsets": %s, "add_prefix_space": %s}',
        json_str(self:id_to_token(c.post.sep) or ""), c.post.sep,
        json_str(self:id_to_token(c.post.cls) or ""), c.post.cls,
        tostring(c.trim_offsets == true), tostring(c.post_add_prefix_space == true))
    end
    return string.format('{"type": "TemplateProcessing", "single": %s, ' ..
      '"pair": %s, "special_tokens": {%s}}', template_json(c.post.single or {}),
      template_json(c.post.pair or {}), table.concat(sp, ", "))
end

local NORM_JSON = {
  replace = function(st) return string.format('{"type": "Replace", "pattern": {"String": %s}, "content": %s}',
    json_str(st.pattern or ""), json_str(st.content or "")) end,
  spaces = function() return '{"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}' end,
  lowercase = function() return '{"type": "Lowercase"}' end,
  nfkd = function() return '{"type": "NFKD"}' end,
  nfd = function() return '{"type": "NFD"}' end,
  nfc = function() return '{"type": "NFC"}' end,
  nfkc = function() return '{"type": "NFKC"}' end,
  nmt = function() return '{"type": "Nmt"}' end,
  strip_accents = function() return '{"type": "StripAccents"}' end,
  strip = function(st) return string.format('{"type": "Strip", "strip_left": %s, "strip_right": %s}',
    tostring(st.left ~= false), tostring(st.right ~= false)) end,
  prepend = function(st) return string.format('{"type": "Prepend", "prepend": %s}', json_str(st.content or "")) end,
}

local SPLIT_JSON = {
  whitespace_split = '{"type": "WhitespaceSplit"}', whitespace = '{"type": "Whitespace"}',
  bert = '{"type": "BertPreTokenizer"}', punctuation = '{"type": "Punctuation", "behavior": "Isolated"}',
  digits = '{"type": "Digits", "individual_digits": false}',
  digits_each = '{"type": "Digits", "individual_digits": true}',
}

-- A Unigram tokenizer as HF's tokenizer.json; a .model (spm semantics) is
-- converted as transformers' SpmConverter / AlbertConverter do it.
local function unigram_json(self, c)
  local list = self:vocab_list()
  local spm = c.spm
  local norms = {}
  local precompiled = c.charsmap and #c.charsmap > 0 and
    string.format('{"type": "Precompiled", "precompiled_charsmap": "%s"}', b64encode(c.charsmap))
  for _, st in ipairs(c.normalizers or {}) do
    if st.kind == "precompiled" then
      if precompiled then norms[#norms + 1] = precompiled end
    else norms[#norms + 1] = NORM_JSON[st.kind](st) end
  end
  if spm then
    if precompiled then norms[#norms + 1] = precompiled end
    if c.remove_extra_whitespaces ~= false then norms[#norms + 1] = NORM_JSON.spaces() end
  end
  local b = {'{\n"version": "1.0",\n"truncation": null,\n"padding": null,\n"added_tokens": ['}
  local at, seen = {}, {}
  local added = {}
  for _, a in ipairs(c.added_tokens or {}) do added[#added + 1] = a; seen[a.id] = true end
  if spm then     -- user-defined pieces become added tokens, as SpmConverter does
    for i, ty in ipairs(c.types or {}) do
      if ty == 4 and not seen[i - 1] then
        added[#added + 1] = {content = list[i], id = i - 1, special = false}
      end
    end
  end
  table.sort(added, function(x, y) return x.id < y.id end)
  for _, a in ipairs(added) do
    at[#at + 1] = string.format('{"id": %d, "content": %s, "single_word": %s, "lstrip": %s, ' ..
      '"rstrip": %s, "normalized": %s, "special": %s}', a.id, json_str(a.content),
      tostring(a.single_word == true), tostring(a.lstrip == true), tostring(a.rstrip == true),
      tostring(a.normalized == true), tostring(a.special ~= false))
  end
  b[#b + 1] = table.concat(at, ",\n") .. "],\n"
  if #norms > 0 then
    b[#b + 1] = '"normalizer": {"type": "Sequence", "normalizers": [' .. table.concat(norms, ", ") .. ']},\n'
  else b[#b + 1] = '"normalizer": null,\n' end
  local ps = spm and (c.add_dummy_prefix ~= false and "always" or "never") or c.prepend_scheme or "always"
  local meta = string.format('{"type": "Metaspace", "replacement": %s, "prepend_scheme": "%s", "split": %s}',
    json_str(c.replacement or META), ps, tostring(spm or c.split ~= false))
  if spm or c.pre_tokenizer == "metaspace" then b[#b + 1] = '"pre_tokenizer": ' .. meta .. ',\n'
  elseif c.pre_tokenizer == "whitespace_split" then b[#b + 1] = '"pre_tokenizer": {"type": "WhitespaceSplit"},\n'
  else b[#b + 1] = '"pre_tokenizer": null,\n' end
  b[#b + 1] = '"post_processor": ' .. (c.post and post_json(self, c) or "null") .. ',\n'
  local bf = spm and c.byte_fallback or c.decoder_byte_fallback
  b[#b + 1] = '"decoder": ' .. (bf and ('{"type": "Sequence", "decoders": [{"type": "ByteFallback"}, ' ..
    meta .. ']}') or meta) .. ',\n'
  local albert = spm and c.family == "albert"
  local v = {}
  for i, p in ipairs(list) do
    local sc = c.scores and c.scores[i] or 0
    -- AlbertConverter: pieces ending in "<digit>," lose 100
    if albert and p:match("%d,$") then sc = sc - 100 end
    v[i] = "[" .. json_str(p or "") .. ", " .. string.format("%.17g", sc) .. "]"
  end
  b[#b + 1] = string.format('"model": {"type": "Unigram", "unk_id": %s, "vocab": [\n  %s], ' ..
    '"byte_fallback": %s}\n}\n', c.unk_id and string.format("%d", c.unk_id) or "null",
    table.concat(v, ",\n  "), tostring(c.byte_fallback == true))
  return table.concat(b)
end

M.train_supports = function(kind) return kind == "wordpiece" or kind == "bpe" or kind == "unigram" end

local function tokenizer_json(self)
  local c = self:config()
  if c.model == "unigram" then return unigram_json(self, c) end
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
  if c.normalizers then
    local norms = {}
    for _, st in ipairs(c.normalizers) do norms[#norms + 1] = NORM_JSON[st.kind](st) end
    b[#b + 1] = '"normalizer": {"type": "Sequence", "normalizers": [' .. table.concat(norms, ", ") .. ']},\n'
  elseif n then
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
  elseif c.pre_tokenizers then
    local steps = {}
    for i, st in ipairs(c.pre_tokenizers) do steps[i] = SPLIT_JSON[st] end
    b[#b + 1] = '"pre_tokenizer": {"type": "Sequence", "pretokenizers": [' .. table.concat(steps, ", ") .. ']},\n'
  elseif c.pre_tokenizer == "whitespace_split" then
    b[#b + 1] = '"pre_tokenizer": {"type": "WhitespaceSplit"},\n'
  else b[#b + 1] = '"pre_tokenizer": null,\n' end
  if c.post then
    b[#b + 1] = '"post_processor": ' .. post_json(self, c) .. ',\n'
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

--- Saves the tokenizer.  path is either an explicit file name or a
-- directory, never both: "x.json" writes that tokenizer.json; "x.txt"
-- writes a WordPiece vocabulary file; anything else is a directory
-- (created if missing) that gets tokenizer.json plus the model's own files
-- (vocab.txt, or vocab.json + merges.txt).  Each file is written to a
-- temp file, then renamed.  Returns true or nil, msg.
function methods.save(self, path)
  if type(path) ~= "string" then
    error("save: argument #2 (path) expected string, got " .. type(path), 2)
  end
  local c = self:config()
  local parent = path:match("^(.*)/[^/]+$")
  if parent and parent ~= "" and not is_dir(parent) and (path:match("%.json$") or path:match("%.txt$")) then
    local ok, err = fs.mkdir(parent)
    if not ok then return nil, "save: " .. tostring(err) end
  end
  if path:match("%.json$") then return write_atomic(path, tokenizer_json(self)) end
  local list = self:vocab_list()
  local function vocab_txt()
    local lines = {}
    for i, t in ipairs(list) do lines[i] = t or "" end
    return table.concat(lines, "\n") .. "\n"
  end
  if path:match("%.txt$") then
    if c.model ~= "wordpiece" then
      return nil, string.format("save: %s: a .txt file holds a WordPiece vocabulary; this " ..
        "tokenizer is %s (give a directory or a .json file name)", path, c.model)
    end
    return write_atomic(path, vocab_txt())
  end
  if path:match("%.model$") then
    return nil, "save: " .. path .. ": writing SentencePiece .model files is not supported " ..
      "(give a directory or a .json file name)"
  end
  if not is_dir(path) then
    if exists(path) then return nil, "save: " .. path .. ": exists and is not a directory" end
    local ok, err = fs.mkdir(path)
    if not ok then return nil, "save: " .. path .. ": cannot create directory: " .. tostring(err) end
  end
  local ok, err = true, nil
  if c.model == "wordpiece" then
    ok, err = write_atomic(path .. "/vocab.txt", vocab_txt())
  elseif c.model == "bpe" then
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
