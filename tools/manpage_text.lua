-- Translated manual pages (troff source, uncompressed) as documents for
-- tools/build_corpus.lua: a JSON line per page, {"id": "man-LANG-PAGE",
-- "lang": LANG, "sentences": [...]}.  Debian's manpages-ja carries ~1,000
-- pages of Japanese, the language the multilingual corpus otherwise has
-- only the UDHR for (tools/fetch_multilingual.sh).
--
-- Only running text is kept:
--   - request and macro lines (".SH", ".TP", comments) are not text, but
--     the arguments of the font macros (".B ls", ".BR ls (1)") are; the
--     paragraph macros (.SH .SS .PP .LP .P .TP .IP .HP .sp .br, and mdoc's)
--     end a paragraph (a .TP's tag line is one of its own), and no-fill
--     blocks (.nf/.fi, .EX/.EE, .Bd/.Ed: examples, synopses) are dropped
--     whole;
--   - escapes go: fonts (\fB, \f(CW, \f[B]), strings (\*(xx), sizes,
--     zero-width marks (\& \, \/ \c), comments (\"); \- and the named
--     quotes and dashes become their characters;
--   - lines join into paragraphs (corpus.join_lines), split into sentences
--     (corpus.split_sentences_multilingual); a paragraph whose non-space
--     characters are less than half letters (option lists, tables) is
--     dropped, and with --min-non-ascii F one whose letters are less than F
--     non-ASCII (0.5 for Japanese: the English a translation left
--     untranslated; corpus.letter_shares).
--
--   lua5.4 tools/manpage_text.lua OUT.jsonl [--min-non-ascii F] LANG=FILE...
local USAGE = "usage: lua5.4 tools/manpage_text.lua OUT.jsonl [--min-non-ascii F] LANG=FILE...\n" ..
  "Writes the running text of manual pages (troff source) as JSON lines {id, lang, sentences}, one per page,\n" ..
  "for tools/build_corpus.lua (tools/fetch_multilingual.sh runs it).  --min-non-ascii F keeps only paragraphs\n" ..
  "whose letters are at least that share non-ASCII.\n"
if arg[1] == "--help" or arg[1] == "-h" then io.stdout:write(USAGE) os.exit(0) end
package.path = "./lua/?.lua;./lua/?/init.lua;./tools/lib/?.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local converter = require("converter")
local corpus = require("bert.data.corpus")

local outp = arg[1]
local min_non_ascii, first = 0, 2
if arg[2] == "--min-non-ascii" then
  min_non_ascii, first = tonumber(arg[3]), 4
  if not min_non_ascii or min_non_ascii < 0 or min_non_ascii > 1 then
    error("manpage_text: --min-non-ascii " .. tostring(arg[3]) .. ": expected a share between 0 and 1", 0)
  end
end
if not (outp and arg[first]) then
  io.stderr:write(USAGE)
  os.exit(2)
end

-- (man's macros, then mdoc's: BSD-derived pages use those)
local BREAKS = {SH = true, SS = true, PP = true, LP = true, P = true, TP = true, IP = true, HP = true,
                sp = true, br = true, RS = true, RE = true,
                Sh = true, Ss = true, Pp = true, Lp = true, It = true, Bl = true, El = true}
local NOFILL_START = {nf = true, EX = true, Bd = true}
local NOFILL_END = {fi = true, EE = true, Ed = true}
-- font macros carry text (".B printcap" inside a sentence): their arguments
-- are kept, joined by a space (.B .I .SM .SB) or run together (.BR and the
-- other alternating forms: ".BR ls (1)" is "ls(1)")
local FONT_MACRO = {B = " ", I = " ", SM = " ", SB = " ", BR = "", RB = "", IR = "", RI = "", BI = "", IB = "",
                    Nm = " ", Ar = " ", Pa = " ", Ev = " ", Em = " ", Sy = " ", Li = " ", Cm = " ", Dv = " ",
                    Va = " ", Xr = " ", Fl = " ", Ql = " ", Dq = " ", Sq = " ", Pq = " "}
local NAMED = {aq = "'", dq = '"', lq = "\u{201C}", rq = "\u{201D}", oq = "\u{2018}", cq = "\u{2019}",
               em = "\u{2014}", en = "\u{2013}", hy = "-", mi = "-", bu = "\u{2022}", co = "\u{00A9}"}

local CHAR = "[^\128-\191][\128-\191]*"   -- one UTF-8 character, whatever its length

-- a text line with its escapes resolved
local function unescape(line)
  line = line:gsub('\\".*$', "")                      -- a comment to the end of the line
  line = line:gsub("\\\\", "\0")                       -- (an escaped backslash, kept apart)
  line = line:gsub("\\f%(..", ""):gsub("\\f%[[^%]]*%]", ""):gsub("\\f" .. CHAR, "")
  line = line:gsub("\\%*%(..", ""):gsub("\\%*%[[^%]]*%]", ""):gsub("\\%*" .. CHAR, "")
  line = line:gsub("\\s[+-]?%d", "")
  line = line:gsub("\\%((..)", function(name) return NAMED[name] or "" end)
  line = line:gsub("\\%[(%a%a)%]", function(name) return NAMED[name] or "" end)
  line = line:gsub("\\%-", "-"):gsub("\\e", "\0"):gsub("\\ ", " "):gsub("\\~", " ")
  line = line:gsub("\\[&,/^|c%%:]", "")
  line = line:gsub("\\" .. CHAR, "")                    -- any other escape
  return (line:gsub("\0", "\\"))
end

-- a macro's arguments (space-separated, or in double quotes) joined by sep
local function macro_text(rest, sep)
  local args, i = {}, 1
  while true do
    local start = rest:find("%S", i)
    if not start then break end
    if rest:sub(start, start) == '"' then
      local stop = rest:find('"', start + 1, true) or #rest + 1
      args[#args + 1] = rest:sub(start + 1, stop - 1)
      i = stop + 1
    else
      local stop = rest:find("%s", start) or #rest + 1
      args[#args + 1] = rest:sub(start, stop - 1)
      i = stop
    end
  end
  return table.concat(args, sep)
end

local docs, pages, kept_paras, dropped_paras = converter.documents(), 0, 0, 0
for i = first, #arg do
  local lang, path, text = converter.read_lang_file("manpage_text", arg[i])
  pages = pages + 1
  local sents, para, nofill, tag = {}, {}, false, false
  local function flush()
    if #para == 0 then return end
    local joined = corpus.join_lines(para)
    para = {}
    local letters, non_ascii = corpus.letter_shares(joined)
    if letters < 0.5 or non_ascii < min_non_ascii then
      dropped_paras = dropped_paras + 1
      return
    end
    kept_paras = kept_paras + 1
    for _, sent in ipairs(corpus.split_sentences_multilingual(joined)) do
      if sent:find("[%a\128-\255]") then sents[#sents + 1] = sent end   -- ("\&." left a lone ".")
    end
  end
  for line in (text:gsub("\r\n", "\n") .. "\n"):gmatch("([^\n]*)\n") do
    local request, rest = line:match("^[.'][ \t]*(%S*)[ \t]*(.*)$")
    if request and FONT_MACRO[request] and rest ~= "" then
      line, request = macro_text(rest, FONT_MACRO[request]), nil
    end
    if request then
      if NOFILL_START[request] then flush() nofill = true
      elseif NOFILL_END[request] then nofill = false
      elseif BREAKS[request] then flush() tag = request == "TP" end
    elseif not nofill then
      line = unescape(line)
      if line:match("^%s*$") then flush() else para[#para + 1] = line end
      if tag then flush() tag = false end   -- a .TP's first line is its tag (an option, a name)
    end
  end
  flush()
  if #sents > 0 then
    local page = path:match("([^/]+)$")
    docs.add(string.format("man-%s-%s", lang, page), lang, sents)
  end
end

docs.write("manpage_text", outp)
io.stderr:write(string.format("manpages: %d pages, %d with text (%s); %d paragraphs kept, %d dropped\n",
  pages, #docs.lines, docs.counts(), kept_paras, dropped_paras))
