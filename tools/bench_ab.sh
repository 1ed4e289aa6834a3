#!/bin/sh
# Compares two builds of bert on one machine at the same moment: each pair
# runs the BERT-base step of both builds *concurrently*, one thread each,
# each pinned to its own core (swapped between pairs), so both see the same
# load from other tenants, whose drift otherwise swamps a 10% change.  Needs
# two cores and two worktrees, each built (make), e.g.
#   git worktree add ../base <commit> && make -C ../base
#   tools/bench_ab.sh ../base . --pairs 4 --mode train
# Prints one line per run: label, core, seconds per step; then each side's mean.
set -eu
usage="usage: tools/bench_ab.sh DIR_A DIR_B [--pairs N] [--mode train|infer] [--model base] [--steps 3]"
case "${1:-}" in -h|--help) echo "$usage"; exit 0 ;; esac
[ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
for d in "$1" "$2"; do [ -d "$d" ] || { echo "bench_ab: no directory '$d'" >&2; exit 2; }; done
A=$(cd "$1" && pwd); B=$(cd "$2" && pwd); shift 2
pairs=2; mode=train; model=base; steps=3
while [ $# -gt 0 ]; do
  case "$1" in
    --pairs) pairs=$2 ;; --mode) mode=$2 ;; --model) model=$2 ;; --steps) steps=$2 ;;
    *) echo "bench_ab: unknown option '$1'" >&2; echo "$usage" >&2; exit 2 ;;
  esac
  shift 2
done
for d in "$A" "$B"; do
  [ -f "$d/tools/bench.lua" ] || { echo "bench_ab: $d has no tools/bench.lua (a bert worktree?)" >&2; exit 2; }
done
[ "$(nproc)" -ge 2 ] || { echo "bench_ab: needs two cores, this machine has $(nproc)" >&2; exit 2; }
export OMP_WAIT_POLICY=passive
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() {   # dir core label
  (cd "$1" && taskset -c "$2" lua5.4 tools/bench.lua --model "$model" --mode "$mode" --steps "$steps" \
     --threads 1 --share 0 2>/dev/null | tail -1 | sed -n 's/.*"sec_per_step":\([0-9.eE+-]*\).*/\1/p') > "$out/$3.$2.$4"
}
for i in $(seq "$pairs"); do
  ca=$(( i % 2 )); cb=$(( 1 - ca ))
  run "$A" "$ca" A "$i" & run "$B" "$cb" B "$i" & wait
  printf "A core %d %s\nB core %d %s\n" "$ca" "$(cat "$out/A.$ca.$i")" "$cb" "$(cat "$out/B.$cb.$i")"
done
for side in A B; do
  cat "$out"/$side.* | awk -v s="$side" '{ t += $1; n++ } END { if (n) printf "%s mean %.3f s over %d runs\n", s, t / n, n }'
done
