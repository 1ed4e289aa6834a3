-- Summarises fine-tuning runs: one line per group of runs that differ only
-- in their seed, with the mean and spread of the dev metric (the best
-- checkpoint's) and of the test metrics.
--
--   lua5.4 tools/summarize_runs.lua runs/ft/spam-*     (run directories with summary.json)
--
-- A group's key is the model, the initialisation (pretrained / scratch), the
-- number of training examples and the settings other than the seed; the line
-- with the best mean dev metric per model, initialisation and training size
-- is marked "*" (pick hyperparameters on dev,
-- read them off test).
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cjson = require("cjson")
local fs = require("bert.fs")

if #arg == 0 or arg[1] == "-h" or arg[1] == "--help" then
  print("usage: lua5.4 tools/summarize_runs.lua RUN_DIR...")
  os.exit(arg[1] and 0 or 1)
end

local METRICS = {classification = {"accuracy", "macro_f1"}, tagging = {"accuracy", "entity_f1"},
                 qa = {"exact_match", "f1"}}

local function stats(xs)
  local n, s = #xs, 0
  for _, x in ipairs(xs) do s = s + x end
  local mean, v = s / n, 0
  for _, x in ipairs(xs) do v = v + (x - mean) ^ 2 end
  return mean, n > 1 and math.sqrt(v / (n - 1)) or 0
end

local groups, order = {}, {}
for _, dir in ipairs(arg) do
  local text = fs.read_file(dir .. "/summary.json")
  local ok, sm = pcall(cjson.decode, text or "")
  if text and ok and type(sm) == "table" and sm.test then
    local st = sm.settings or {}
    local keys = {}
    for k, v in pairs(st) do
      if k ~= "seed" and type(v) ~= "table" then keys[#keys + 1] = k .. "=" .. tostring(v) end
    end
    table.sort(keys)
    local init = sm.from_scratch and "scratch" or "pretrained"
    local key = table.concat({sm.task or "?", sm.model or "?", init, tostring(sm.n_train), table.concat(keys, " ")}, " | ")
    local g = groups[key]
    if not g then
      g = {task = sm.task, model = sm.model, init = init, kind = sm.kind, settings = st, n_train = sm.n_train,
           runs = {}}
      groups[key] = g
      order[#order + 1] = key
    end
    g.runs[#g.runs + 1] = sm
  else
    io.stderr:write("summarize_runs: ", dir, ": no readable summary.json (unfinished run?), skipped\n")
  end
end

local best = {}
for _, key in ipairs(order) do
  local g = groups[key]
  local names = METRICS[g.kind] or {"accuracy"}
  local dev = {}
  for _, r in ipairs(g.runs) do dev[#dev + 1] = r.dev and r.dev[names[1]] or 0 end
  g.dev = stats(dev)
  local bk = table.concat({g.task or "", g.model or "", g.init, tostring(g.n_train)}, "|")
  if not best[bk] or g.dev > best[bk].dev then best[bk] = g end
end

print(string.format("%-2s %-10s %-7s %-11s %-8s %-5s %-16s %s", "", "task", "train", "init", "lr", "seeds", "dev (mean)",
  "test: mean ± sd"))
for _, key in ipairs(order) do
  local g = groups[key]
  local names = METRICS[g.kind] or {"accuracy"}
  local parts = {}
  for _, m in ipairs(names) do
    local xs = {}
    for _, r in ipairs(g.runs) do if r.test[m] then xs[#xs + 1] = r.test[m] end end
    if #xs > 0 then
      local mean, sd = stats(xs)
      parts[#parts + 1] = string.format("%s %.2f ± %.2f", m, 100 * mean, 100 * sd)
    end
  end
  local mark = best[table.concat({g.task or "", g.model or "", g.init, tostring(g.n_train)}, "|")] == g and "*" or ""
  print(string.format("%-2s %-10s %-7s %-11s %-8s %-5d %-16s %s   (%s)", mark, g.task or "?", tostring(math.tointeger(g.n_train) or g.n_train), g.init,
    tostring(g.settings.lr), #g.runs, string.format("%s %.2f", names[1], 100 * g.dev), table.concat(parts, ", "),
    g.model or "?"))
end
