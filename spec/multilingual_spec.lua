-- bert.data.multilingual: the smoothed language sampling (against values
-- computed by hand), the mix it builds, the per-language corpus reader and
-- the vocabulary's fertility per language.
local bert = require("bert")
local ml = require("bert.data.multilingual")
local corpus = require("bert.data.corpus")
local T = require("bert.tokenizer")

local function near(a, b, tol) return math.abs(a - b) <= (tol or 1e-9) end

local tmpdir = require("spec.support.tmpdir").dir

-- n documents of k sentences each, named LANG-DOC-SENTENCE
local function docs(lang, n, k)
  local out = {}
  for i = 1, n do
    local d = {}
    for j = 1, k do d[j] = string.format("%s-%d-%d", lang, i, j) end
    out[i] = d
  end
  return out
end

describe("multilingual.rates", function()
  it("smooths the shares as q = p^alpha / sum p^alpha", function()
    local counts = {en = 900, es = 90, de = 10}
    local one = ml.rates(counts, 1)
    assert.is_true(near(0.9, one.en)) assert.is_true(near(0.09, one.es)) assert.is_true(near(0.01, one.de))
    local zero = ml.rates(counts, 0)
    for _, l in ipairs({"en", "es", "de"}) do assert.is_true(near(1 / 3, zero[l])) end
    -- alpha 0.5: sqrt(0.9), sqrt(0.09), sqrt(0.01) = 0.948683, 0.3, 0.1; sum 1.348683
    local half = ml.rates(counts, 0.5)
    assert.is_true(near(0.948683298 / 1.348683298, half.en, 1e-8))
    assert.is_true(near(0.3 / 1.348683298, half.es, 1e-8))
    assert.is_true(near(0.1 / 1.348683298, half.de, 1e-8))
    -- a language with nothing gets nothing, whatever alpha
    assert.equals(0, ml.rates({en = 5, xx = 0}, 0).xx)
  end)

  it("refuses what it cannot sample", function()
    assert.has_error(function() ml.rates({en = 1}, 1.5) end, "multilingual.rates: alpha must be a number in [0, 1], got 1.5")
    assert.has_error(function() ml.rates({en = -1}, 0.5) end,
      "multilingual.rates: the count of 'en' must be a non-negative number, got -1")
    assert.has_error(function() ml.rates({en = 0}, 0.5) end, "multilingual.rates: every count is 0")
  end)
end)

describe("multilingual.mix", function()
  local by_lang = {en = docs("en", 90, 10), es = docs("es", 9, 10), de = docs("de", 1, 10)}

  it("gives each language its smoothed share of the sentences, over- and under-sampling whole documents", function()
    local mixed, plan = ml.mix(by_lang, 0.5, 7)
    local got = {en = 0, es = 0, de = 0}
    local seen_en = {}
    for _, d in ipairs(mixed) do
      local lang = d[1]:match("^(%a+)")
      got[lang] = got[lang] + #d
      if lang == "en" then
        assert.is_nil(seen_en[d[1]], "English is under-sampled: no document twice")
        seen_en[d[1]] = true
      end
    end
    local q = ml.rates({en = 900, es = 90, de = 10}, 0.5)
    for lang, n in pairs(got) do
      -- whole documents of 10 sentences: within one document of the target
      assert.is_true(math.abs(n - q[lang] * 1000) <= 10, string.format("%s: %d sentences for %.1f", lang, n, q[lang] * 1000))
      assert.equals(n, plan.languages[lang].sentences_taken)
    end
    assert.is_true(plan.languages.de.passes > 7, "German's one document is repeated")
    assert.is_true(plan.languages.en.passes < 1)
  end)

  it("is the same for the same seed and another for another", function()
    local a = ml.mix(by_lang, 0.7, 3)
    local b = ml.mix(by_lang, 0.7, 3)
    local c = ml.mix(by_lang, 0.7, 4)
    local same, differ = true, false
    for i = 1, #a do
      same = same and a[i][1] == b[i][1]
      differ = differ or (c[i] == nil or a[i][1] ~= c[i][1])
    end
    assert.is_true(same) assert.is_true(differ)
  end)
end)

