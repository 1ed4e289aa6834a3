-- HTML pages as documents for tools/build_corpus.lua: a JSON line per page,
-- {"id": "PREFIX-LANG-N", "lang": LANG, "sentences": [...]}, N the page's
-- number among LANG's pages in the order given.  Debian's LibreOffice help
-- (libreoffice-help-ko, -el, -hi, ...) carries ~2,600 translated pages in
-- languages the multilingual corpus otherwise has only the UDHR for
-- (tools/fetch_multilingual.sh).
--
-- The text is that of the block elements (p, h1-h6, li, dt, dd, td: an
-- element that wraps another of them is left to the inner one;
-- corpus.html_blocks), each split into sentences
-- (corpus.split_sentences_multilingual).  A block whose non-space
-- characters are less than half letters (menus of symbols, numbers) is
-- dropped, and with --min-non-ascii F one whose letters are less than F
-- non-ASCII (corpus.letter_shares): a translation's untranslated English.
-- A block found on --boilerplate N or more of its language's pages (default
-- 10) and on at least 1% of them is the site's furniture (a page header,
-- "Related Topics", "Syntax:") and is dropped everywhere; so is every
-- <footer> (LibreOffice's debug footer says "Title is: " and the page's
-- title, a different block on every page).
--
--   lua5.4 tools/html_text.lua OUT.jsonl [--min-non-ascii F] [--boilerplate N] [--prefix NAME] LANG=FILE...
local USAGE = "usage: lua5.4 tools/html_text.lua OUT.jsonl [--min-non-ascii F] [--boilerplate N] [--prefix NAME] " ..
  "LANG=FILE...\n" ..
  "Writes the text of HTML pages as JSON lines {id, lang, sentences}, one per page, for tools/build_corpus.lua\n" ..
  "(tools/fetch_multilingual.sh runs it).  --min-non-ascii F keeps only blocks whose letters are at least\n" ..
  "that share non-ASCII; a block on N or more pages of a language (and 1% of them) is dropped (--boilerplate,\n" ..
  "default 10); ids are PREFIX-LANG-N (--prefix, default html).\n"
if arg[1] == "--help" or arg[1] == "-h" then io.stdout:write(USAGE) os.exit(0) end
package.path = "./lua/?.lua;./lua/?/init.lua;./tools/lib/?.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local converter = require("converter")
local corpus = require("bert.data.corpus")

local BLOCKS = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "li", "dt", "dd", "td"}

local outp = arg[1]
local min_non_ascii, boilerplate, prefix, first = 0, 10, "html", 2
while arg[first] == "--min-non-ascii" or arg[first] == "--prefix" or arg[first] == "--boilerplate" do
  if arg[first] == "--prefix" then
    prefix = arg[first + 1]
    if not (prefix and prefix:match("^[%w_]+$")) then
      error("html_text: --prefix " .. tostring(prefix) .. ": expected letters, digits or _", 0)
    end
  elseif arg[first] == "--boilerplate" then
    boilerplate = math.tointeger(tonumber(arg[first + 1]))
    if not boilerplate or boilerplate < 2 then
      error("html_text: --boilerplate " .. tostring(arg[first + 1]) .. ": expected a page count of 2 or more", 0)
    end
  else
    min_non_ascii = tonumber(arg[first + 1])
    if not min_non_ascii or min_non_ascii < 0 or min_non_ascii > 1 then
      error("html_text: --min-non-ascii " .. tostring(arg[first + 1]) .. ": expected a share between 0 and 1", 0)
    end
  end
  first = first + 2
end
if not (outp and arg[first]) then
  io.stderr:write(USAGE)
  os.exit(2)
end

-- first every page's blocks, and on how many of its language's pages each block is
local pages, page_count, seen_on = {}, {}, {}
for i = first, #arg do
  local lang, _, html = converter.read_lang_file("html_text", arg[i])
  local blocks = corpus.html_blocks(html:gsub("<footer[%s>].-</footer>", ""), BLOCKS)
  pages[#pages + 1] = {lang = lang, blocks = blocks}
  page_count[lang] = (page_count[lang] or 0) + 1
  seen_on[lang] = seen_on[lang] or {}
  local on_page = {}
  for _, text in ipairs(blocks) do
    if not on_page[text] then
      on_page[text] = true
      seen_on[lang][text] = (seen_on[lang][text] or 0) + 1
    end
  end
end

local docs, kept, dropped, furniture, numbered = converter.documents(), 0, 0, 0, {}
for _, page in ipairs(pages) do
  local lang = page.lang
  local limit = math.max(boilerplate, page_count[lang] / 100)
  local sents = {}
  for _, text in ipairs(page.blocks) do
    local letters, non_ascii = corpus.letter_shares(text)
    if seen_on[lang][text] >= limit then
      furniture = furniture + 1
    elseif letters < 0.5 or non_ascii < min_non_ascii then
      dropped = dropped + 1
    else
      kept = kept + 1
      corpus.split_sentences_multilingual(text, sents)
    end
  end
  numbered[lang] = (numbered[lang] or 0) + 1
  if #sents > 0 then docs.add(string.format("%s-%s-%d", prefix, lang, numbered[lang]), lang, sents) end
end

docs.write("html_text", outp)
io.stderr:write(string.format("%s: %d pages, %d with text (%s); %d blocks kept, %d dropped, %d on many pages\n",
  prefix, #pages, #docs.lines, docs.counts(), kept, dropped, furniture))
