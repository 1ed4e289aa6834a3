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

  it("keeps the closing quotes and brackets after a CJK full stop with its sentence", function()
    assert.same({"子曰：“可谓孝矣。”", "他说：「好。」』", "再见！）", "完"},
                corpus.split_sentences_multilingual("子曰：“可谓孝矣。”他说：「好。」』再见！）完"))
  end)
end)

describe("corpus.join_lines", function()
  it("joins wrapped lines with a space, or with nothing between two CJK characters", function()
    assert.equal("Man muss wissen, dass es regnet.", corpus.join_lines({"  Man muss wissen,", "dass es regnet. "}))
    assert.equal("建议你通过键入以下命令来获取帮助。 ls を参照", corpus.join_lines({"建议你通过键入", "以下命令来获取帮助。", "ls を参照"}))
    assert.equal("a b", corpus.join_lines({"a", "   ", "b"}))
    assert.equal("", corpus.join_lines({}))
  end)
end)

describe("corpus.letter_shares and corpus.html_blocks", function()
  it("measure letters and their non-ASCII share", function()
    local letters, non_ascii = corpus.letter_shares("ab -- 12")
    assert.equal(2 / 6, letters)   -- a b among a b - - 1 2
    assert.equal(0, non_ascii)
    letters, non_ascii = corpus.letter_shares("Αβγ d")
    assert.equal(1, letters)
    assert.equal(6 / 7, non_ascii)   -- three 2-byte letters and one ASCII
    assert.same({0, 0}, {corpus.letter_shares("  ")})
  end)

  it("give the blocks' text in document order, tags stripped, entities decoded, wrappers left to what they wrap", function()
    local html = '<html><h1 id="t">Title &amp; more</h1><ul><li><p>In &quot;a&quot;\n  list</p></li>' ..
      '<li>Bare &#x3b1;&#946; item</li></ul><p class="x">Last <b>bold</b>&nbsp;one</p><p>  </p></html>'
    assert.same({"Title & more", 'In "a" list', "Bare αβ item", "Last bold one"},
                corpus.html_blocks(html, {"p", "h1", "li"}))
  end)
end)

