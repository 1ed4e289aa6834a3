--- bert.ablate: a grid of pretraining runs, each fine-tuned on the same
-- downstream tasks with the same settings, over several seeds; the engine
-- behind experiments/ablate.lua.
--
--   local ablate = require("bert.ablate")
--   local grid = ablate.load("experiments/ablations/nsp.lua", {budget_scale = 0.05})
--   ablate.run(grid, "runs/ablate/nsp")        -- resumable: finished cells are skipped
--   ablate.summarize("runs/ablate/nsp")        -- results.json, results.md, plots/
--
-- An ablation file returns a table:
--   name, description     -- for the table's heading
--   axes = {{name = "objective", values = {"mlm-nsp", "mlm", "mlm-sop"}}, ...}
--       -- a name is a pretraining setting (bert.pretrain.settings: model,
--       -- tokenizer, objective, masking, whole_word_mask, ...), or
--       -- "finetune.X" for a fine-tuning setting (from_scratch, max_train,
--       -- ...).  A value is that setting's value, or a table {label = "...",
--       -- setting = value, ...} that sets several at once.
--   fixed = {model = "tiny", corpus = "brown", ...}   -- every pretraining run
--   seeds = {1, 2, 3}
--   budget = {steps = 2000} or {tokens = 4e6}  -- per pretraining run (tokens:
--       -- steps = tokens / (batch_size * accum * seq_len)), so cells get equal compute
--   downstream = {{task = "spam", max_train = 1000, epochs = 3}, ...}
--       -- bert.finetune.experiment settings; kind from the task for spam,
--       -- brown-genre (classification), brown-pos (tagging), synthetic-qa (qa)
--   finetune = {...}      -- settings shared by every downstream task
--   evaluation = {suite = "glue", steps = 300, seeds = {1, 2, 3}, ...}
--       -- bert.evaluate.run settings: the evaluation suite on every cell's
--       -- checkpoint (cells/ID/evaluate/), each task's headline score (mean
--       -- over the fine-tuning seeds) a metric `eval_TASK`, with eval_glue
--       -- (the GLUE average); with from_scratch_control = true also
--       -- eval_TASK_scratch (the same architecture from random weights) and
--       -- eval_TASK_gain (pretrained - scratch); `downstream` may then be left out
--   planned = {{axis = "objective", values = {"clm"}, missing = "why"}, ...}
--       -- values the ablation is meant to have that cannot run yet: listed
--       -- at the start and in results.md, never run (a value that cannot run
--       -- put in `axes` stops the grid with an error naming it)
--   teacher = {model = "mini", objective = "mlm", budget = {steps = 1500}}
--       -- for --objective distill cells: a teacher pretrained once per seed
--       -- (the fixed settings, then these; its own budget, scaled like the
--       -- cells') into GRID/teacher-SEED, whose checkpoint is every
--       -- distill cell's --teacher unless the cell names one
--
-- Layout of a grid directory:
--   grid.json                   the resolved grid (a rerun must match it)
--   pretrain/ID/                one pretraining run, shared by the cells that
--                               differ only in fine-tuning settings
--   teacher-SEED/               the teacher of that seed's distill cells
--   cells/ID/done.json          a finished cell's metrics (the done-marker)
--   cells/ID/TASK/              its fine-tuning runs
--   cells/ID/evaluate/          its evaluation suite (with `evaluation`)
--   results.json, results.md, plots/*.png (bars per metric; curve-AXIS-METRIC.png
--   and .dat, a learning curve per numeric axis)
local cjson = require("cjson")
local bert = require("bert")
local fs = require("bert.fs")
local pretrain = require("bert.pretrain")

local M = {}

local TASK_KINDS = require("bert.finetune.tasks").kinds   -- every built-in task, the evaluation suite's included

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

------------------------------------------------------------- loading

-- One axis value as {label, pretrain = {...}, finetune = {...}}.
local function axis_setting(file, axis, value, i)
  local where = string.format("%s: axis '%s' value %d", file, axis.name, i)
  local out = {pretrain = {}, finetune = {}}
  local function put(name, v)
    local ft = name:match("^finetune%.(.+)$")
    if ft then out.finetune[ft] = v else out.pretrain[name] = v end
  end
  if type(value) == "table" then
    if type(value.label) ~= "string" then error("ablate: " .. where .. ": a table value needs a label string", 0) end
    out.label = value.label
    for k, v in pairs(value) do if k ~= "label" then put(k, v) end end
  elseif type(value) == "string" or type(value) == "number" or type(value) == "boolean" then
    out.label = axis.name:gsub("^finetune%.", "") .. "=" .. fmt_value(value)
    put(axis.name, value)
  else
    error("ablate: " .. where .. ": expected a string, number, boolean or table, got " .. type(value), 0)
  end
  return out
end

--- Reads an ablation file and resolves its grid: every cell's pretraining
-- settings are checked through bert.pretrain.settings, so that an unknown
-- setting or an objective that is not implemented stops the grid before
-- anything runs.  opts.budget_scale scales the pretraining budget (quick
-- runs: at least one step) and the fine-tuning set sizes (at least 64).
function M.load(path, opts)
  if type(path) ~= "string" then error("ablate.load: argument #1 (path) expected a string, got " .. type(path), 2) end
  opts = opts or {}
  local chunk, lerr = loadfile(path, "t", setmetatable({}, {__index = _G}))
  if not chunk then error("ablate: cannot read " .. tostring(path) .. ": " .. tostring(lerr), 0) end
  local ok, spec = pcall(chunk)
  if not ok then error("ablate: " .. path .. ": " .. tostring(spec), 0) end
  if type(spec) ~= "table" then error("ablate: " .. path .. " must return a table, got " .. type(spec), 0) end
  local scale = opts.budget_scale or 1
  if type(scale) ~= "number" or not (scale > 0) then
    error("ablate: budget_scale must be a positive number, got " .. tostring(scale), 0)
  end
  local function need(cond, msg) if not cond then error("ablate: " .. path .. ": " .. msg, 0) end end
  need(type(spec.axes) == "table" and #spec.axes >= 1, "'axes' must be a list of {name = ..., values = {...}}")
  need(type(spec.seeds) == "table" and #spec.seeds >= 1, "'seeds' must be a non-empty list of integers")
  for i, s in ipairs(spec.seeds) do need(math.type(s) == "integer" and s >= 0, "seed " .. i .. " is not an integer >= 0") end
  need(type(spec.budget) == "table" and ((spec.budget.steps ~= nil) ~= (spec.budget.tokens ~= nil)),
    "'budget' must be {steps = N} or {tokens = N}")
  local fixed = spec.fixed or {}
  need(type(fixed) == "table", "'fixed' must be a table of pretraining settings")
  for _, k in ipairs({"steps", "time_budget", "output", "resume", "seed"}) do
    need(fixed[k] == nil, "'fixed' may not set " .. k .. " (the grid sets it: budget, seeds, directories)")
  end
  local evaluation = spec.evaluation
  if evaluation ~= nil then
    need(type(evaluation) == "table", "'evaluation' must be a table of bert.evaluate settings")
    for _, k in ipairs({"model", "output"}) do
      need(evaluation[k] == nil, "'evaluation' may not set " .. k .. " (the grid sets it: each cell's checkpoint)")
    end
    local suites = require("bert.evaluate").SUITES
    need(evaluation.tasks ~= nil or suites[evaluation.suite or "all"] ~= nil,
      "'evaluation.suite' must be one of the evaluation suites, got " .. tostring(evaluation.suite))
  end
  local downstream = spec.downstream or (evaluation and {}) or {{task = "spam", max_train = 1000}}
  need(type(downstream) == "table" and (#downstream >= 1 or evaluation ~= nil),
    "'downstream' must be a non-empty list of tasks")
  for i, d in ipairs(downstream) do
    need(type(d) == "table" and type(d.task) == "string", "downstream " .. i .. " needs a task name")
    need(d.kind or TASK_KINDS[d.task], "downstream " .. i .. " (" .. d.task .. ") needs a kind " ..
      "(classification, tagging or qa)")
  end
  for a, axis in ipairs(spec.axes) do
    need(type(axis) == "table" and type(axis.name) == "string", "axis " .. a .. " needs a name")
    need(type(axis.values) == "table" and #axis.values >= 1, "axis '" .. axis.name .. "' needs a list of values")
    for _, k in ipairs({"steps", "time_budget", "output", "resume", "seed"}) do
      need(axis.name ~= k, "axis '" .. k .. "' is set by the grid itself")
    end
  end

  -- the combinations of axis values, first axis slowest
  local combos = {{}}
  for _, axis in ipairs(spec.axes) do
    local next_combos = {}
    for _, c in ipairs(combos) do
      for i, v in ipairs(axis.values) do
        local c2 = copy(c)
        c2[#c2 + 1] = axis_setting(path, axis, v, i)
        next_combos[#next_combos + 1] = c2
      end
    end
    combos = next_combos
  end

  local teacher = spec.teacher
  if teacher ~= nil then
    need(type(teacher) == "table", "'teacher' must be a table of pretraining settings with a budget")
    need(type(teacher.budget) == "table" and ((teacher.budget.steps ~= nil) ~= (teacher.budget.tokens ~= nil)),
      "'teacher.budget' must be {steps = N} or {tokens = N}")
    for _, k in ipairs({"steps", "time_budget", "output", "resume", "seed", "teacher"}) do
      need(teacher[k] == nil, "'teacher' may not set " .. k .. " (the grid sets it)")
    end
  end

  local planned = spec.planned or {}
  need(type(planned) == "table", "'planned' must be a list of {axis, values, missing}")
  for i, p in ipairs(planned) do
    need(type(p) == "table" and type(p.axis) == "string" and type(p.values) == "table" and type(p.missing) == "string",
      "planned " .. i .. " must be {axis = NAME, values = {...}, missing = \"what is missing\"}")
  end
  local grid = {name = spec.name or path:match("([^/]+)%.lua$") or path, description = spec.description,
                file = path, budget_scale = scale, seeds = spec.seeds, axes = {}, cells = {}, pretrain_runs = {},
                downstream = {}, planned = planned, teachers = {}, evaluation = evaluation}
  for _, axis in ipairs(spec.axes) do grid.axes[#grid.axes + 1] = axis.name end
  for i, d in ipairs(downstream) do
    local dd = copy(spec.finetune)
    for k, v in pairs(d) do dd[k] = v end
    dd.kind = d.kind or TASK_KINDS[d.task]
    -- the name in metric names and directories: a built-in task's, or a task directory's last part
    dd.name = d.name or d.task:gsub("/+$", ""):match("[^/]*$")
    if dd.max_train and scale < 1 then dd.max_train = math.max(64, math.floor(dd.max_train * scale)) end
    grid.downstream[i] = dd
  end
  local seen_runs = {}
  for _, seed in ipairs(spec.seeds) do        -- seeds outermost: one full comparison comes first
    for _, combo in ipairs(combos) do
      local pre, ft, labels, pre_labels = copy(fixed), {}, {}, {}
      for _, s in ipairs(combo) do
        for k, v in pairs(s.pretrain) do pre[k] = v end
        for k, v in pairs(s.finetune) do ft[k] = v end
        labels[#labels + 1] = s.label
        if next(s.pretrain) then pre_labels[#pre_labels + 1] = s.label end
      end
      if ft.max_train and scale < 1 then ft.max_train = math.max(64, math.floor(ft.max_train * scale)) end
      local label = table.concat(labels, ", ")
      local function checked(settings, what)   -- bad or planned settings stop the grid here, naming the cell
        local okp, res = pcall(pretrain.settings, settings)
        if not okp then
          error(string.format("ablate: %s: %s: %s", path, what or ("cell " .. label),
            (tostring(res):gsub("^pretrain%.settings: ", ""))), 0)
        end
        return res
      end
      -- the budget in steps, from tokens with this run's batch shape
      local function budgeted(settings, budget, what)
        local base = checked(settings, what)
        local steps = budget.steps
        if budget.tokens then
          steps = math.ceil(budget.tokens / (base.batch_size * base.accum * base.seq_len))
        end
        steps = math.max(1, math.floor(steps * scale + 0.5))
        settings.steps, settings.seed = steps, seed
        if settings.save_every == nil then settings.save_every = math.max(1, math.min(200, math.ceil(steps / 5))) end
        if settings.eval_every == nil then settings.eval_every = math.max(1, math.ceil(steps / 5)) end
        settings.no_plot = true
        checked(settings, what)
        return steps
      end
      -- a distill cell without a teacher of its own reads this seed's,
      -- pretrained by the grid ({grid} is the grid directory, M.run)
      if pre.teacher == nil and pretrain.objective(pre.objective or "") == "distill" then
        need(teacher, "cell " .. label .. " distils (--objective distill) but the file has no 'teacher' " ..
          "(a teacher pretrained per seed) and the cell names no teacher directory")
        local teacher_id = "teacher-" .. seed
        pre.teacher = "{grid}/" .. teacher_id .. "/checkpoint"
        if not grid.teachers[#grid.teachers] or grid.teachers[#grid.teachers].seed ~= seed then
          local t = copy(fixed)
          for k, v in pairs(teacher) do if k ~= "budget" then t[k] = v end end
          local t_steps = budgeted(t, teacher.budget, "teacher (seed " .. seed .. ")")
          grid.teachers[#grid.teachers + 1] = {seed = seed, id = teacher_id, settings = t, pretrain_steps = t_steps}
        end
      end
      local steps = budgeted(pre, spec.budget)
      local pre_id = slug((#pre_labels > 0 and table.concat(pre_labels, ",") or "base") .. ",seed=" .. seed)
      if not seen_runs[pre_id] then
        seen_runs[pre_id] = true
        grid.pretrain_runs[#grid.pretrain_runs + 1] = {id = pre_id, settings = pre}
      end
      grid.cells[#grid.cells + 1] = {id = slug(label .. ",seed=" .. seed), label = label, seed = seed,
        pretrain_id = pre_id, pretrain_steps = steps, finetune = ft}
    end
  end
  if #grid.teachers == 0 then grid.teachers = nil end   -- grid.json as before for grids without one
  return grid
end

------------------------------------------------------------- running

local function say(fmt, ...)
  io.stdout:write(string.format(fmt, ...), "\n")
  io.stdout:flush()
end

------------------------------------------------------------- reuse

-- Grids often share a cell: nsp's "mlm" is tokenizer's "wordpiece", and
-- family's "bert" is nsp's "mlm-nsp".  A run is deterministic given its
-- settings (seed included), so a finished pretraining run of a grid next to
-- this one (same parent directory) with equal settings is read instead of
-- recomputed, and so are the fine-tunings made from it with equal task
-- settings.  The cell's pretrain/ID/ then holds only reused.json, naming the
-- run it reads.

local function split_dir(dir)
  dir = dir:gsub("/+$", "")
  local parent, name = dir:match("^(.*)/([^/]+)$")
  if not parent then return ".", dir end
  return parent == "" and "/" or parent, name
end

-- The settings that decide a pretraining run's result, as text; nil for a
-- run whose teacher lives inside its own grid (another grid's teacher-SEED
-- may differ).
local function reuse_key(settings, steps)
  if type(settings.teacher) == "string" and settings.teacher:find("^{grid}/") then return nil end
  local s = copy(settings)
  s.no_plot, s.quiet, s.log_every = nil, nil, nil   -- printing and plotting only
  if s.objective then s.objective = require("bert.objectives").names[s.objective] or s.objective end
  s.steps = s.steps or steps
  return canonical(s)
end

-- Finished pretraining runs of the grids next to dir, by reuse_key.
local function reusable_runs(dir)
  local parent, own = split_dir(dir)
  local index = {}
  for _, name in ipairs(fs.listdir(parent) or {}) do
    local gdir = (parent == "/" and "" or parent) .. "/" .. name
    local g = name ~= own and read_json(gdir .. "/grid.json")
    for _, r in ipairs(g and g.pretrain_runs or {}) do
      local key = reuse_key(r.settings)
      if key and not index[key] and fs.exists(gdir .. "/pretrain/" .. r.id .. "/summary.json")
          and not fs.exists(gdir .. "/pretrain/" .. r.id .. "/reused.json") then
        index[key] = {grid_name = name, grid_dir = gdir, grid = g, run_id = r.id}
      end
    end
  end
  return index
end

-- A run directory of grid dir, or the run its reused.json names.
local function follow(own, dir)
  local reused = read_json(own .. "/reused.json")
  if not reused then return own end
  return split_dir(dir) .. "/" .. reused.grid .. "/pretrain/" .. reused.run
end

-- The directory of a cell's pretraining run: its own, or the one it reuses.
local function pretrain_dir(dir, id) return follow(dir .. "/pretrain/" .. id, dir) end

-- The finished fine-tuning of `task` in the reused grid from the same run,
-- seed and settings, or nil.
local function reusable_finetuning(found, seed, task, overrides)
  local task_key, over_key
  for _, t in ipairs(found.grid.downstream or {}) do
    if t.name == task.name then task_key = canonical(t) end
  end
  if task_key ~= canonical(task) then return nil end
  over_key = canonical(overrides or {})
  for _, c in ipairs(found.grid.cells or {}) do
    if c.pretrain_id == found.run_id and c.seed == seed and canonical(c.finetune or {}) == over_key then
      local path = found.grid_dir .. "/cells/" .. c.id .. "/" .. slug(task.name) .. "/summary.json"
      local summary = read_json(path)
      if summary then return summary, path end
    end
  end
end

-- Runs (or resumes, or skips) one pretraining run into out; returns its summary.
local function run_pretraining(out, run)
  local done = read_json(out .. "/summary.json")
  if done then return done, "done" end
  local settings = copy(run.settings)
  settings.quiet = true
  if fs.exists(out .. "/args.json") and fs.exists(out .. "/checkpoint") then
    say("  resuming the pretraining run %s from its checkpoint", run.id)
    return pretrain.run(pretrain.settings({resume = out, quiet = true})), "resumed"
  end
  settings.output = out
  return pretrain.run(pretrain.settings(settings)), "ran"
end

-- Fine-tunes a pretrained checkpoint on one downstream task (a killed
-- fine-tuning run starts again: it is short next to pretraining).
local function run_finetuning(cell_dir, ckpt, seed, task, overrides, found)
  local experiment = require("bert.finetune.experiment")
  local out = cell_dir .. "/" .. slug(task.name)
  local done = read_json(out .. "/summary.json")
  if done then return done end
  local other, path = nil, nil
  if found then other, path = reusable_finetuning(found, seed, task, overrides) end
  if other then
    say("  %s: reusing the finished fine-tuning %s", task.name, path)
    assert(bert.mkdir(out))
    local ok, err = fs.write_atomic(out .. "/summary.json", fs.read_file(path))   -- verbatim: the same figures
    if not ok then error("ablate: cannot write " .. out .. "/summary.json: " .. tostring(err), 0) end
    return other, path
  end
  local opts = {}
  for k, v in pairs(task) do if k ~= "kind" and k ~= "name" then opts[k] = v end end
  for k, v in pairs(overrides) do opts[k] = v end
  opts.model, opts.output, opts.seed, opts.quiet, opts.no_plot = ckpt, out, seed, true, true
  opts.fetch = function(what) os.execute("sh tools/fetch_data.sh " .. what) end
  return experiment.run(task.kind, opts)
end

-- The evaluation suite (bert.evaluate, resumable per task) on a cell's
-- checkpoint, then on each learning-curve snapshot its pretraining kept
-- (--snapshots): each task's headline score as result.metrics eval_TASK and
-- eval_TASK@FRACTION; with from_scratch_control, the control (run once, on
-- the final checkpoint's architecture) as eval_TASK_scratch and
-- pretrained - scratch as eval_TASK_gain[@FRACTION].
local function evaluate_cell(settings, result, ckpt, cell_dir, snapshots, run_dir)
  local scratch = {}
  local function point(model, out, suffix, control)
    local opts = copy(settings)
    opts.model, opts.output, opts.quiet, opts.from_scratch_control = model, out, true, control or nil
    opts.fetch = function(what) os.execute("sh tools/fetch_data.sh " .. what) end
    local ev = require("bert.evaluate").run(opts)
    local scores = {}
    for name, r in pairs(ev.tasks) do
      if r.headline and r.headline.mean then
        local key = "eval_" .. name:gsub("%-", "_")
        scores[key] = r.headline.mean
        if r.from_scratch and r.from_scratch.headline.mean then scratch[key] = r.from_scratch.headline.mean end
      end
    end
    if ev.glue_average then scores.eval_glue = ev.glue_average.mean end
    if ev.glue_average_scratch then scratch.eval_glue = ev.glue_average_scratch.mean end
    for key, v in pairs(scores) do
      result.metrics[key .. suffix] = v
      if scratch[key] then result.metrics[key .. "_gain" .. suffix] = v - scratch[key] end
    end
  end
  point(ckpt, cell_dir .. "/evaluate", "", settings.from_scratch_control)
  for key, v in pairs(scratch) do result.metrics[key .. "_scratch"] = v end
  for _, sn in ipairs(snapshots) do
    point(run_dir .. "/" .. sn.name, string.format("%s/evaluate-at-%g", cell_dir, sn.fraction),
      string.format("@%g", sn.fraction), false)
  end
end

-- Whether a saved grid.json holds grid's settings: the same grid named by
-- another path (relative, absolute, another checkout) is the same grid.
local function same_settings(saved_text, grid)
  local ok, saved = pcall(cjson.decode, saved_text)
  if not ok or type(saved) ~= "table" then return false end
  local file = grid.file
  saved.file, grid.file = nil, nil
  local same = canonical(saved) == canonical(grid)
  grid.file = file
  return same
end

--- Runs every cell of a grid under dir, skipping finished cells (those
-- with cells/ID/done.json), resuming a killed pretraining run from its
-- checkpoint; then writes the summary (M.summarize).
function M.run(grid, dir, opts)
  opts = opts or {}
  assert(bert.mkdir(dir .. "/cells"))
  assert(bert.mkdir(dir .. "/pretrain"))
  local saved = fs.read_file(dir .. "/grid.json")
  local text = canonical(grid)
  if saved and saved:gsub("%s+$", "") ~= text and not same_settings(saved, grid) then
    error("ablate: " .. dir .. " holds a grid with other settings (grid.json differs): " ..
      "use another --output, or remove " .. dir, 0)
  end
  if not saved then write_json(dir .. "/grid.json", grid) end
  local runs = {}
  for _, r in ipairs(grid.pretrain_runs) do runs[r.id] = r end
  -- opts.shard = {K or {K1, K2, ...}, N}: cells whose index i has (i - 1) % N + 1 among the Ks
  local shard_set
  if opts.shard then
    shard_set = {}
    for _, k in ipairs(type(opts.shard[1]) == "table" and opts.shard[1] or {opts.shard[1]}) do shard_set[k] = true end
  end
  local function mine(i) return not opts.shard or shard_set[(i - 1) % opts.shard[2] + 1] == true end
  local todo, finished = 0, 0
  for i, cell in ipairs(grid.cells) do
    if fs.exists(dir .. "/cells/" .. cell.id .. "/done.json") then finished = finished + 1
    elseif mine(i) then todo = todo + 1 end
  end
  say("ablate: %s: %d cells (%d finished), %d seeds, %d downstream task(s), output %s%s",
    grid.name, #grid.cells, finished, #grid.seeds, #grid.downstream, dir,
    opts.shard and string.format(" (shard %s/%d: %d cells to run)", type(opts.shard[1]) == "table" and
      table.concat(opts.shard[1], ",") or opts.shard[1], opts.shard[2], todo) or "")
  for _, p in ipairs(grid.planned or {}) do
    local vals = {}
    for _, v in ipairs(p.values) do vals[#vals + 1] = fmt_value(v) end
    say("  not run (not implemented yet): %s = %s: %s", p.axis, table.concat(vals, ", "), p.missing)
  end
  local reusable = opts.reuse ~= false and reusable_runs(dir) or {}
  local started, ran = bert.wall_time(), 0
  for i, cell in ipairs(grid.cells) do
    local cell_dir = dir .. "/cells/" .. cell.id
    if fs.exists(cell_dir .. "/done.json") then
      say("[%d/%d] %s, seed %d: finished, skipped", i, #grid.cells, cell.label, cell.seed)
    elseif not mine(i) then
      say("[%d/%d] %s, seed %d: another shard's", i, #grid.cells, cell.label, cell.seed)
    else
      local t0 = bert.wall_time()
      say("[%d/%d] %s, seed %d: pretraining %d steps", i, #grid.cells, cell.label, cell.seed, cell.pretrain_steps)
      local run = runs[cell.pretrain_id]
      local teacher = run.settings.teacher
      if type(teacher) == "string" and teacher:find("^{grid}/") then
        -- this seed's teacher first (once: a finished one is skipped)
        -- (or a finished run of a grid next to this one with the teacher's settings)
        for _, t in ipairs(grid.teachers or {}) do
          local tdir = dir .. "/" .. t.id
          if t.seed == cell.seed and not fs.exists(tdir .. "/summary.json") and not fs.exists(tdir .. "/reused.json") then
            local tkey = reuse_key(t.settings, t.pretrain_steps)
            local tfound = opts.reuse ~= false and tkey and reusable[tkey]
            if tfound and not fs.exists(tdir .. "/args.json") then
              say("  the teacher for seed %d: reusing the finished pretraining run %s/pretrain/%s (equal settings)",
                t.seed, tfound.grid_dir, tfound.run_id)
              assert(bert.mkdir(tdir))
              write_json(tdir .. "/reused.json", {grid = tfound.grid_name, run = tfound.run_id})
            else
              say("  pretraining the teacher for seed %d: %d steps into %s", t.seed, t.pretrain_steps, tdir)
              run_pretraining(tdir, t)
            end
          end
        end
        run = {id = run.id, settings = copy(run.settings)}
        local tid, rest = teacher:match("^{grid}/([^/]+)(.*)$")
        run.settings.teacher = follow(dir .. "/" .. tid, dir) .. rest
      end
      local own = dir .. "/pretrain/" .. run.id
      local key = reuse_key(run.settings, cell.pretrain_steps)
      local found = key and reusable[key]
      if found and not fs.exists(own .. "/reused.json") then
        if fs.exists(own .. "/args.json") then
          found = nil   -- this grid started the run itself: resume it
        else
          say("  reusing the finished pretraining run %s/pretrain/%s (equal settings)", found.grid_dir, found.run_id)
          assert(bert.mkdir(own))
          write_json(own .. "/reused.json", {grid = found.grid_name, run = found.run_id})
        end
      end
      local pre
      if fs.exists(own .. "/reused.json") then
        pre = read_json(pretrain_dir(dir, run.id) .. "/summary.json")
        if not pre then
          error("ablate: " .. own .. "/reused.json names a run without summary.json (" ..
            pretrain_dir(dir, run.id) .. "): remove " .. own .. " to pretrain this cell here", 0)
        end
      else
        found = nil
        pre = run_pretraining(own, run)
      end
      assert(bert.mkdir(cell_dir))
      local result = {id = cell.id, label = cell.label, seed = cell.seed, pretrain_id = cell.pretrain_id,
        parameters = pre.parameters, pretrain_tokens_per_s = pre.tokens_per_s, pretrain_steps = pre.steps,
        pretrain_seconds = pre.train_seconds, metrics = {}}
      local reused = read_json(own .. "/reused.json")
      if reused then result.pretrain_reused_from = reused.grid .. "/pretrain/" .. reused.run end
      for _, k in ipairs(M.pretrain_metrics) do
        if type(pre[k]) == "number" then result.metrics[k] = pre[k] end
      end
      local ckpt = pretrain_dir(dir, cell.pretrain_id) .. "/checkpoint"
      for _, task in ipairs(grid.downstream) do
        local ft, reused_path = run_finetuning(cell_dir, ckpt, cell.seed, task, cell.finetune, found)
        if reused_path then
          result.finetune_reused_from = result.finetune_reused_from or {}
          result.finetune_reused_from[task.name] = reused_path
        end
        for _, k in ipairs(M.finetune_metrics) do
          if type(ft[k]) == "number" then result.metrics[task.name .. "_" .. k] = ft[k] end
        end
      end
      if grid.evaluation then
        evaluate_cell(grid.evaluation, result, ckpt, cell_dir, pre.snapshots or {},
          pretrain_dir(dir, cell.pretrain_id))
      end
      result.seconds = bert.wall_time() - t0
      write_json(cell_dir .. "/done.json", result)   -- the done-marker, written last
      ran, todo = ran + 1, todo - 1
      local per_cell = (bert.wall_time() - started) / ran
      local parts = {}
      for _, k in ipairs({"mlm_accuracy"}) do
        if result.metrics[k] then parts[#parts + 1] = string.format("%s %.4f", k, result.metrics[k]) end
      end
      for _, task in ipairs(grid.downstream) do
        local k = task.name .. "_accuracy"
        if result.metrics[k] then parts[#parts + 1] = string.format("%s %.4f", k, result.metrics[k]) end
      end
      say("[%d/%d] done in %s: %s | grid ETA %s (%d cells left)", i, #grid.cells, fmt_duration(result.seconds),
        table.concat(parts, ", "), fmt_duration(per_cell * todo), todo)
    end
  end
  return M.summarize(dir)
end

------------------------------------------------------------- summary

-- The value of axis `name` in a cell: the setting the cell ran with (the
-- fine-tuning one for "finetune.X", scaled by --budget-scale as run), or nil.
local function cell_setting(grid, cell, name)
  local ft = name:match("^finetune%.(.+)$")
  if ft then return (cell.finetune or {})[ft] end
  for _, r in ipairs(grid.pretrain_runs or {}) do
    if r.id == cell.pretrain_id then return r.settings[name] end
  end
end

--- The learning curves of a summary: for every axis whose values are
-- numbers (given as plain values, so that a cell's label holds NAME=VALUE),
-- and every metric that can depend on it (the downstream ones for a
-- fine-tuning axis), one line per combination of the other axes' values:
-- {axis, metric, logx, lines = {{label, points = {{x, mean, sd, n}}}}}.
-- rows: the summary's rows (label, metrics[k] = {mean, sd, n}).
function M.learning_curves(grid, rows, metric_names)
  local first_cell = {}
  for _, c in ipairs(grid.cells) do first_cell[c.label] = first_cell[c.label] or c end
  local pretrain_metric = {}
  for _, k in ipairs(M.pretrain_metrics) do pretrain_metric[k] = true end
  local curves = {}
  for _, axis in ipairs(grid.axes) do
    local short = axis:gsub("^finetune%.", "")
    local xs, distinct, ok = {}, {}, #rows > 0
    for _, r in ipairs(rows) do
      local x = first_cell[r.label] and cell_setting(grid, first_cell[r.label], axis)
      -- the other axes' labels: the label's parts less this axis' NAME=VALUE
      local rest, found = {}, false
      for part in (r.label .. ", "):gmatch("(.-), ") do
        if not found and part:sub(1, #short + 1) == short .. "=" then found = true else rest[#rest + 1] = part end
      end
      if type(x) ~= "number" or not found then ok = false; break end
      xs[r.label] = {x = x, line = #rest > 0 and table.concat(rest, ", ") or axis}
      distinct[x] = true
    end
    local ndistinct = 0
    for _ in pairs(distinct) do ndistinct = ndistinct + 1 end
    if ok and ndistinct >= 2 then
      local lo, hi = math.huge, -math.huge
      for _, v in pairs(xs) do lo, hi = math.min(lo, v.x), math.max(hi, v.x) end
      local logx = lo > 0 and hi / lo >= 8
      for _, k in ipairs(metric_names) do
        if not (axis:find("^finetune%.") and pretrain_metric[k]) then
          local lines, by_line = {}, {}
          for _, r in ipairs(rows) do
            local m = r.metrics[k]
            if m then
              local key = xs[r.label].line
              if not by_line[key] then
                by_line[key] = {label = key, points = {}}
                lines[#lines + 1] = by_line[key]
              end
              table.insert(by_line[key].points, {x = xs[r.label].x, mean = m.mean, sd = m.sd, n = m.n})
            end
          end
          for _, line in ipairs(lines) do table.sort(line.points, function(a, b) return a.x < b.x end) end
          if #lines > 0 then curves[#curves + 1] = {axis = axis, metric = k, logx = logx, lines = lines} end
        end
      end
    end
  end
  return curves
end

--- Each row against its baseline: the row whose label differs only in the
-- first axis, at that axis' first value (nsp: mlm and mlm-sop against
-- mlm-nsp; pretrain-vs-scratch: scratch against pretrained at each set
-- size).  Per metric with at least two seeds on both sides: the difference
-- of the means, Welch's t, and whether the difference is larger than the
-- spread (|difference| > sd + sd of the baseline: the ±sd error bars do
-- not overlap).
function M.comparisons(rows, names)
  local function parts(label)
    local t = {}
    for p in (label .. ", "):gmatch("(.-), ") do t[#t + 1] = p end
    return t
  end
  local out = {}
  if #rows < 2 then return out end
  local base_part = parts(rows[1].label)[1]
  local by_label = {}
  for _, r in ipairs(rows) do by_label[r.label] = r end
  for _, r in ipairs(rows) do
    local p = parts(r.label)
    if p[1] ~= base_part then
      p[1] = base_part
      local b = by_label[table.concat(p, ", ")]
      if b then
        local entry = {label = r.label, baseline = b.label, metrics = {}}
        for _, k in ipairs(names) do
          local x, y = r.metrics[k], b.metrics[k]
          if x and y and x.sd and y.sd then
            local d = x.mean - y.mean
            local se = math.sqrt(x.sd ^ 2 / x.n + y.sd ^ 2 / y.n)
            local m = {difference = d, welch_t = se > 0 and d / se or nil, beyond_spread = math.abs(d) > x.sd + y.sd}
            -- the stated rule (bert.stats): a finding when the 95% Welch interval excludes 0
            local w = x.values and y.values and require("bert.stats").welch(x.values, y.values)
            if w then
              m.ci95, m.df, m.p = w.ci, w.df, w.p
              m.finding = w.ci[1] > 0 or w.ci[2] < 0
            else
              m.finding = false
            end
            entry.metrics[k] = m
          end
        end
        out[#out + 1] = entry
      end
    end
  end
  return out
end

--- Rebuilds DIR/results.json, DIR/results.md and DIR/plots/ from the
-- finished cells of DIR (unfinished ones are listed as missing).  Returns
-- the results table.
function M.summarize(dir)
  local grid = read_json(dir .. "/grid.json")
  if type(grid) ~= "table" or type(grid.cells) ~= "table" then
    error("ablate: " .. dir .. "/grid.json is missing or unreadable: not an ablation directory", 0)
  end
  local rows, by_label, cells, missing, names, seen_name = {}, {}, {}, {}, {}, {}
  local is_pretrain_metric = {}
  for _, k in ipairs(M.pretrain_metrics) do is_pretrain_metric[k] = true end
  for _, cell in ipairs(grid.cells) do
    local done = read_json(dir .. "/cells/" .. cell.id .. "/done.json")
    if done and (cell.finetune or {}).from_scratch == true then
      -- fine-tuned from fresh weights: the grid's pretraining run is not this cell's model
      for k in pairs(done.metrics) do if is_pretrain_metric[k] then done.metrics[k] = nil end end
      done.pretrain_tokens_per_s = nil
    end
    if done then
      cells[#cells + 1] = done
      local row = by_label[cell.label]
      if not row then
        row = {label = cell.label, seeds = {}, values = {}, parameters = done.parameters, tokens_per_s = {}}
        by_label[cell.label] = row
        rows[#rows + 1] = row
      end
      row.seeds[#row.seeds + 1] = cell.seed
      row.tokens_per_s[#row.tokens_per_s + 1] = done.pretrain_tokens_per_s
      for k, v in pairs(done.metrics) do
        row.values[k] = row.values[k] or {}
        table.insert(row.values[k], v)
        if not seen_name[k] then seen_name[k] = true; names[#names + 1] = k end
      end
    else
      missing[#missing + 1] = cell.id
    end
  end
  -- pretraining metrics first, in their fixed order, then the downstream ones
  local order = {}
  for i, k in ipairs(M.pretrain_metrics) do order[k] = i end
  table.sort(names, function(a, b)
    local oa, ob = order[a] or 100, order[b] or 100
    if oa ~= ob then return oa < ob end
    return a < b
  end)
  local out_rows = {}
  for _, row in ipairs(rows) do
    local r = {label = row.label, seeds = row.seeds, parameters = row.parameters, metrics = {}}
    r.tokens_per_s = mean_sd(row.tokens_per_s)
    for _, k in ipairs(names) do
      if row.values[k] then
        local m, sd, n = mean_sd(row.values[k])
        r.metrics[k] = {mean = m, sd = sd, n = n, values = row.values[k]}
      end
    end
    out_rows[#out_rows + 1] = r
  end
  local results = {name = grid.name, description = grid.description, file = grid.file, budget_scale = grid.budget_scale,
    axes = grid.axes, downstream = grid.downstream, rows = out_rows, cells = cells, missing = missing,
    metric_names = names, comparisons = M.comparisons(out_rows, names)}
  write_json(dir .. "/results.json", results)

  -- the table: one row per cell, mean ± sd over seeds
  local md = {string.format("# Ablation: %s\n", grid.name)}
  if grid.description then md[#md + 1] = grid.description .. "\n" end
  md[#md + 1] = string.format("Grid file `%s`, budget scale %g; %d of %d cells finished%s. Mean ± sample sd over seeds.\n",
    grid.file, grid.budget_scale, #cells, #grid.cells,
    #missing > 0 and (" (missing: " .. table.concat(missing, " ") .. ")") or "")
  for _, p in ipairs(grid.planned or {}) do
    local vals = {}
    for _, v in ipairs(p.values) do vals[#vals + 1] = fmt_value(v) end
    md[#md + 1] = string.format("Not run (not implemented yet): %s = %s: %s.\n", p.axis, table.concat(vals, ", "), p.missing)
  end
  local head = {"cell", "seeds", "parameters", "pretraining tokens/s"}
  for _, k in ipairs(names) do head[#head + 1] = k end
  md[#md + 1] = "| " .. table.concat(head, " | ") .. " |"
  local rule = {}
  for i = 1, #head do rule[i] = i == 1 and "---" or "---:" end
  md[#md + 1] = "|" .. table.concat(rule, "|") .. "|"
  local function pm(m, sd, fmt)
    if m == nil then return "" end
    if sd == nil then return string.format(fmt, m) end
    return string.format(fmt .. " ± " .. fmt, m, sd)
  end
  for _, r in ipairs(out_rows) do
    local tps_m, tps_sd = mean_sd(by_label[r.label].tokens_per_s)
    local params = r.parameters and string.format("%d", math.floor(r.parameters + 0.5)) or ""
    local line = {r.label, tostring(#r.seeds), params, pm(tps_m, tps_sd, "%.0f")}
    for _, k in ipairs(names) do
      local m = r.metrics[k]
      line[#line + 1] = m and pm(m.mean, m.sd, k:find("perplexity$") and "%.1f" or "%.4f") or ""
    end
    md[#md + 1] = "| " .. table.concat(line, " | ") .. " |"
  end
  if #results.comparisons > 0 then
    md[#md + 1] = "\nAgainst the baseline row (the first value of the first axis): difference of the means, " ..
      "its 95% Welch interval and Welch's t. The rule: a difference is a finding when its 95% interval excludes 0 " ..
      "(**bold**); nothing else is. Metrics with fewer than two seeds on a side are left blank.\n"
    local chead, crule = {"cell", "baseline"}, {"---", "---"}
    for _, k in ipairs(names) do chead[#chead + 1] = k; crule[#crule + 1] = "---:" end
    md[#md + 1] = "| " .. table.concat(chead, " | ") .. " |"
    md[#md + 1] = "|" .. table.concat(crule, "|") .. "|"
    for _, c in ipairs(results.comparisons) do
      local line = {c.label, c.baseline}
      for _, k in ipairs(names) do
        local m = c.metrics[k]
        local cellv = ""
        if m then
          local f = k:find("perplexity$") and "%+.1f" or "%+.4f"
          cellv = string.format(f, m.difference) ..
            (m.ci95 and string.format(" [" .. f .. ", " .. f .. "]", m.ci95[1], m.ci95[2]) or "") ..
            (m.welch_t and string.format(" (t %.1f)", m.welch_t) or "")
          if m.finding then cellv = "**" .. cellv .. "**" end
        end
        line[#line + 1] = cellv
      end
      md[#md + 1] = "| " .. table.concat(line, " | ") .. " |"
    end
  end
  local ok, err = fs.write_atomic(dir .. "/results.md", table.concat(md, "\n") .. "\n")
  if not ok then error("ablate: cannot write " .. dir .. "/results.md: " .. tostring(err), 0) end

  -- plots: the pretraining curves of every finished run, and one bar chart per metric
  local plot = require("bert.plot")
  assert(bert.mkdir(dir .. "/plots"))
  local run_dirs, labels, seen_run = {}, {}, {}
  for _, c in ipairs(cells) do
    local d = pretrain_dir(dir, c.pretrain_id)
    if not seen_run[d] and fs.exists(d .. "/metrics.jsonl") then
      seen_run[d] = true
      run_dirs[#run_dirs + 1] = d
      labels[#labels + 1] = c.pretrain_id
    end
  end
  local made, perr = {}, nil
  if #run_dirs > 0 then
    local files, e = plot.runs(run_dirs, {output = dir .. "/plots", labels = labels})
    if files then for _, f in ipairs(files) do made[#made + 1] = f end else perr = e end
  end
  -- and per row (its seeds together), where the all-runs figure is crowded
  for _, r in ipairs(out_rows) do
    local rdirs, rlabels = {}, {}
    for _, c in ipairs(cells) do
      local d = pretrain_dir(dir, c.pretrain_id)
      if c.label == r.label and fs.exists(d .. "/metrics.jsonl") then
        rdirs[#rdirs + 1] = d
        rlabels[#rlabels + 1] = "seed " .. c.seed
      end
    end
    if #rdirs > 0 then
      local sub = dir .. "/plots/" .. slug(r.label)
      assert(bert.mkdir(sub))
      local files, e = plot.runs(rdirs, {output = sub, labels = rlabels})
      if files then for _, f in ipairs(files) do made[#made + 1] = f end else perr = perr or e end
    end
  end
  for _, k in ipairs(names) do
    local bars = {}
    for _, r in ipairs(out_rows) do
      if r.metrics[k] then bars[#bars + 1] = {label = r.label, mean = r.metrics[k].mean, sd = r.metrics[k].sd} end
    end
    local png = dir .. "/plots/" .. slug(k) .. ".png"
    local okb, e = plot.bars(png, grid.name .. ": " .. k .. " (mean ± sd over seeds)", k, bars)
    if okb then made[#made + 1] = png else perr = perr or e end
  end
  -- learning curves: one figure per numeric axis and metric
  for _, curve in ipairs(M.learning_curves(grid, out_rows, names)) do
    local png = dir .. "/plots/curve-" .. slug(curve.axis) .. "-" .. slug(curve.metric) .. ".png"
    local xlabel = curve.axis == "finetune.max_train" and "fine-tuning examples (finetune.max_train)" or curve.axis
    local okc, e = plot.curves(png, string.format("%s: %s against %s (mean ± sd over seeds)", grid.name, curve.metric,
      curve.axis), xlabel, curve.metric, curve.lines, {logx = curve.logx})
    curve.png, curve.data = png, png:gsub("%.png$", "") .. ".dat"
    if okc then made[#made + 1] = png else perr = perr or e end
    results.curves = results.curves or {}
    results.curves[#results.curves + 1] = curve
  end
  results.plots, results.plot_error = made, perr
  if results.curves then write_json(dir .. "/results.json", results) end   -- with the curves' points
  return results
end

return M
