#!/bin/sh
# Runs the libFuzzer targets built by `make fuzz` (see docs/fuzzing.md).
#   fuzz/run.sh smoke SECONDS target...    each target for SECONDS from its seeds
#   fuzz/run.sh campaign RUNS target...    each target for RUNS executions, one at a time
#                                          (FUZZ_CONTRACTS=1: result contracts too)
# FUZZ_BIN_DIR: where the binaries are (default build-fuzz).
# Seeds: fuzz/corpus/<target> (committed, read-only); the growing corpus,
# logs and any crashing inputs go to build-fuzz/.  Exits non-zero when a
# target crashes, leaks past its limits or breaks an invariant.
set -u
mode=$1; amount=$2; shift 2
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
# the Lua targets run the library's Lua code, which leaks nothing but is
# long-lived: leak checking at exit only reports the interpreter's state
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
status=0
for t in "$@"; do
  case $t in
    safetensors|shard) maxlen=4096 ;;
    tokenizer_files) maxlen=16384 ;;
    encode) maxlen=1024 ;;
    config) maxlen=2048 ;;
    *) maxlen=4096 ;;
  esac
  work=build-fuzz/corpus/$t; art=build-fuzz/artifacts/$t; log=build-fuzz/logs/$t.$mode.log
  mkdir -p "$work" "$art" build-fuzz/logs
  dict=""
  [ -f "fuzz/dict/$t.dict" ] && dict="-dict=fuzz/dict/$t.dict"
  if [ "$mode" = smoke ]; then
    limit="-max_total_time=$amount"
  else
    # fork mode keeps going past a finding and saves each input;
    # FUZZ_CONTRACTS=1 also checks the result contracts (FUZZ_STRICT)
    limit="-runs=$amount -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1"
    [ "${FUZZ_CONTRACTS:-0}" = 1 ] && export FUZZ_STRICT=1
  fi
  start=$(date +%s)
  # shellcheck disable=SC2086
  "${FUZZ_BIN_DIR:-build-fuzz}/fuzz_$t" $limit -max_len=$maxlen -timeout=20 -rss_limit_mb=3072 -print_final_stats=1 \
    -artifact_prefix="$art/" $dict "$work" "fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  [ -n "$runs" ] || runs=$(grep -o '^#[0-9]*' "$log" | tr -d '#' | tail -1)   # fork mode
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  found=$(ls "$art" 2>/dev/null | wc -l)
  [ "$found" -eq 0 ] || rc=1
  if [ $rc -eq 0 ]; then
    printf 'fuzz %-16s ok    %10s executions in %4d s (%s)\n' "$t" "${runs:-?}" "$secs" "${cov:-cov: ?}"
  else
    status=1
    printf 'fuzz %-16s FAIL  %s executions, %d saved inputs in %s, see %s\n' "$t" "${runs:-?}" "$found" "$art" "$log"
    grep -E 'ERROR: |FUZZ FINDING|runtime error' "$log" | head -5
  fi
done
exit $status