describe("tools/html_text.lua", function()
  it("writes a document per page, the blocks left in English, the footer and those on many pages dropped", function()
    local d = tmpdir()
    -- LibreOffice's pages end in a debug footer whose "Title is: ..." holds the translated title
    write(d .. "/a.html", "<html><body><h1>Βοήθεια</h1><p>Πατήστε το κουμπί. Μετά κλείστε.</p>" ..
      "<p>This text was not translated.</p><td>1 | 2 | 3</td>" ..
      "<footer><div class=\"debug\"><p>Title is: Παραδείγματα προγραμματισμού</p></div></footer></body></html>")
    write(d .. "/b.html", "<html><h1>Βοήθεια</h1><p>Only English here.</p></html>")
    local ok, out = run(string.format("lua5.4 tools/html_text.lua '%s/h.jsonl' --min-non-ascii 0.5 --prefix help " ..
                                      "--boilerplate 2 el='%s/a.html' el='%s/b.html'", d, d, d))
    assert.is_true(ok, out)
    assert.matches("help: 2 pages, 1 with text (el 1); 1 blocks kept, 3 dropped, 2 on many pages", out, 1, true)
    local docs = {}
    for line in io.lines(d .. "/h.jsonl") do docs[#docs + 1] = cjson.decode(line) end
    assert.same({{id = "help-el-1", lang = "el", sentences = {"Πατήστε το κουμπί.", "Μετά κλείστε."}}}, docs)
    ok, out = run(string.format("lua5.4 tools/html_text.lua '%s/h.jsonl' --min-non-ascii 2 el='%s/a.html'", d, d))
    assert.is_false(ok)
    assert.matches("--min-non-ascii 2: expected a share between 0 and 1", out, 1, true)
  end)
end)

describe("tools/fortune_text.lua", function()
  it("writes a document per entry: colour codes, attributions and shell commands dropped, CJK lines joined", function()
    local d = tmpdir()
    write(d .. "/zitate", "Man muss wissen,\r\ndass es regnet. Immer.\r\n\t\t-- Jemand\r\n%\r\n" ..
      "Zweiter Spruch.\n\nNeuer Absatz\n%\n" ..
      "+--+--+\n|  |  |\n+--+--+\n%\n")
    write(d .. "/chinese", "\27[37;1m标题\27[;m\n\n    建议你通过键入以下命令来\n    获取帮助。好\n" ..
      "\27[32;1m    $ man 5 sources.list\27[;m\n\27[33m    -- Debian\27[m\n%\n")
    local ok, out = run(string.format("lua5.4 tools/fortune_text.lua '%s/f.jsonl' de='%s/zitate' zh='%s/chinese'",
                                      d, d, d))
    assert.is_true(ok, out)
    assert.matches("4 entries from 2 files, 3 kept (de 2, zh 1), 1 dropped", out, 1, true)
    local docs = {}
    for line in io.lines(d .. "/f.jsonl") do docs[#docs + 1] = cjson.decode(line) end
    assert.same({
      {id = "fortune-de-zitate-1", lang = "de", sentences = {"Man muss wissen, dass es regnet.", "Immer."}},
      {id = "fortune-de-zitate-2", lang = "de", sentences = {"Zweiter Spruch.", "Neuer Absatz"}},
      {id = "fortune-zh-chinese-1", lang = "zh", sentences = {"标题", "建议你通过键入以下命令来获取帮助。", "好"}},
    }, docs)
  end)

  it("runs before the library is built (bert.data.corpus and bert.fs load without bert.core)", function()
    local d = tmpdir()
    write(d .. "/sprueche", "Ein Spruch.\n%\n")
    local ok, out = run(string.format("env -u LUA_CPATH BERT_BUILD=%s/no-build lua5.4 tools/fortune_text.lua " ..
                                      "'%s/f.jsonl' de='%s/sprueche'", d, d, d))
    assert.is_true(ok, out)
    assert.matches("1 kept (de 1)", out, 1, true)
  end)

  it("refuses a file that is not UTF-8 or an argument without its language, writing nothing", function()
    local d = tmpdir()
    write(d .. "/latin1", "Gr\252\223e\n%\n")
    local ok, out = run(string.format("lua5.4 tools/fortune_text.lua '%s/f.jsonl' de='%s/latin1'", d, d))
    assert.is_false(ok)
    assert.matches(d .. "/latin1: not UTF-8 text", out, 1, true)
    ok, out = run(string.format("lua5.4 tools/fortune_text.lua '%s/f.jsonl' '%s/latin1'", d, d))
    assert.is_false(ok)
    assert.matches("expected LANG=FILE", out, 1, true)
    assert.is_nil(io.open(d .. "/f.jsonl"), "nothing written")
    assert.is_nil(io.open(d .. "/f.jsonl.tmp"), "nothing half-written")
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

  it("rewrites the Arabic original (LANG ar) in modern spelling, a verse a sentence", function()
    -- words as quran.json writes them (Uthmani script, vowel signs and Qur'anic marks in its order)
    local uthmani = {
      "\u{0630}\u{064E}\u{0670}\u{0644}\u{0650}\u{0643}\u{064E}",                                   -- that
      "\u{0671}\u{0644}\u{06E1}\u{0643}\u{0650}\u{062A}\u{064E}\u{0670}\u{0628}\u{064F}",                 -- the book
      "\u{0671}\u{0644}\u{0635}\u{0651}\u{064E}\u{0644}\u{064E}\u{0648}\u{0670}\u{0629}\u{064E}",         -- the prayer
      "\u{064A}\u{064E}\u{0670}\u{0642}\u{064E}\u{0648}\u{06E1}\u{0645}\u{0650}",                         -- o people
      "\u{0621}\u{064E}\u{0627}\u{0645}\u{064E}\u{0646}\u{064F}\u{0648}\u{0627}\u{0652}",                 -- they believed
      "\u{0634}\u{064E}\u{064A}\u{06E1}\u{0640}\u{0654}\u{0657}\u{0627}",                                 -- a thing
      "\u{0639}\u{064E}\u{0644}\u{064E}\u{0649}\u{0670}",                                                 -- on
      "\u{0671}\u{0644}\u{0633}\u{0651}\u{064E}\u{0645}\u{064E}\u{0670}\u{0648}\u{064E}\u{0670}\u{062A}\u{0650}", -- the heavens
      "\u{0628}\u{0650}\u{0640}\u{0654}\u{064E}\u{0627}\u{064A}\u{064E}\u{0670}\u{062A}\u{0650}\u{0646}\u{064E}\u{0627}\u{0653}", -- our signs
      "\u{0625}\u{0650}\u{0628}\u{06E1}\u{0631}\u{064E}\u{0670}\u{0647}\u{0650}\u{0640}\u{06E7}\u{0645}\u{064E}", -- Abraham
      "\u{0625}\u{0650}\u{0633}\u{06E1}\u{0631}\u{064E}\u{0640}\u{0670}\u{0653}\u{0621}\u{0650}\u{064A}\u{0644}\u{064E}", -- Israel
      "\u{0671}\u{0644}\u{06E1}\u{0623}\u{0653}\u{062E}\u{0650}\u{0631}\u{064E}\u{0629}\u{0650}",         -- the hereafter
      "\u{064A}\u{064E}\u{0640}\u{0670}\u{0653}\u{0623}\u{064E}\u{064A}\u{0651}\u{064F}\u{0647}\u{064E}\u{0627}", -- o you
      "\u{0623}\u{064F}\u{0648}\u{0652}\u{0644}\u{064E}\u{0640}\u{0670}\u{0653}\u{0626}\u{0650}\u{0643}\u{064E}", -- those
      "\u{06DA}",                                                                                 -- a pause mark alone
    }
    local d = tmpdir()
    local chapters = {}
    for n = 1, 114 do chapters[n] = {id = n, verses = {{id = 1, text = "\u{0627}\u{0644}\u{0645}"}}} end
    chapters[2].verses[2] = {id = 2, text = table.concat(uthmani, " ")}
    write(d .. "/quran.json", cjson.encode(chapters))
    local ok, out = run(string.format("lua5.4 tools/quran_text.lua '%s' '%s/q.jsonl' ar", d, d))
    assert.is_true(ok, out)
    local docs = {}
    for line in io.lines(d .. "/q.jsonl") do docs[#docs + 1] = cjson.decode(line) end
    assert.equal(114, #docs)
    assert.same({id = "quran-ar-2", lang = "ar", sentences = {"الم",
      "ذلك الكتاب الصلاة يا قوم آمنوا شيئا على السماوات بآياتنا إبراهيم إسرائيل الآخرة يا أيها أولئك"}}, docs[2])
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

describe("tools/manpage_text.lua", function()
  it("keeps a page's running text: requests, examples, tags and escapes dropped, font macros' words kept", function()
    local d = tmpdir()
    write(d .. "/ls.1", table.concat({
      '.\\" a comment',
      ".TH LS 1",
      ".SH 名前",
      "ls \\- ディレクトリの内容を",
      "表示する",
      ".SH 説明",
      ".B ls",
      "は \\fB\\-a\\fR を\\(aqつけると\\(dq全部\\(dq表示します。次へ。",
      ".TP",
      "\\fB\\-A\\fR, \\fB\\-\\-almost\\-all\\fR",
      "\\&. および .. を表示しない",
      ".nf",
      "$ ls \\-la /tmp",
      ".fi",
      ".PP",
      "This paragraph was left in English.",
      ".PP",
      ".BR ls (1)",
      "を参照。",
      "",
    }, "\n"))
    local ok, out = run(string.format("lua5.4 tools/manpage_text.lua '%s/m.jsonl' --min-non-ascii 0.5 ja='%s/ls.1'", d, d))
    assert.is_true(ok, out)
    assert.matches("1 pages, 1 with text (ja 1); 4 paragraphs kept, 2 dropped", out, 1, true)
    local docs = {}
    for line in io.lines(d .. "/m.jsonl") do docs[#docs + 1] = cjson.decode(line) end
    assert.same({{id = "man-ja-ls.1", lang = "ja", sentences = {
      "ls - ディレクトリの内容を表示する",
      "ls は -a を'つけると\"全部\"表示します。", "次へ。",
      "および .. を表示しない",
      "ls(1) を参照。"}}}, docs)
    -- without --min-non-ascii the English paragraph and the tag stay
    ok, out = run(string.format("lua5.4 tools/manpage_text.lua '%s/m.jsonl' ja='%s/ls.1'", d, d))
    assert.is_true(ok, out)
    assert.matches("6 paragraphs kept, 0 dropped", out, 1, true)
  end)

  it("refuses a page that is not UTF-8, naming it, and writes nothing", function()
    local d = tmpdir()
    write(d .. "/bad.1", ".TH BAD 1\n\255\254 text\n")
    local ok, out = run(string.format("lua5.4 tools/manpage_text.lua '%s/m.jsonl' ja='%s/bad.1'", d, d))
    assert.is_false(ok)
    assert.matches(d .. "/bad.1: not UTF-8 text", out, 1, true)
    assert.is_nil(io.open(d .. "/m.jsonl"), "nothing written")
  end)
end)
