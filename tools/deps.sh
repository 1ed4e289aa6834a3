#!/bin/sh
# Installs the Debian packages bert needs, only those that are missing.
# Runs as root, or through sudo when available.
case "${1:-}" in -h|--help) cat <<'USAGE'
usage: sh tools/deps.sh   (make deps)
       sh tools/deps.sh fuzz   (make fuzz: clang, libFuzzer, sanitizers)
Installs the missing Debian packages bert needs (through sudo when not root).
USAGE
  exit 0 ;;
esac
set -e
PKGS="lua5.4 liblua5.4-dev luarocks lua-busted lua-cjson lua-argparse
      libopenblas-dev libdnnl-dev libutf8proc-dev pkg-config gcc make
      libvulkan-dev glslc mesa-vulkan-drivers gnuplot-nox
      nodejs
      openmpi-bin libopenmpi-dev
      curl xz-utils unzip zip"
# `tools/deps.sh fuzz` (make fuzz): clang with libFuzzer, its sanitizers and OpenMP
[ "${1:-}" = fuzz ] && PKGS="clang libclang-rt-14-dev libomp-14-dev liblua5.4-dev libopenblas-dev libutf8proc-dev lua-cjson make"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
# npm: Debian's package, unless a nodejs that bundles it (NodeSource) is there
[ "${1:-}" = fuzz ] || command -v npm >/dev/null 2>&1 || missing="$missing npm"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
if [ -n "$missing" ]; then
  echo "deps: installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
[ "${1:-}" = fuzz ] && exit 0
# ONNX Runtime for Node, into .deps/node: spec/onnx_spec.lua runs exported
# models in it.  The CPU runtime ships in the package; its install script
# only fetches GPU binaries from elsewhere, so it is skipped.
if [ ! -d .deps/node/node_modules/onnxruntime-node ] && command -v npm >/dev/null 2>&1; then
  echo "deps: installing onnxruntime-node (npm) into .deps/node"
  mkdir -p .deps/node
  (cd .deps/node && npm install --silent --no-save --ignore-scripts onnxruntime-node >/dev/null) ||
    echo "deps: could not install onnxruntime-node: spec/onnx_spec.lua will fail until it is there"
fi
# The rockspec depends on lua-cjson and argparse; Debian installs them
# outside LuaRocks' trees, so tell LuaRocks (5.4) they are provided, else an
# offline `luarocks make` would try to download them.
for rock in "lua-cjson 2.1.0-1" "argparse 0.7.1-1"; do
  set -- $rock
  if ! luarocks --lua-version 5.4 config "rocks_provided.$1" >/dev/null 2>&1; then
    $SUDO luarocks --lua-version 5.4 config --scope system "rocks_provided.$1" "$2" >/dev/null
  fi
done
# Debian's LuaRocks defaults to Lua 5.1; make a plain `luarocks make` build
# for 5.4 unless someone already chose a default.
if [ ! -e /etc/luarocks/default-lua-version.lua ] && [ "$(luarocks config lua_version 2>/dev/null)" != "5.4" ]; then
  echo "deps: setting LuaRocks' default Lua version to 5.4"
  $SUDO luarocks config --scope system lua_version 5.4 >/dev/null
fi
# Tokenizer parity (spec/tokenizer_hf_spec.lua, tools/bench_tokenizer.lua,
# tools/gen_*_goldens.js): SentencePiece's command line, Node and Hugging
# Face's tokenizers for Node, in .deps/tok (a prefix of its own: npm prunes
# what it did not install itself from a shared one).
tok_missing=""
command -v spm_encode >/dev/null || tok_missing="$tok_missing sentencepiece"
command -v node >/dev/null || tok_missing="$tok_missing nodejs"
command -v npm >/dev/null || tok_missing="$tok_missing npm"
[ -n "$tok_missing" ] && { echo "deps: installing$tok_missing"; $SUDO apt-get install -y -qq --no-install-recommends $tok_missing || echo "deps: could not install$tok_missing (tokenizer parity specs will say so)"; }
root=$(cd "$(dirname "$0")/.." && pwd)
if command -v npm >/dev/null && [ ! -d "$root/.deps/tok/node_modules/@anush008/tokenizers" ]; then
  echo "deps: installing @anush008/tokenizers (npm) into .deps/tok"
  mkdir -p "$root/.deps/tok"
  npm install --prefix "$root/.deps/tok" --no-save --no-audit --no-fund --silent @anush008/tokenizers >/dev/null ||
    echo "deps: npm install @anush008/tokenizers failed (tokenizer parity specs will say so)"
fi
