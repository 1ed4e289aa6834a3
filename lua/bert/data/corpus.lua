--- bert.data.corpus: text corpora as documents (lists of sentence strings).
--
--   corpus.read(path)            BERT's plain format: one sentence per line, a
--                                blank line between documents -> documents
--   corpus.write(path, docs)     the inverse (temp file + rename)
--   corpus.from_text(path)       raw text: paragraphs (blank-line separated)
--                                are documents, split into sentences
--   corpus.split_sentences(text) -> list of sentences
--   corpus.split_sentences_multilingual(text[, out]) -> and after CJK full stops
--   corpus.join_lines(lines)     a paragraph's wrapped lines as one text
--   corpus.letter_shares(text)   -> share of letters, share of non-ASCII letters
--   corpus.html_blocks(html, elements) -> the text of those elements, in order
--
-- Pure Lua (no bert.core), so tools/fetch_data.sh can use it before a build.
-- File problems return nil, message; bad arguments raise errors.
--
-- The sentence splitter is rule-based.  Whitespace (newlines included) is
-- collapsed to single spaces, then a boundary is a run of terminators
-- (. ! ? .. ... or U+2026), plus any closing quotes and brackets right after
-- it (" ' ) ] } ” ’ »), followed by a space or the end of the text.
-- Whether a candidate splits:
--   1. ! or ? in the run: splits, unless the next word starts lowercase
--      ("Really?" she asked).
--   2. an ellipsis (two or more dots, or U+2026): splits only when the next
--      word starts with an uppercase letter.
--   3. a single period after
--      a. a title or abbreviation that precedes more text (Mr. Mrs. Dr. Prof.
--         St. Mt. Gen. Col. Capt. Lt. Sgt. Gov. Sen. Rep. Rev. Hon. vs. e.g.
--         i.e. cf. viz. etc. approx. No. Fig. Vol. pp. Jan. Feb. ... ,
--         case-insensitive): never splits;
--      b. a single letter (an initial: "J. F. Kennedy"): never splits;
--      c. a dotted abbreviation ("U.S.", "a.m.", "Ph.D."): splits only when
--         the next word starts uppercase;
--      d. any other word: splits unless the next word starts lowercase.
--   Decimals ("3.14"), times and URLs never split: no space after the dot.
--   The next word is looked at after any opening quotes or brackets.
-- Limits: only ASCII letters count as lower/uppercase; an abbreviation or
-- initial that really ends a sentence ("... in the U.S. Then") is not
-- split in case 3a/3b and always split in 3c before a capital ("U.S.
-- Army"); "etc." before a capitalised word stays unsplit; no language
-- other than English is considered.
local M = {}

------------------------------------------------------------ plain files

local read_all = require("bert.fs").read_file

--- Reads BERT's plain format: one sentence per line (outer whitespace
-- trimmed), a blank (or whitespace-only) line between documents.  Returns documents (lists of
-- sentence strings, none empty), or nil, message.
function M.read(path)
  if type(path) ~= "string" then
    error("read: argument #1 (path) expected string, got " .. type(path), 2)
  end
  local text, err = read_all(path)
  if not text then return nil, err end
  local docs, cur = {}, {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    line = line:match("^%s*(.-)%s*$")   -- \r and outer spaces dropped
    if line == "" then
      if #cur > 0 then docs[#docs + 1] = cur; cur = {} end
    else
      cur[#cur + 1] = line
    end
  end
  if #cur > 0 then docs[#docs + 1] = cur end
  return docs
end

--- Writes documents in the plain format (temp file + rename).
function M.write(path, docs)
  if type(path) ~= "string" then
    error("write: argument #1 (path) expected string, got " .. type(path), 2)
  end
  if type(docs) ~= "table" then
    error("write: argument #2 (documents) expected table, got " .. type(docs), 2)
  end
  local tmp = path .. ".tmp"
  local f, err = io.open(tmp, "wb")
  if not f then return nil, err end
  for i, doc in ipairs(docs) do
    if i > 1 then f:write("\n") end
    for _, s in ipairs(doc) do f:write((s:gsub("[\r\n]+", " ")), "\n") end
  end
  local ok, werr = f:close()
  if not ok then os.remove(tmp) return nil, werr end
  local rok, rerr = os.rename(tmp, path)
  if not rok then os.remove(tmp) return nil, rerr end
  return true
end

------------------------------------------------------------- splitter

local NEVER = {}
for w in ([[mr mrs ms mx dr prof st mt ft gen col capt cpt lt sgt maj adm gov sen rep rev
  hon messrs mme mlle vs v e.g i.e cf viz etc approx ca no nos fig figs vol vols pp p
  ch sec art jan feb mar apr jun jul aug sep sept oct nov dec dept univ assn bros est
  al]]):gmatch("%S+") do
  NEVER[w] = true
end

local CLOSERS = {'"', "'", ")", "]", "}", "\226\128\157", "\226\128\153", "\194\187"}
local OPENERS = {'"', "'", "(", "[", "{", "\226\128\156", "\226\128\152", "\194\171", "`"}
local ELLIPSIS = "\226\128\166"

local function skip_any(s, i, list)   -- first index at or after i past any of list
  local moved = true
  while moved do
    moved = false
    for _, c in ipairs(list) do
      if s:sub(i, i + #c - 1) == c then i = i + #c; moved = true end
    end
  end
  return i
end

local function strip_leading(w, list)
  local i = skip_any(w, 1, list)
  return w:sub(i)
end

local function is_boundary(term, prev, nextw)
  local first = nextw:sub(1, 1)
  local lower, upper = first:match("^%l$") ~= nil, first:match("^%u$") ~= nil
  if term:find("[!?]") then return not lower end
  if #term > 1 or term == ELLIPSIS then return upper end
  local w = prev:lower()
  if NEVER[w] then return false end
  if prev:match("^%a$") then return false end
  if prev:match("^%a+%.[%a%.]*$") then return upper end
  return not lower
end

--- Splits raw text into sentences (see the rules at the top of the file).
function M.split_sentences(text)
  if type(text) ~= "string" then
    error("split_sentences: argument #1 (text) expected string, got " .. type(text), 2)
  end
  text = text:gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")
  local out, start, i, n = {}, 1, 1, #text
  while i <= n do
    local s1 = text:find("[%.!?]", i)
    local s2 = text:find(ELLIPSIS, i, true)
    local s = s1
    if s2 and (not s or s2 < s) then s = s2 end
    if not s then break end
    local e = s - 1
    repeat                                  -- the run of terminators
      local moved = false
      if text:sub(e + 1, e + 1):match("[%.!?]") then e = e + 1; moved = true
      elseif text:sub(e + 1, e + 3) == ELLIPSIS then e = e + 3; moved = true end
    until not moved
    local term = text:sub(s, e)
    local stop = skip_any(text, e + 1, CLOSERS) - 1
    if stop >= n or text:sub(stop + 1, stop + 1) == " " then
      local prev = strip_leading(text:sub(start, s - 1):match("(%S*)$"), OPENERS)
      local nextw = stop >= n and "" or strip_leading(text:sub(stop + 2):match("^%S*"), OPENERS)
      if stop >= n or is_boundary(term, prev, nextw) then
        out[#out + 1] = text:sub(start, stop)
        start = stop + 2
      end
    end
    i = stop + 1
  end
  if start <= n then
    local rest = text:sub(start)
    if rest:find("%S") then out[#out + 1] = rest end
  end
  return out
end

-- closing quotes and brackets that stay with the CJK full stop before them:
-- ” ’ 」 』 》 〉 ） and ASCII " ' )
local CJK_CLOSER = {"\226\128\157", "\226\128\153", "\227\128\141", "\227\128\143", "\227\128\139",
                    "\227\128\137", "\239\188\137", '"', "'", ")"}

--- split_sentences, then also after the full stops of CJK scripts (。！？,
-- which need no space after them) and any closing quotes or brackets right
-- after them (“……矣。” is one sentence), for text in any language; the
-- sentences are appended to out (a new list when nil), which is returned.
function M.split_sentences_multilingual(text, out)
  out = out or {}
  for _, s in ipairs(M.split_sentences(text)) do
    s = s:gsub("\227\128\130", "%0\n"):gsub("\239\188[\129\159]", "%0\n")   -- 。！？
    local moved = s:find("\n", 1, true) ~= nil
    while moved do   -- each pass moves the break past one closer
      moved = false
      for _, c in ipairs(CJK_CLOSER) do
        local n
        s, n = s:gsub("\n" .. c:gsub("%p", "%%%0"), c .. "\n")
        moved = moved or n > 0
      end
    end
    for piece in s:gmatch("[^\n]+") do
      piece = piece:gsub("^%s+", ""):gsub("%s+$", "")
      if piece ~= "" then out[#out + 1] = piece end
    end
  end
  return out
end

-- CJK ideographs, kana, CJK punctuation and full-width forms: a line break
-- between two of them is inside a Chinese or Japanese sentence
local function is_cjk(cp)
  return cp ~= nil and ((cp >= 0x2E80 and cp <= 0x9FFF) or (cp >= 0xF900 and cp <= 0xFAFF)
                        or (cp >= 0xFF00 and cp <= 0xFFEF))
end

local function first_codepoint(s)
  local ok, cp = pcall(utf8.codepoint, s, 1)
  return ok and cp or nil
end

local function last_codepoint(s)
  local i = #s
  while i > 1 and s:byte(i) >= 0x80 and s:byte(i) < 0xC0 do i = i - 1 end
  local ok, cp = pcall(utf8.codepoint, s, i)
  return ok and cp or nil
end

--- The lines of one paragraph (wrapped text) as one string: each line
-- trimmed, joined with a space, or with nothing where both sides of the
-- break are CJK characters (a Chinese or Japanese line wraps inside a word).
function M.join_lines(lines)
  local out, prev = {}, nil
  for _, line in ipairs(lines) do
    line = line:gsub("^%s+", ""):gsub("%s+$", "")
    if line ~= "" then
      if prev then out[#out + 1] = (is_cjk(last_codepoint(prev)) and is_cjk(first_codepoint(line))) and "" or " " end
      out[#out + 1] = line
      prev = line
    end
  end
  return table.concat(out)
end

--- Two shares of text, for the converters' filters: letters among the
-- non-space bytes (ASCII letters, and every byte of a non-ASCII character:
-- scripts are not told apart), and non-ASCII bytes among those letters
-- (about 1 for Greek, Korean or Japanese, 0 for English).  0, 0 for text
-- without letters.
function M.letter_shares(text)
  local ascii_letters, other_letters, other = 0, 0, 0
  for c in text:gmatch("%S") do
    if c:byte() >= 0x80 then other_letters = other_letters + 1
    elseif c:match("%a") then ascii_letters = ascii_letters + 1
    else other = other + 1 end
  end
  local letters = ascii_letters + other_letters
  if letters == 0 then return 0, 0 end
  return letters / (letters + other), other_letters / letters
end

local HTML_ENTITIES = {amp = "&", lt = "<", gt = ">", quot = '"', apos = "'", nbsp = " "}

local function html_unescape(s)
  return (s:gsub("&(#?[xX]?)(%w+);", function(kind, v)
    if kind == "" then return HTML_ENTITIES[v] end
    local cp = tonumber(v, (kind == "#x" or kind == "#X") and 16 or 10)
    if cp and cp < 0x110000 then return utf8.char(cp) end
  end))
end

--- The text of an HTML page's elements of the given names (e.g. {"p",
-- "li"}), in document order: tags stripped, entities decoded, whitespace
-- collapsed, empty ones left out.  An element that holds another of those
-- names (an <li> wrapping a <p>) is left to the inner one.
function M.html_blocks(html, elements)
  local blocks, inner = {}, {}
  for _, el in ipairs(elements) do inner[#inner + 1] = "<" .. el .. "[%s>]" end
  for _, el in ipairs(elements) do
    local pos = 1
    while true do
      local s, e, body = html:find("<" .. el .. "%f[%s>][^>]*>(.-)</" .. el .. ">", pos)
      if not s then break end
      local nested = false
      for _, pat in ipairs(inner) do nested = nested or body:find(pat) ~= nil end
      if not nested then
        local text = html_unescape(body:gsub("<[^>]*>", "")):gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")
        if text ~= "" then blocks[#blocks + 1] = {s, text} end
      end
      pos = e + 1
    end
  end
  table.sort(blocks, function(x, y) return x[1] < y[1] end)
  for i, b in ipairs(blocks) do blocks[i] = b[2] end
  return blocks
end

--- Raw text: paragraphs separated by blank lines are documents, each split
-- into sentences.  Returns documents, or nil, message.
function M.from_text(path)
  if type(path) ~= "string" then
    error("from_text: argument #1 (path) expected string, got " .. type(path), 2)
  end
  local text, err = read_all(path)
  if not text then return nil, err end
  local docs, para = {}, {}
  local function flush()
    if #para > 0 then
      local sents = M.split_sentences(table.concat(para, " "))
      if #sents > 0 then docs[#docs + 1] = sents end
      para = {}
    end
  end
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^%s*$") then flush() else para[#para + 1] = line end
  end
  flush()
  return docs
end

return M
