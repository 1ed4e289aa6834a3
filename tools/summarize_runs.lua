-- Summarises run directories: one line per group of runs that differ only
-- in their seed, with the mean and spread of their metrics.  Fine-tuning
-- runs show the dev metric (the best checkpoint's) and the test metrics;
-- pretraining runs (summary.json with kind "pretraining", from
-- experiments/pretrain.lua or an ablation's pretrain/ID/) every objective's
-- held-out metrics (MLM accuracy, perplexity, NSP/SOP accuracy, ...), the
-- unigram baseline and the training tokens/s, with the settings that differ
-- between the groups.
--
--   lua5.4 tools/summarize_runs.lua runs/ft/spam-* runs/pretrain-*
--
-- A pretraining group's key is the model, the objective, the corpus and
-- the settings other than the seed.  A fine-tuning group's key is the model, the initialisation (pretrained /
-- scratch), the number of training examples and the settings other than
-- the seed; the line with the best mean dev metric per model,
-- initialisation and training size is marked "*" (pick hyperparameters on
-- dev, read them off test).  Metrics are fractions in the files and
-- percentages here.
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cjson = require("cjson")
local fs = require("bert.fs")
local cli = require("bert.cli")

local p = cli.parser("summarize_runs.lua", "Mean and spread over seeds of fine-tuning and pretraining runs.")
p:argument("runs", "Run directories (each with summary.json)"):args("+")
local args = p:parse()

local METRICS = {classification = {"accuracy", "macro_f1"}, tagging = {"accuracy", "entity_f1"},
                 qa = {"exact_match", "f1"}}

local function stats(xs)
  local n, s = #xs, 0
  for _, x in ipairs(xs) do s = s + x end
  local mean, v = s / n, 0
  for _, x in ipairs(xs) do v = v + (x - mean) ^ 2 end
  return mean, n > 1 and math.sqrt(v / (n - 1)) or 0
end

local function settings_key(st)
  local keys = {}
  for k, v in pairs(st or {}) do
    if k ~= "seed" and type(v) ~= "table" then keys[#keys + 1] = k .. "=" .. tostring(v) end
  end
  table.sort(keys)
  return table.concat(keys, " ")
end

local groups, order = {}, {}
local function add(key, sm, fields)
  local g = groups[key]
  if not g then
    g = fields
    g.runs = {}
    groups[key] = g
    order[#order + 1] = key
  end
  g.runs[#g.runs + 1] = sm
end

for _, dir in ipairs(args.runs) do
  local text = fs.read_file(dir .. "/summary.json")
  local ok, sm = pcall(cjson.decode, text or "")
  if text and ok and type(sm) == "table" and sm.test then
    local init = sm.from_scratch and "scratch" or "pretrained"
    add(table.concat({"ft", sm.task or "?", sm.model or "?", init, tostring(sm.n_train), settings_key(sm.settings)}, " | "),
      sm, {task = sm.task, model = sm.model, init = init, kind = sm.kind, settings = sm.settings or {}, n_train = sm.n_train})
  elseif text and ok and type(sm) == "table" and (sm.kind == "pretraining" or (sm.mlm_accuracy and not sm.test)) then
    add(table.concat({"pt", sm.model or "?", sm.objective or "?", tostring(sm.corpus), settings_key(sm.settings)}, " | "),
      sm, {kind = "pretraining", model = sm.model, objective = sm.objective, settings = sm.settings or {}})
  else
    io.stderr:write("summarize_runs: ", dir, ": no readable summary.json (unfinished run?), skipped\n")
  end
end

local function mean_sd(runs, get)
  local xs = {}
  for _, r in ipairs(runs) do local v = get(r) if type(v) == "number" then xs[#xs + 1] = v end end
  if #xs == 0 then return nil end
  return stats(xs)
end

-- {------------------------------------------------ fine-tuning runs
local best, any_ft = {}, false
for _, key in ipairs(order) do
  local g = groups[key]
  if g.kind ~= "pretraining" then
    any_ft = true
    local names = METRICS[g.kind] or {"accuracy"}
    g.dev = mean_sd(g.runs, function(r) return r.dev and r.dev[names[1]] end) or 0
    local bk = table.concat({g.task or "", g.model or "", g.init, tostring(g.n_train)}, "|")
    if not best[bk] or g.dev > best[bk].dev then best[bk] = g end
  end
end
if any_ft then
  print(string.format("%-2s %-10s %-7s %-11s %-8s %-5s %-18s %s", "", "task", "train", "init", "lr", "seeds",
    "dev (mean)", "test, % (mean ± sd)"))
  for _, key in ipairs(order) do
    local g = groups[key]
    if g.kind ~= "pretraining" then
      local names = METRICS[g.kind] or {"accuracy"}
      local parts = {}
      for _, m in ipairs(names) do
        local mean, sd = mean_sd(g.runs, function(r) return r.test[m] end)
        if mean then parts[#parts + 1] = string.format("%s %.2f ± %.2f", m, 100 * mean, 100 * sd) end
      end
      local mark = best[table.concat({g.task or "", g.model or "", g.init, tostring(g.n_train)}, "|")] == g and "*" or ""
      print(string.format("%-2s %-10s %-7s %-11s %-8s %-5d %-18s %s   (%s)", mark, g.task or "?",
        tostring(math.tointeger(g.n_train) or g.n_train), g.init, tostring(g.settings.lr), #g.runs,
        string.format("%s %.2f%%", names[1], 100 * g.dev), table.concat(parts, ", "), g.model or "?"))
    end
  end
end

-- {------------------------------------------------ pretraining runs
-- every objective's held-out metrics (bert.objectives), the unigram
-- baseline, then the training speed; a column of the settings that differ
-- between the groups, so that lines with the same model and objective can
-- be told apart
local pt_metrics, seen_metric = {}, {}
do
  local names = {}
  for _, m in ipairs(require("bert.objectives").each_module()) do
    for _, k in ipairs(m.metrics or {}) do names[#names + 1] = k end
  end
  for _, k in ipairs(names) do
    if not seen_metric[k] then seen_metric[k] = true; pt_metrics[#pt_metrics + 1] = k end
  end
  table.insert(pt_metrics, 2, "unigram_baseline_accuracy")
end
local function is_fraction(k) return k:find("accuracy$") or k:find("f1$") or k:find("exact_match$") end

local pt_groups = {}
for _, key in ipairs(order) do
  if groups[key].kind == "pretraining" then pt_groups[#pt_groups + 1] = groups[key] end
end
local varying = {}   -- settings keys whose values differ between pretraining groups
do
  local values, keys = {}, {}
  for _, g in ipairs(pt_groups) do
    for k, v in pairs(g.settings) do
      if k ~= "seed" and type(v) ~= "table" then
        if values[k] == nil then values[k] = {}; keys[#keys + 1] = k end
        values[k][tostring(v)] = true
      end
    end
  end
  for _, k in ipairs(keys) do
    local n, missing = 0, false
    for _ in pairs(values[k]) do n = n + 1 end
    for _, g in ipairs(pt_groups) do if g.settings[k] == nil then missing = true end end
    if n > 1 or (missing and #pt_groups > 1) then varying[#varying + 1] = k end
  end
  table.sort(varying)
end
if #pt_groups > 0 then
  if any_ft then print("") end
  print(string.format("%-10s %-9s %-6s %-5s %s", "model", "objective", "steps", "seeds",
    "held-out (mean ± sd; fractions in %), training tokens/s" .. (#varying > 0 and "; settings" or "")))
  for _, g in ipairs(pt_groups) do
    local parts = {}
    for _, m in ipairs(pt_metrics) do
      local mean, sd = mean_sd(g.runs, function(r) return r[m] end)
      if mean then
        if is_fraction(m) then parts[#parts + 1] = string.format("%s %.2f ± %.2f", m, 100 * mean, 100 * sd)
        else parts[#parts + 1] = string.format("%s %.1f ± %.1f", m, mean, sd) end
      end
    end
    local tps, tps_sd = mean_sd(g.runs, function(r) return r.tokens_per_s end)
    if tps then parts[#parts + 1] = string.format("tokens/s %.0f ± %.0f", tps, tps_sd) end
    local set = {}
    for _, k in ipairs(varying) do set[#set + 1] = k .. "=" .. tostring(g.settings[k]) end
    local steps = mean_sd(g.runs, function(r) return r.steps end)
    print(string.format("%-10s %-9s %-6s %-5d %s%s", tostring(g.model), tostring(g.objective),
      steps and string.format("%.0f", steps) or "?", #g.runs, table.concat(parts, ", "),
      #set > 0 and ("; " .. table.concat(set, " ")) or ""))
  end
end
