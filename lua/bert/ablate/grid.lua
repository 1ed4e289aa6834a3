--- bert.ablate.grid: reads an ablation file (its format: bert.ablate)
-- and resolves its grid of cells.
local pretrain = require("bert.pretrain")
local common = require("bert.ablate.common")
local copy, fmt_value, slug = common.copy, common.fmt_value, common.slug

local M = {}

local TASK_KINDS = require("bert.finetune.tasks").kinds   -- every built-in task, the evaluation suite's included

------------------------------------------------------------- loading

-- The fields of an ablation file (bert.ablate documents them).
local FIELDS = {"name", "description", "axes", "fixed", "seeds", "budget", "downstream", "finetune", "evaluation",
  "planned", "teacher", "comparisons"}

-- Held-out sequences per pretraining evaluation in a quick look.
local QUICK_MAX_EVAL = 512

--- The evaluation settings of a quick look (budget_scale < 1): the suite's
-- work shrinks with the pretraining budget, so that the scaled grid is a
-- look at the pipeline in minutes, not a result.  One fine-tuning seed at
-- one rate (the default for the model's size; ablate.run picks it) instead
-- of a rate grid and five seeds, fine-tuning steps scaled (at least 10),
-- training sets of those steps' examples, at most 200 dev examples, BLiMP
-- pairs and held-out bytes scaled, and no evaluation of the learning-curve
-- snapshots.  The file's own settings are kept for the full budget.
function M.quick_evaluation(evaluation, scale)
  local defaults = require("bert.evaluate").defaults
  local quick = copy(evaluation)
  quick.seeds = {(evaluation.seeds or defaults.seeds)[1]}
  quick.steps = math.max(10, math.floor((evaluation.steps or defaults.steps) * scale + 0.5))
  quick.max_train = math.min(evaluation.max_train or math.huge,
    math.max(64, quick.steps * (evaluation.batch_size or defaults.batch_size)))
  quick.max_dev = math.min(evaluation.max_dev or defaults.max_dev, 200)
  quick.blimp_pairs = math.max(1, math.floor((evaluation.blimp_pairs or defaults.blimp_pairs) * scale + 0.5))
  quick.lm_max_bytes = math.max(10000, math.floor((evaluation.lm_max_bytes or 1e6) * scale))
  quick.quick_scale = scale   -- ablate.run: one rate, no snapshot evaluations
  return quick
end

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
-- runs: at least one step, held-out evaluations of 512 sequences), the
-- fine-tuning set sizes (at least 64) and the evaluation suite's work
-- (M.quick_evaluation).
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
  -- a misspelt field ('evalution') would drop its settings silently
  require("bert.options").check("ablate: " .. path, spec, FIELDS, 0, "field")
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
                downstream = {}, planned = planned, teachers = {}, evaluation = evaluation,
                -- what a quick look runs instead of the file's evaluation
                quick_evaluation = evaluation and scale < 1 and M.quick_evaluation(evaluation, scale) or nil}
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
      -- the budget in steps, from tokens with this run's batch shape; a cell's
      -- budget_factor scales its own (a compute-matched control: a student
      -- without a teacher's forward passes gets more steps for the same FLOPs)
      local function budgeted(settings, budget, what)
        local factor = settings.budget_factor or 1
        settings.budget_factor = nil
        need(type(factor) == "number" and factor > 0, (what or ("cell " .. label)) ..
          ": budget_factor must be a positive number, got " .. tostring(factor))
        local base = checked(settings, what)
        local steps = budget.steps
        if budget.tokens then
          steps = math.ceil(budget.tokens / (base.batch_size * base.accum * base.seq_len))
        end
        steps = math.max(1, math.floor(steps * factor * scale + 0.5))
        settings.steps, settings.seed = steps, seed
        if settings.save_every == nil then settings.save_every = math.max(1, math.min(200, math.ceil(steps / 5))) end
        if settings.eval_every == nil then settings.eval_every = math.max(1, math.ceil(steps / 5)) end
        -- a quick look's held-out evaluations would cost more than its training steps
        if scale < 1 and settings.max_eval == nil then settings.max_eval = QUICK_MAX_EVAL end
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
  -- comparisons beyond the baseline row's: {{ROW, AGAINST}, ...} by cell label
  if spec.comparisons ~= nil then
    need(type(spec.comparisons) == "table", "'comparisons' must be a list of {ROW, AGAINST} cell labels")
    local labels, known = {}, {}
    for _, c in ipairs(grid.cells) do
      if not labels[c.label] then labels[c.label] = true; known[#known + 1] = c.label end
    end
    for i, pair in ipairs(spec.comparisons) do
      need(type(pair) == "table" and #pair == 2 and labels[pair[1]] and labels[pair[2]] and pair[1] ~= pair[2],
        string.format("comparison %d must be two different cell labels {ROW, AGAINST}, got %s (the labels: %s)", i,
          type(pair) == "table" and common.canonical(pair) or tostring(pair), table.concat(known, ", ")))
    end
    grid.comparisons = spec.comparisons
  end
  return grid
end

return M
