--- bert.ablate.common: what the grid (bert.ablate.grid), the runner
-- (bert.ablate.run) and the report (bert.ablate.report) share: the metrics
-- kept, canonical JSON, small helpers and the layout of a grid directory.
local cjson = require("cjson")
local fs = require("bert.fs")

local M = {}

-- metrics kept from a pretraining summary and from a fine-tuning summary
-- (every objective's held-out metrics, bert.objectives, in a fixed order)
M.pretrain_metrics = {}
do
  local seen = {}
  for _, objective in ipairs(require("bert.objectives").each_module()) do
    for _, k in ipairs(objective.metrics or {}) do
      if not seen[k] then seen[k] = true; M.pretrain_metrics[#M.pretrain_metrics + 1] = k end
    end
  end
end
M.finetune_metrics = {"accuracy", "macro_f1", "mcc", "pearson", "spearman", "entity_f1", "exact_match", "f1"}

------------------------------------------------------------- helpers

-- JSON with sorted keys, so that equal tables give equal text (grid.json is
-- compared with the grid of a rerun).
local function canonical(v)
  if type(v) ~= "table" then return cjson.encode(v) end
  if #v > 0 or next(v) == nil then
    local parts = {}
    for i, x in ipairs(v) do parts[i] = canonical(x) end
    return "[" .. table.concat(parts, ",") .. "]"
  end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  local parts = {}
  for i, k in ipairs(keys) do parts[i] = cjson.encode(k) .. ":" .. canonical(v[k]) end
  return "{" .. table.concat(parts, ",") .. "}"
end
M.canonical = canonical

local read_json = fs.read_json

local function write_json(path, value)
  local ok, err = fs.write_atomic(path, canonical(value) .. "\n")
  if not ok then error("ablate: cannot write " .. path .. ": " .. tostring(err), 0) end
end

local function copy(t)
  local out = {}
  for k, v in pairs(t or {}) do out[k] = v end
  return out
end

local function fmt_value(v)
  if type(v) == "number" then return (string.format("%.6g", v)) end
  return tostring(v)
end

-- A name safe as a directory: letters, digits and . _ - = kept.
local function slug(s) return (s:gsub("[^%w%._%-=]", "_")) end

local mean_sd = require("bert.stats").mean_sd
M.mean_sd = mean_sd

local fmt_duration = require("bert.cli").format_duration

------------------------------------------------------------- layout

local function split_dir(dir)
  dir = dir:gsub("/+$", "")
  local parent, name = dir:match("^(.*)/([^/]+)$")
  if not parent then return ".", dir end
  return parent == "" and "/" or parent, name
end

-- A run directory of grid dir, or the run its reused.json names.
local function follow(own, dir)
  local reused = read_json(own .. "/reused.json")
  if not reused then return own end
  return split_dir(dir) .. "/" .. reused.grid .. "/pretrain/" .. reused.run
end

-- The directory of a cell's pretraining run: its own, or the one it reuses.
local function pretrain_dir(dir, id) return follow(dir .. "/pretrain/" .. id, dir) end

M.read_json, M.write_json, M.copy, M.fmt_value, M.slug = read_json, write_json, copy, fmt_value, slug
M.fmt_duration = fmt_duration
M.split_dir, M.follow, M.pretrain_dir = split_dir, follow, pretrain_dir

--- A cell's metrics from one run of the evaluation suite (bert.evaluate's
-- results, or the tasks finished so far), into metrics: eval_TASK..suffix
-- (the headline mean; eval_glue for the GLUE average) and, where scratch
-- holds the task's from-scratch control (taken from results when they
-- carry it: the final checkpoint's), eval_TASK_gain..suffix.  The caller
-- writes eval_TASK_scratch from scratch once every run is in.
function M.evaluation_metrics(results, suffix, scratch, metrics)
  local scores = {}
  for name, r in pairs(results.tasks or {}) do
    if r.headline and r.headline.mean then
      local key = "eval_" .. name:gsub("%-", "_")
      scores[key] = r.headline.mean
      local s = r.from_scratch and r.from_scratch.headline and r.from_scratch.headline.mean
      if s then scratch[key] = s end
    end
  end
  if results.glue_average then scores.eval_glue = results.glue_average.mean end
  if results.glue_average_scratch then scratch.eval_glue = results.glue_average_scratch.mean end
  for key, v in pairs(scores) do
    metrics[key .. suffix] = v
    if scratch[key] then metrics[key .. "_gain" .. suffix] = v - scratch[key] end
  end
end

return M
