-- Threads against other work: times a step at 1 and at 2 threads, paired and
-- back to back (1, 2, 1, 2, ...), while a CPU-bound process (a Lua busy loop)
-- shares the machine.  The target: the 2-thread step no slower than the
-- 1-thread step.  OMP_WAIT_POLICY is removed from the children's environment
-- (the library must not depend on it being set).
--   lua5.4 tools/bench_contention.lua [--model mini] [--batch 8] [--seq 128]
--     [--mode train|infer] [--pairs 3] [--steps 2] [--hogs 1] [--build DIR]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
require("bert.cli").help(arg, [[
usage: lua5.4 tools/bench_contention.lua [--model NAME] [--batch N] [--seq N] [--mode train|infer]
                                         [--pairs N] [--steps N] [--hogs N] [--build DIR]
Paired 1-thread / 2-thread step times (tools/bench.lua) while N CPU-bound
processes run (default 1); prints each pair and the median ratio t(2)/t(1).]])
local cjson = require("cjson")

local o = {model = "mini", batch = 8, seq = 128, mode = "train", pairs = 3, steps = 2, hogs = 1,
           build = os.getenv("BERT_BUILD") or "build"}
local i = 1
while i <= #arg do
  local key = arg[i]:match("^%-%-(.+)$")
  if not key or o[key] == nil or arg[i + 1] == nil then
    io.stderr:write("bench_contention: bad argument '" .. tostring(arg[i]) .. "' (see --help)\n")
    os.exit(2)
  end
  o[key] = type(o[key]) == "number" and math.tointeger(tonumber(arg[i + 1])) or arg[i + 1]
  if o[key] == nil or (type(o[key]) == "number" and o[key] < (key == "hogs" and 0 or 1)) then
    io.stderr:write("bench_contention: --" .. key .. " needs a whole number, got '" .. arg[i + 1] .. "'\n")
    os.exit(2)
  end
  i = i + 2
end

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
