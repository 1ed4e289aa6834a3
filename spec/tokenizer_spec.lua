-- Tokenizer specs: parity with Hugging Face tokenizers (goldens generated
-- once by tools/gen_tokenizer_goldens.js), file formats, training, errors.
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath

local cjson = require("cjson")
local T = require("bert.tokenizer")

local FX = "spec/fixtures/tokenizer/"

local function read_json(name)
  local f = assert(io.open(FX .. name, "rb"))
  local s = f:read("a"); f:close()
  return cjson.decode(s)
end

local tmpdir = require("spec.support.tmpdir").dir
local golden = require("spec.support.golden")

local function readall(p)
  local f = assert(io.open(p, "rb")); local s = f:read("a"); f:close(); return s
end

-- the fields HF's goldens record for every encoding
local FIELDS = {"ids", "tokens", "offsets", "word_ids", "type_ids", "special_tokens_mask", "attention_mask"}

local function run_goldens(tok, cases) golden.run(tok, cases, 15, FIELDS) end

describe("bert-base-uncased WordPiece", function()
  local tok = assert(T.load(FX .. "bert-base-uncased-vocab.txt"))
  local g = read_json("bert_goldens.json")

  it("gives the documented ids", function()
    assert.are.same({101, 7592, 1010, 2088, 999, 102}, tok:encode("Hello, world!").ids)
    assert.are.same({101, 7592, 1010, 2088, 999, 2129, 2024, 2017, 1029, 102},
                    tok:encode("Hello, world! How are you?").ids)
  end)

  it("matches HF on edge cases, real text, pairs, truncation, padding", function()
    run_goldens(tok, g.cases)
  end)

  it("decodes like HF", function()
    for _, d in ipairs(golden.nonempty(g.decode, 10, "decode")) do
      assert.are.equal(d.skip, tok:decode(d.ids, {skip_special_tokens = true}))
      assert.are.equal(d.keep, tok:decode(d.ids, {skip_special_tokens = false}))
    end
  end)

  it("gives character offsets into the original string", function()
    local e = tok:encode("Café 北京")
    assert.are.same({"[CLS]", "cafe", "北", "京", "[SEP]"}, e.tokens)
    assert.are.same({{0, 0}, {0, 4}, {5, 6}, {6, 7}, {0, 0}}, e.offsets)
    assert.are.same({false, 0, 1, 2, false}, e.word_ids)
  end)

  it("treats words over 100 characters as [UNK]", function()
    assert.are.same({101, 100, 102}, tok:encode(("x"):rep(101)).ids)
    assert.are.equal(3, #tok:encode(("x"):rep(100)).ids >= 3 and 3 or 0)
  end)

  it("survives invalid UTF-8, NUL bytes and megabyte lines", function()
    local e = tok:encode("ab\xff\xfecd\0ef")
    assert.are.same({"[CLS]", "abc", "##de", "##f", "[SEP]"}, e.tokens)   -- "abcdef"
    local big = ("hello world "):rep(100000)
    local e2 = tok:encode(big)
    assert.are.equal(200002, #e2.ids)
    local e3 = tok:encode(("z"):rep(1000000))
    assert.are.same({101, 100, 102}, e3.ids)
  end)

  it("pads a batch to the longest and encodes in parallel", function()
    local texts = {}
    for i = 1, 200 do texts[i] = ("word "):rep(i % 7 + 1) end
    local b = tok:encode_batch(texts, {padding = "longest"})
    assert.are.equal(200, #b)
    for i = 1, 200 do
      assert.are.equal(9, #b[i].ids)
      assert.are.same(tok:encode(texts[i]).ids[2], b[i].ids[2])
    end
    local p = tok:encode_batch({{"a b", "c"}, "d"}, {padding = true})
    assert.are.same({0, 0, 0, 0, 1, 1}, p[1].type_ids)
    assert.are.same({1, 1, 1, 0, 0, 0}, p[2].attention_mask)
  end)

  it("saves and loads back", function()
    local d = tmpdir()
    assert(tok:save(d))
    local t2 = assert(T.load(d .. "/vocab.txt"))
    local t3 = assert(T.load(d))                  -- tokenizer.json
    for _, c in ipairs{"Hello, world!", "Café 北京 unaffable [MASK]"} do
      assert.are.same(tok:encode(c).ids, t2:encode(c).ids)
      assert.are.same(tok:encode(c, "pair").ids, t3:encode(c, "pair").ids)
    end
    assert.are.equal(tok:vocab_size(), t3:vocab_size())
    assert.are.equal(7592, t3:get_vocab()["hello"])
    assert.are.same(readall(FX .. "bert-base-uncased-vocab.txt"), readall(d .. "/vocab.txt"))
    os.execute("rm -rf " .. d)
  end)

  it("answers vocabulary questions", function()
    assert.are.equal(30522, tok:vocab_size())
    assert.are.equal(7592, tok:token_to_id("hello"))
    assert.are.equal("hello", tok:id_to_token(7592))
    assert.is_nil(tok:token_to_id("no-such-token"))
    assert.is_nil(tok:id_to_token(999999))
    assert.are.same({"hello world", "[CLS] hi [SEP]"},
      tok:decode_batch({{7592, 2088}, {101, 7632, 102}}, {skip_special_tokens = false}))
  end)
end)

describe("vocab.txt variants", function()
  it("handles CRLF, a trailing blank line and duplicates", function()
    local d = tmpdir()
    local f = assert(io.open(d .. "/vocab.txt", "wb"))
    f:write("[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\nhello\r\nworld\r\nhello\r\n\r\n")
    f:close()
    local tok = assert(T.load(d .. "/vocab.txt"))
    assert.are.same({2, 6, 5, 3}, tok:encode("hello world").ids)   -- later line wins
    assert.is_nil(tok:id_to_token(4))
    os.execute("rm -rf " .. d)
  end)
end)

describe("BERT tokenizer.json", function()
  it("loads HF's file and matches HF", function()
    local tok = assert(T.load(FX .. "bert-small-tokenizer.json"))
    run_goldens(tok, read_json("bert_small_goldens.json").cases)
  end)
end)

describe("byte-level BPE (RoBERTa config)", function()
  local tok = assert(T.load(FX .. "roberta-tiny-tokenizer.json"))

  it("matches HF on edge cases, real text, pairs, truncation, padding", function()
    run_goldens(tok, read_json("roberta_goldens.json").cases)
  end)

  it("decodes like HF", function()
    for _, d in ipairs(golden.nonempty(read_json("roberta_goldens.json").decode, 10, "decode")) do
      assert.are.equal(d.skip, tok:decode(d.ids, {skip_special_tokens = true}))
      assert.are.equal(d.keep, tok:decode(d.ids, {skip_special_tokens = false}))
    end
  end)

  it("matches HF with add_prefix_space", function()
    local j = read_json("roberta-tiny-tokenizer.json")
    j.pre_tokenizer.add_prefix_space = true
    j.post_processor.add_prefix_space = true
    local d = tmpdir()
    local f = assert(io.open(d .. "/tokenizer.json", "wb")); f:write(cjson.encode(j)); f:close()
    local t2 = assert(T.load(d))
    run_goldens(t2, read_json("roberta_aps_goldens.json").cases)
    os.execute("rm -rf " .. d)
  end)

  it("stays fast on a 100k-character word", function()
    local t0 = os.clock()
    local e = tok:encode(("a"):rep(100000))
    assert.is_true(#e.ids > 2)
    assert.is_true(os.clock() - t0 < 5)
  end)

  it("round-trips through vocab.json + merges.txt and tokenizer.json", function()
    local d = tmpdir()
    assert(tok:save(d))
    local t2 = assert(T.load(d .. "/vocab.json"))   -- with merges.txt beside it
    local t3 = assert(T.load(d))
    for _, s in ipairs{"Hello world", "The jury's report.", "a\n\nb  c"} do
      assert.are.same(tok:encode(s).ids, t2:encode(s).ids)
      assert.are.same(tok:encode(s, "pair").offsets, t3:encode(s, "pair").offsets)
      assert.are.equal(s, t3:decode(t3:encode(s).ids))
    end
    os.execute("rm -rf " .. d)
  end)
end)

describe("training", function()
  it("byte-level BPE equals HF's trainer on the same corpus", function()
    local hf = read_json("bpe_trained_hf.json")
    local tok = assert(T.train{kind = "bpe", files = {FX .. "bpe_corpus.txt"}, vocab_size = 30000,
                               min_frequency = 0, special_tokens = {}, initial_alphabet = false})
    local list = tok:vocab_list()
    assert.are.equal(#hf.vocab_by_id, #list)
    assert.are.same(hf.vocab_by_id, list)
    local m, got = tok:merges(), {}
    for i = 1, #m, 2 do got[#got + 1] = m[i] .. " " .. m[i + 1] end
    assert.are.same(hf.merges, got)
  end)

  it("is deterministic: the same input gives the same files", function()
    local function train_save(kind)
      local tok = assert(T.train{kind = kind, files = {FX .. "bpe_corpus.txt"}, vocab_size = 600})
      local d = tmpdir()
      assert(tok:save(d))
      return d, tok
    end
    for _, kind in ipairs{"wordpiece", "bpe"} do
      local d1, tok = train_save(kind)
      local d2 = train_save(kind)
      for _, f in ipairs(kind == "bpe" and {"vocab.json", "merges.txt", "tokenizer.json"}
                           or {"vocab.txt", "tokenizer.json"}) do
        assert.are.equal(readall(d1 .. "/" .. f), readall(d2 .. "/" .. f))
      end
      assert.are.equal(600, tok:vocab_size())
      local t2 = assert(T.load(d1))
      assert.are.same(tok:encode("The jury said").ids, t2:encode("The jury said").ids)
      os.execute("rm -rf " .. d1 .. " " .. d2)
    end
  end)

  it("trains WordPiece from an iterator with specials first", function()
    local lines = {}
    for l in io.lines(FX .. "bpe_corpus.txt") do lines[#lines + 1] = l end
    local i = 0
    local tok = assert(T.train{kind = "wordpiece", iterator = function() i = i + 1 return lines[i] end,
                               vocab_size = 400, min_frequency = 2, limit_alphabet = 50})
    assert.are.equal(0, tok:token_to_id("[PAD]"))
    assert.are.equal(4, tok:token_to_id("[MASK]"))
    local e = tok:encode("the jury")
    assert.are.equal(2, e.ids[1])
    assert.are.equal(3, e.ids[#e.ids])
    assert.are.equal("the jury", tok:decode(e.ids))
  end)
end)

describe("errors", function()
  local tok = assert(T.load(FX .. "bert-base-uncased-vocab.txt"))
  it("names the function, the argument and the value", function()
    assert.error_matches(function() tok:encode(nil) end,
      "encode: argument #2 %(text%) expected string, got nil")
    assert.error_matches(function() tok:encode("a", 5) end,
      "encode: argument #3 %(pair%) expected string, got number")
    assert.error_matches(function() tok:encode("a", nil, {truncation = "sideways", max_length = 4}) end,
      "encode: option 'truncation' must be")
    assert.error_matches(function() tok:encode("a", nil, {truncation = true}) end,
      "encode: option 'truncation' needs 'max_length'")
    assert.error_matches(function() tok:encode("a b c d e", nil, {truncation = true, max_length = 1}) end,
      "max_length 1 is smaller than the 2 special tokens")
    assert.error_matches(function() tok:encode("a b", "c", {truncation = "only_second", max_length = 4}) end,
      "only_second")
    assert.error_matches(function() tok:encode("a b c d e f", nil, {truncation = true, max_length = 6, stride = 4}) end,
      "stride 4 must be smaller")
    assert.error_matches(function() tok:decode({1, "x"}) end,
      "decode: argument #2 %(ids%) item 2 expected integer, got string")
    assert.error_matches(function() tok:encode_batch("x") end,
      "encode_batch: argument #2 %(texts%) expected table, got string")
    assert.error_matches(function() tok.encode("x", "y") end,
      "encode: argument #1 %(self%) expected bert.Tokenizer")
    assert.error_matches(function() T.load(42) end, "load: argument #1 %(path%) expected string, got number")
    assert.error_matches(function() T.train{kind = "wordpeice", files = {}} end, "option 'kind'")
    -- a misspelt option is named, not ignored (model = "bpe" would train WordPiece)
    assert.error_matches(function() T.train{model = "bpe", files = {}} end,
      "train: unknown option 'model' %(the options: kind, files,")
    -- encode, encode_batch and decode likewise (max_lenght would leave the text untruncated)
    assert.error_matches(function() tok:encode("a b c", {max_lenght = 2}) end,
      "encode: unknown option 'max_lenght' %(the options: add_special_tokens, max_length,")
    assert.error_matches(function() tok:encode("a", "b", {return_tensors = true}) end,
      "encode: unknown option 'return_tensors'")
    assert.error_matches(function() tok:encode("a", {[1] = true}) end, "encode: unknown option %[1%]")
    assert.error_matches(function() tok:encode_batch({"a"}, {padding = true, pad_side = "left"}) end,
      "encode_batch: unknown option 'pad_side' %(the options: .*return_special_tokens_mask%)")
    assert.error_matches(function() tok:decode({1}, {skip_special = false}) end,
      "decode: unknown option 'skip_special' %(the options: skip_special_tokens%)")
    assert.error_matches(function() tok:encode("a", {padding = true, padding_side = "lef"}) end,
      "encode: option 'padding_side' must be 'left' or 'right', got 'lef'")
    assert.error_matches(function() tok:encode_batch({"a"}, {truncation_side = 1, truncation = true, max_length = 3}) end,
      "encode_batch: option 'truncation_side' must be 'left' or 'right', got number")
    assert.error_matches(function() tok:count_tokens({"a", false}) end,
      "count_tokens: texts%[2%] is a boolean, not a string")
    assert.are.equal(3, #tok:encode("a", {padding_side = "right", truncation_side = "right"}).ids)
  end)

  it("returns nil, message for file problems", function()
    local tok2, err = T.load("/nonexistent/vocab.txt")
    assert.is_nil(tok2); assert.matches("nonexistent", err)
    local d = tmpdir()
    local f = io.open(d .. "/vocab.json", "wb"); f:write('{"a": 0, "b": 1, "ab": 2}'); f:close()
    f = io.open(d .. "/merges.txt", "wb"); f:write("#version: 0.2\na b\nab  c\n"); f:close()
    local t, e = T.load(d)
    assert.is_nil(t); assert.matches("merges.txt:3", e)
    f = io.open(d .. "/merges.txt", "wb"); f:write("a b\nb zz\n"); f:close()
    t, e = T.load(d)
    assert.is_nil(t); assert.matches("merge 2: merge token 'zz' not in vocabulary", e)
    f = io.open(d .. "/tokenizer.json", "wb"); f:write('{"model": {"type": "WordPiece", "vocab": 3}}'); f:close()
    t, e = T.load(d)
    assert.is_nil(t); assert.matches("key 'model.vocab'", e)
    f = io.open(d .. "/tokenizer.json", "wb"); f:write('{"model": '); f:close()
    t, e = T.load(d)
    assert.is_nil(t); assert.matches("invalid JSON", e)
    local r, e2 = T.train{kind = "bpe", files = {d .. "/missing.txt"}}
    assert.is_nil(r); assert.matches("missing.txt", e2)
    os.execute("rm -rf " .. d)
  end)

  it("is closed by __close and then refuses use", function()
    local t = assert(T.load(FX .. "bert-base-uncased-vocab.txt"))
    do local _ <close> = t end
    assert.error_matches(function() t:encode("x") end, "encode: the tokenizer is closed")
  end)
end)
