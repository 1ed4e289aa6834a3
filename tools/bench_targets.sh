#!/bin/sh
# Issue 33's targets in one sitting: every row of docs/speed.md's target table,
# ours and the PyTorch peer alternated (ROUNDS rounds, each starting with the
# other side), 2 threads, nothing else should run.  Writes one labelled JSON
# line per run to OUT/runs.jsonl, the ONNX Runtime comparison's output to
# OUT/onnx.txt, and a markdown table of each row's runs and ratio to
# OUT/table.md (printed too); about 10 minutes on a 2-core AVX-512 machine.
#   tools/bench_targets.sh [--out DIR] [--rounds 2] [--threads 2] [--no-onnx]
# The peer is ../shared/peer/torch_bert.py (or $BERT_PEER) under /usr/bin/python3
# with torch; without it the peer rows are left out with a line saying so.
set -eu
usage="usage: tools/bench_targets.sh [--out DIR] [--rounds N] [--threads N] [--no-onnx]"
out=runs/bench-targets; rounds=2; threads=2; onnx=1
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) echo "$usage"; exit 0 ;;
    --out) out=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --no-onnx) onnx=0; shift ;;
    *) echo "bench_targets: unknown option '$1'" >&2; echo "$usage" >&2; exit 2 ;;
  esac
done
[ -f tools/bench.lua ] || { echo "bench_targets: run it from the repository root" >&2; exit 2; }
peer=${BERT_PEER:-../shared/peer/torch_bert.py}
python=/usr/bin/python3
if [ -f "$peer" ] && "$python" -c "import torch" 2>/dev/null; then have_peer=1; else
  have_peer=0; echo "bench_targets: no PyTorch peer ($peer with torch under $python): its rows are left out"
fi
mkdir -p "$out"
runs="$out/runs.jsonl"; : > "$runs"

# ROW SIDE COMMAND...: runs COMMAND, keeps its last JSON line labelled with the row and side
run() {
  row=$1; side=$2; shift 2
  lines=$("$@" 2>/dev/null | grep '^{') || true
  [ -n "$lines" ] || { echo "bench_targets: $row ($side) printed no result: $*" >&2; return 0; }
  echo "$lines" | while IFS= read -r line; do
    printf '{"row":"%s","side":"%s","result":%s}\n' "$row" "$side" "$line" >> "$runs"
    printf '%-30s %-5s %s\n' "$row" "$side" "$(echo "$line" | cut -c1-110)"
  done
}
ours() { row=$1; shift; run "$row" ours lua5.4 tools/bench.lua --threads "$threads" --share 0 "$@"; }
theirs() {
  row=$1; shift
  [ "$have_peer" = 1 ] && run "$row" peer "$python" "$peer" --threads "$threads" "$@"
  return 0
}
# ROW OUR-ARGS -- PEER-ARGS: both sides, the order alternating with the round
pair() {
  row=$1; shift
  a=""; while [ "$1" != "--" ]; do a="$a $1"; shift; done; shift
  # shellcheck disable=SC2086
  if [ $((r % 2)) = 1 ]; then ours "$row" $a; theirs "$row" "$@"; else theirs "$row" "$@"; ours "$row" $a; fi
}

