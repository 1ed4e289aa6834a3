#!/bin/sh
# Groups the inputs a campaign saved (build-fuzz/artifacts/<target>/) by
# the message each reproduces, so findings can be counted and reported.
#   fuzz/triage.sh target [FUZZ_BIN_DIR]
# Prints "count  message" per distinct message, then one example input each.
set -u
t=$1; bin=${2:-build-fuzz}/fuzz_$t
cd "$(dirname "$0")/.."
export FUZZ_STRICT=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive ASAN_OPTIONS=detect_leaks=0
tmp=$(mktemp)
for f in build-fuzz/artifacts/$t/*; do
  [ -f "$f" ] || continue
  msg=$(timeout 60 "$bin" "$f" 2>&1 | grep -m1 -E 'FUZZ FINDING|ERROR: AddressSanitizer|runtime error|ERROR: libFuzzer' |
        sed -E 's|/tmp/bert-fuzz-[A-Za-z0-9]+/||g; s/==[0-9]+==//; s/0x[0-9a-f]+/ADDR/g')
  [ -n "$msg" ] || msg="(does not reproduce)"
  printf '%s\t%s\n' "$(printf '%s' "$msg" | sed -E 's/[0-9]+/N/g; s/encode\(".*"\)/encode(...)/; s/"[^"]*"/"..."/g')" "$f" >> "$tmp"
done
cut -f1 "$tmp" | sort | uniq -c | sort -rn
echo "examples:"
sort -u -t '	' -k1,1 "$tmp" | cut -f2
rm -f "$tmp"
