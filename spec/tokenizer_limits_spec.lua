-- Tokenizers under hostile input: linear time in added tokens, capped
-- overflow windows, training on nothing, ids outside the vocabulary,
-- wrong-typed fields in tokenizer files, save paths.  Each case failed
-- before its fix (issues 16 and 17).
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath

local cjson = require("cjson")
local T = require("bert.tokenizer")
local core = require("bert.core").tokenizer

local FX = "spec/fixtures/tokenizer/"

local function readall(p)
  local f = assert(io.open(p, "rb")); local s = f:read("a"); f:close(); return s
end

local function writeall(p, s)
  local f = assert(io.open(p, "wb")); f:write(s); f:close()
end

local tmpdir = require("spec.support.tmpdir").dir

-- best of five, the garbage collector held off while timing, so that a
-- busy machine or a collection does not fake a quadratic
local function time(f)
  local best = math.huge
  for _ = 1, 5 do
    collectgarbage("collect"); collectgarbage("stop")
    local t0 = os.clock(); f(); local dt = os.clock() - t0
    collectgarbage("restart")
    if dt < best then best = dt end
  end
  return best
end

describe("encoding time is linear #slow", function()
  local roberta = assert(T.load(FX .. "roberta-tiny-tokenizer.json"))
  local bert = assert(T.load(FX .. "bert-base-uncased-vocab.txt"))

  -- 16x the text: linear gives ~16x the time, quadratic ~256x.  A wide
  -- ratio because caches make even linear code 2-3x slower per byte once
  -- the output tables leave them (CI measured 10.5 for 4x the text).
  local function check(tok, unit, label)
    local small = unit:rep((64 * 1024) // #unit)
    local big = unit:rep((1024 * 1024) // #unit)
    local n_big
    local ts = time(function() tok:encode(small) end)
    local tb = time(function() n_big = #tok:encode(big).ids end)
    assert.is_true(n_big > 1000, label)
    assert.is_true(tb / ts < 64, string.format("%s: 64 KB %.4f s, 1 MB %.3f s (ratio %.1f)",
                                              label, ts, tb, tb / ts))
  end

  it("in 1 MB of special tokens (lstrip <mask> included)", function()
    check(roberta, "<s></s> <mask>", "roberta specials")
    check(bert, "[CLS][SEP] [MASK]", "bert specials")
  end)

  it("in 1 MB of ordinary text", function()
    check(roberta, "The quick brown fox jumps over the lazy dog. ", "roberta text")
    check(bert, "The quick brown fox jumps over the lazy dog. ", "bert text")
  end)
end)

describe("overflow windows", function()
  local bert = assert(T.load(FX .. "bert-base-uncased-vocab.txt"))
  local a = ("word "):rep(2400)

  it("are capped by max_windows with a clear error", function()
    local ok, err = pcall(bert.encode, bert, a, a, {truncation = true, max_length = 128, stride = 60,
                                                    return_overflowing_tokens = true})
    assert.is_false(ok)
    assert.matches("max_windows = 1000", err)
    local e = bert:encode(("word "):rep(100), {truncation = true, max_length = 16, stride = 4,
                                               return_overflowing_tokens = true, max_windows = 20})
    assert.is_true(#e.overflowing > 0)
    assert.has_error(function()
      bert:encode(("word "):rep(400), {truncation = true, max_length = 16, stride = 4, max_windows = 20})
    end)
  end)
end)

describe("training and construction edge cases", function()
  it("trains on no input without undefined behaviour", function()
    for _, kind in ipairs({"wordpiece", "bpe"}) do
      local tok = T.train{kind = kind, vocab_size = 50, iterator = function() return nil end,
                          initial_alphabet = false}
      assert.is_not_nil(tok)
      assert.is_true(tok:vocab_size() >= 5)
    end
  end)

  it("refuses a template special-token id outside the vocabulary", function()
    local ok, err = pcall(core.new, {model = "wordpiece", vocab_list = {"[UNK]", "a"}, unk_token = "[UNK]",
      post = {single = {{ids = {99}, type_id = 0}, {seq = 0, type_id = 0}}}})
    assert.is_false(ok)
    assert.matches("post.single item 1: special token id 99 is not in the vocabulary", err, 1, true)
  end)

  it("refuses invalid vocab ids instead of dropping them", function()
    for _, bad in ipairs({-1, 1.5, "x", 2^40}) do
      local ok, err = pcall(core.new, {model = "bpe", vocab = {a = 0, b = bad}, merges = {}})
      assert.is_false(ok, tostring(bad))
      assert.matches("vocab: entry 'b' has id", err, 1, true)
    end
    local ok, err = pcall(core.new, {model = "wordpiece", vocab_list = {"a", 5}})
    assert.is_false(ok)
    assert.matches("vocab_list[2]", err, 1, true)
  end)
end)

describe("tokenizer files with wrong-typed fields", function()
  local d = tmpdir()
  local base = cjson.decode(readall(FX .. "bert-small-tokenizer.json"))
  local rob = cjson.decode(readall(FX .. "roberta-tiny-tokenizer.json"))

  local function try(j, mut, field)
    local c = cjson.decode(cjson.encode(j))
    mut(c)
    writeall(d .. "/tokenizer.json", cjson.encode(c))
    local tok, err = T.load(d .. "/tokenizer.json")
    assert.is_nil(tok, field)
    assert.matches("tokenizer.json: key '" .. field .. "'", err, 1, true)
    assert.is_nil(err:match("attempt to"), err)
  end

  it("name the file and the field", function()
    try(base, function(c) c.pre_tokenizer = 5 end, "pre_tokenizer")
    try(base, function(c) c.normalizer = "x" end, "normalizer")
    try(base, function(c) c.normalizer.lowercase = "yes" end, "normalizer.lowercase")
    try(base, function(c) c.model = 3 end, "model")
    try(base, function(c) c.model.vocab = "v" end, "model.vocab")
    try(base, function(c) c.model.unk_token = 7 end, "model.unk_token")
    try(base, function(c) c.post_processor.single[1] = 1 end, "post_processor.single[1]")
    try(base, function(c) c.post_processor.special_tokens["[CLS]"].ids = {"x"} end,
        "post_processor.special_tokens.[CLS].ids[1]")
    try(base, function(c) c.added_tokens[2] = "tok" end, "added_tokens[2]")
    try(base, function(c) c.added_tokens[1].content = {} end, "added_tokens[1].content")
    try(base, function(c) c.padding = 1 end, "padding")
    try(rob, function(c) c.model.merges[3] = 5 end, "model.merges[3]")
    try(rob, function(c) c.pre_tokenizer.add_prefix_space = "no" end, "pre_tokenizer.add_prefix_space")
    try(rob, function(c) c.post_processor.cls = "x" end, "post_processor.cls")
  end)

  it("survive random type changes with a message naming the file", function()
    local seed = 7
    local function rnd(n) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n end
    local values = {5, "x", true, {}, {1, 2}, cjson.null, -1, 1.5}
    local keys = {"normalizer", "pre_tokenizer", "post_processor", "decoder", "model", "added_tokens",
                  "padding", "truncation"}
    for _ = 1, 200 do
      local c = cjson.decode(cjson.encode(rnd(2) == 0 and base or rob))
      local k = keys[rnd(#keys) + 1]
      local obj = c[k]
      if type(obj) == "table" and rnd(2) == 0 then
        local sub = {}
        for kk in pairs(obj) do sub[#sub + 1] = kk end
        table.sort(sub, function(x, y) return tostring(x) < tostring(y) end)
        if #sub > 0 then obj[sub[rnd(#sub) + 1]] = values[rnd(#values) + 1] end
      else
        c[k] = values[rnd(#values) + 1]
      end
      writeall(d .. "/tokenizer.json", cjson.encode(c))
      local ok, tok, err = pcall(T.load, d .. "/tokenizer.json")
      assert.is_true(ok, tostring(tok))
      if not tok then
        assert.matches("tokenizer.json", err)
        assert.is_nil(err:match("attempt to"), err)
      else
        tok:encode("Hello, world!", "pair")
      end
    end
  end)
end)

describe("save paths and written ids", function()
  it("takes an explicit file name or a directory, never both", function()
    local d = tmpdir()
    local tok = assert(T.load(FX .. "bert-base-uncased-vocab.txt"))
    -- a .txt name is a file (its directory is created)
    assert(tok:save(d .. "/run/tokenizer/vocab.txt"))
    local f = io.open(d .. "/run/tokenizer/vocab.txt", "rb")
    assert.is_truthy(f:read(1)); f:close()              -- a file, not a directory
    assert(tok:save(d .. "/run/tokenizer/tok.json"))
    assert.are.equal("{", readall(d .. "/run/tokenizer/tok.json"):sub(1, 1))
    assert(tok:save(d .. "/dir"))
    assert.is_truthy(io.open(d .. "/dir/vocab.txt")); assert.is_truthy(io.open(d .. "/dir/tokenizer.json"))
    local bpe = assert(T.load(FX .. "roberta-tiny-tokenizer.json"))
    local ok, err = bpe:save(d .. "/x.txt")
    assert.is_nil(ok)
    assert.matches("WordPiece vocabulary", err)
    os.execute("rm -rf " .. d)
  end)

  it("writes integer ids after a load (HF refuses 2.0)", function()
    local d = tmpdir()
    local tok = assert(T.load(FX .. "bert-small-tokenizer.json"))
    assert(tok:save(d .. "/t.json"))
    local s = readall(d .. "/t.json")
    assert.is_nil(s:match('"ids": %[%d+%.%d'))
    assert.is_truthy(s:match('"ids": %[%d+%]'))
    os.execute("rm -rf " .. d)
  end)
end)
