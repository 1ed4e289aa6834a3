-- Unigram (SentencePiece) specs: parity with spm_encode on .model files and
-- with Hugging Face on converted tokenizer.json files (goldens generated
-- once by tools/gen_unigram_goldens.js), malformed files, round trips.
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath

local cjson = require("cjson")
local T = require("bert.tokenizer")

local FX = "spec/fixtures/tokenizer_unigram/"

local function readall(p)
  local f = assert(io.open(p, "rb")); local s = f:read("a"); f:close(); return s
end

local function writeall(p, s)
  local f = assert(io.open(p, "wb")); f:write(s); f:close()
end

local function read_json(name) return cjson.decode(readall(FX .. name)) end

local function unhex(h) return (h:gsub("..", function(x) return string.char(tonumber(x, 16)) end)) end

local tmpdir = require("spec.support.tmpdir").dir
local golden = require("spec.support.golden")

describe("SentencePiece .model files", function()
  local g = read_json("spm_goldens.json")
  for _, name in ipairs({"albert_like", "cased_bf"}) do
    it(name .. ": ids equal spm_encode's on every golden case", function()
      local tok = assert(T.load(FX .. name .. ".model"))
      local cases = g.models[name]
      assert.is_true(#cases >= 150, "golden file has " .. #cases .. " cases")
      for i, c in ipairs(cases) do
        local text = unhex(c.hex)
        local e = tok:encode(text, {add_special_tokens = false})
        assert.are.same(c.ids, e.ids, string.format("case %d %q", i, text:sub(1, 50)))
      end
    end)
  end

  it("reads pieces, types and the normalizer spec", function()
    local tok = assert(T.load(FX .. "albert_like.model"))
    assert.are.equal(2000, tok:vocab_size())
    assert.are.equal(1, tok:token_to_id("<unk>"))
    assert.are.equal(2, tok:token_to_id("[CLS]"))
    local e = tok:encode("Hello world")
    assert.are.equal("[CLS]", e.tokens[1])
    assert.are.equal("[SEP]", e.tokens[#e.tokens])
    local a = tok:encode("a", {add_special_tokens = false})
    local p = tok:encode("a", "b")
    assert.are.equal(0, p.type_ids[#a.ids + 2])      -- the first [SEP]
    assert.are.equal(1, p.type_ids[#a.ids + 3])      -- B
    assert.are.equal(1, p.type_ids[#p.ids])          -- the last [SEP]
  end)

  it("maps offsets back through nmt_nfkc and whitespace folding", function()
    local tok = assert(T.load(FX .. "albert_like.model"))
    local text = "  Ｈello   wörld "
    local e = tok:encode(text, {add_special_tokens = false})
    local chars = {}
    for _, c in utf8.codes(text) do chars[#chars + 1] = utf8.char(c) end
    local function span(k) return table.concat(chars, "", e.offsets[k][1] + 1, e.offsets[k][2]) end
    assert.are.equal("▁he", e.tokens[1])
    assert.are.equal("Ｈe", span(1))
    for k = 1, #e.ids do
      assert.is_true(e.offsets[k][1] <= e.offsets[k][2])
      if k > 1 then assert.is_true(e.offsets[k][1] >= e.offsets[k - 1][1]) end
    end
  end)

  it("falls back to bytes and decodes them back", function()
    local tok = assert(T.load(FX .. "cased_bf.model"))
    local text = "Hello World 北京 😀 naïve"
    local e = tok:encode(text, {add_special_tokens = false})
    local bytes = 0
    for _, t in ipairs(e.tokens) do if t:match("^<0x%x%x>$") then bytes = bytes + 1 end end
    assert.is_true(bytes >= 10)
    assert.are.equal(text, tok:decode(e.ids))
  end)

  it("decodes unknowns as spm_decode does (' ⁇ ') and drops the dummy prefix", function()
    local tok = assert(T.load(FX .. "albert_like.model"))
    local e = tok:encode("hello 北 world", {add_special_tokens = false})
    -- spm_decode prints "hello  ⁇  world" for these ids
    assert.are.equal("hello  \226\129\135  world", tok:decode(e.ids, {skip_special_tokens = false}))
  end)

  it("as family 'albert' lowercases and strips accents like AlbertTokenizer", function()
    local plain = assert(T.load(FX .. "cased_bf.model"))
    local alb = assert(T.load(FX .. "cased_bf.model", {family = "albert"}))
    local a = alb:encode("Naïve CAFÉ", {add_special_tokens = false})
    local b = plain:encode("naive cafe", {add_special_tokens = false})
    assert.are.same(b.ids, a.ids)
  end)

  it("reorders ids the fairseq way for family 'xlmr'", function()
    local tok = assert(T.load(FX .. "albert_like.model", {family = "xlmr"}))
    assert.are.equal(0, tok:token_to_id("<s>"))
    assert.are.equal(3, tok:token_to_id("<unk>"))
    assert.are.equal(2001, tok:token_to_id("<mask>"))
    local a = tok:encode("a", {add_special_tokens = false})
    local e = tok:encode("a", "b")
    assert.are.equal("<s>", e.tokens[1])
    assert.are.equal("</s>", e.tokens[#a.ids + 2])
    assert.are.equal("</s>", e.tokens[#a.ids + 3])
    assert.are.equal("</s>", e.tokens[#e.tokens])
  end)
end)

describe("malformed .model files", function()
  local good = readall(FX .. "albert_like.model")
  local function try(bytes)
    local d = tmpdir()
    writeall(d .. "/x.model", bytes)
    local tok, err = T.load(d .. "/x.model")
    os.execute("rm -rf " .. d)
    return tok, err
  end

  it("give a clear error when truncated, never a crash", function()
    for _, n in ipairs({1, 2, 7, 100, 5000, #good // 2, #good - 1}) do
      local tok, err = try(good:sub(1, n))
      if n < #good then
        assert.is_nil(tok, "truncated at " .. n)
        assert.matches("x%.model: ", err)
      end
    end
  end)

  it("refuse zero pieces, wrong wire types, huge lengths and bad types", function()
    local cases = {
      {"", "no pieces"},
      {"\18\2\32\1", "no pieces"},                        -- trainer_spec only
      {"\8\1", "wire type 0, expected 2"},                -- field 1 as a varint
      {"\10\255\255\255\255\15", "runs past the end"},    -- a 4 GB piece
      {"\10\5\10\1a\24\9", "type 9"},                     -- piece type 9
      {"\10\3\10\1a\10\3\10\1b", "UNKNOWN"},              -- no unknown piece
      {"\10\255", "truncated varint"},
      {"\10\4\10\1a\27", "wire type"},
    }
    for _, c in ipairs(cases) do
      local tok, err = try(c[1])
      assert.is_nil(tok, c[2])
      assert.matches(c[2], err, 1, true)
    end
  end)

  it("refuse a charsmap whose trie does not fit", function()
    local piece = "\10\5\10\1a\24\2"                        -- "a", UNKNOWN
    local cm = "\255\0\0\0abc"
    local norm = "\26" .. string.char(#cm + 2) .. "\18" .. string.char(#cm) .. cm
    local tok, err = try(piece .. norm)
    assert.is_nil(tok)
    assert.matches("charsmap", err)
  end)

  it("built by the C entry point (bt_unigram_load_model) encode like spm", function()
    local core = require("bert.core").tokenizer
    local tok = assert(core.from_spm_bytes(good))
    local g = read_json("spm_goldens.json").models.albert_like
    assert.is_true(#g >= 150)
    for i = 1, #g do
      local text = unhex(g[i].hex)
      assert.are.same(g[i].ids, tok:encode(text, {add_special_tokens = false}).ids)
    end
    local t2, err = core.from_spm_bytes(good:sub(1, 999))
    assert.is_nil(t2)
    assert.is_string(err)
  end)

  it("survive random corruption (Lua loader and the C entry point)", function()
    local core = require("bert.core").tokenizer
    local seed = 12345
    local function rnd(n) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n end
    for _ = 1, 60 do
      local bytes = good
      for k = 1, 8 do     -- half in the pieces, half anywhere (the charsmap)
        local p = k <= 4 and rnd(4000) + 1 or rnd(#good) + 1
        bytes = bytes:sub(1, p - 1) .. string.char(rnd(256)) .. bytes:sub(p + 1)
      end
      local tok = try(bytes)
      if tok then tok:encode("Hello world, 北京 ﬁ") end
      local t2 = core.from_spm_bytes(bytes)
      if t2 then t2:encode("Hello world, 北京 ﬁ  x") end
      for _, cut in ipairs({rnd(#good), rnd(300000)}) do
        local t3 = core.from_spm_bytes(bytes:sub(1, cut))
        if t3 then t3:encode("abc def") end
      end
    end
  end)
end)

describe("Unigram tokenizer.json (converted as HF converts ALBERT / DeBERTa-v3)", function()
  for _, name in ipairs({"albert_like", "cased_bf"}) do
    it(name .. ": HF's ids, tokens, offsets and type ids on every case, pairs and truncation included", function()
      local tok = assert(T.load(FX .. name .. ".tokenizer.json"))
      local g = read_json(name .. ".hf_goldens.json")
      golden.run(tok, g.cases, 100, {"ids", "tokens", "offsets", "type_ids", "special_tokens_mask"})
    end)

    it(name .. ": decodes like HF", function()
      local tok = assert(T.load(FX .. name .. ".tokenizer.json"))
      local g = read_json(name .. ".hf_goldens.json")
      assert.is_true(#g.decodes >= 20)
      for _, d in ipairs(g.decodes) do
        assert.are.equal(d.skip, tok:decode(d.ids))
      end
    end)
  end

  it("loads back what it saves, with the same encodings", function()
    local d = tmpdir()
    for _, name in ipairs({"albert_like", "cased_bf"}) do
      local tok = assert(T.load(FX .. name .. ".tokenizer.json"))
      assert(tok:save(d .. "/" .. name .. ".json"))
      local tok2 = assert(T.load(d .. "/" .. name .. ".json"))
      for _, text in ipairs({"Hello, world!", "  Ünïcödé  ``x'' ", "北京 😀 ﬁ", "a [MASK] b"}) do
        local a, b = tok:encode(text, "pair here"), tok2:encode(text, "pair here")
        assert.are.same(a.ids, b.ids)
        assert.are.same(a.offsets, b.offsets)
        assert.are.same(a.type_ids, b.type_ids)
      end
    end
    os.execute("rm -rf " .. d)
  end)

  it("names the file and the field for wrong-typed fields", function()
    local j = cjson.decode(readall(FX .. "albert_like.tokenizer.json"))
    local d = tmpdir()
    local function try(mut, field)
      local c = cjson.decode(cjson.encode(j))
      mut(c)
      writeall(d .. "/t.json", cjson.encode(c))
      local tok, err = T.load(d .. "/t.json")
      assert.is_nil(tok, field)
      assert.matches("t%.json: key '" .. field:gsub("[%.%[%]]", "%%%0") .. "'", err)
    end
    try(function(c) c.pre_tokenizer = 5 end, "pre_tokenizer")
    try(function(c) c.normalizer.normalizers[1].pattern = "x" end, "normalizer.normalizers[1].pattern")
    try(function(c) c.model.vocab[3] = {"x"} end, "model.vocab[3][2]")
    try(function(c) c.model.vocab = {} end, "model.vocab")
    try(function(c) c.model.unk_id = 99999 end, "model.unk_id")
    try(function(c) c.model.unk_id = "1" end, "model.unk_id")
    try(function(c) c.normalizer.normalizers[6].precompiled_charsmap = "!!!!" end,
        "normalizer.normalizers[6].precompiled_charsmap")
    try(function(c) c.added_tokens[1].id = -1 end, "added_tokens[1].id")
    try(function(c) c.post_processor.single = 3 end, "post_processor.single")
    os.execute("rm -rf " .. d)
  end)
end)

describe("Unigram training (SentencePiece's algorithm)", function()
  local corpus = "spec/fixtures/tokenizer/bpe_corpus.txt"

  it("gives the requested size, specials first, every character kept", function()
    local tok = assert(T.train{kind = "unigram", vocab_size = 400, files = {corpus}})
    assert.are.equal(400, tok:vocab_size())
    assert.are.same({"<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"},
                    {table.unpack(tok:vocab_list(), 1, 5)})
    local unk = tok:token_to_id("<unk>")
    local text = readall(corpus)
    local words, toks = 0, 0
    for line in text:gmatch("[^\n]+") do
      local e = tok:encode(line, {add_special_tokens = false})
      for _, id in ipairs(e.ids) do assert.are_not.equal(unk, id, line) end
      for _ in line:gmatch("%S+") do words = words + 1 end
      toks = toks + #e.ids
    end
    -- a real segmentation: well under one token per character
    assert.is_true(toks / words < 2.5, string.format("%.2f tokens per word", toks / words))
    local e = tok:encode("The jury said")
    assert.are.equal("[CLS]", e.tokens[1])
    assert.are.equal("\226\150\129the", e.tokens[2])
  end)

  it("is reproducible: the same input gives the same file", function()
    local d = tmpdir()
    local a = assert(T.train{kind = "unigram", vocab_size = 300, files = {corpus}})
    local b = assert(T.train{kind = "unigram", vocab_size = 300, files = {corpus}})
    assert(a:save(d .. "/a.json")); assert(b:save(d .. "/b.json"))
    assert.are.equal(readall(d .. "/a.json"), readall(d .. "/b.json"))
    os.execute("rm -rf " .. d)
  end)

  it("scores pieces as log-probabilities, most likely first", function()
    local tok = assert(T.train{kind = "unigram", vocab_size = 300, files = {corpus}})
    local c = tok:config()
    local last = 0
    for i = 6, #c.scores do
      assert.is_true(c.scores[i] < 0)
      assert.is_true(c.scores[i] <= last + 1e-12)
      last = c.scores[i]
    end
  end)

  it("refuses a vocabulary smaller than the alphabet, and empty input", function()
    local tok, err = T.train{kind = "unigram", vocab_size = 20, files = {corpus}}
    assert.is_nil(tok)
    assert.matches("characters", err)
    local t2, e2 = T.train{kind = "unigram", vocab_size = 100, iterator = function() return nil end}
    assert.is_nil(t2)
    assert.matches("empty input", e2)
  end)

  it("trains from tools/tokenize.lua train --kind unigram", function()
    local d = tmpdir()
    local ok = os.execute("lua5.4 tools/tokenize.lua train --kind unigram --vocab-size 300 --out " ..
                          d .. "/tok " .. corpus .. " 2>/dev/null")
    assert.is_true(ok == true or ok == 0)
    local tok = assert(T.load(d .. "/tok"))
    assert.are.equal(300, tok:vocab_size())
    os.execute("rm -rf " .. d)
  end)
end)