describe("multilingual.read and prepare", function()
  it("reads DIR/train/LANG.txt and writes the mix once", function()
    local d = tmpdir()
    assert(bert.mkdir(d .. "/train"))
    assert(corpus.write(d .. "/train/en.txt", docs("en", 20, 5)))
    assert(corpus.write(d .. "/train/zh.txt", docs("zh", 2, 5)))
    local by_lang, langs = ml.read(d)
    assert.same({"en", "zh"}, langs)
    assert.equals(20, #by_lang.en) assert.equals("zh-2-5", by_lang.zh[2][5])
    local path, plan = ml.prepare(d, 0.3, 1)
    assert.equals(d .. "/mix/alpha-0.3-seed-1.txt", path)
    local mixed = assert(corpus.read(path))
    local n = 0
    for _, doc in ipairs(mixed) do n = n + #doc end
    assert.equals(plan.total_sentences, n)
    -- a second call reads the plan written by the first
    local again, plan2 = ml.prepare(d, 0.3, 1)
    assert.equals(path, again)
    assert.equals(plan.total_sentences, plan2.total_sentences)
    local missing, err = ml.read(d .. "/nope")
    assert.is_nil(missing)
    assert.truthy(err:find("tools/fetch_data.sh multilingual", 1, true))
  end)
end)

describe("multilingual.fertility", function()
  it("counts tokens per word and per character and the unknown rate per language", function()
    local tok = assert(T.load("spec/fixtures/tokenizer/bert-base-uncased-vocab.txt"))
    local f = ml.fertility(tok, {en = {{"the cat sat on the mat"}}, am = {{"ሰላም ለዓለም"}}})
    -- six words in the vocabulary: one token each
    assert.equals(6, f.en.words) assert.equals(6, f.en.tokens) assert.equals(0, f.en.unknown)
    assert.is_true(near(1, f.en.tokens_per_word)) assert.is_true(near(6 / 17, f.en.tokens_per_char))
    -- Ethiopic is not in bert-base-uncased: each word is [UNK]
    assert.equals(2, f.am.words) assert.equals(2, f.am.unknown) assert.is_true(near(1, f.am.unknown_rate))
    assert.equals(7, f.am.chars)
    local text = ml.fertility_table(f)
    assert.truthy(text:find("am%s+1%s+2%s+2%s+1.00%s+0.29%s+100.00%%%s+0.00%%"), text)
  end)
end)

describe("pretrain --lang-alpha", function()
  local pretrain = require("bert.pretrain")
  it("takes a number from 0 to 1, and only with --corpus multilingual", function()
    local ok, err = pcall(pretrain.settings, {lang_alpha = 1.5})
    assert.is_false(ok)
    assert.truthy(tostring(err):find("option --lang-alpha: expected a number from 0 to 1, got '1.5'", 1, true), tostring(err))
    local d = tmpdir()
    ok, err = pcall(pretrain.run, pretrain.settings({corpus = "brown", lang_alpha = 0.5, output = d .. "/run", steps = 1,
      quiet = true}))
    assert.is_false(ok)
    assert.truthy(tostring(err):find("--lang-alpha samples the languages of --corpus multilingual, not of brown", 1, true),
      tostring(err))
    assert.is_false(require("bert.fs").exists(d .. "/run"))
  end)
end)

describe("multilingual.fertility with byte fallback", function()
  it("counts byte pieces, not unknowns, for characters outside the alphabet", function()
    local lines = {}
    for i = 1, 200 do lines[i] = "the cat sat on the mat number " .. (i % 7) end
    local tok = assert(T.train{kind = "unigram", vocab_size = 320, byte_fallback = true,
      iterator = coroutine.wrap(function() for _, l in ipairs(lines) do coroutine.yield(l) end end)})
    local f = ml.fertility(tok, {zh = {{"饕餮"}}, en = {{"the cat"}}})
    -- two characters of three UTF-8 bytes each, none in the alphabet
    assert.equals(6, f.zh.byte_pieces)
    assert.equals(0, f.zh.unknown)
    assert.equals(0, f.en.byte_pieces)
  end)
end)
