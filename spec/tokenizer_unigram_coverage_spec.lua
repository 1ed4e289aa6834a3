-- Unigram training for a multilingual vocabulary: character_coverage (the
-- alphabet is the most frequent characters covering that fraction of all
-- occurrences, SentencePiece's rule) and byte_fallback (the 256 <0xNN>
-- pieces; a character outside the alphabet encodes as its UTF-8 bytes).
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath

local T = require("bert.tokenizer")
local tmpdir = require("spec.support.tmpdir").dir
local optional = require("spec.support.optional")

local function train(lines, opts)
  local i = 0
  opts.kind = "unigram"
  opts.iterator = function() i = i + 1; return lines[i] end
  return T.train(opts)
end

-- the single-character pieces, specials and byte pieces aside
local function alphabet(tok)
  local set = {}
  for _, p in ipairs(tok:vocab_list()) do
    if utf8.len(p) == 1 then set[#set + 1] = p end
  end
  table.sort(set)
  return table.concat(set, " ")
end

local function pieces(tok, text)
  return table.concat(tok:encode(text, {add_special_tokens = false}).tokens, " ")
end

describe("Unigram training with character_coverage", function()
  -- words ▁aaaaaa ▁bbb ▁c: a 6, b 3, ▁ 3, c 1 (13 in all); by count, ties
  -- by code point: a (0 covered before it), b (6/13), ▁ (9/13), c (12/13)
  local text = {"aaaaaa bbb c"}

  it("keeps the most frequent characters until the fraction is covered", function()
    local function alpha(cov)
      return alphabet(assert(train(text, {vocab_size = 40, character_coverage = cov})))
    end
    assert.are.equal("a b c ▁", alpha(nil))       -- default: every character
    assert.are.equal("a b c ▁", alpha(1))
    assert.are.equal("a b c ▁", alpha(0.95))      -- 12/13 < 0.95: c too
    assert.are.equal("a b ▁", alpha(0.9))         -- 12/13 = 0.923 covers 0.9
    assert.are.equal("a b", alpha(0.6))           -- b before ▁ (equal counts)
    assert.are.equal("a", alpha(0.4))
    assert.are.equal("a", alpha(1e-9))            -- the first is always kept
  end)

  it("leaves a character outside the alphabet out of every piece", function()
    local lines = {}
    for i = 1, 50 do lines[i] = "abc abd abe" end
    lines[#lines + 1] = "abz abz"
    local tok = assert(train(lines, {vocab_size = 40, character_coverage = 0.99}))
    for _, p in ipairs(tok:vocab_list()) do assert.is_nil(p:find("z", 1, true), p) end
    -- the unknown shows the text it covers, as HF and spm do; its id is the unknown piece's
    assert.are.equal("▁ab z", pieces(tok, "abz"))
    assert.are.equal(tok:token_to_id("<unk>"), tok:encode("abz", {add_special_tokens = false}).ids[2])
  end)

  it("refuses a coverage outside (0, 1], naming the option and the value", function()
    for _, bad in ipairs({0, -0.5, 1.5, 0 / 0}) do
      local ok, err = pcall(train, text, {vocab_size = 40, character_coverage = bad})
      assert.is_false(ok)
      assert.matches("option 'character_coverage' must be in %(0, 1%], got " ..
                     tostring(bad):gsub("%p", "%%%0"), err)
    end
    local ok, err = pcall(train, text, {vocab_size = 40, character_coverage = "most"})
    assert.is_false(ok)
    assert.matches("option 'character_coverage' expected a number, got string", err)
    ok, err = pcall(T.train, {kind = "wordpiece", iterator = function() end, character_coverage = 0.9})
    assert.is_false(ok)
    assert.matches("option 'character_coverage' is for kind 'unigram', not 'wordpiece'", err)
  end)
end)

describe("Unigram training with byte_fallback", function()
  local lines = {}
  for i = 1, 40 do
    lines[#lines + 1] = "the quick brown fox jumps over the lazy dog " .. i
    lines[#lines + 1] = "今天天气很好 我们去公园散步吧"
  end
  lines[#lines + 1] = "rare 饕餮 snow ☃"

  it("adds <0x00>..<0xFF> after the specials, within vocab_size", function()
    local tok = assert(train(lines, {vocab_size = 400, character_coverage = 0.998,
                                     byte_fallback = true}))
    local v = tok:vocab_list()
    assert.is_true(#v <= 400)
    for b = 0, 255 do assert.are.equal(string.format("<0x%02X>", b), v[6 + b]) end
    assert.are.equal("<pad> <unk> [CLS] [SEP] [MASK]", table.concat(v, " ", 1, 5))
    local none, why = train(lines, {vocab_size = 300, byte_fallback = true})
    assert.is_nil(none)
    assert.are.equal("train: option 'vocab_size' (300) leaves 39 pieces after the 5 special tokens " ..
      "and the 256 byte pieces, fewer than the 53 characters of the alphabet (every one is kept)", why)
    local ok, err = pcall(train, lines, {vocab_size = 261, byte_fallback = true})
    assert.is_false(ok)
    assert.matches("'vocab_size' %(261%) must exceed the 5 special tokens and the 256 byte pieces", err)
  end)

  it("encodes a character outside the alphabet as its bytes and decodes it back", function()
    local tok = assert(train(lines, {vocab_size = 400, character_coverage = 0.998,
                                     byte_fallback = true}))
    assert.is_nil(tok:token_to_id("☃"))
    assert.matches("<0xE2> <0x98> <0x83>", pieces(tok, "a ☃ b"), 1, true)
    assert.matches("<0xE4> <0xB8> <0xAD>", pieces(tok, "中"), 1, true)   -- never seen
    for _, s in ipairs({"a ☃ b", "中文 ok", "饕餮 ☃☃ dog", "naïve 😀"}) do
      local e = tok:encode(s, {add_special_tokens = false})
      assert.are.equal(s, tok:decode(e.ids))
    end
    -- saved as tokenizer.json (byte_fallback, a ByteFallback decoder) and reloaded
    local d = tmpdir()
    assert(tok:save(d))
    local back = assert(T.load(d))
    os.execute("rm -rf " .. d)
    local e = back:encode("x ☃ 中", {add_special_tokens = false})
    assert.are.same(tok:encode("x ☃ 中", {add_special_tokens = false}).ids, e.ids)
    assert.are.equal("x ☃ 中", back:decode(e.ids))
  end)

  it("encodes as Hugging Face does with the saved tokenizer.json", function()
    local no_hf = optional.missing("node", "tokenizers")
    if no_hf then return pending(no_hf) end
    local cjson = require("cjson")
    local tok = assert(train(lines, {vocab_size = 400, character_coverage = 0.998,
                                     byte_fallback = true}))
    local d = tmpdir()
    assert(tok:save(d .. "/tok"))
    local texts = {"a ☃ b", "中文 ok", "饕餮 ☃☃ dog", "naïve 😀", "<0x41> x", "  lead and trail  "}
    local f = assert(io.open(d .. "/in.json", "w"))
    f:write(cjson.encode({files = {d .. "/tok/tokenizer.json"}, texts = texts, pairs = {{"☃", "中"}}}))
    f:close()
    assert(os.execute("NODE_PATH=" .. optional.node_modules("tokenizers") .. " node tools/hf_encode.js " .. d ..
                      "/in.json " .. d .. "/out.json"))
    local out = assert(io.open(d .. "/out.json")):read("a")
    os.execute("rm -rf " .. d)
    local r = cjson.decode(out).results[d .. "/tok/tokenizer.json"]
    assert.is_nil(r.load_error)
    local function ints(t)
      local o = {}
      for i, v in ipairs(t) do o[i] = math.tointeger(v) end
      return o
    end
    for k, t in ipairs(texts) do
      assert.are.same(ints(r.single[k].ids), tok:encode(t).ids, t)
    end
    assert.are.same(ints(r.pair[1].ids), tok:encode("☃", "中").ids)
  end)

  it("without byte_fallback the same character is unknown", function()
    local tok = assert(train(lines, {vocab_size = 400, character_coverage = 0.998}))
    assert.is_nil(tok:token_to_id("<0xE2>"))
    local e = tok:encode("a ☃ b", {add_special_tokens = false})
    local unk = tok:token_to_id("<unk>")
    local shown
    for i, id in ipairs(e.ids) do if id == unk then shown = e.tokens[i] end end
    assert.are.equal("☃", shown, pieces(tok, "a ☃ b"))
  end)
end)

describe("the alphabet against spm_train", function()
  local no_spm = optional.missing("spm_train")
  local lines = {
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Zebras and jaguars quietly explored the vast, exotic jungle at dawn.",
    "今天天气很好，我们去公园散步吧。", "北京是中国的首都，也是一座历史悠久的城市。",
    "春眠不觉晓，处处闻啼鸟。", "饕餮是一种传说中的怪兽。",
    "วันนี้อากาศดีมาก เราไปเดินเล่นที่สวนกันเถอะ", "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย",
    "ฤดูฝนในประเทศไทยเริ่มในเดือนพฤษภาคม",
  }
  local text = {}
  for k = 1, 6 do   -- counts from 1 to 6, many ties at the cut
    for i, l in ipairs(lines) do if k == 1 or i % 3 ~= 0 then text[#text + 1] = l end end
  end

  it("keeps the same characters (coverage 0.98, 0.995, 0.9995)", function()
    if no_spm then return pending(no_spm) end
    local d = tmpdir()
    local f = assert(io.open(d .. "/mixed.txt", "w"))
    f:write(table.concat(text, "\n"), "\n"); f:close()
    for _, cov in ipairs({0.98, 0.995, 0.9995}) do
      assert(os.execute(string.format("spm_train --input %s/mixed.txt --model_prefix %s/m " ..
        "--model_type unigram --vocab_size 400 --character_coverage %s --byte_fallback true " ..
        "--normalization_rule_name identity --hard_vocab_limit false --num_threads 1 " ..
        ">/dev/null 2>&1", d, d, cov)))
      local spm = {}
      for l in io.lines(d .. "/m.vocab") do
        local p = l:match("^([^\t]+)")
        if utf8.len(p) == 1 then spm[#spm + 1] = p end
      end
      table.sort(spm)
      local tok = assert(train(text, {vocab_size = 400, character_coverage = cov,
                                      byte_fallback = true, lowercase = false}))
      assert.are.equal(table.concat(spm, " "), alphabet(tok), "coverage " .. cov)
    end
    os.execute("rm -rf " .. d)
  end)
end)
