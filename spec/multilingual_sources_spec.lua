-- The multilingual corpus' converters (tools/fetch_multilingual.sh runs
-- them): sentences in any script, and npm quran-json's translations as one
-- document per chapter and language, on small files made here.
local cjson = require("cjson")
local corpus = require("bert.data.corpus")
local tmpdir = require("spec.support.tmpdir").dir

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local function run(cmd)
  local out, rc = require("spec.support.shell").run(cmd)
  return rc == 0, out
end

describe("corpus.split_sentences_multilingual", function()
  it("splits as split_sentences, then after CJK full stops, appending to a list", function()
    assert.same({"One here.", "Two there."}, corpus.split_sentences_multilingual("One here. Two there."))
    local out = {"kept"}
    corpus.split_sentences_multilingual("我们只崇拜你。求你引领我们！真的吗？好", out)
    assert.same({"kept", "我们只崇拜你。", "求你引领我们！", "真的吗？", "好"}, out)
    assert.same({}, corpus.split_sentences_multilingual("   "))
  end)
end)

describe("tools/quran_text.lua", function()
  -- a dist folder with the 114 chapters in two languages, a verse or two each
  local function dist(dir, lang, broken)
    local chapters = {}
    for n = 1, 114 do
      chapters[n] = {id = n, verses = {{id = 1, text = "ignored", translation = lang .. " verse one. And two."},
                                       {id = 2, text = "ignored", translation = lang .. " chapter " .. n}}}
    end
    if broken then chapters[7].verses[2].translation = nil end
    write(dir .. "/quran_" .. lang .. ".json", cjson.encode(chapters))
  end

  it("writes a document per chapter and language, its verses split into sentences", function()
    local d = tmpdir()
    dist(d, "fr")
    dist(d, "ru")
    local ok, out = run(string.format("lua5.4 tools/quran_text.lua '%s' '%s/q.jsonl' fr ru", d, d))
    assert.is_true(ok, out)
    assert.matches("228 chapters, 456 verses in 2 languages", out, 1, true)
    local docs = {}
    for line in io.lines(d .. "/q.jsonl") do docs[#docs + 1] = cjson.decode(line) end
    assert.equal(228, #docs)
    assert.same({id = "quran-fr-1", lang = "fr", sentences = {"fr verse one.", "And two.", "fr chapter 1"}}, docs[1])
    assert.equal("quran-ru-114", docs[228].id)
  end)

  it("refuses a translation file that is not the 114 chapters, or a verse without its translation, naming it", function()
    local d = tmpdir()
    dist(d, "fr", true)
    local ok, out = run(string.format("lua5.4 tools/quran_text.lua '%s' '%s/q.jsonl' fr", d, d))
    assert.is_false(ok)
    assert.matches(d .. "/quran_fr.json: chapter 7 verse 2 has no translation", out, 1, true)
    write(d .. "/quran_ru.json", "[]")
    ok, out = run(string.format("lua5.4 tools/quran_text.lua '%s' '%s/q.jsonl' ru", d, d))
    assert.is_false(ok)
    assert.matches(d .. "/quran_ru.json: expected a JSON list of the 114 chapters", out, 1, true)
    assert.is_nil(io.open(d .. "/q.jsonl"), "nothing written")
    assert.is_nil(io.open(d .. "/q.jsonl.tmp"), "nothing half-written")
  end)
end)
