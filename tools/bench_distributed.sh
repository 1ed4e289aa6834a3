#!/bin/sh
case "${1:-}" in -h|--help) cat <<'USAGE'
usage: [MODEL=mini STEPS=12 B=16 BERT_DIST_BUCKET_MB=8] sh tools/bench_distributed.sh
Data-parallel speed on one machine (docs/distributed.md): 1 rank x 2 threads against 2 ranks x 1 thread
(mpirun) with the gradient all-reduce overlapped with backward and not, three repetitions back to back.
Prints per run: model, repetition, set-up, tokens/s, train seconds, all-reduce wait after backward (s),
share of buckets started during backward, buckets, load average.  Runs go to runs/bench_*.
USAGE
  exit 0 ;;
esac
cd "$(dirname "$0")/.." || exit 1
# 2 ranks x 1 thread (overlap on / off) vs 1 rank x 2 threads, same global batch; repeated, back to back
export OMP_WAIT_POLICY=passive
MODEL=${MODEL:-mini}; STEPS=${STEPS:-12}; B=${B:-16}
ROOT=""; [ "$(id -u)" -eq 0 ] && ROOT="--allow-run-as-root"
# the tokenizer and shards, made once and copied into each run directory
[ -f runs/bench1/data/train/meta.json ] || lua5.4 experiments/pretrain.lua --model tiny --corpus brown \
  --vocab-size 8000 --seq-len 128 --batch-size 16 --steps 1 --no-plot --output runs/bench1 >/dev/null 2>&1
common="--model $MODEL --corpus brown --vocab-size 8000 --seq-len 128 --batch-size $B --steps $STEPS --log-every 100 --no-plot --max-eval 16 --save-every 100000"
for rep in 1 2 3; do
  for cfg in one ov noov; do
    out=runs/bench_$cfg; rm -rf $out; mkdir -p $out; cp -r runs/bench1/args.json runs/bench1/data runs/bench1/tokenizer $out/
    case $cfg in
      one) OMP_NUM_THREADS=2 lua5.4 experiments/pretrain.lua $common --threads 2 --output $out >/dev/null 2>&1 ;;
      ov) OMP_NUM_THREADS=1 BERT_DIST_OVERLAP=1 mpirun -np 2 --oversubscribe $ROOT lua5.4 experiments/pretrain.lua $common --threads 1 --output $out >/dev/null 2>&1 ;;
      noov) OMP_NUM_THREADS=1 BERT_DIST_OVERLAP=0 mpirun -np 2 --oversubscribe $ROOT lua5.4 experiments/pretrain.lua $common --threads 1 --output $out >/dev/null 2>&1 ;;
    esac
    python3 -c "
import json; d=json.load(open('$out/summary.json')); x=d.get('distributed') or {}
print('$MODEL', '$rep', '$cfg', round(d['tokens_per_s'],1), round(d['train_seconds'],2), x.get('reduce_wait_s'), x.get('overlapped'), x.get('buckets'), open('/proc/loadavg').read().split()[0], flush=True)"
  done
done
