#!/bin/sh
# Installs the Debian packages bert needs, only those that are missing.
# Runs as root, or through sudo when available.
case "${1:-}" in -h|--help) cat <<'USAGE'
usage: sh tools/deps.sh   (make deps)
Installs the missing Debian packages bert needs (through sudo when not root).
USAGE
  exit 0 ;;
esac
set -e
PKGS="lua5.4 liblua5.4-dev luarocks lua-busted lua-cjson lua-argparse
      libopenblas-dev libdnnl-dev libutf8proc-dev pkg-config gcc make
      libvulkan-dev glslc mesa-vulkan-drivers gnuplot-nox"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
if [ -n "$missing" ]; then
  echo "deps: installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
# Debian's LuaRocks defaults to Lua 5.1; make a plain `luarocks make` build
# for 5.4 unless someone already chose a default.
if [ ! -e /etc/luarocks/default-lua-version.lua ] && [ "$(luarocks config lua_version 2>/dev/null)" != "5.4" ]; then
  echo "deps: setting LuaRocks' default Lua version to 5.4"
  $SUDO luarocks config --scope system lua_version 5.4 >/dev/null
fi
