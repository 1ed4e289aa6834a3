-- The optimizer phase of a BERT step, timed on the model's real parameter
-- list: AdamW / LAMB as one call over every parameter (the default) against
-- one kernel call per parameter, in pairs run back to back (best of
-- --repeat pairs each), plus zero_grad and global-norm clipping.
--   lua5.4 tools/bench_optim.lua [--model base] [--repeat 5] [--threads N] [--kind AdamW|LAMB]
-- One JSON line: milliseconds per step for each path, their ratio, and
-- GB/s of the bytes an AdamW step must move (p, g, m, v read; p, m, v written).
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cli = require("bert.cli")
local p = cli.parser("bench_optim.lua", "Times the optimizer step over a model's parameters: one call over all of " ..
  "them against one call per parameter (paired runs, best of N); one JSON line.")
p:option("--model", "The model size (BertForPreTraining)", "base")
p:option("--repeat", "Paired runs (the best of each path is kept)", "5"):convert(cli.integer("--repeat", 1, 100000))
cli.add(p, "threads")
p:option("--kind", "The optimizer", "AdamW"):choices({"AdamW", "LAMB"})
local o = p:parse()
local bert = require("bert")
local cjson = require("cjson")

if o.threads then bert.set_num_threads(o.threads) end
o.threads = bert.get_num_threads()

bert.manual_seed(0)
local model = bert.model("BertForPreTraining", o.model)
local named = model:named_parameters()
local numel = 0
for _, np in ipairs(named) do numel = numel + np.param:numel() end
model.flat_grad:copy_(bert.randn({numel}, {seed = 1}):mul(1e-3))

local multi = bert.optim[o.kind](named, {lr = 1e-4})
local single = bert.optim[o.kind](named, {lr = 1e-4})
single._update_multi = false   -- the per-parameter path
multi:step(); single:step()    -- state allocated, pages touched

local function time(f)
  local t0 = bert.wall_time()
  f()
  return bert.wall_time() - t0
end
local best = {multi = math.huge, single = math.huge, zero_grad = math.huge, clip = math.huge}
for _ = 1, o["repeat"] do
  best.multi = math.min(best.multi, time(function() multi:step() end))
  best.single = math.min(best.single, time(function() single:step() end))
  best.clip = math.min(best.clip, time(function() bert.optim.clip_grad_norm(multi, 1e9) end))
end
best.zero_grad = time(function() multi:zero_grad() end)

local bytes = numel * 4 * 7
local f = io.open("/proc/loadavg")
local load = f and f:read("l"):match("^(%S+)")
if f then f:close() end
print(cjson.encode({
  model = o.model, kind = o.kind, threads = o.threads, parameters = #named, elements = numel,
  one_call_ms = best.multi * 1e3, per_parameter_ms = best.single * 1e3,
  per_parameter_over_one_call = best.single / best.multi,
  one_call_gb_s = bytes / best.multi / 1e9, per_parameter_gb_s = bytes / best.single / 1e9,
  clip_ms = best.clip * 1e3, zero_grad_ms = best.zero_grad * 1e3, load_average_1min = tonumber(load),
}))
