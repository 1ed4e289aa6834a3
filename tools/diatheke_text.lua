-- A Bible module's text as documents for tools/build_corpus.lua: one JSON
-- line per chapter, {"id": "BOOK C", "sentences": [...]}, read from the book
-- files `diatheke_books` (tools/lib/fetch_common.sh) wrote as DIR/001.txt,
-- DIR/002.txt, ...  tools/fetch_english.sh (World English Bible) and
-- tools/fetch_multilingual.sh (Reina-Valera 1909) run it.
--
-- diatheke's plain output is "Book C:V: text", a verse's poetry continuing on
-- the next lines; a blank line ends a verse, and text before a reference or
-- after a blank line is a (repeated) psalm title or an appended glossary:
-- dropped.  Footnotes ("-o f": "[1:1 The Hebrew ...]") are cut out; without
-- -o f diatheke glues the words around them ("Godcreated").  --drop-caps:
-- the module prints a chapter's first word in capitals ("EN el principio"),
-- made lowercase after its first letter.
--
--   lua5.4 tools/diatheke_text.lua MODULE DIR OUT.jsonl --books N --min-verses M [--drop-caps]
local USAGE = "usage: lua5.4 tools/diatheke_text.lua MODULE DIR OUT.jsonl --books N --min-verses M [--drop-caps]\n" ..
  "Writes the chapters of the books diatheke printed into DIR/NNN.txt as JSON lines {id, sentences} for\n" ..
  "tools/build_corpus.lua; fails unless there are N books and more than M verses.\n"
if arg[1] == "--help" or arg[1] == "-h" then io.stdout:write(USAGE) os.exit(0) end
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cjson = require("cjson")
local corpus = require("bert.data.corpus")

local module, dir, outp = arg[1], arg[2], arg[3]
local want_books, min_verses, drop_caps
local i = 4
while arg[i] do
  local a = arg[i]
  if a == "--books" then want_books = math.tointeger(tonumber(arg[i + 1])); i = i + 2
  elseif a == "--min-verses" then min_verses = math.tointeger(tonumber(arg[i + 1])); i = i + 2
  elseif a == "--drop-caps" then drop_caps = true; i = i + 1
  else io.stderr:write("diatheke_text.lua: unknown argument '" .. a .. "'\n" .. USAGE) os.exit(2) end
end
if not (module and dir and outp and want_books and min_verses) then
  io.stderr:write(USAGE)
  os.exit(2)
end

local out = assert(io.open(outp, "wb"))
local nbooks, ndocs, nverses = 0, 0, 0
for n = 1, 999 do
  local f = io.open(string.format("%s/%03d.txt", dir, n), "rb")
  if not f then break end
  local text = f:read("a"); f:close()
  text = text:gsub("<[^>]*>", "")        -- markup diatheke leaks on some titles
  local counts, book = {}, nil
  for line in text:gmatch("[^\n]+") do   -- the book's name as diatheke prints it: its most frequent
    local name = line:match("^%s*([^%[%]]-) %d+:%d+:")
    if name then counts[name] = (counts[name] or 0) + 1 end
    if name and (not book or counts[name] > counts[book]) then book = name end
  end
  assert(book, "diatheke printed no verses for book " .. n)
  nbooks = nbooks + 1
  local chapters, order, cur, verse = {}, {}, nil, nil
  local function flush()
    if verse and cur then
      local v = table.concat(verse, " "):gsub("%[%d+:%d+[^%]]*%]", " "):gsub("%[%s*%]", " ")
      if v:find("%S") then local c = chapters[cur]; c[#c + 1] = v; nverses = nverses + 1 end
    end
    verse = nil
  end
  local esc = book:gsub("%p", "%%%0")
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    local c, v, rest = line:match(esc .. " (%d+):(%d+): ?(.*)$")
    if c then
      flush()
      cur = tonumber(c)
      if not chapters[cur] then chapters[cur] = {}; order[#order + 1] = cur end
      if drop_caps and v == "1" then
        rest = rest:gsub("^(%u)(%u+)(%f[%A])", function(a, b) return a .. b:lower() end)
      end
      verse = {rest}
    elseif line:match("^%s*$") or line == "(" .. module .. ")" then
      flush()
    elseif verse then
      verse[#verse + 1] = line
    end
  end
  flush()
  for _, c in ipairs(order) do
    if #chapters[c] > 0 then
      local sents = corpus.split_sentences(table.concat(chapters[c], " "))
      if #sents > 0 then
        ndocs = ndocs + 1
        out:write(cjson.encode({id = book .. " " .. c, sentences = sents}), "\n")
      end
    end
  end
end
assert(out:close())
assert(nbooks == want_books, string.format("diatheke: expected %d books, got %d", want_books, nbooks))
assert(nverses > min_verses, string.format("diatheke: only %d verses", nverses))
io.stderr:write(string.format("%s: %d books, %d chapters, %d verses\n", module, nbooks, ndocs, nverses))
