-- Fortune-cookie files (the fortune(6) format: entries separated by lines
-- holding only "%") as documents for tools/build_corpus.lua: a JSON line per
-- entry, {"id": "fortune-LANG-FILE-N", "lang": LANG, "sentences": [...]}.
-- Debian's fortunes-de, -bg, -ru and -zh carry quotations, proverbs, jokes
-- and anecdotes in languages the multilingual corpus otherwise has only the
-- UDHR for (tools/fetch_multilingual.sh).
--
-- An entry is cleaned before it is split into sentences
-- (bert.data.corpus.split_sentences_multilingual):
--   - terminal colour codes (ESC [ ... m, fortunes-zh has them) and CRs go;
--   - attribution lines ("    -- Goethe") and shell command lines
--     ("$ man 5 sources.list") go: names and commands are not the language;
--   - lines join into paragraphs (a blank line ends one) with a space, or
--     with nothing between CJK characters (corpus.join_lines);
--   - an entry whose non-space characters are less than half letters
--     (ASCII art, tables, code) is dropped whole and counted.
--
--   lua5.4 tools/fortune_text.lua OUT.jsonl LANG=FILE...
local USAGE = "usage: lua5.4 tools/fortune_text.lua OUT.jsonl LANG=FILE...\n" ..
  "Writes the entries of fortune files (entries separated by '%' lines) as JSON lines {id, lang, sentences},\n" ..
  "one per entry, for tools/build_corpus.lua (tools/fetch_multilingual.sh runs it).\n"
if arg[1] == "--help" or arg[1] == "-h" then io.stdout:write(USAGE) os.exit(0) end
package.path = "./lua/?.lua;./lua/?/init.lua;./tools/lib/?.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local converter = require("converter")
local corpus = require("bert.data.corpus")

local outp = arg[1]
if not (outp and arg[2]) then
  io.stderr:write(USAGE)
  os.exit(2)
end

local ATTRIBUTION = "^%s*%-%-"     -- "-- Author (Work)"
local COMMAND = "^%s*[%$#] "       -- "$ dpkg -L vim"

-- the paragraphs of one entry's lines, cleaned as the header says
local function paragraphs(lines)
  local paras, cur = {}, nil
  for _, line in ipairs(lines) do
    line = line:gsub("\27%[[%d;]*m", ""):gsub("\r", "")
    if line:match("^%s*$") then
      cur = nil
    elseif not (line:match(ATTRIBUTION) or line:match(COMMAND)) then
      if not cur then
        cur = {}
        paras[#paras + 1] = cur
      end
      cur[#cur + 1] = line
    end
  end
  for i, p in ipairs(paras) do paras[i] = corpus.join_lines(p) end
  return paras
end

local docs, entries, dropped = converter.documents(), 0, 0
for i = 2, #arg do
  local lang, path, text = converter.read_lang_file("fortune_text", arg[i])
  local name = path:match("([^/]+)$")
  local n, entry = 0, {}
  local function flush()
    local blank = true
    for _, l in ipairs(entry) do blank = blank and not l:find("%S") end
    if blank then entry = {} return end   -- the text after the last '%', or an empty entry
    n = n + 1
    entries = entries + 1
    local paras = paragraphs(entry)
    local joined = table.concat(paras, " ")
    entry = {}
    if joined == "" or corpus.letter_shares(joined) < 0.5 then
      dropped = dropped + 1
      return
    end
    local sents = {}
    for _, p in ipairs(paras) do corpus.split_sentences_multilingual(p, sents) end
    docs.add(string.format("fortune-%s-%s-%d", lang, name, n), lang, sents)
  end
  for line in (text:gsub("\r\n", "\n") .. "\n"):gmatch("([^\n]*)\n") do   -- (one line more at the end: blank)
    if line == "%" then flush() else entry[#entry + 1] = line end
  end
  flush()
end

docs.write("fortune_text", outp)
io.stderr:write(string.format("fortunes: %d entries from %d files, %d kept (%s), %d dropped (mostly not letters)\n",
  entries, #arg - 1, #docs.lines, docs.counts(), dropped))
