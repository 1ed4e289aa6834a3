--- bert.ablate.report: a grid directory's results: results.json,
-- results.md (mean ± sd per cell, comparisons against the baseline row),
-- plots/ (pretraining curves, bars per metric, learning curves).
local bert = require("bert")
local fs = require("bert.fs")
local common = require("bert.ablate.common")
local read_json, write_json, fmt_value, slug = common.read_json, common.write_json, common.fmt_value, common.slug
local mean_sd, pretrain_dir = common.mean_sd, common.pretrain_dir

local M = {}

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
  for _, k in ipairs(common.pretrain_metrics) do pretrain_metric[k] = true end
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
-- size); then the pairs in extra ({{ROW, AGAINST}, ...} by label: the grid
-- file's 'comparisons', e.g. nsp's mlm-pairs against mlm).  Per metric
-- with at least two seeds on both sides: the difference of the means,
-- Welch's t, and whether the difference is larger than the spread
-- (|difference| > sd + sd of the baseline: the ±sd error bars do not
-- overlap).
function M.comparisons(rows, names, extra)
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
  -- the pairs: each row against its baseline, then the grid's own (extra: {{ROW, AGAINST}, ...})
  local pairs_, seen = {}, {}
  for _, r in ipairs(rows) do
    local p = parts(r.label)
    if p[1] ~= base_part then
      p[1] = base_part
      local b = by_label[table.concat(p, ", ")]
      if b then pairs_[#pairs_ + 1] = {r, b}; seen[r.label .. "\0" .. b.label] = true end
    end
  end
  for _, e in ipairs(extra or {}) do
    local r, b, key = by_label[e[1]], by_label[e[2]], e[1] .. "\0" .. e[2]
    if r and b and not seen[key] then pairs_[#pairs_ + 1] = {r, b}; seen[key] = true end
  end
  -- a from-scratch control the two cells share (the same runs on both sides) compares nothing
  local function same(x, y)
    if not (x and y and #x == #y) then return false end
    for i = 1, #x do if x[i] ~= y[i] then return false end end
    return true
  end
  for _, pair in ipairs(pairs_) do
    local r, b = pair[1], pair[2]
    local entry = {label = r.label, baseline = b.label, metrics = {}}
    for _, k in ipairs(names) do
      local x, y = r.metrics[k], b.metrics[k]
      if x and y and x.sd and y.sd and not (k:find("_scratch") and same(x.values, y.values)) then
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
  return out
end

-- An evaluation directory's results.json, or while its suite runs, the
-- tasks finished so far ({tasks = {NAME = tasks/NAME/result.json}}).
local function evaluation_results(edir)
  local r = read_json(edir .. "/results.json")
  if r or not fs.exists(edir .. "/tasks") then return r end
  local tasks, any = {}, false
  for _, name in ipairs(fs.listdir(edir .. "/tasks") or {}) do
    tasks[name] = read_json(edir .. "/tasks/" .. name .. "/result.json")
    any = any or tasks[name] ~= nil
  end
  return any and {tasks = tasks} or nil
end

-- Calls take(results, suffix) with each evaluation suite's results of a
-- cell: the final checkpoint's (suffix "") and each snapshot's ("@F").
local function each_evaluation(cell_dir, take)
  local final = evaluation_results(cell_dir .. "/evaluate")
  if final then take(final, "") end
  local names = fs.listdir(cell_dir) or {}
  table.sort(names)
  for _, name in ipairs(names) do
    local f = name:match("^evaluate%-at%-(.+)$")
    local r = f and evaluation_results(cell_dir .. "/" .. name)
    if r then take(r, "@" .. f) end
  end
end

-- An unfinished cell as its done.json would read so far (summarize's
-- interim view), or nil before its pretraining has finished: the run's
-- held-out metrics and the suite's tasks finished so far, with
-- pretrained - scratch against the final checkpoint's control as
-- evaluate_cell (bert.ablate.run) computes it.
local function partial_cell(dir, cell)
  local pre = read_json(pretrain_dir(dir, cell.pretrain_id) .. "/summary.json")
  if not pre then return nil end
  local done = {id = cell.id, label = cell.label, seed = cell.seed, pretrain_id = cell.pretrain_id,
    parameters = pre.parameters, pretrain_tokens_per_s = pre.tokens_per_s, metrics = {}, partial = true}
  for _, k in ipairs(common.pretrain_metrics) do
    if type(pre[k]) == "number" then done.metrics[k] = pre[k] end
  end
  local scratch = {}
  each_evaluation(dir .. "/cells/" .. cell.id, function(results, suffix)
    common.evaluation_metrics(results, suffix, scratch, done.metrics)
  end)
  for key, v in pairs(scratch) do done.metrics[key .. "_scratch"] = v end
  return done
end

-- The per-seed scores of a cell's evaluation suite (cells/ID/evaluate/ and
-- evaluate-at-F/ results.json), by the metric names the cell reports:
-- eval_TASK (the fine-tuning seeds' headline scores at the chosen rate),
-- eval_TASK_LANG per test language, eval_TASK_scratch (the control), each
-- with "@F" for a snapshot.  A grid of hours-long cells pretrains once per
-- cell, and then these are the spread its comparisons can use.  Per-language
-- keys are also entered in `languages` (when given) as
-- languages[key] = {task = "eval_TASK" .. suffix, language = LANG}, the
-- control's per-language scores as eval_TASK_scratch_LANG (control = true),
-- and the task's floors per language in `floors` (when given) as
-- floors[task][LANG] = {majority, bag_of_words, most_frequent_tag}.
local function evaluation_samples(cell_dir, languages, floors)
  local out = {}
  local function take(results, suffix)
    for name, r in pairs(results.tasks or {}) do
      local key = "eval_" .. name:gsub("%-", "_")
      if r.headline and r.headline.values and #r.headline.values > 0 then out[key .. suffix] = r.headline.values end
      if r.from_scratch and r.from_scratch.headline and r.from_scratch.headline.values then
        out[key .. "_scratch" .. suffix] = r.from_scratch.headline.values
      end
      for _, l in ipairs(r.languages or {}) do
        if l.values and #l.values > 0 then
          out[key .. "_" .. l.name .. suffix] = l.values
          if languages then languages[key .. "_" .. l.name .. suffix] = {task = key .. suffix, language = l.name} end
        end
      end
      for _, l in ipairs(r.from_scratch and r.from_scratch.languages or {}) do
        if l.values and #l.values > 0 then
          out[key .. "_scratch_" .. l.name .. suffix] = l.values
          if languages then
            languages[key .. "_scratch_" .. l.name .. suffix] = {task = key .. suffix, language = l.name, control = true}
          end
        end
      end
      if floors and r.language_baselines then
        floors[key .. suffix] = floors[key .. suffix] or {}
        for lang, b in pairs(r.language_baselines) do
          floors[key .. suffix][lang] = {majority = b.majority and b.majority.headline,
            bag_of_words = b.bag_of_words and b.bag_of_words.headline,
            most_frequent_tag = b.most_frequent_tag and b.most_frequent_tag.headline}
        end
      end
    end
  end
  each_evaluation(cell_dir, take)
  return out
end

-- How close to its floor a score is still "at the floor": a point.
local FLOOR_MARGIN = 0.01

-- The floors of a cell's scores, by metric name: held-out MLM (or CLM)
-- accuracy's is the unigram baseline of its pretraining summary (always
-- the commonest token); an evaluation task's is its majority class,
-- {floor = headline, one_class = runs that predicted one class, runs =
-- runs} (eval_TASK and eval_TASK@F).
local function cell_floors(cell_dir, pretraining)
  local out = {}
  for _, k in ipairs({"mlm_accuracy", "clm_accuracy"}) do
    if pretraining and pretraining[k] and pretraining.unigram_baseline_accuracy then
      out[k] = {floor = pretraining.unigram_baseline_accuracy}
    end
  end
  local function take(results, suffix)
    for name, r in pairs(results.tasks or {}) do
      local majority = r.baselines and r.baselines.majority
      if majority and majority.headline and r.headline and r.headline.values then
        out["eval_" .. name:gsub("%-", "_") .. suffix] = {floor = majority.headline, one_class = r.one_class_runs or 0,
          runs = #r.headline.values}
      end
    end
  end
  each_evaluation(cell_dir, take)
  return out
end

-- Whether a row's score m (mean over its cells) is at the floor: within
-- FLOOR_MARGIN above the mean floor, or every run predicted one class.
local function at_floor(m, floors)
  if not floors or #floors == 0 then return false end
  local sum, one_class, runs = 0, 0, 0
  for _, f in ipairs(floors) do
    sum, one_class, runs = sum + f.floor, one_class + (f.one_class or 0), runs + (f.runs or 0)
  end
  return m <= sum / #floors + FLOOR_MARGIN or (runs > 0 and one_class == runs)
end

--- Rebuilds DIR/results.json, DIR/results.md and DIR/plots/ from the
-- finished cells of DIR (unfinished ones are listed as missing).  Returns
-- the results table.  opts.interim: a look while the grid runs, into
-- DIR/results-interim.json and .md (no plots; results.md is left as it is):
-- unfinished cells whose pretraining has finished count with the tasks
-- evaluated so far, marked partial.
function M.summarize(dir, opts)
  opts = opts or {}
  local grid = read_json(dir .. "/grid.json")
  if type(grid) ~= "table" or type(grid.cells) ~= "table" then
    error("ablate: " .. dir .. "/grid.json is missing or unreadable: not an ablation directory", 0)
  end
  local rows, by_label, cells, missing, names, seen_name = {}, {}, {}, {}, {}, {}
  local is_pretrain_metric = {}
  for _, k in ipairs(common.pretrain_metrics) do is_pretrain_metric[k] = true end
  local partial = {}
  local languages = {}         -- per-language metric -> {task, language}: their own tables
  local language_floors = {}    -- task -> language -> its floors
  for _, cell in ipairs(grid.cells) do
    local done = read_json(dir .. "/cells/" .. cell.id .. "/done.json")
    if not done and opts.interim then
      done = partial_cell(dir, cell)
      if done then partial[#partial + 1] = cell.id end
    end
    if done and (cell.finetune or {}).from_scratch == true then
      -- fine-tuned from fresh weights: the grid's pretraining run is not this cell's model
      for k in pairs(done.metrics) do if is_pretrain_metric[k] then done.metrics[k] = nil end end
      done.pretrain_tokens_per_s = nil
    end
    if done then
      cells[#cells + 1] = done
      local row = by_label[cell.label]
      if not row then
        row = {label = cell.label, seeds = {}, values = {}, parameters = done.parameters, tokens_per_s = {},
          -- the cell's pretraining compute, equal across a grid's cells by design: stated, not assumed
          compute = require("bert.models.flops").pretraining(pretrain_dir(dir, cell.pretrain_id))}
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
      row.floors = row.floors or {}
      local pretraining = read_json(pretrain_dir(dir, cell.pretrain_id) .. "/summary.json")
      for k, f in pairs(cell_floors(dir .. "/cells/" .. cell.id, pretraining)) do
        row.floors[k] = row.floors[k] or {}
        table.insert(row.floors[k], f)
      end
      row.samples = row.samples or {}
      for k, vs in pairs(evaluation_samples(dir .. "/cells/" .. cell.id, languages, language_floors)) do
        row.samples[k] = row.samples[k] or {}
        for _, v in ipairs(vs) do table.insert(row.samples[k], v) end
        if not seen_name[k] then seen_name[k] = true; names[#names + 1] = k end
      end
    else
      missing[#missing + 1] = cell.id
    end
  end
  -- pretraining metrics first, in their fixed order, then the downstream ones
  local order = {}
  for i, k in ipairs(common.pretrain_metrics) do order[k] = i end
  table.sort(names, function(a, b)
    local oa, ob = order[a] or 100, order[b] or 100
    if oa ~= ob then return oa < ob end
    return a < b
  end)
  local out_rows = {}
  for _, row in ipairs(rows) do
    local r = {label = row.label, seeds = row.seeds, parameters = row.parameters, metrics = {}, compute = row.compute}
    r.tokens_per_s = mean_sd(row.tokens_per_s)
    for _, k in ipairs(names) do
      -- one pretraining run: the spread is the fine-tuning seeds' (marked in the table)
      local over_finetuning = #row.seeds == 1 and row.samples[k] ~= nil
      local vs = over_finetuning and row.samples[k] or row.values[k]
      if vs then
        local m, sd, n = mean_sd(vs)
        r.metrics[k] = {mean = m, sd = sd, n = n, values = vs, over = over_finetuning and "fine-tuning seeds" or nil,
          at_floor = at_floor(m, row.floors[k]) or nil}
      end
    end
    out_rows[#out_rows + 1] = r
  end
  local results = {name = grid.name, description = grid.description, file = grid.file, budget_scale = grid.budget_scale,
    axes = grid.axes, downstream = grid.downstream, rows = out_rows, cells = cells, missing = missing,
    metric_names = names, comparisons = M.comparisons(out_rows, names, grid.comparisons), partial = opts.interim and partial or nil}
  local base = dir .. (opts.interim and "/results-interim" or "/results")
  write_json(base .. ".json", results)

  -- the table: one row per cell, mean ± sd over seeds
  local md = {string.format("# Ablation: %s\n", grid.name)}
  if grid.description then md[#md + 1] = grid.description .. "\n" end
  md[#md + 1] = string.format("Grid file `%s`, budget scale %g; %d of %d cells finished%s%s. Mean ± sample sd over seeds.\n",
    grid.file, grid.budget_scale, #cells - #partial, #grid.cells,
    #partial > 0 and (", " .. #partial .. " partial, with the tasks evaluated so far (" .. table.concat(partial, " ") ..
      ")") or "",
    #missing > 0 and (" (missing: " .. table.concat(missing, " ") .. ")") or "")
  if opts.interim then
    md[1] = string.format("# Ablation: %s (interim, %s)\n", grid.name, os.date("!%Y-%m-%d %H:%M UTC"))
  end
  local marked = false
  for _, r in ipairs(out_rows) do for _, m in pairs(r.metrics) do marked = marked or m.over ~= nil end end
  if marked then
    md[#md + 1] = "† over the evaluation suite's fine-tuning seeds of the row's one pretraining run: the spread " ..
      "of fine-tuning, not of pretraining; a difference between such rows holds for these pretraining runs.\n"
  end
  local floored = false
  for _, r in ipairs(out_rows) do for _, m in pairs(r.metrics) do floored = floored or m.at_floor ~= nil end end
  if floored then
    md[#md + 1] = string.format("‡ at the floor: held-out MLM (CLM) accuracy within %g of the unigram baseline (always " ..
      "the commonest token), or an evaluation score within %g of the majority class or from runs that all predicted " ..
      "one class: nothing learned there yet%s.\n", FLOOR_MARGIN, FLOOR_MARGIN,
      (grid.budget_scale or 1) < 1 and ", as expected of a quick look" or "")
  end
  for _, p in ipairs(grid.planned or {}) do
    local vals = {}
    for _, v in ipairs(p.values) do vals[#vals + 1] = fmt_value(v) end
    md[#md + 1] = string.format("Not run (not implemented yet): %s = %s: %s.\n", p.axis, table.concat(vals, ", "), p.missing)
  end
  local function pm(m, sd, fmt)
    if m == nil then return "" end
    if sd == nil then return string.format(fmt, m) end
    return string.format(fmt .. " ± " .. fmt, m, sd)
  end
  local function value(m, k)
    return m and (pm(m.mean, m.sd, k:find("perplexity$") and "%.1f" or "%.4f") .. (m.over and " †" or "")
      .. (m.at_floor and " ‡" or "")) or ""
  end
  -- per-language scores (the cross-lingual tasks) get a table per task, languages as columns
  -- (English, the fine-tuning language, first), out of the wide tables
  local wide, by_task, task_order, control_key = {}, {}, {}, {}
  for _, k in ipairs(names) do
    local l = languages[k]
    if l and l.control then
      control_key[l.task] = control_key[l.task] or {}
      control_key[l.task][l.language] = k
    elseif l then
      if not by_task[l.task] then by_task[l.task] = {}; task_order[#task_order + 1] = l.task end
      table.insert(by_task[l.task], {language = l.language, key = k})
    else
      wide[#wide + 1] = k
    end
  end
  for _, t in ipairs(task_order) do
    table.sort(by_task[t], function(a, b)
      if (a.language == "en") ~= (b.language == "en") then return a.language == "en" end
      return a.language < b.language
    end)
  end
  -- The from-scratch controls of the rows, one per architecture: rows whose controls scored alike
  -- on `keys` (a control shared by several cells) are one group, {row = its first row, label}.
  local function distinct_controls(keys)
    local groups, by_scores = {}, {}
    for _, r in ipairs(out_rows) do
      local scores = {}
      for _, k in ipairs(keys) do
        local m = r.metrics[k]
        if m then scores[#scores + 1] = k .. "=" .. pm(m.mean, m.sd, "%.6g") end
      end
      if #scores > 0 then
        local key = table.concat(scores, ";")
        if not by_scores[key] then by_scores[key] = {row = r, labels = {}}; groups[#groups + 1] = by_scores[key] end
        table.insert(by_scores[key].labels, r.label)
      end
    end
    for _, g in ipairs(groups) do
      g.label = #groups == 1 and "from scratch (the control)"
        or "from scratch (the control of " .. table.concat(g.labels, ", ") .. ")"
    end
    return groups
  end
  -- the suite's headline scores at the final checkpoints, a row for the from-scratch control under
  -- them: the table a reader wants first (the full one below adds snapshots, gains, settings)
  local short = {}
  for _, k in ipairs(wide) do
    if k == "mlm_accuracy" or k == "clm_accuracy" or (k:find("^eval_") and not k:find("@")
        and not k:find("_gain$") and not k:find("_scratch$")) then
      short[#short + 1] = k
    end
  end
  if #short > 1 then
    md[#md + 1] = "Final checkpoints, the evaluation suite's headline scores:\n"
    md[#md + 1] = "| cell | " .. table.concat(short, " | ") .. " |"
    md[#md + 1] = "|---|" .. string.rep("---:|", #short)
    for _, r in ipairs(out_rows) do
      local line = {r.label}
      for _, k in ipairs(short) do line[#line + 1] = value(r.metrics[k], k) end
      md[#md + 1] = "| " .. table.concat(line, " | ") .. " |"
    end
    local control_keys = {}
    for _, k in ipairs(short) do control_keys[#control_keys + 1] = k .. "_scratch" end
    for _, c in ipairs(distinct_controls(control_keys)) do
      local line = {c.label}
      for _, k in ipairs(short) do line[#line + 1] = value(c.row.metrics[k .. "_scratch"], k) end
      md[#md + 1] = "| " .. table.concat(line, " | ") .. " |"
    end
    md[#md + 1] = ""
  end
  for _, t in ipairs(task_order) do
    local langs = by_task[t]
    local others = {}
    for _, l in ipairs(langs) do if l.language ~= "en" then others[#others + 1] = l end end
    local with_mean = #others >= 2 and #others < #langs
    md[#md + 1] = string.format("`%s` per test language (mean ± sd over the fine-tuning seeds%s):\n", t,
      with_mean and "; the last column is the mean of the other languages' means" or "")
    local h = {"cell"}
    for _, l in ipairs(langs) do h[#h + 1] = l.language end
    if with_mean then h[#h + 1] = "other languages" end
    md[#md + 1] = "| " .. table.concat(h, " | ") .. " |"
    md[#md + 1] = "|---|" .. string.rep("---:|", #h - 1)
    -- a line: its label and, per language, a metric {mean, sd} or nil
    local function add_line(label, metric_of)
      local line, sum, n = {label}, 0, 0
      for _, l in ipairs(langs) do
        local m = metric_of(l)
        line[#line + 1] = m and pm(m.mean, m.sd, "%.4f") or ""
        if m and l.language ~= "en" then sum, n = sum + m.mean, n + 1 end
      end
      if with_mean then line[#line + 1] = n == #others and string.format("%.4f", sum / n) or "" end
      md[#md + 1] = "| " .. table.concat(line, " | ") .. " |"
    end
    for _, r in ipairs(out_rows) do add_line(r.label, function(l) return r.metrics[l.key] end) end
    -- the from-scratch controls (one line per distinct control, as under the headline table)
    local control_keys = {}
    for _, l in ipairs(langs) do control_keys[#control_keys + 1] = (control_key[t] or {})[l.language] end
    for _, c in ipairs(distinct_controls(control_keys)) do
      add_line(c.label, function(l) return c.row.metrics[(control_key[t] or {})[l.language] or ""] end)
    end
    -- the floors, trained on the same English examples: the majority class, bag of words, a
    -- tagger's most frequent tag per word; a floor no language has is left out
    local floors = language_floors[t] or language_floors[t:gsub("@.*$", "")]
    for _, f in ipairs({{"majority", "majority class"}, {"bag_of_words", "bag of words"},
                        {"most_frequent_tag", "most frequent tag"}}) do
      local function floor(l)
        local v = floors and floors[l.language] and floors[l.language][f[1]]
        return v and {mean = v} or nil
      end
      local any = false
      for _, l in ipairs(langs) do any = any or floor(l) ~= nil end
      if any then add_line(f[2], floor) end
    end
    md[#md + 1] = ""
  end
  if #short > 1 or #task_order > 0 then md[#md + 1] = "All metrics:\n" end
  local head = {"cell", "seeds", "parameters", "pretraining token slots", "pretraining PFLOP", "pretraining tokens/s"}
  for _, k in ipairs(wide) do head[#head + 1] = k end
  md[#md + 1] = "| " .. table.concat(head, " | ") .. " |"
  local rule = {}
  for i = 1, #head do rule[i] = i == 1 and "---" or "---:" end
  md[#md + 1] = "|" .. table.concat(rule, "|") .. "|"
  for _, r in ipairs(out_rows) do
    local tps_m, tps_sd = mean_sd(by_label[r.label].tokens_per_s)
    local params = r.parameters and string.format("%d", math.floor(r.parameters + 0.5)) or ""
    local cmp = r.compute or {}
    local line = {r.label, tostring(#r.seeds), params, cmp.token_slots and string.format("%.3g", cmp.token_slots) or "",
      cmp.flops and string.format("%.3g", cmp.flops / 1e15) or "", pm(tps_m, tps_sd, "%.0f")}
    for _, k in ipairs(wide) do line[#line + 1] = value(r.metrics[k], k) end
    md[#md + 1] = "| " .. table.concat(line, " | ") .. " |"
  end
  if #results.comparisons > 0 then
    md[#md + 1] = "\nAgainst the baseline row (the first value of the first axis; then the pairs the grid file " ..
      "names in 'comparisons'): difference of the means, " ..
      "its 95% Welch interval and Welch's t. The rule: a difference is a finding when its 95% interval excludes 0 " ..
      "(**bold**); nothing else is. Metrics with fewer than two seeds on a side are left blank.\n"
    local function difference(m, k)
      if not m then return "" end
      local f = k:find("perplexity$") and "%+.1f" or "%+.4f"
      local v = string.format(f, m.difference) ..
        (m.ci95 and string.format(" [" .. f .. ", " .. f .. "]", m.ci95[1], m.ci95[2]) or "") ..
        (m.welch_t and string.format(" (t %.1f)", m.welch_t) or "")
      return m.finding and "**" .. v .. "**" or v
    end
    local function comparison_table(keys, titles)
      local chead, crule = {"cell", "baseline"}, {"---", "---"}
      for i = 1, #keys do chead[#chead + 1] = titles[i]; crule[#crule + 1] = "---:" end
      md[#md + 1] = "| " .. table.concat(chead, " | ") .. " |"
      md[#md + 1] = "|" .. table.concat(crule, "|") .. "|"
      for _, c in ipairs(results.comparisons) do
        local line = {c.label, c.baseline}
        for _, k in ipairs(keys) do line[#line + 1] = difference(c.metrics[k], k) end
        md[#md + 1] = "| " .. table.concat(line, " | ") .. " |"
      end
    end
    comparison_table(wide, wide)
    for _, t in ipairs(task_order) do
      local keys, titles = {}, {}
      for _, l in ipairs(by_task[t]) do keys[#keys + 1], titles[#titles + 1] = l.key, l.language end
      md[#md + 1] = string.format("\n`%s` per test language, against the baseline row as above:\n", t)
      comparison_table(keys, titles)
    end
  end
  local ok, err = fs.write_atomic(base .. ".md", table.concat(md, "\n") .. "\n")
  if not ok then error("ablate: cannot write " .. base .. ".md: " .. tostring(err), 0) end
  if opts.interim then results.plots = {} return results end

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