date -u +"bench_targets: start %Y-%m-%d %H:%M UTC"
lua5.4 tools/bench_peak.lua --threads "$threads" | tee "$out/peak.json"
# every fraction of peak below against this one measurement
BERT_PEAK_GFLOPS=$(lua5.4 -e 'print(require("cjson").decode(io.read("a")).peak_gflops)' < "$out/peak.json")
export BERT_PEAK_GFLOPS
r=1
while [ "$r" -le "$rounds" ]; do
  echo "round $r"
  pair "base train B8xT128" --model base --mode train --batch 8 --seq 128 -- --size base --mode train --gather --batch 8 --seq 128
  pair "base infer B8xT128" --model base --mode infer --batch 8 --seq 128 -- --size base --mode infer --batch 8 --seq 128
  pair "mini train B32xT128" --model mini --mode train --batch 32 --seq 128 -- --size mini --mode train --gather --batch 32 --seq 128
  pair "small train B32xT128" --model small --mode train --batch 32 --seq 128 -- --size small --mode train --gather --batch 32 --seq 128
  # DeBERTa against our own BERT-base (the row above is its partner)
  ours "deberta-base train B8xT128" --model deberta-base --mode train --batch 8 --seq 128
  ours "deberta-base infer B8xT128" --model deberta-base --mode infer --batch 8 --seq 128
  ours "deberta-base infer V30522" --model deberta-base --mode infer --batch 8 --seq 128 --vocab-size 30522
  # int8 against float32, B32 x T128
  for m in mini base; do
    ours "$m infer B32xT128" --model $m --mode infer --batch 32 --seq 128
    ours "$m infer int8 B32xT128" --model $m --mode infer --batch 32 --seq 128 --int8
  done
  r=$((r + 1))
done
# the shares outside the GEMMs (the profile on: these runs are not timing rows)
for m in mini base; do
  for mode in train infer; do
    run "$m $mode share" ours lua5.4 tools/bench.lua --threads "$threads" --model $m --mode $mode --batch 32 --seq 128 --steps 2
  done
done
for t in 128 512; do
  run "attention_rel T$t" ours lua5.4 tools/bench_attention_rel.lua --seq $t --repeat 5 --threads "$threads"
done
if [ "$onnx" = 1 ]; then
  lua5.4 tools/bench_onnx.lua --size base --threads "$threads" --rounds "$rounds" --int8 | tee "$out/onnx.txt"
fi
lua5.4 - "$runs" > "$out/table.md" <<'EOF'
local cjson = require("cjson")
local rows, order = {}, {}
for line in io.lines(arg[1]) do
  local e = cjson.decode(line)
  local row = rows[e.row]
  if not row then row = {ours = {}, peer = {}, result = {}}; rows[e.row] = row; order[#order + 1] = e.row end
  if e.result.sec_per_step then table.insert(row[e.side], e.result.sec_per_step) end
  table.insert(row.result, e.result)
end
local function list(ts)
  local s = {}
  for k, t in ipairs(ts) do s[k] = string.format("%.3f", t) end
  return table.concat(s, ", ")
end
local function mean(ts) local s = 0; for _, t in ipairs(ts) do s = s + t end; return s / #ts end
print("| row | ours s/step | peer s/step | peer / ours | fraction of fp32 peak | outside GEMMs |")
print("|---|---|---|---:|---:|---:|")
for _, name in ipairs(order) do
  local row = rows[name]
  local last = row.result[#row.result]
  if last.deberta_attention_s then   -- bench_attention_rel: one result per mode
    local parts = {}
    for _, res in ipairs(row.result) do
      parts[#parts + 1] = string.format("%s %.2fx (CPU time %.2fx)", res.mode, res.ratio, res.cpu_ratio)
    end
    print(string.format("| %s: relative / BERT attention | %s | | | | |", name, table.concat(parts, "; ")))
  else
    local ratio = (#row.ours > 0 and #row.peer > 0) and string.format("%.2fx", mean(row.peer) / mean(row.ours)) or ""
    -- int8 work against the fp32 peak would read above 100%: left out
    local frac = (last.peak_fraction and not last.int8) and string.format("%.0f%%", 100 * last.peak_fraction) or ""
    local share = last.outside_gemm_share and string.format("%.1f%%", 100 * last.outside_gemm_share) or ""
    print(string.format("| %s | %s | %s | %s | %s | %s |", name, list(row.ours), list(row.peer), ratio, frac, share))
  end
end
EOF
cat "$out/table.md"
date -u +"bench_targets: end %Y-%m-%d %H:%M UTC"
