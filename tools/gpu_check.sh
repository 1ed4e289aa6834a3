#!/bin/sh
# Device checks for a GPU machine, run from the repository root with the
# module prebuilt into $BERT_BUILD (default .gpu/build/bert/core.so) and the
# runtime libraries (Vulkan loader + driver, lua5.4, lua-cjson) provided by
# the caller.  Each step has its own timeout; the whole script stays under
# 6 minutes.  Output: one line or JSON per result.
#   sh tools/gpu_check.sh
case "${1:-}" in -h|--help) cat <<'USAGE'
usage: sh tools/gpu_check.sh
Device checks for a GPU machine (module prebuilt into $BERT_BUILD, default .gpu/build).
USAGE
  exit 0 ;;
esac
export BERT_BUILD="${BERT_BUILD:-.gpu/build}"
step() { name=$1; echo "=== $name"; shift; timeout -k 5 "$@"; rc=$?; [ $rc -eq 0 ] || echo "{\"step_failed\": \"$name\", \"rc\": $rc}"; }
step "vulkan device" 20 lua5.4 -e 'package.path="./lua/?.lua;./lua/?/init.lua;"..package.path
  package.cpath="./"..os.getenv("BERT_BUILD").."/?.so;"..package.cpath
  local v=require("bert").backend_info().vulkan
  print(v.available and string.format("%s (%s) shared %d subgroup %d", v.device, v.type, v.max_shared_memory, v.subgroup_size) or ("unavailable: "..tostring(v.reason)))'
# fp32 GEMM GFLOP/s for the BERT-base shapes and 4096^3 (67 TFLOP/s fp32 peak on an H200)
step "gemm throughput" 90 lua5.4 tools/bench_gemm.lua --device vulkan --big --repeat 5
step "gemm 4096 with 64x64 tiles (comparison)" 40 env BERT_VK_GEMM_TILE=64 lua5.4 -e '
  package.path="./lua/?.lua;./lua/?/init.lua;"..package.path
  package.cpath="./"..os.getenv("BERT_BUILD").."/?.so;"..package.cpath
  local bert=require("bert"); local n=4096
  local a=bert.randn({n,n},{seed=1}):to("vulkan"); local b=bert.randn({n,n},{seed=2}):to("vulkan")
  a:matmul(b):free(); bert.vulkan.sync(); local t0=bert.wall_time()
  for _=1,10 do a:matmul(b):free() end; bert.vulkan.sync()
  print(string.format("{\"gemm\": 4096, \"tile\": 64, \"gflops\": %.1f}", 10*2*n^3/(bert.wall_time()-t0)/1e9))'
# correctness on the device: odd sizes, every transpose, both tile sizes, epilogue, a BERT-tiny train step
step "correctness vs cpu" 60 lua5.4 tools/gemm_check_vulkan.lua
step "bert-base inference" 70 lua5.4 tools/bench_vulkan.lua --model base --batch 8 --seq 128 --steps 3
step "bert-base train step" 100 lua5.4 tools/bench.lua --device vulkan --mode train --model base --batch 8 --seq 128 --steps 3
echo "=== done"
