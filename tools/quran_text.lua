-- The translations of npm quran-json (dist/quran_LANG.json: the 114
-- chapters, each a list of verses {id, text, translation}) as documents for
-- tools/build_corpus.lua: a JSON line per chapter and language, {"id":
-- "quran-LANG-N", "lang": LANG, "sentences": [...]}, the verses' translations
-- split into sentences (bert.data.corpus.split_sentences_multilingual).  The
-- Arabic original (quran.json, in Uthmani script with its diacritics, unlike
-- the evaluation sets' Arabic) is not read.  A parallel text: the same
-- chapters in every language.
--
--   lua5.4 tools/quran_text.lua DIST_DIR OUT.jsonl LANG...
local USAGE = "usage: lua5.4 tools/quran_text.lua DIST_DIR OUT.jsonl LANG...\n" ..
  "Writes the translations DIST_DIR/quran_LANG.json of npm quran-json as JSON lines {id, lang, sentences},\n" ..
  "one per chapter, for tools/build_corpus.lua (tools/fetch_multilingual.sh runs it).\n"
if arg[1] == "--help" or arg[1] == "-h" then io.stdout:write(USAGE) os.exit(0) end
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cjson = require("cjson")
local corpus = require("bert.data.corpus")

local dir, outp = arg[1], arg[2]
if not (dir and outp and arg[3]) then
  io.stderr:write(USAGE)
  os.exit(2)
end

local lines, verses = {}, 0   -- written at the end: a bad file leaves nothing behind
for i = 3, #arg do
  local lang = arg[i]
  local path = dir .. "/quran_" .. lang .. ".json"
  local f, err = io.open(path, "rb")
  if not f then error("quran_text: " .. tostring(err), 0) end
  local ok, chapters = pcall(cjson.decode, f:read("a"))
  f:close()
  if not ok or type(chapters) ~= "table" or #chapters ~= 114 then
    error("quran_text: " .. path .. ": expected a JSON list of the 114 chapters", 0)
  end
  for n, ch in ipairs(chapters) do
    if type(ch) ~= "table" or type(ch.verses) ~= "table" then
      error(string.format("quran_text: %s: chapter %d has no verses", path, n), 0)
    end
    local sents = {}
    for v, verse in ipairs(ch.verses) do
      if type(verse) ~= "table" or type(verse.translation) ~= "string" then
        error(string.format("quran_text: %s: chapter %d verse %d has no translation", path, n, v), 0)
      end
      corpus.split_sentences_multilingual(verse.translation, sents)
      verses = verses + 1
    end
    if #sents > 0 then
      lines[#lines + 1] = cjson.encode({id = string.format("quran-%s-%d", lang, n), lang = lang, sentences = sents})
    end
  end
end
local out = assert(io.open(outp .. ".tmp", "wb"))
assert(out:write(table.concat(lines, "\n"), "\n"))
assert(out:close())
assert(os.rename(outp .. ".tmp", outp))
io.stderr:write(string.format("quran: %d chapters, %d verses in %d languages\n", #lines, verses, #arg - 2))
