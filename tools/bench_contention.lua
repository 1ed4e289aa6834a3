-- Threads against other work: times a step at 1 and at 2 threads, paired and
-- back to back (1, 2, 1, 2, ...), while a CPU-bound process (a Lua busy loop)
-- shares the machine.  The target: the 2-thread step no slower than the
-- 1-thread step.  OMP_WAIT_POLICY is removed from the children's environment
-- (the library must not depend on it being set).
--   lua5.4 tools/bench_contention.lua [--model mini] [--batch 8] [--seq 128]
--     [--mode train|infer] [--pairs 3] [--steps 2] [--hogs 1] [--build DIR]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local cli = require("bert.cli")
local p = cli.parser("bench_contention.lua", "Paired 1-thread / 2-thread step times (tools/bench.lua) while N " ..
  "CPU-bound processes run (default 1); prints each pair and the median ratio t(2)/t(1).")
p:option("--model", "The model (bench.lua's --model)", "mini")
p:option("--batch", "Sequences per step", "8"):convert(cli.integer("--batch", 1, 65536))
p:option("--seq", "Tokens per sequence", "128"):convert(cli.integer("--seq", 1, 65536))
p:option("--mode", "train (forward, backward, AdamW) or infer (a forward)", "train"):choices({"train", "infer"})
p:option("--pairs", "1-thread / 2-thread pairs", "3"):convert(cli.integer("--pairs", 1))
p:option("--steps", "Timed steps per run (bench.lua's --steps)", "2"):convert(cli.integer("--steps", 1, 100000))
p:option("--hogs", "CPU-bound processes beside the runs", "1"):convert(cli.integer("--hogs", 0))
p:option("--build", "The build directory the runs load (BERT_BUILD)", os.getenv("BERT_BUILD") or "build")
local o = p:parse()
local cjson = require("cjson")

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
-- the busy loops end on their own after an hour at the latest
local hog_pids = {}
for _ = 1, o.hogs do
  local p = assert(io.popen("timeout 3600 lua5.4 -e 'while true do end' >/dev/null 2>&1 & echo $!"))
  hog_pids[#hog_pids + 1] = p:read("l")
  p:close()
end
local function stop_hogs() for _, pid in ipairs(hog_pids) do os.execute("kill " .. pid .. " 2>/dev/null") end end

local function step_time(threads)
  local cmd = string.format("env -u OMP_WAIT_POLICY BERT_BUILD=%s BERT_PEAK_GFLOPS=1 lua5.4 tools/bench.lua "
    .. "--model %s --batch %d --seq %d --mode %s --steps %d --threads %d", q(o.build), q(o.model), o.batch,
    o.seq, q(o.mode), o.steps, threads)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  local ok, r = pcall(cjson.decode, out:match("(%b{})") or "")
  if not ok or not r.sec_per_step then stop_hogs(); error("bench_contention: no result from: " .. cmd .. "\n" .. out) end
  return r.sec_per_step
end

local ratios = {}
for k = 1, o.pairs do
  local t1, t2 = step_time(1), step_time(2)
  ratios[k] = t2 / t1
  print(string.format("pair %d: 1 thread %.3f s, 2 threads %.3f s, ratio %.2f", k, t1, t2, t2 / t1))
end
stop_hogs()
table.sort(ratios)
print(cjson.encode({model = o.model, mode = o.mode, batch = o.batch, seq = o.seq, hogs = o.hogs, build = o.build,
                    pairs = o.pairs, median_ratio_2_over_1 = ratios[(#ratios + 1) // 2]}))
