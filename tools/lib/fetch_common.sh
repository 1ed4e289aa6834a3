# Shell helpers the corpus fetchers source (tools/fetch_data.sh,
# fetch_english.sh, fetch_multilingual.sh): `. tools/lib/fetch_common.sh`.
# done_msg reads the sourcing script's $TMP (where a conversion writes) and
# $SRC (where its sources are kept).

need_library() {   # need_library: builds the library when it is missing (tools/build_corpus.lua loads bert.core)
  [ -e build/bert/core.so ] && return 0
  echo "building the library first (make): the corpus builder needs it"
  if ! make >&2 || [ ! -e build/bert/core.so ]; then
    echo "$0: the corpus builder needs the built library (build/bert/core.so) and make failed;" \
      "make deps installs what the build needs" >&2
    exit 1
  fi
}

npm_fetch() {   # npm_fetch PACKAGE DIR: unpacks the package into DIR/package
  mkdir -p "$2"
  (cd "$2" && npm pack --silent "$1" >/dev/null && tar xzf ./*.tgz)
}

apt_install() {   # apt_install PACKAGE...: as root, or through sudo
  if [ "$(id -u)" = 0 ]; then apt-get install -y "$@"
  else sudo apt-get install -y "$@"; fi
}

apt_extract() {   # apt_extract DIR PACKAGE...: the packages' files unpacked under DIR (nothing installed)
  _dir=$1; shift
  mkdir -p "$_dir/debs"
  if ! (cd "$_dir/debs" && apt-get download "$@"); then   # stale package lists: update them once
    if [ "$(id -u)" = 0 ]; then apt-get update -qq; else sudo apt-get update -qq; fi
    (cd "$_dir/debs" && apt-get download "$@")
  fi
  for _deb in "$_dir"/debs/*.deb; do dpkg-deb -x "$_deb" "$_dir"; done
}

done_msg() {   # done_msg NAME: renames $TMP/NAME.jsonl into $SRC, atomically
  mv "$TMP/$1.jsonl" "$SRC/$1.jsonl.tmp" && mv "$SRC/$1.jsonl.tmp" "$SRC/$1.jsonl"
  echo "wrote $SRC/$1.jsonl ($(wc -l < "$SRC/$1.jsonl") documents)"
}

diatheke_books() {   # diatheke_books MODULE DIR BOOK...: each book's plain text, footnotes apart, as DIR/NNN.txt
  _module=$1; _dir=$2; shift 2
  mkdir -p "$_dir"
  _i=0
  for _b in "$@"; do
    _i=$((_i + 1))
    diatheke -b "$_module" -f plain -o f -m 1000000 -k "$_b" > "$_dir/$(printf %03d $_i).txt"
  done
}
