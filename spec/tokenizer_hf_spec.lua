-- Every tokenizer.json the project writes (trained, loaded-then-saved, each
-- kind: WordPiece, BPE, Unigram) loads in Hugging Face's tokenizers (the
-- npm binding, through tools/hf_encode.js) and encodes identically.
-- Skipped, pending with the install command, where Node or the binding is
-- missing (spec/support/optional.lua; `make deps` installs both).
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath

local cjson = require("cjson")
local T = require("bert.tokenizer")

local function sh_ok(cmd) local ok = os.execute(cmd .. " >/dev/null 2>&1"); return ok == true or ok == 0 end
local optional = require("spec.support.optional")
local no_hf = optional.missing("node", "tokenizers")

local function readall(p)
  local f = assert(io.open(p, "rb")); local s = f:read("a"); f:close(); return s
end

local function writeall(p, s)
  local f = assert(io.open(p, "wb")); f:write(s); f:close()
end

local TEXTS = {
  "Hello, world! How are you?", "", "  leading and trailing  ", "Café naïve résumé",
  "北京大学 東京 한국어", "emoji 😀 👍🏽 here", "digits 2024 3.14 1,000,000", "tab\there",
  "The [MASK] sat on the <mask>.", "ｆｕｌｌｗｉｄｔｈ ﬁ", "don't stop   believing",
}
local PAIRS = {{"What is it?", "It is a test, with a pair."}, {"a", "b"}}

local function flat(offs)
  local r = {}
  for i, p in ipairs(offs) do r[i] = string.format("%d:%d", p[1], p[2]) end
  return r
end

describe("tokenizer.json files we write, read by Hugging Face", function()
  if no_hf then
    pending(no_hf)
    return
  end

  it("load and encode identically (trained, loaded-then-saved, every kind)", function()
    local FX, FU = "spec/fixtures/tokenizer/", "spec/fixtures/tokenizer_unigram/"
    local d = os.tmpname(); os.remove(d); assert(os.execute("mkdir -p " .. d))
    local corpus = FX .. "bpe_corpus.txt"
    local toks = {
      trained_wordpiece = assert(T.train{kind = "wordpiece", vocab_size = 400, files = {corpus}}),
      trained_bpe = assert(T.train{kind = "bpe", vocab_size = 400, files = {corpus}}),
      loaded_bert_vocab = assert(T.load(FX .. "bert-base-uncased-vocab.txt")),
      loaded_bert_json = assert(T.load(FX .. "bert-small-tokenizer.json")),
      loaded_roberta_json = assert(T.load(FX .. "roberta-tiny-tokenizer.json")),
      loaded_albert_json = assert(T.load(FU .. "albert_like.tokenizer.json")),
      loaded_deberta_json = assert(T.load(FU .. "cased_bf.tokenizer.json")),
      loaded_spm_model = assert(T.load(FU .. "albert_like.model")),
      loaded_spm_albert = assert(T.load(FU .. "albert_like.model", {family = "albert"})),
      loaded_spm_xlmr = assert(T.load(FU .. "cased_bf.model", {family = "xlmr"})),
    }
    -- HF's usual WordPiece setups beyond BertNormalizer (issue 30, item 21)
    local function bert_with(name, normalizer, pre)
      local j = cjson.decode(readall(FX .. "bert-small-tokenizer.json"))
      j.normalizer, j.pre_tokenizer = normalizer, pre
      local f = d .. "/src_" .. name .. ".json"
      writeall(f, cjson.encode(j))
      toks[name] = assert(T.load(f))
    end
    bert_with("loaded_wp_nmt_nfkc", {type = "Sequence", normalizers = {{type = "Nmt"}, {type = "NFKC"},
      {type = "Lowercase"}}}, {type = "Sequence", pretokenizers = {{type = "Whitespace"},
      {type = "Digits", individual_digits = true}}})
    bert_with("loaded_wp_nfd_strip", {type = "Sequence", normalizers = {{type = "NFD"}, {type = "Lowercase"},
      {type = "StripAccents"}}}, {type = "Sequence", pretokenizers = {{type = "WhitespaceSplit"},
      {type = "Punctuation", behavior = "Isolated"}}})
    if T.train_supports and T.train_supports("unigram") then
      toks.trained_unigram = assert(T.train{kind = "unigram", vocab_size = 300, files = {corpus}})
    end
    local files, names = {}, {}
    for name, tok in pairs(toks) do
      local f = d .. "/" .. name .. ".json"
      assert(tok:save(f))
      -- saved again after loading: a second generation must be identical
      local again = assert(T.load(f))
      assert(again:save(d .. "/" .. name .. ".2.json"))
      files[#files + 1] = f; files[#files + 1] = d .. "/" .. name .. ".2.json"
      names[#names + 1] = name
      assert.is_nil(readall(f):match('"ids": %[%d+%.%d'), name .. ": float ids")
    end
    assert.is_true(#files >= 24)
    writeall(d .. "/in.json", cjson.encode({files = files, texts = TEXTS, pairs = PAIRS}))
    local cmd = "NODE_PATH=" .. optional.node_modules("tokenizers") .. " node tools/hf_encode.js " .. d .. "/in.json " ..
                d .. "/out.json 2>" .. d .. "/err.txt"
    if not sh_ok(cmd) then
      error("tools/hf_encode.js failed (is @anush008/tokenizers installed? run make deps): " ..
            readall(d .. "/err.txt"))
    end
    local out = cjson.decode(readall(d .. "/out.json")).results
    for _, f in ipairs(files) do
      local r = out[f]
      assert.is_nil(r.load_error, f .. ": " .. tostring(r.load_error))
      local ours = assert(T.load(f))
      for i, t in ipairs(TEXTS) do
        local e = ours:encode(t)
        local label = f .. " text " .. i
        assert.are.same(r.single[i].ids, e.ids, label .. " ids")
        assert.are.same(flat(r.single[i].offsets), flat(e.offsets), label .. " offsets")
      end
      for i, p in ipairs(PAIRS) do
        local e = ours:encode(p[1], p[2])
        assert.are.same(r.pair[i].ids, e.ids, f .. " pair " .. i .. " ids")
        assert.are.same(r.pair[i].type_ids, e.type_ids, f .. " pair " .. i .. " type_ids")
      end
    end
    os.execute("rm -rf " .. d)
  end)
end)
