#!/bin/sh
# Installs what bert needs, only what is missing: `make deps` everything,
# `make test` and `make demo` only what they use.  The rest is optional:
# a spec that needs a missing piece skips, pending, with the command that
# installs it (docs/testing.md).  Runs as root, or through sudo when not.
usage() {
  cat <<'USAGE'
usage: sh tools/deps.sh [SET]   (make deps: SET all)
  all               everything: the sets below, Vulkan, MPI, Node with onnxruntime-node and
                    Hugging Face's tokenizers (npm, about 300 MB), SentencePiece, LuaRocks
  test              what `make test` needs: the compiler, Lua, busted, OpenBLAS, utf8proc
  demo              what `make demo` needs: test's packages, the data fetcher's tools, gnuplot
  fuzz              what `make fuzz` needs: clang, libFuzzer, sanitizers
  onnxruntime-node  ONNX Runtime for Node (npm) in .deps/node: spec/onnx_spec.lua
  tokenizers        Hugging Face's tokenizers for Node (npm) in .deps/tok: tokenizer parity specs
Installs only what is missing, so it is quick when nothing is.
USAGE
}
case "${1:-all}" in -h|--help) usage; exit 0 ;; esac
set -e
root=$(cd "$(dirname "$0")/.." && pwd)

BUILD_PKGS="lua5.4 liblua5.4-dev lua-busted lua-cjson lua-argparse libopenblas-dev libutf8proc-dev
            pkg-config gcc make"
FETCH_PKGS="curl xz-utils unzip"
ALL_PKGS="$BUILD_PKGS $FETCH_PKGS gnuplot-nox zip luarocks libdnnl-dev
          libvulkan-dev glslc mesa-vulkan-drivers openmpi-bin libopenmpi-dev nodejs"
FUZZ_PKGS="clang libclang-rt-14-dev libomp-14-dev liblua5.4-dev libopenblas-dev libutf8proc-dev lua-cjson make"

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"

# The packages among $* that dpkg does not list as installed (one dpkg-query
# for all of them: this runs before every `make test`).  dpkg-query exits 1
# when it has never heard of one of them (a fresh machine): under set -e that
# must not end the script, so its status is ignored and its output read.
missing_packages() {
  installed=" $(dpkg-query -W -f='${Package}:${db:Status-Status} ' "$@" 2>/dev/null || true) "
  for p in "$@"; do
    case "$installed" in *" $p:installed "*) ;; *) printf ' %s' "$p" ;; esac
  done
}

apt_install() {
  missing=$(missing_packages "$@")
  [ -n "$missing" ] || return 0
  echo "deps: installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends $missing
}

# npm: Debian's package, unless a nodejs that bundles it (NodeSource) is there
need_npm() {
  apt_install nodejs
  command -v npm >/dev/null 2>&1 || apt_install npm
}

# ONNX Runtime for Node, into .deps/node: spec/onnx_spec.lua runs exported
# models in it.  The CPU runtime ships in the package; its install script
# only fetches GPU binaries from elsewhere, so it is skipped.
onnxruntime_node() {
  [ -d "$root/.deps/node/node_modules/onnxruntime-node" ] && return 0
  need_npm
  echo "deps: installing onnxruntime-node (npm, about 300 MB) into .deps/node"
  mkdir -p "$root/.deps/node"
  npm install --prefix "$root/.deps/node" --no-save --no-audit --no-fund --silent --ignore-scripts \
    onnxruntime-node >/dev/null ||
    echo "deps: could not install onnxruntime-node: spec/onnx_spec.lua skips until it is there"
}

# Tokenizer parity (spec/tokenizer_hf_spec.lua, tools/bench_tokenizer.lua,
# tools/gen_*_goldens.js): Hugging Face's tokenizers for Node in .deps/tok
# (a prefix of its own: npm prunes what it did not install itself from a
# shared one).
tokenizers() {
  [ -d "$root/.deps/tok/node_modules/@anush008/tokenizers" ] && return 0
  need_npm
  echo "deps: installing @anush008/tokenizers (npm) into .deps/tok"
  mkdir -p "$root/.deps/tok"
  npm install --prefix "$root/.deps/tok" --no-save --no-audit --no-fund --silent @anush008/tokenizers >/dev/null ||
    echo "deps: could not install @anush008/tokenizers: the tokenizer parity specs skip until it is there"
}

# The rockspec depends on lua-cjson and argparse; Debian installs them
# outside LuaRocks' trees, so tell LuaRocks (5.4) they are provided, else an
# offline `luarocks make` would try to download them.  Debian's LuaRocks
# defaults to Lua 5.1: make a plain `luarocks make` build for 5.4 unless
# someone already chose a default.
luarocks_setup() {
  for rock in "lua-cjson 2.1.0-1" "argparse 0.7.1-1"; do
    set -- $rock
    if ! luarocks --lua-version 5.4 config "rocks_provided.$1" >/dev/null 2>&1; then
      $SUDO luarocks --lua-version 5.4 config --scope system "rocks_provided.$1" "$2" >/dev/null
    fi
  done
  if [ ! -e /etc/luarocks/default-lua-version.lua ] && [ "$(luarocks config lua_version 2>/dev/null)" != "5.4" ]; then
    echo "deps: setting LuaRocks' default Lua version to 5.4"
    $SUDO luarocks config --scope system lua_version 5.4 >/dev/null
  fi
}

case "${1:-all}" in
  all)
    apt_install $ALL_PKGS
    need_npm
    # SentencePiece's command line (the unigram specs' spm_train check) is
    # not packaged everywhere: its absence only skips those cases
    apt_install sentencepiece || echo "deps: could not install sentencepiece (the spm_train cases skip)"
    luarocks_setup
    onnxruntime_node
    tokenizers ;;
  test) apt_install $BUILD_PKGS ;;
  demo) apt_install $BUILD_PKGS $FETCH_PKGS gnuplot-nox ;;
  fuzz) apt_install $FUZZ_PKGS ;;
  onnxruntime-node) onnxruntime_node ;;
  tokenizers) tokenizers ;;
  *) echo "deps: unknown set '$1'" >&2; usage >&2; exit 2 ;;
esac
