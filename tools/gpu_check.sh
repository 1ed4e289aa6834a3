#!/bin/sh
# One unattended Vulkan check on a GPU machine (no network): build, the
# Vulkan spec, GEMM throughput incl. 4096^3 fp32, BERT-base inference on
# the device.  Everything goes to stdout; about 3-6 minutes.
#   sh tools/gpu_check.sh
cd "$(dirname "$0")/.." || exit 1
T0=$(date +%s)
say() { echo "=== [$(( $(date +%s) - T0 ))s] $*"; }

say "environment"
uname -a
for t in gcc make lua5.4 busted glslc vulkaninfo nvidia-smi pkg-config; do
  if command -v "$t" >/dev/null 2>&1; then echo "found   $t: $(command -v "$t")"; else echo "MISSING $t"; fi
done
ls /usr/include/vulkan/vulkan.h 2>/dev/null || echo "MISSING Vulkan headers (/usr/include/vulkan/vulkan.h): the build will be without Vulkan"
ls /usr/lib/x86_64-linux-gnu/libvulkan.so.1* /usr/lib64/libvulkan.so.1* 2>/dev/null || echo "MISSING Vulkan loader libvulkan.so.1"
echo "ICDs:"; ls /usr/share/vulkan/icd.d/ /etc/vulkan/icd.d/ 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null
command -v vulkaninfo >/dev/null 2>&1 && timeout 20 vulkaninfo --summary 2>&1 | head -40

say "build"
timeout 240 make -j"$(nproc)" 2>&1 | tail -15
[ -f build/bert/core.so ] || { echo "BUILD FAILED"; exit 1; }

say "backend_info().vulkan"
timeout 60 lua5.4 -e '
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./build/?.so;" .. package.cpath
local bert = require("bert")
local v = bert.backend_info().vulkan
local keys = {}
for k in pairs(v) do keys[#keys + 1] = k end
table.sort(keys)
for _, k in ipairs(keys) do print(k, v[k]) end'

say "vulkan spec"
if command -v busted >/dev/null 2>&1; then
  timeout 180 lua5.4 /usr/bin/busted -o plainTerminal spec/vulkan_spec.lua 2>&1 | tail -40
else
  echo "busted missing: skipping the spec"
fi

say "GEMM (tools/bench_gemm.lua --device vulkan --big); H200 fp32 peak ~67 TFLOP/s"
timeout 150 lua5.4 tools/bench_gemm.lua --device vulkan --big --repeat 5 2>&1 | tail -12
for tile in 64; do
  say "GEMM with BERT_VK_GEMM_TILE=$tile (small tiles)"
  BERT_VK_GEMM_TILE=$tile timeout 60 lua5.4 tools/bench_gemm.lua --device vulkan --big --repeat 3 2>&1 | tail -2
done

say "BERT-base inference forward on vulkan (batch 8, seq 128) and train-step status"
timeout 90 lua5.4 tools/bench_vulkan.lua --model base --batch 8 --seq 128 --steps 3 2>&1 | tail -3
timeout 90 lua5.4 tools/bench_vulkan.lua --model base --batch 32 --seq 128 --steps 3 2>&1 | tail -3
echo "(train-step on vulkan: not available yet: autograd through device tensors is not implemented)"
say "done"
