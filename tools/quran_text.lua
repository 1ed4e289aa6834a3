-- The translations of npm quran-json (dist/quran_LANG.json: the 114
-- chapters, each a list of verses {id, text, translation}) as documents for
-- tools/build_corpus.lua: a JSON line per chapter and language, {"id":
-- "quran-LANG-N", "lang": LANG, "sentences": [...]}, the verses' translations
-- split into sentences (bert.data.corpus.split_sentences_multilingual).  A
-- parallel text: the same chapters in every language.
--
-- LANG "ar" reads the Arabic original (quran.json, each verse's text), which
-- is written in the Uthmani script of the printed Qur'an, fully vocalised;
-- the evaluation sets' Arabic (XNLI) is modern and unvocalised.  Each verse
-- is rewritten in modern spelling (plain_arabic below: vowel signs and
-- Qur'anic marks dropped, the dagger alef written as the alef modern
-- spelling has, alef wasla as alef, the few words modern spelling writes
-- without that alef restored), and is one sentence (verses have no
-- punctuation).
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

-- Uthmani to modern Arabic spelling, by code point:
local DROP = {}   -- vowel signs, tanwin, shadda, sukun, tatweel, Qur'anic annotation and pause marks
for cp = 0x064B, 0x0652 do DROP[cp] = true end
for cp = 0x0656, 0x065F do DROP[cp] = true end
for cp = 0x06D6, 0x06ED do DROP[cp] = true end
DROP[0x06E7] = nil   -- the small yeh stands for a yeh modern spelling writes
for cp = 0x08F0, 0x08F3 do DROP[cp] = true end
DROP[0x0640] = true   -- (tatweel: a hamza after it is handled below)
local ALEF, ALEF_MADDA, ALEF_HAMZA_ABOVE, ALEF_HAMZA_BELOW = 0x0627, 0x0622, 0x0623, 0x0625
local HAMZA, TATWEEL = 0x0621, 0x0640
local WAW, WAW_HAMZA, YEH, ALEF_MAKSURA, YEH_HAMZA = 0x0648, 0x0624, 0x064A, 0x0649, 0x0626
-- words modern spelling writes without the long a the Uthmani dagger alef
-- marks (this, that, but, those, these, the Merciful, god)
local WORD_FIXES = {{"هاذ", "هذ"}, {"ذالك", "ذلك"}, {"لاكن", "لكن"}, {"أولائك", "أولئك"},
                    {"هاؤلاء", "هؤلاء"}, {"الرحمان", "الرحمن"}, {"إلاه", "إله"}}

local function plain_word(word)
  -- prev: the previous code point of the input, dropped or not; base: the
  -- previous one that is no vowel sign (a hamza's seat may carry one)
  local out, prev, base = {}, nil, nil
  for _, cp in utf8.codes(word) do
    local last = out[#out]
    if DROP[cp] then                                                         -- dropped
    elseif cp == 0x0671 then out[#out + 1] = ALEF                                -- alef wasla
    elseif cp == 0x0670 then                                                   -- dagger alef
      if #out == 1 and last == YEH then out[2], out[3] = ALEF, 0x20            -- the vocative ya, a word of its own
      elseif prev == WAW then out[#out] = ALEF                                 -- salawat: the waw is its seat
      elseif prev ~= ALEF_MAKSURA then out[#out + 1] = ALEF end                -- (ala: the maksura stays)
    elseif cp == 0x0653 then                                -- maddah: a word's first alef, or a hamza's
      if (last == ALEF and #out == 1) or last == ALEF_HAMZA_ABOVE then out[#out] = ALEF_MADDA end
    elseif cp == 0x0654 then                                                   -- hamza above its seat
      if base == TATWEEL then out[#out + 1] = last == YEH and YEH_HAMZA or HAMZA   -- a seat of its own
      elseif last == ALEF then out[#out] = ALEF_HAMZA_ABOVE
      elseif last == WAW then out[#out] = WAW_HAMZA
      elseif last == YEH or last == ALEF_MAKSURA then out[#out] = YEH_HAMZA end
    elseif cp == 0x0655 then                                                   -- hamza below
      if last == ALEF then out[#out] = ALEF_HAMZA_BELOW end
    elseif cp == 0x06E7 then out[#out + 1] = YEH                               -- small yeh: a written yeh
    else out[#out + 1] = cp end
    prev = cp
    if cp < 0x064B or cp > 0x0652 then base = cp end
  end
  if #out == 0 then return "" end
  local w = utf8.char(table.unpack(out))
  -- hamza then alef is an alef madda (quran, ayat); a hamza between alef and yeh sits on a yeh (Israil)
  w = w:gsub("ءا", "آ"):gsub("اءي", "ائي"):gsub(" $", "")
  for _, fix in ipairs(WORD_FIXES) do w = w:gsub(fix[1], fix[2]) end
  return w
end

local function plain_arabic(text)
  local words = {}
  for word in text:gsub("\226\128\137", " "):gmatch("%S+") do   -- (a thin space in one verse)
    local w = plain_word(word)
    if w ~= "" then words[#words + 1] = w end
  end
  return table.concat(words, " ")
end

local dir, outp = arg[1], arg[2]
if not (dir and outp and arg[3]) then
  io.stderr:write(USAGE)
  os.exit(2)
end

local lines, verses = {}, 0   -- written at the end: a bad file leaves nothing behind
for i = 3, #arg do
  local lang = arg[i]
  local path = dir .. (lang == "ar" and "/quran.json" or "/quran_" .. lang .. ".json")
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
      local field = lang == "ar" and "text" or "translation"
      if type(verse) ~= "table" or type(verse[field]) ~= "string" then
        error(string.format("quran_text: %s: chapter %d verse %d has no %s", path, n, v, field), 0)
      end
      if lang == "ar" then
        local plain = plain_arabic(verse.text)
        if plain ~= "" then sents[#sents + 1] = plain end
      else
        corpus.split_sentences_multilingual(verse.translation, sents)
      end
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
