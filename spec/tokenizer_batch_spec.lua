-- encode_batch(..., {return_tensors = true}): int32 tensors built in C,
-- equal to the per-text path, for every tokenizer kind.
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath

local bert = require("bert")
local T = require("bert.tokenizer")

local TEXTS = {"Hello, world!", "", "A much longer sentence, with punctuation; and more words.",
               "北京 Café 😀", "short"}
local PAIRS = {"pair one", "second", "", "x y z", "the last pair text here"}

local function row(t, i) return t:select(1, i):totable() end

local function check(tok, label)
  for _, opts in ipairs({
    {},
    {max_length = 8, truncation = true},
    {max_length = 12, padding = "max_length", truncation = true},
    {padding_side = "left"},
    {pad_to_multiple_of = 8},
  }) do
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    o.return_tensors = true; o.return_offsets_mapping = true; o.return_special_tokens_mask = true
    for _, pairs_ in ipairs({false, true}) do
      local b = pairs_ and tok:encode_batch(TEXTS, PAIRS, o) or tok:encode_batch(TEXTS, o)
      assert.are.equal("int32", b.input_ids:dtype())
      assert.are.equal(#TEXTS, b.input_ids:size(1))
      local width = b.input_ids:size(2)
      for i, text in ipairs(TEXTS) do
        local po = {max_length = opts.max_length, truncation = opts.truncation,
                    padding = "max_length", padding_side = opts.padding_side}
        po.max_length = width
        if opts.truncation then po.max_length = opts.max_length end
        local e = tok:encode(text, pairs_ and PAIRS[i] or nil,
                             {max_length = po.max_length, truncation = opts.truncation})
        local n = #e.ids
        local ids, mask = row(b.input_ids, i), row(b.attention_mask, i)
        local types, spec = row(b.token_type_ids, i), row(b.special_tokens_mask, i)
        local at = opts.padding_side == "left" and width - n or 0
        for k = 1, n do
          local where = string.format("%s %s text %d token %d", label, tostring(pairs_), i, k)
          assert.are.equal(e.ids[k], ids[at + k], where)
          assert.are.equal(1, mask[at + k], where)
          assert.are.equal(e.type_ids[k], types[at + k], where)
          assert.are.equal(e.special_tokens_mask[k], spec[at + k], where)
          local off = b.offset_mapping:select(1, i):select(1, at + k):totable()
          assert.are.same(e.offsets[k], off, where)
        end
        for k = 1, width - n do
          local j = opts.padding_side == "left" and k or n + k
          assert.are.equal(0, mask[j])
        end
      end
    end
  end
end

describe("encode_batch to tensors", function()
  local FX = "spec/fixtures/tokenizer/"
  it("equals the per-text encodings (WordPiece, BPE, Unigram)", function()
    check(assert(T.load(FX .. "bert-base-uncased-vocab.txt")), "wordpiece")
    check(assert(T.load(FX .. "roberta-tiny-tokenizer.json")), "bpe")
    check(assert(T.load("spec/fixtures/tokenizer_unigram/albert_like.tokenizer.json")), "unigram")
  end)

  it("flattens overflowing windows with their sample index", function()
    local tok = assert(T.load(FX .. "bert-base-uncased-vocab.txt"))
    local long = ("word "):rep(40)
    local b = tok:encode_batch({"short", long}, {max_length = 16, truncation = true, stride = 4,
                                return_overflowing_tokens = true, return_tensors = true})
    local e = tok:encode(long, {max_length = 16, truncation = true, stride = 4,
                                return_overflowing_tokens = true})
    assert.are.equal(2 + #e.overflowing, b.input_ids:size(1))
    assert.are.same({0, 1}, {b.overflow_to_sample_mapping:get(1), b.overflow_to_sample_mapping:get(2)})
    assert.are.equal(1, b.overflow_to_sample_mapping:get(b.input_ids:size(1)))
    assert.are.same(e.overflowing[1].ids, {table.unpack(row(b.input_ids, 3), 1, #e.overflowing[1].ids)})
  end)

  it("refuses pairs of another length and non-string pairs", function()
    local tok = assert(T.load(FX .. "bert-base-uncased-vocab.txt"))
    assert.has_error(function() tok:encode_batch({"a", "b"}, {"x"}, {return_tensors = true}) end,
                     "encode_batch: argument #3 (pairs) has 1 items, texts has 2")
    assert.has_error(function() tok:encode_batch({"a"}, {5}) end)
  end)

  it("is faster than building a table per token", function()
    local tok = assert(T.load(FX .. "bert-base-uncased-vocab.txt"))
    local texts = {}
    for i = 1, 2000 do texts[i] = "The quick brown fox jumps over the lazy dog number " .. i end
    local function best(f)
      local b = math.huge
      for _ = 1, 3 do local t0 = os.clock(); f(); b = math.min(b, os.clock() - t0) end
      return b
    end
    local tt = best(function() tok:encode_batch(texts, {return_tensors = true}) end)
    local tl = best(function() tok:encode_batch(texts) end)
    assert.is_true(tt < tl, string.format("tensors %.3f s, tables %.3f s", tt, tl))
  end)
end)
