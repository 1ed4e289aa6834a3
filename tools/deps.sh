#!/bin/sh
# Installs the Debian packages bert needs, only those that are missing.
# Runs as root, or through sudo when available.
set -e
PKGS="lua5.4 liblua5.4-dev luarocks lua-busted lua-cjson lua-argparse
      libopenblas-dev libdnnl-dev libutf8proc-dev pkg-config gcc make
      libvulkan-dev glslc mesa-vulkan-drivers gnuplot-nox"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing
