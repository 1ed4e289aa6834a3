--- bert.ablate.run: runs a grid's cells (pretraining, fine-tuning, the
-- evaluation suite), resumably, reusing equal runs of the grids next to it.
local cjson = require("cjson")
local bert = require("bert")
local fs = require("bert.fs")
local pretrain = require("bert.pretrain")
local common = require("bert.ablate.common")
local report = require("bert.ablate.report")
local canonical, read_json, write_json, copy = common.canonical, common.read_json, common.write_json, common.copy
local fmt_value, slug, fmt_duration = common.fmt_value, common.slug, common.fmt_duration
local split_dir, follow, pretrain_dir = common.split_dir, common.follow, common.pretrain_dir

local M = {}

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
      -- (a run restored from an archive has its summary but no checkpoint to fine-tune)
      if key and not index[key] and fs.exists(gdir .. "/pretrain/" .. r.id .. "/summary.json")
          and fs.exists(gdir .. "/pretrain/" .. r.id .. "/checkpoint")
          and not fs.exists(gdir .. "/pretrain/" .. r.id .. "/reused.json") then
        index[key] = {grid_name = name, grid_dir = gdir, grid = g, run_id = r.id}
      end
    end
  end
  return index
end

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

-- The suite's finished tasks of the reused grid's cell from the same run and
-- seed, copied verbatim into this cell's evaluation directories (the final
-- checkpoint's and each snapshot's) where this cell has none yet, when the
-- two grids evaluate with equal settings apart from the task list: a task is
-- then evaluated once for every grid that shares the run.  Returns the cell
-- directory read and the number of tasks copied.
local function reuse_evaluations(found, seed, settings, cell_dir)
  local other = found.grid.quick_evaluation or found.grid.evaluation
  if not other then return nil, 0 end
  local function key(t)   -- the settings that decide the scores: all but the task list
    local k = copy(t)
    k.tasks, k.suite, k.learning_curve = nil, nil, nil
    return canonical(k)
  end
  local mine = key(settings)
  for _, c in ipairs(found.grid.cells or {}) do
    local theirs = copy(other)
    for k, v in pairs(c.finetune or {}) do theirs[k] = v end
    if c.pretrain_id == found.run_id and c.seed == seed and key(theirs) == mine then
      local from, copied = found.grid_dir .. "/cells/" .. c.id, 0
      for _, point in ipairs(fs.listdir(from) or {}) do
        if point == "evaluate" or point:find("^evaluate%-at%-") then
          for _, task in ipairs(fs.listdir(from .. "/" .. point .. "/tasks") or {}) do
            local text = fs.read_file(from .. "/" .. point .. "/tasks/" .. task .. "/result.json")
            local into = cell_dir .. "/" .. point .. "/tasks/" .. task
            if text and not fs.exists(into .. "/result.json") then
              for _, d in ipairs({cell_dir, cell_dir .. "/" .. point, cell_dir .. "/" .. point .. "/tasks", into}) do
                assert(bert.mkdir(d))
              end
              local ok, err = fs.write_atomic(into .. "/result.json", text)
              if not ok then error("ablate: cannot write " .. into .. "/result.json: " .. tostring(err), 0) end
              copied = copied + 1
            end
          end
        end
      end
      return from, copied
    end
  end
  return nil, 0
end

-- Runs (or resumes, or skips) one pretraining run into out; returns its summary.
local function run_pretraining(out, run)
  local done = read_json(out .. "/summary.json")
  if done then return done, "done" end
  local settings = copy(run.settings)
  settings.quiet = true
  -- checkpoint.old alone: killed mid-replace (the Trainer resumes from it)
  if fs.exists(out .. "/args.json") and (fs.exists(out .. "/checkpoint") or fs.exists(out .. "/checkpoint.old")) then
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
  opts.overwrite = true   -- a killed run's checkpoint/ is replaced: it starts again
  opts.fetch = fs.fetch_data
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
  local quick = settings.quick_scale   -- grid.quick_evaluation: one rate, no snapshots
  local quick_rate
  if quick and settings.lr_grid == nil then
    local config = read_json(ckpt .. "/config.json")
    local hidden = config and (config.hidden_size or config.dim)
    if hidden then quick_rate = {require("bert.cli").default_lr("finetune", hidden)} end
  end
  local function point(model, out, suffix, control)
    local opts = copy(settings)
    opts.quick_scale, opts.lr_grid, opts.learning_curve = nil, settings.lr_grid or quick_rate, nil
    opts.model, opts.output, opts.quiet, opts.from_scratch_control = model, out, true, control or nil
    opts.fetch = fs.fetch_data
    common.evaluation_metrics(require("bert.evaluate").run(opts), suffix, scratch, result.metrics)
  end
  -- the other cells' finished controls are read where they are this cell's too (the same
  -- architecture and tokenizer: a grid that varies only the objective runs its control once)
  local others = {}
  local cells_dir, own = split_dir(cell_dir)
  for _, name in ipairs(fs.listdir(cells_dir) or {}) do
    if name ~= own then others[#others + 1] = cells_dir .. "/" .. name .. "/evaluate" end
  end
  table.sort(others)
  settings.control_from = others
  point(ckpt, cell_dir .. "/evaluate", "", settings.from_scratch_control)
  settings.control_from = nil
  for key, v in pairs(scratch) do result.metrics[key .. "_scratch"] = v end
  -- learning_curve = false: the snapshots are kept (a shared run's settings) but not evaluated
  for _, sn in ipairs((quick or settings.learning_curve == false) and {} or snapshots) do
    point(run_dir .. "/" .. sn.name, string.format("%s/evaluate-at-%g", cell_dir, sn.fraction),
      string.format("@%g", sn.fraction), false)
  end
end

-- Wall seconds per pretraining step (evaluations and saves included) of a
-- finished run in dir or a grid next to it with the same model and batch
-- shape as `settings`, and that run's directory; nil when there is none.
local function measured_step_seconds(dir, settings)
  local parent = split_dir(dir)
  local function same(s) return s and s.batch_size == settings.batch_size and s.seq_len == settings.seq_len end
  for _, name in ipairs(fs.listdir(parent) or {}) do
    local gdir = (parent == "/" and "" or parent) .. "/" .. name
    for _, id in ipairs(fs.listdir(gdir .. "/pretrain") or {}) do
      local summary = read_json(gdir .. "/pretrain/" .. id .. "/summary.json")
      if summary and summary.model == settings.model and same(summary.settings) and (summary.steps or 0) > 0 then
        return (summary.wall_seconds or summary.train_seconds) / summary.steps, gdir .. "/pretrain/" .. id
      end
    end
  end
end

-- Seconds a pretraining step of `settings` takes here, timed on a BERT of
-- its size and batch shape with random tokens (two steps after a warm-up
-- one); nil for a model that is not a bare size.
local function timed_step_seconds(settings)
  local s = pretrain.settings(copy(settings))
  if not require("bert.models.config").sizes[s.model] then return nil end
  local vocab = s.vocab_size or 30522
  local model = bert.model("BertForMaskedLM", s.model, {vocab_size = vocab, max_position_embeddings = math.max(512, s.seq_len)})
  local opt = bert.optim.AdamW(model, {lr = 1e-4})
  local ids = bert.randint(1, vocab, {s.batch_size, s.seq_len}, {seed = 1})
  local batch = {input_ids = ids, attention_mask = bert.ones({s.batch_size, s.seq_len}, "int32"),
                 labels = bert.where(bert.rand({s.batch_size, s.seq_len}, {seed = 2}):lt(0.15), ids, -100):int()}
  local function step()
    opt:zero_grad()
    for _ = 1, s.accum do model:forward(batch).loss:backward() end
    opt:step()
  end
  step()
  local t0 = bert.wall_time()
  step()
  step()
  return (bert.wall_time() - t0) / 2
end

-- What the grid costs at its full budget, printed before it starts: the
-- pretraining steps and their time, at the step time of a finished run of
-- the same model and batch shape here, else of two steps timed now.
local function say_full_budget(grid, dir)
  local scale = grid.budget_scale or 1
  local runs = {}
  for _, t in ipairs(grid.teachers or {}) do runs[#runs + 1] = {settings = t.settings, steps = t.pretrain_steps} end
  for _, r in ipairs(grid.pretrain_runs) do runs[#runs + 1] = {settings = r.settings, steps = r.settings.steps} end
  local steps, seconds, how, timed = 0, 0, nil, {}
  for _, r in ipairs(runs) do
    local full = math.floor(r.steps / scale + 0.5)
    steps = steps + full
    local per_step, from = measured_step_seconds(dir, r.settings)
    if per_step then
      how = how or ("the step time of " .. from)
    else
      local key = canonical({r.settings.model, r.settings.batch_size, r.settings.seq_len, r.settings.accum})
      if timed[key] == nil then
        local ok, t = pcall(timed_step_seconds, r.settings)
        timed[key] = ok and t or false
      end
      per_step = timed[key] or nil
      how = how or "a BERT step of each run's size and batch shape timed now, evaluations not included"
    end
    seconds = seconds and per_step and seconds + per_step * full or nil
  end
  say("  full budget: %d pretraining runs, %d steps in all: %s%s", #runs, steps,
    seconds and string.format("about %s of pretraining (%s)", fmt_duration(seconds), how)
      or "its time is not known here (no finished run of these settings to time it by)",
    grid.evaluation and ", then the evaluation suite per cell" or "")
  if scale < 1 then
    local ev = grid.quick_evaluation
    say("  quick look (--budget-scale %g): pretraining steps x %g, held-out evaluations of %s sequences%s", scale,
      scale, tostring(grid.pretrain_runs[1].settings.max_eval or "all"),
      ev and string.format("; evaluation: seed %d only, one rate, %d steps, %d training examples, <= %d dev, " ..
        "%d BLiMP pairs per paradigm, %d held-out bytes, no snapshot evaluations", ev.seeds[1], ev.steps, ev.max_train,
        ev.max_dev, ev.blimp_pairs, ev.lm_max_bytes) or "")
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

-- Whether grid only adds to a saved grid: cells after the saved ones
-- (another seed, or an axis value when there is one seed) and tasks after
-- the saved ones in its evaluation's task list, every other setting equal
-- (the description and 'comparisons' may change),
-- so that finished cells and every shard's share of them stay where they
-- are.  The counts of cells and of evaluation tasks added.
local function extends(saved_text, grid)
  local ok, saved = pcall(cjson.decode, saved_text)
  if not ok or type(saved) ~= "table" then return nil end
  local function prefix(old, new)
    if type(old) ~= "table" or type(new) ~= "table" or #old > #new then return false end
    for i = 1, #old do if canonical(old[i]) ~= canonical(new[i]) then return false end end
    return true
  end
  if not (prefix(saved.cells, grid.cells) and prefix(saved.pretrain_runs, grid.pretrain_runs)) then return nil end
  local rest_saved, rest_new = copy(saved), copy(grid)
  -- (the description and the report's comparisons change no result)
  for _, k in ipairs({"cells", "pretrain_runs", "seeds", "description", "comparisons", "file"}) do
    rest_saved[k], rest_new[k] = nil, nil
  end
  local tasks_added = 0
  for _, k in ipairs({"evaluation", "quick_evaluation"}) do
    local old, new = rest_saved[k], rest_new[k]
    if type(old) == "table" and type(new) == "table" and old.tasks and new.tasks then
      if not prefix(old.tasks, new.tasks) then return nil end
      tasks_added = #new.tasks - #old.tasks
      rest_saved[k], rest_new[k] = copy(old), copy(new)
      rest_saved[k].tasks, rest_new[k].tasks = nil, nil
    end
  end
  if canonical(rest_saved) ~= canonical(rest_new) then return nil end
  return #grid.cells - #saved.cells, tasks_added
end

-- Whether a cell is finished: its done-marker written and, with an
-- evaluation task list, every task's result there (a grid file may add
-- tasks: a finished cell then evaluates those, its pretraining and the
-- tasks it has read, not run again).
local function cell_finished(grid, cell_dir)
  if not fs.exists(cell_dir .. "/done.json") then return false end
  local ev = grid.quick_evaluation or grid.evaluation
  for _, task in ipairs(ev and ev.tasks or {}) do
    if not fs.exists(cell_dir .. "/evaluate/tasks/" .. task .. "/result.json") then return false end
  end
  return true
end

--- Runs every cell of a grid under dir, skipping finished cells (those
-- with cells/ID/done.json), resuming a killed pretraining run from its
-- checkpoint; then writes the summary (bert.ablate.report).
function M.run(grid, dir, opts)
  opts = opts or {}
  assert(bert.mkdir(dir .. "/cells"))
  assert(bert.mkdir(dir .. "/pretrain"))
  local saved = fs.read_file(dir .. "/grid.json")
  local text = canonical(grid)
  if saved and saved:gsub("%s+$", "") ~= text and not same_settings(saved, grid) then
    local added, tasks_added = extends(saved, grid)
    if not added then
      error("ablate: " .. dir .. " holds a grid with other settings (grid.json differs; a grid file may only add " ..
        "cells after the saved ones: another seed, or an axis value last with one seed; or evaluation tasks after " ..
        "the saved ones): use another --output, or remove " .. dir, 0)
    end
    if added > 0 then
      say("ablate: %s: the grid file adds %d cell%s after the %d saved ones", dir, added, added == 1 and "" or "s",
        #grid.cells - added)
    end
    if tasks_added > 0 then
      local ev = grid.quick_evaluation or grid.evaluation
      say("ablate: %s: the grid file adds evaluation task%s %s: finished cells evaluate %s", dir,
        tasks_added == 1 and "" or "s", table.concat(ev.tasks, ", ", #ev.tasks - tasks_added + 1),
        tasks_added == 1 and "it" or "them")
    end
    saved = nil
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
    if cell_finished(grid, dir .. "/cells/" .. cell.id) then finished = finished + 1
    elseif mine(i) then todo = todo + 1 end
  end
  -- what each cell is scored on: the evaluation suite's tasks, or the first-round downstream tasks
  local e = grid.evaluation
  local scored = e and ("evaluated on " .. (e.tasks and table.concat(e.tasks, ",") or "suite " .. (e.suite or "all")))
    or string.format("%d downstream task(s)", #grid.downstream)
  say("ablate: %s: %d cells (%d finished), %d seeds, %s, output %s%s",
    grid.name, #grid.cells, finished, #grid.seeds, scored, dir,
    opts.shard and string.format(" (shard %s/%d: %d cells to run)", type(opts.shard[1]) == "table" and
      table.concat(opts.shard[1], ",") or opts.shard[1], opts.shard[2], todo) or "")
  for _, p in ipairs(grid.planned or {}) do
    local vals = {}
    for _, v in ipairs(p.values) do vals[#vals + 1] = fmt_value(v) end
    say("  not run (not implemented yet): %s = %s: %s", p.axis, table.concat(vals, ", "), p.missing)
  end
  say_full_budget(grid, dir)
  local reusable = opts.reuse ~= false and reusable_runs(dir) or {}
  local started, ran = bert.wall_time(), 0
  for i, cell in ipairs(grid.cells) do
    local cell_dir = dir .. "/cells/" .. cell.id
    if cell_finished(grid, cell_dir) then
      say("[%d/%d] %s, seed %d: finished, skipped", i, #grid.cells, cell.label, cell.seed)
    elseif not mine(i) then
      say("[%d/%d] %s, seed %d: another shard's", i, #grid.cells, cell.label, cell.seed)
    else
      local t0 = bert.wall_time()
      local before = read_json(cell_dir .. "/done.json")   -- finished before tasks were added
      if before then
        say("[%d/%d] %s, seed %d: evaluating the added tasks", i, #grid.cells, cell.label, cell.seed)
      else
        say("[%d/%d] %s, seed %d: pretraining %d steps", i, #grid.cells, cell.label, cell.seed, cell.pretrain_steps)
      end
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
      for _, k in ipairs(common.pretrain_metrics) do
        if type(pre[k]) == "number" then result.metrics[k] = pre[k] end
      end
      local ckpt = pretrain_dir(dir, cell.pretrain_id) .. "/checkpoint"
      if not fs.exists(ckpt) then   -- a finished run restored from an archive (--restore): results only
        error(string.format("ablate: cell %s needs the checkpoint of the finished pretraining run %s, which is not " ..
          "here (restored from an archive?): remove %s and %s to run the cell again", cell.id,
          pretrain_dir(dir, cell.pretrain_id), cell_dir, own), 0)
      end
      for _, task in ipairs(grid.downstream) do
        local ft, reused_path = run_finetuning(cell_dir, ckpt, cell.seed, task, cell.finetune, found)
        if reused_path then
          result.finetune_reused_from = result.finetune_reused_from or {}
          result.finetune_reused_from[task.name] = reused_path
        end
        for _, k in ipairs(common.finetune_metrics) do
          if type(ft[k]) == "number" then result.metrics[task.name .. "_" .. k] = ft[k] end
        end
      end
      if grid.evaluation then
        -- a cell's finetune.* settings (e.g. the labelled set size) apply to its suite
        local ev_settings = copy(grid.quick_evaluation or grid.evaluation)
        for k, v in pairs(cell.finetune or {}) do ev_settings[k] = v end
        if found then
          local from, copied = reuse_evaluations(found, cell.seed, ev_settings, cell_dir)
          if copied > 0 then say("  reusing %d finished evaluation tasks of %s (the same run, equal settings)", copied, from) end
          if from then result.evaluation_reused_from = from end
        end
        evaluate_cell(ev_settings, result, ckpt, cell_dir, pre.snapshots or {},
          pretrain_dir(dir, cell.pretrain_id))
      end
      result.seconds = bert.wall_time() - t0 + (before and before.seconds or 0)
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
  return report.summarize(dir)
end

return M
