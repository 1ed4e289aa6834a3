--- bert.evaluate: the evaluation suite.  One checkpoint, the field's tasks,
-- one protocol, a table with the floors beside every score.
--
--   local evaluate = require("bert.evaluate")
--   local results = evaluate.run{model = "runs/pretrain/checkpoint", suite = "glue", output = "runs/eval/x"}
--
-- Suites (SUITES): glue (CoLA, SST-2, MRPC, STS-B, RTE, WNLI), blimp
-- (zero-shot minimal pairs), squad, wnut17, pos (UD English-EWT UPOS), lm
-- (bits per byte of held-out text), all; and the cross-lingual suites xnli,
-- pawsx, ud-xling (fine-tuned on English, scored per language; not in all).
-- control_model names a second checkpoint (e.g. one pretrained on English
-- alone) that runs the same protocol into OUTPUT/control/: each score gets
-- the difference and its 95% Welch interval over the fine-tuning seeds.  The tasks and their splits are
-- bert.finetune.tasks'; the zero-shot scorers bert.evaluate.lm and
-- bert.evaluate.blimp; the floors bert.evaluate.baselines.
--
-- Fine-tuning protocol (settings, all overridable): a fixed number of
-- optimizer steps per task (not epochs: small training sets get the same
-- number of updates as large ones), the learning rate chosen on the task's
-- dev split from a small grid with the first seed, then every seed at that
-- rate; the test figure is mean ± sample sd over the seeds.  Dev is
-- evaluated once per rate, test at the chosen rate alone.  Runs that
-- predict one class for every test example are counted.  With
-- from_scratch_control the same protocol runs from random weights of the
-- same architecture; opts.control_from lists other evaluation outputs whose
-- finished control is read instead of rerun when it is the same control
-- (M.same_control: config, tokenizer files and protocol alike), and whose
-- control running in another process now (tasks/NAME/control.lock held) is
-- waited for, after the other tasks, rather than run twice.
--
-- Output directory: tasks/NAME/RUN/ (one fine-tuning run each, as
-- experiments/finetune_*.lua writes it, less the weights unless
-- keep_models), tasks/NAME/result.json (written last: a finished task is
-- skipped on a rerun; a finished run is reused), results.json, results.md.
local bert = require("bert")
local cli = require("bert.cli")
local fs = require("bert.fs")
local util = require("bert.finetune.util")
local tasks = require("bert.finetune.tasks")
local metrics = require("bert.finetune.metrics")

local M = {}

M.SUITES = {
  glue = {"cola", "sst2", "mrpc", "stsb", "rte", "wnli"},
  blimp = {"blimp"},
  squad = {"squad"},
  wnut17 = {"wnut17"},
  pos = {"pos-en"},
  lm = {"lm"},
  xnli = {"xnli"},
  pawsx = {"pawsx"},
  ["ud-xling"] = {"pos-xling"},
}
M.SUITES.all = {}
for _, s in ipairs({"glue", "blimp", "squad", "wnut17", "pos", "lm"}) do
  for _, t in ipairs(M.SUITES[s]) do table.insert(M.SUITES.all, t) end
end
M.ZERO_SHOT = {blimp = true, lm = true}

-- The GLUE average leaves WNLI out, as BERT's paper did (its train and dev
-- sets are adversarial: a model that learns the train set scores below the
-- majority class).
M.GLUE_AVERAGE = {cola = true, sst2 = true, mrpc = true, stsb = true, rte = true}

M.defaults = {
  steps = 200, seeds = {1, 2, 3}, batch_size = 32, warmup = 0.1, weight_decay = 0.01, seq_len = 128,
  -- SQuAD's 128-token windows are 2-10x longer than GLUE's sentences: batches of 16 keep its five
  -- runs within the suite's 45 minutes on 2 cores (at 32 they took 6.4 minutes each)
  qa_seq_len = 128, qa_batch_size = 16, max_dev = 1000, lr_grid = nil,   -- nil: the default rate by hidden size x {1/10, 1/3, 1}
  -- BLiMP: the first 200 pairs of each paradigm (13,400 pairs; every kind of model scores the same
  -- ones): a masked model's pseudo-log-likelihood costs a forward pass per token, and all 67,000
  -- pairs take a BERT-mini ~18 minutes on 2 cores; blimp_pairs = 1000 runs them all
  blimp_pairs = 200, lm_max_bytes = nil, heldout = "data/english/heldout.txt",
}

-- The settings every run of an output directory must share (what a run's
-- directory name, TASK/[scratch-]lrRATE-seedSEED, does not say).
M.FIXED = {"model", "tokenizer", "steps", "batch_size", "qa_batch_size", "warmup", "weight_decay", "seq_len",
  "qa_seq_len", "max_train", "max_dev", "no_varlen", "config_overrides"}

--- The task's headline score (a fraction) from its metrics, as the
-- benchmark reports it: CoLA MCC, MRPC mean of F1 and accuracy, STS-B mean
-- of Pearson and Spearman, SQuAD F1, WNUT-17 entity F1, the rest accuracy.
function M.headline(name, m)
  if m == nil then return nil end
  if name == "cola" then return m.mcc
  elseif name == "mrpc" then return m.f1 and m.accuracy and (m.f1 + m.accuracy) / 2
  elseif name == "stsb" then return m.pearson and m.spearman and (m.pearson + m.spearman) / 2
  elseif name == "squad" then return m.f1
  elseif name == "wnut17" then return m.entity_f1 or m.f1
  end
  return m.accuracy
end

M.headline_name = {cola = "MCC", mrpc = "F1/acc", stsb = "Pearson/Spearman", squad = "F1", wnut17 = "entity F1"}

--- Metrics of predictions against a task's examples (what the models'
-- evaluation reports, for the baselines): classification labels (numbers
-- for regression), tag lists for tagging.
function M.score_predictions(task, pred, examples)
  if #pred ~= #examples then
    error(string.format("score_predictions: %d predictions for %d examples of task %s", #pred, #examples, task.name), 2)
  end
  if task.kind == "classification" then
    local gold = {}
    for i, ex in ipairs(examples) do gold[i] = task.regression and tonumber(ex.label) or ex.label end
    if task.regression then
      local r = {pearson = metrics.pearson(pred, gold), spearman = metrics.spearman(pred, gold)}
      -- a constant prediction (the mean) has no correlation: scored 0, as the models' are
      if r.pearson ~= r.pearson then r.pearson = 0 end
      if r.spearman ~= r.spearman then r.spearman = 0 end
      return r
    end
    local r = {accuracy = metrics.accuracy(pred, gold), mcc = metrics.matthews_corrcoef(pred, gold)}
    if task.positive_label then r.f1 = metrics.binary_f1(pred, gold, task.positive_label) end
    return r
  elseif task.kind == "tagging" then
    local gold = {}
    for i, ex in ipairs(examples) do gold[i] = ex.tags end
    if metrics.is_entity_scheme(task.labels) then
      local e = metrics.entity_scores(pred, gold)
      return {accuracy = e.accuracy, entity_f1 = e.f1, entity_precision = e.precision, entity_recall = e.recall}
    end
    local right, n = 0, 0
    for s, tags in ipairs(gold) do
      for i, t in ipairs(tags) do n = n + 1 if pred[s][i] == t then right = right + 1 end end
    end
    return {accuracy = n > 0 and right / n or 0}
  end
  error("score_predictions: task " .. task.name .. " of kind " .. tostring(task.kind) .. " has no baseline metrics", 2)
end

--- The floors of a fine-tuning task on its test examples: {NAME = {metrics, headline}}.
-- majority (the commonest training label; for regression the mean), a
-- bag-of-words linear model (classification), the most frequent tag per
-- word (tagging).  QA has none here.
function M.baselines(task, train, test)
  local base = require("bert.evaluate.baselines")
  local out = {}
  local function add(name, pred)
    local m = M.score_predictions(task, pred, test)
    out[name] = {metrics = m, headline = M.headline(task.name, m)}
  end
  if task.kind == "classification" then
    add("majority", base.majority(train, test, {labels = task.labels, regression = task.regression}))
    -- its L2 strength is chosen on the task's dev split by the task's own headline score
    local function dev_score(pred, gold)
      local examples = {}
      for i, g in ipairs(gold) do examples[i] = {label = g} end
      local h = M.headline(task.name, M.score_predictions(task, pred, examples))
      return h or M.score_predictions(task, pred, examples).accuracy
    end
    add("bag_of_words", base.bag_of_words(train, test, {regression = task.regression, labels = task.labels,
      dev = task.dev, score = dev_score}))
  elseif task.kind == "tagging" then
    add("most_frequent_tag", base.most_frequent_tag(train, test))
  end
  return out
end

-- {============================================================ statistics

--- Mean and sample standard deviation (nil sd for one value) of a list.
M.mean_sd = require("bert.stats").mean_sd
-- }============================================================

local function say(opts, fmt, ...)
  if opts.quiet then return end
  io.stdout:write(string.format(fmt, ...), "\n")
  io.stdout:flush()
end

local read_json = require("bert.fs").read_json

-- A copy with NaN and infinities as JSON null: one undefined figure (a
-- correlation of a constant) must not lose a finished task's results.
local function finite(v)
  if type(v) == "number" then return (v == v and v ~= math.huge and v ~= -math.huge) and v or util.null end
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = finite(x) end
  return out
end

local function write_json(path, v)
  local ok, err = util.write_file(path, util.json(finite(v)) .. "\n")
  if not ok then error(string.format("evaluate: cannot write %s: %s", path, tostring(err)), 0) end
end

local function fmt_lr(lr) return (string.format("%g", lr):gsub("%+", "")) end

--- The learning-rate grid for a model of this hidden size: the default
-- fine-tuning rate and a third and a tenth of it.
function M.lr_grid(hidden_size)
  local d = cli.default_lr("finetune", hidden_size)
  return {d / 10, d / 3, d}
end

-- A progress line: run i of n with the elapsed time and, from the mean
-- time per finished run, the time left.
local function progress(opts, state, what)
  state.done = state.done or 0
  local elapsed = bert.wall_time() - state.started
  local ran = state.done - (state.skipped or 0)   -- runs made by this process: what the time was spent on
  local eta = ran > 0 and (elapsed / ran) * (state.total - state.done) or nil
  say(opts, "[evaluate %d/%d] %s | elapsed %s%s", state.done + 1, state.total, what, cli.format_duration(elapsed),
    eta and (" | ETA " .. cli.format_duration(eta)) or "")
end

-- One fine-tuning run (reused when its summary.json exists and has what
-- is asked for).  how.defer_test: trained and its checkpoint chosen on dev,
-- the test left to the handle returned third (bert.finetune.experiment's
-- defer_test; a reused run has dev figures, and test ones only if it was
-- chosen); how.no_dev_eval: no dev evaluation, for runs whose dev figure
-- nothing reads.
local function finetune_run(name, kind, dir, settings, opts, how)
  how = how or {}
  local done = read_json(dir .. "/summary.json")
  if done and (done.test or (how.defer_test and done.dev)) then return done, true end
  fs.remove_tree(dir)
  local experiment = require("bert.finetune.experiment")
  local args = {}
  for k, v in pairs(settings) do args[k] = v end
  args.task, args.output, args.quiet, args.no_plot = name, dir, not opts.verbose, true
  args.defer_test, args.no_dev_eval = how.defer_test, how.no_dev_eval
  local summary, pending = experiment.run(kind, args)
  if not pending then M.drop_model(dir, opts) end
  return summary, false, pending
end

-- A tested or released run's weights go unless keep_models.
function M.drop_model(dir, opts)
  if not opts.keep_models then fs.remove_tree(dir .. "/best") fs.remove_tree(dir .. "/tokenizer") end
end

-- The CPU seconds by phase and the evaluated features and tokens by set,
-- summed over runs' summaries (bert.finetune.experiment's cpu_seconds and
-- evaluated): where a task's time went.
local function add_costs(into, summary)
  into.cpu_seconds = into.cpu_seconds or {}
  for phase, v in pairs(summary.cpu_seconds or {}) do into.cpu_seconds[phase] = (into.cpu_seconds[phase] or 0) + v end
  into.evaluated = into.evaluated or {}
  for set, e in pairs(summary.evaluated or {}) do
    local t = into.evaluated[set] or {evaluations = 0, features = 0, tokens = 0}
    into.evaluated[set] = t
    for k in pairs(t) do t[k] = t[k] + (e[k] or 0) end
  end
end

-- The first setting of M.FIXED (but those in `except`) on which a saved
-- protocol.json and opts differ: key, saved value, opts' value; nil if none.
local function protocol_mismatch(saved, opts, except)
  for _, k in ipairs(M.FIXED) do
    local a, b = saved[k], opts[k]
    if a == util.null then a = nil end
    if b == util.null then b = nil end
    if a ~= b and not (except and except[k]) then return k, a, b end
  end
  return nil
end

local function same_value(a, b)
  if type(a) ~= "table" or type(b) ~= "table" then return a == b end
  for k, v in pairs(a) do if not same_value(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

-- A checkpoint directory's files that do not shape a from-scratch control:
-- the weights, the training state, the model card (config.json is compared
-- apart, without its "architectures": the pretraining head, which the
-- control's task head replaces).
local NOT_CONTROL = {["model.safetensors"] = true, ["optimizer.safetensors"] = true, ["trainer.json"] = true,
  ["README.md"] = true, ["config.json"] = true}

--- Whether two checkpoints give the same from-scratch control: the same
-- config (less "architectures") and byte-identical tokenizer files (every
-- other file of the directory), e.g. the cells of a grid that vary only
-- the pretraining objective.
function M.same_control(a, b)
  local finetune = require("bert.finetune")
  local da, db = finetune.model_dir(a), finetune.model_dir(b)
  if not (da and db) then return false end
  local ca, cb = read_json(da .. "/config.json"), read_json(db .. "/config.json")
  if not (ca and cb) then return false end
  ca.architectures, cb.architectures = nil, nil
  if not same_value(ca, cb) then return false end
  local function files(dir)
    local out = {}
    for _, name in ipairs(fs.listdir(dir) or {}) do
      if not NOT_CONTROL[name] and not name:find("^%.") then out[name] = fs.read_file(dir .. "/" .. name) end
    end
    return out
  end
  return same_value(files(da), files(db))
end

-- A finished control of task `name` in one of opts.control_from (another
-- evaluation's output) made with this protocol on a checkpoint that gives
-- the same control: its result, marked with where it was read; nil if none.
local function shared_control(name, opts)
  for _, other in ipairs(opts.control_from or {}) do
    local r = read_json(other .. "/tasks/" .. name .. "/result.json")
    local saved = r and r.from_scratch and read_json(other .. "/protocol.json")
    if saved and not protocol_mismatch(saved, opts, {model = true}) and not M.stale(r, opts)
        and M.same_control(saved.model, opts.model) then
      local control = r.from_scratch
      control.read_from = other
      return control
    end
  end
  return nil
end

-- Another process may be running the very control this one is about to run:
-- two shards of a grid evaluating two cells of one architecture at once (the
-- control of a GLUE task is about as long as the task itself).  A process
-- running a control holds OUTPUT/tasks/NAME/control.lock (a flock, freed by
-- its end, however it ends) until the task's result.json is written; the
-- others look for a held lock in the evaluations they read controls from.

-- The evaluations among opts.control_from whose lock for task `name` is held
-- by another process and that would give this control.
local function controls_running(name, opts)
  local busy = {}
  for _, other in ipairs(opts.control_from or {}) do
    local path = other .. "/tasks/" .. name .. "/control.lock"
    if fs.exists(path) then
      local lock, why = fs.lock_file(path)   -- held for an instant: claim_control retries its own
      if lock then lock:release()
      elseif why == "locked" then
        local saved = read_json(other .. "/protocol.json")
        if saved and not protocol_mismatch(saved, opts, {model = true}) and M.same_control(saved.model, opts.model) then
          busy[#busy + 1] = other
        end
      end
    end
  end
  return busy
end

-- Claims this task's control: the control read from another evaluation
-- (finished), or true with the lock held in state.control_lock (run it
-- here), or false when another process runs it now and opts.wait_for_control
-- is not set (come back to the task later).  With wait_for_control, waits
-- for the other process to finish or end.
local function claim_control(name, opts, state)
  local dir = opts.output .. "/tasks/" .. name
  while true do
    local found = shared_control(name, opts)
    if found then return found end
    local busy = controls_running(name, opts)
    if #busy == 0 then
      -- another process probing this lock (controls_running) holds it for an instant
      local lock, why
      for _ = 1, 50 do
        lock, why = fs.lock_file(dir .. "/control.lock")
        if lock or why ~= "locked" then break end
        os.execute("sleep 0.1")
      end
      if not lock then error("evaluate: cannot lock " .. dir .. "/control.lock: " .. tostring(why), 0) end
      -- two processes that took their locks at the same moment: the later name in
      -- byte order leaves the control to the other
      busy = controls_running(name, opts)
      local yield = false
      for _, other in ipairs(busy) do if other < opts.output then yield = true end end
      if not yield then
        state.control_lock = lock
        return true
      end
      lock:release()
    end
    if not opts.wait_for_control then
      say(opts, "[evaluate] %s: the from-scratch control is being run by another process (%s): after the other tasks",
        name, busy[1] or "?")
      return false
    end
    say(opts, "[evaluate] %s: waiting for the from-scratch control another process is running (%s)", name, busy[1] or "?")
    os.execute("sleep " .. (opts.control_poll_seconds or 60))
  end
end

--- Fine-tunes one task with the protocol; returns its result table
-- {task, kind, metric, lr_grid, dev_by_lr, lr, seeds, runs, test = {metric = {mean, sd, values}},
--  headline = {mean, sd}, one_class_runs, from_scratch = {...} (with the control), baselines,
--  cpu_seconds, evaluated}.
-- Each split is evaluated where the protocol reads it: dev once per rate
-- (with the first seed), test at the chosen rate alone (its first-seed run
-- is tested after the choice, the other rates' never), the other seeds
-- without dev evaluations (their last step is tested, as every run's is).
function M.finetune_task(name, opts, state)
  local kind = tasks.kinds[name]
  local task = tasks.load(name, {data_dir = opts.data_dir, fetch = opts.fetch})
  local dir = opts.output .. "/tasks/" .. name
  assert(bert.mkdir(opts.output .. "/tasks")) assert(bert.mkdir(dir))
  local hidden = opts.hidden_size
  local grid = opts.lr_grid or M.lr_grid(hidden)
  local base = {
    model = opts.model, tokenizer = opts.tokenizer, steps = opts.steps,
    batch_size = kind == "qa" and opts.qa_batch_size or opts.batch_size,
    warmup = opts.warmup, weight_decay = opts.weight_decay, max_train = opts.max_train, max_dev = opts.max_dev,
    max_eval = math.maxinteger, seq_len = kind == "qa" and opts.qa_seq_len or opts.seq_len, data_dir = opts.data_dir,
    -- one dev evaluation, after the last step: the rate is chosen on it, not the step
    threads = opts.threads, eval_every = opts.steps, fetch = opts.fetch, device = opts.device,
    no_varlen = opts.no_varlen, config_overrides = opts.config_overrides,
  }
  local function protocol(from_scratch)
    local tag = from_scratch and "scratch-" or ""
    local out = {dev_by_lr = {}, runs = {}}
    local metric = task.metric
    local function run_dir(lr, seed) return string.format("%s/%slr%s-seed%d", dir, tag, fmt_lr(lr), seed) end
    local function settings(lr, seed)
      local s = {} for k, v in pairs(base) do s[k] = v end
      s.lr, s.seed, s.from_scratch = lr, seed, from_scratch or nil
      return s
    end
    -- the leader: the run with the best dev score so far, its test deferred until the grid is done
    local best_lr, best_dev, leader, leader_pending
    local function drop(rate, handle)   -- a grid run that will not be tested
      if handle then handle.release() end
      M.drop_model(run_dir(rate, opts.seeds[1]), opts)
    end
    for _, lr in ipairs(grid) do
      progress(opts, state, string.format("%s%s lr %s seed %d (choosing the rate on dev)", tag, name, fmt_lr(lr),
        opts.seeds[1]))
      local r, reused, pending = finetune_run(name, kind, run_dir(lr, opts.seeds[1]), settings(lr, opts.seeds[1]), opts,
        {defer_test = true})
      state.done, state.skipped = state.done + 1, (state.skipped or 0) + (reused and 1 or 0)
      add_costs(out, r)
      local d = r.dev and r.dev[metric] or 0 / 0
      out.dev_by_lr[fmt_lr(lr)] = d
      local run = {lr = lr, seed = opts.seeds[1], dev = r.dev, test = r.test, test_sets = r.test_sets, summary = r}
      out.runs[#out.runs + 1] = run
      if leader == nil or (d == d and (best_dev == nil or d > best_dev)) then
        if leader then drop(best_lr, leader_pending) end
        best_lr, best_dev, leader, leader_pending = lr, d == d and d or nil, run, pending
      else
        drop(lr, pending)
      end
    end
    out.lr = best_lr
    if not leader.test then   -- tested now; trained again when an earlier process stopped before its test
      local r
      if leader_pending then
        local trained = leader.summary.cpu_seconds.total
        r = leader_pending.test()
        add_costs(out, {cpu_seconds = {test = r.cpu_seconds.test, total = r.cpu_seconds.total - trained},
          evaluated = {test = r.evaluated.test}})
      else
        r = finetune_run(name, kind, run_dir(best_lr, opts.seeds[1]), settings(best_lr, opts.seeds[1]), opts)
        add_costs(out, r)
      end
      M.drop_model(run_dir(best_lr, opts.seeds[1]), opts)
      leader.dev, leader.test, leader.test_sets, leader.summary = r.dev, r.test, r.test_sets, r
    end
    local chosen = {leader}
    for i = 2, #opts.seeds do
      local seed = opts.seeds[i]
      progress(opts, state, string.format("%s%s lr %s seed %d", tag, name, fmt_lr(best_lr), seed))
      local r, reused = finetune_run(name, kind, run_dir(best_lr, seed), settings(best_lr, seed), opts,
        {no_dev_eval = true})
      state.done, state.skipped = state.done + 1, (state.skipped or 0) + (reused and 1 or 0)
      add_costs(out, r)
      local run = {lr = best_lr, seed = seed, dev = r.dev, test = r.test, test_sets = r.test_sets, summary = r}
      out.runs[#out.runs + 1] = run
      chosen[#chosen + 1] = run
    end
    -- every test metric over the chosen rate's seeds
    local values, heads, one_class = {}, {}, 0
    for _, run in ipairs(chosen) do
      for k, v in pairs(run.test or {}) do
        if type(v) == "number" and k ~= "n" then values[k] = values[k] or {} table.insert(values[k], v) end
      end
      heads[#heads + 1] = M.headline(name, run.test)
      local mb = run.summary.majority_baseline
      if mb and mb.predicted_classes and mb.predicted_classes <= 1 then one_class = one_class + 1 end
      run.summary = nil
    end
    for _, run in ipairs(out.runs) do run.summary = nil end
    out.test = {}
    for k, vs in pairs(values) do
      local m, sd = M.mean_sd(vs)
      out.test[k] = {mean = m, sd = sd, values = vs}
    end
    local hm, hsd = M.mean_sd(heads)
    out.headline = {mean = hm, sd = hsd, values = heads}
    out.one_class_runs = one_class
    out.seeds = opts.seeds
    -- cross-lingual tasks: the headline per test language, over the same seeds
    if task.test_sets then
      out.languages = {}
      for _, set in ipairs(task.test_sets) do
        local vs = {}
        for _, run in ipairs(chosen) do
          local m = run.test_sets and run.test_sets[set.name]
          if m then vs[#vs + 1] = M.headline(name, m) end
        end
        local m, sd = M.mean_sd(vs)
        out.languages[#out.languages + 1] = {name = set.name, mean = m, sd = sd, values = vs, n = #set.examples}
      end
    end
    return out
  end

  local t0 = bert.wall_time()
  local result = {task = name, kind = kind, metric = task.metric, headline_name = M.headline_name[name] or "accuracy",
    description = task.description, note = task.note, lr_grid = grid, steps = opts.steps, batch_size = opts.batch_size,
    n_train = opts.max_train and math.min(opts.max_train, #task.train) or #task.train, n_dev = #task.dev,
    n_test = #task.test}
  if opts.scratch_only then   -- the control alone: its runs are kept for a later run to read
    protocol(true)
    return nil
  end
  local pre = protocol(false)
  for k, v in pairs(pre) do result[k] = v end
  if opts.from_scratch_control then
    local claim = claim_control(name, opts, state)
    if claim == false then return nil end   -- another process runs it now: the caller comes back
    if claim == true then
      result.from_scratch = protocol(true)
    else
      result.from_scratch = claim
      say(opts, "[evaluate] %s: the from-scratch control read from %s (the same architecture, tokenizer and " ..
        "protocol)", name, result.from_scratch.read_from)
    end
  end
  local train = require("bert.finetune.experiment").subset(task.train, opts.max_train, 1)
  result.baselines = M.baselines(task, train, task.test)
  if task.test_sets then
    result.language_baselines = {}
    for _, set in ipairs(task.test_sets) do result.language_baselines[set.name] = M.baselines(task, train, set.examples) end
  end
  result.seconds = bert.wall_time() - t0
  return result
end

local function same_list(a, b)
  if type(a) ~= "table" or type(b) ~= "table" or #a ~= #b then return false end
  -- JSON keeps 10 significant digits: 1e-3 / 3 comes back as 0.0003333333333
  for i = 1, #a do if math.abs(a[i] - b[i]) > 1e-8 * math.abs(b[i]) then return false end end
  return true
end

--- Why a finished task's result does not answer this run's settings (nil
-- when it does): other seeds or rates, no control when one is asked for,
-- other BLiMP pairs or held-out text.
function M.stale(r, opts)
  if r.task == "blimp" then
    return r.pairs_requested ~= (opts.blimp_pairs or util.null) and "other --blimp-pairs" or nil
  elseif r.task == "lm" then
    if r.heldout ~= opts.heldout then return "another held-out file" end
    return r.max_bytes_requested ~= (opts.lm_max_bytes or util.null) and "another --lm-max-bytes" or nil
  end
  if not same_list(r.seeds, opts.seeds) then return "other seeds" end
  if not same_list(r.lr_grid, opts.lr_grid or M.lr_grid(opts.hidden_size)) then return "another rate grid" end
  if opts.from_scratch_control and not r.from_scratch then return "no from-scratch control" end
  return nil
end

-- Loads the checkpoint and its tokenizer once for the zero-shot tasks.
local function zero_shot_model(opts)
  if opts._zs then return opts._zs.model, opts._zs.tok end
  local lm = require("bert.evaluate.lm")
  local model, tok = lm.load(opts.model, {tokenizer = opts.tokenizer, kind = opts.lm_kind})
  opts._zs = {model = model, tok = tok}
  return model, tok
end

function M.blimp_task(opts, state)
  progress(opts, state, "blimp (zero-shot minimal pairs)")
  local blimp = require("bert.evaluate.blimp")
  local model, tok = zero_shot_model(opts)
  local dir = (opts.data_dir or os.getenv("BERT_DATA") or "data") .. "/blimp"
  if not fs.exists(dir .. "/models_summary.jsonl") and opts.fetch then opts.fetch("blimp") end
  local r = blimp.run(model, tok, {dir = dir,
    pairs = opts.blimp_pairs, chunk = 4096, progress = not opts.quiet and function(done, total, seconds)
      say(opts, "  blimp: %d/%d sentences scored, %s%s", done, total, cli.format_duration(seconds),
        done < total and (", ETA " .. cli.format_duration(seconds / done * (total - done))) or "")
    end or nil})
  state.done = state.done + 1
  r.task, r.zero_shot, r.pairs_requested = "blimp", true, opts.blimp_pairs or util.null
  r.headline = {mean = r.overall}
  r.headline_name = "accuracy"
  return r
end

function M.lm_task(opts, state)
  progress(opts, state, "lm (bits per byte of held-out text)")
  local lm = require("bert.evaluate.lm")
  local model, tok = zero_shot_model(opts)
  if not fs.exists(opts.heldout) then
    if opts.fetch and opts.heldout == M.defaults.heldout then opts.fetch("english") end
    if not fs.exists(opts.heldout) then
      error(string.format("evaluate: the held-out text %s is missing: run `sh tools/fetch_data.sh english` " ..
        "(or pass --heldout FILE)", opts.heldout), 0)
    end
  end
  local r = lm.bits_per_byte(model, tok, opts.heldout, {max_bytes = opts.lm_max_bytes})
  state.done = state.done + 1
  r.task, r.zero_shot, r.heldout, r.max_bytes_requested = "lm", true, opts.heldout, opts.lm_max_bytes or util.null
  r.headline = {mean = r.bits_per_byte}
  r.headline_name = "bits per byte (lower is better)"
  return r
end

-- {============================================================ the report

local function pct(x) return x and string.format("%.1f", 100 * x) or "–" end
local function pm(h)
  if not h or not h.mean then return "–" end
  if h.sd then return string.format("%.1f ± %.1f", 100 * h.mean, 100 * h.sd) end
  return pct(h.mean)
end

--- The GLUE average of the tasks run (WNLI left out): mean of the
-- per-seed-mean headline scores.
function M.glue_average(results)
  local sum, n, names = 0, 0, {}
  for _, t in ipairs(M.SUITES.glue) do
    local r = results.tasks[t]
    if M.GLUE_AVERAGE[t] and r and r.headline and r.headline.mean then
      sum, n = sum + r.headline.mean, n + 1
      names[#names + 1] = t
    end
  end
  if n == 0 then return nil end
  return {mean = sum / n, tasks = names}
end

--- A cross-lingual task's scores per test language (English, where it was
-- fine-tuned, first), with the control checkpoint's beside them when one ran.
function M.language_table(add, r, control)
  local stats = require("bert.stats")
  local cl = {}
  for _, l in ipairs(control and control.languages or {}) do cl[l.name] = l end
  add(string.format("%s per test language (%s, mean ± sd over the seeds; fine-tuned on English only):", r.task,
    r.headline_name or "accuracy"))
  add("")
  add("| language | test examples | pretrained | from scratch | control model | pretrained − control [95% CI] | " ..
    "majority | bag of words / most frequent tag |")
  add("|---|---:|---|---|---|---|---|---|")
  local scratch = {}
  for _, l in ipairs(r.from_scratch and r.from_scratch.languages or {}) do scratch[l.name] = l end
  for _, l in ipairs(r.languages) do
    local b = (r.language_baselines or {})[l.name] or {}
    local bow = b.bag_of_words or b.most_frequent_tag
    local c, diff = cl[l.name], "–"
    if c then
      local w = stats.welch(l.values, c.values)
      if w then
        local finding = w.ci[1] > 0 or w.ci[2] < 0
        diff = string.format(finding and "**%+.1f [%+.1f, %+.1f]**" or "%+.1f [%+.1f, %+.1f]", 100 * w.difference,
          100 * w.ci[1], 100 * w.ci[2])
      elseif l.mean and c.mean then
        diff = string.format("%+.1f (no interval: fewer than two seeds or no spread)", 100 * (l.mean - c.mean))
      end
    end
    add(string.format("| %s | %d | %s | %s | %s | %s | %s | %s |", l.name, l.n or 0, pm(l),
      scratch[l.name] and pm(scratch[l.name]) or "not run", c and pm(c) or "not run", diff,
      b.majority and pct(b.majority.headline) or "–", bow and pct(bow.headline) or "–"))
  end
  add("")
end

--- results.md: one row per task, the floors beside each score.
function M.markdown(results)
  local L = {}
  local function add(s) L[#L + 1] = s end
  add("# Evaluation of " .. results.model)
  add("")
  local fine = {}
  for _, name in ipairs(results.order) do
    local r = results.tasks[name]
    if r and not M.ZERO_SHOT[name] then fine[#fine + 1] = r end
  end
  if #fine == 0 then add(string.format("%s, %s.", results.date, results.command or "")) end
  if #fine > 0 then add(string.format("%s, %s. Protocol: %d optimizer steps per task, batch %d, learning rate chosen on dev from {%s} " ..
    "with seed %d; seeds %s at that rate; test = mean ± sample sd over the seeds (percentages).",
    results.date, results.command or "", results.protocol.steps, results.protocol.batch_size,
    table.concat(results.protocol.lr_grid_text or {}, ", "), results.protocol.seeds[1],
    table.concat(results.protocol.seeds, ",")) ..
    (results.protocol.config_overrides and " Config overrides: " .. results.protocol.config_overrides .. "." or "")) end
  add("")
  if #fine > 0 then
    add("| task | metric | pretrained | from scratch | majority | bag of words / most frequent tag | lr | runs predicting one class | minutes |")
    add("|---|---|---|---|---|---|---|---|---|")
    for _, r in ipairs(fine) do
      local b = r.baselines or {}
      local bow = b.bag_of_words or b.most_frequent_tag
      add(string.format("| %s | %s | %s | %s | %s | %s | %s | %d/%d | %.1f |", r.task, r.headline_name, pm(r.headline),
        r.from_scratch and pm(r.from_scratch.headline) or "not run", b.majority and pct(b.majority.headline) or "–",
        bow and pct(bow.headline) or "–", fmt_lr(r.lr), r.one_class_runs or 0, #(r.seeds or {}), (r.seconds or 0) / 60))
    end
    local g = results.glue_average
    if g then
      add(string.format("| GLUE average (%s) | | %s | %s | | | | | |", table.concat(g.tasks, ", "), pct(g.mean),
        results.glue_average_scratch and pct(results.glue_average_scratch.mean) or "not run"))
    end
    add("")
    for _, r in ipairs(fine) do
      if r.note then add(string.format("- %s: %s.", r.task, r.note)) end
    end
    add("")
    for _, r in ipairs(fine) do
      if r.languages then M.language_table(add, r, results.control and results.control.tasks[r.task]) end
    end
  end
  local lmr = results.tasks.lm
  if lmr then
    local how = {masked = "pseudo-log-likelihood: compares between masked models only",
      causal = "log-likelihood", bilm = "the mean of the two directions' log-likelihoods"}
    add(string.format("Language modelling: **%.3f bits per byte** of %s (%d bytes, %s).",
      lmr.bits_per_byte, lmr.heldout, lmr.bytes or 0, how[lmr.kind] or tostring(lmr.kind)))
    add("")
  end
  local bl = results.tasks.blimp
  if bl then
    local blimp = require("bert.evaluate.blimp")
    add(blimp.markdown(bl))
    add("")
  end
  return table.concat(L, "\n") .. "\n"
end
-- }============================================================

--- Runs a suite (opts: model, suite or tasks, output, and the protocol's
-- settings; see M.defaults) and writes results.json and results.md.
function M.run(opts)
  local o = {}
  for k, v in pairs(M.defaults) do o[k] = v end
  for k, v in pairs(opts) do o[k] = v end
  opts = o
  if type(opts.model) ~= "string" then error("evaluate.run: opts.model must be a checkpoint directory", 2) end
  local names = opts.tasks
  if not names then
    names = M.SUITES[opts.suite or "all"]
    if not names then
      local s = {}
      for k in pairs(M.SUITES) do s[#s + 1] = k end
      table.sort(s)
      error(string.format("evaluate.run: unknown suite '%s' (%s)", tostring(opts.suite), table.concat(s, ", ")), 2)
    end
  end
  for _, n in ipairs(names) do
    if not (M.ZERO_SHOT[n] or tasks.kinds[n]) then
      error(string.format("evaluate.run: unknown task '%s'", tostring(n)), 2)
    end
  end
  if opts.threads then bert.set_num_threads(opts.threads) end
  local finetune = require("bert.finetune")
  local dir = finetune.model_dir(opts.model)
  if not dir and not opts.from_scratch then
    error(string.format("evaluate: --model %s is not a checkpoint directory (config.json + model.safetensors)",
      opts.model), 0)
  end
  local config = dir and read_json(dir .. "/config.json") or {}
  opts.hidden_size = opts.hidden_size or config.hidden_size or 128
  opts.output = opts.output or ("runs/evaluate/" .. opts.model:gsub("/+$", ""):gsub("/checkpoint$", ""):gsub("^.*/", ""))
  assert(bert.mkdir(opts.output))
  -- the runs of an output directory are read back by name (task, rate, seed): a rerun must
  -- train them the same way, or it would mix runs of two protocols without a word
  local fixed = {}
  for _, k in ipairs(M.FIXED) do fixed[k] = opts[k] == nil and util.null or opts[k] end
  local saved = read_json(opts.output .. "/protocol.json")
  if saved then
    local k, a, b = protocol_mismatch(saved, fixed)
    if k then
      local function show(v)   -- JSON's 2.0 is the 2 it was written as
        return tostring(math.type(v) == "float" and v == math.floor(v) and math.tointeger(v) or v)
      end
      error(string.format("evaluate: %s holds runs made with %s = %s, not %s: use another --output (or remove it)",
        opts.output, k, show(a), show(b)), 0)
    end
  else
    write_json(opts.output .. "/protocol.json", fixed)
  end

  -- runs to make: per fine-tuning task the grid plus the other seeds (twice with the control)
  local state = {started = bert.wall_time(), total = 0, done = 0}
  for _, n in ipairs(names) do
    if M.ZERO_SHOT[n] then state.total = state.total + (opts.scratch_only and 0 or 1)
    else
      local per = #(opts.lr_grid or M.lr_grid(opts.hidden_size)) + #opts.seeds - 1
      state.total = state.total + per * ((opts.from_scratch_control and not opts.scratch_only) and 2 or 1)
    end
  end

  local results = {model = opts.model, date = os.date("!%Y-%m-%d %H:%M UTC"), command = opts.command, order = names,
    tasks = {}, protocol = {steps = opts.steps, batch_size = opts.batch_size, seeds = opts.seeds,
      lr_grid = opts.lr_grid or M.lr_grid(opts.hidden_size), max_train = opts.max_train, max_dev = opts.max_dev,
      warmup = opts.warmup, seq_len = opts.seq_len, qa_seq_len = opts.qa_seq_len,
      config_overrides = opts.config_overrides, from_scratch_control = opts.from_scratch_control == true}}
  results.protocol.lr_grid_text = {}
  for i, lr in ipairs(results.protocol.lr_grid) do results.protocol.lr_grid_text[i] = fmt_lr(lr) end
  local deferred = {}
  local function finish_task(n, r)
    assert(bert.mkdir(opts.output .. "/tasks")) assert(bert.mkdir(opts.output .. "/tasks/" .. n))
    write_json(opts.output .. "/tasks/" .. n .. "/result.json", r)
    if state.control_lock then state.control_lock:release() state.control_lock = nil end
  end
  for _, n in ipairs(names) do
    local marker = opts.output .. "/tasks/" .. n .. "/result.json"
    local r = read_json(marker)
    local stale = r and M.stale(r, opts)
    if stale then
      say(opts, "[evaluate] %s: finished earlier with %s: evaluating it again (its runs are read where they match)",
        n, stale)
      r = nil
    end
    if r then
      say(opts, "[evaluate] %s: finished earlier (%s)", n, marker)
      local runs = M.ZERO_SHOT[n] and 1 or
        (#results.protocol.lr_grid + #opts.seeds - 1) * (opts.from_scratch_control and 2 or 1)
      state.done, state.skipped = state.done + runs, (state.skipped or 0) + runs
    elseif opts.scratch_only then
      if not M.ZERO_SHOT[n] then M.finetune_task(n, opts, state) end
    else
      local done_before, skipped_before = state.done, state.skipped
      if n == "blimp" then r = M.blimp_task(opts, state)
      elseif n == "lm" then r = M.lm_task(opts, state)
      else r = M.finetune_task(n, opts, state) end
      if r == nil then   -- its control runs in another process: this task again after the others
        deferred[#deferred + 1] = n
        state.done, state.skipped = done_before, skipped_before   -- its runs are counted then
        goto next_task
      end
      finish_task(n, r)
    end
    if opts.scratch_only then goto next_task end
    results.tasks[n] = r
    if r.headline and r.headline.mean then
      say(opts, "[evaluate] %s: %s %s%s", n, r.headline_name or "score",
        n == "lm" and string.format("%.3f", r.headline.mean) or pm(r.headline),
        r.baselines and r.baselines.majority and (" (majority " .. pct(r.baselines.majority.headline) .. ")") or "")
    end
    ::next_task::
  end
  if #deferred > 0 then   -- the tasks whose control was running elsewhere: read it when it is done
    local wait = {}
    for k, v in pairs(opts) do wait[k] = v end
    wait.wait_for_control = true
    for _, n in ipairs(deferred) do
      local r = M.finetune_task(n, wait, state)
      finish_task(n, r)
      results.tasks[n] = r
      if r.headline and r.headline.mean then say(opts, "[evaluate] %s: %s %s", n, r.headline_name or "score", pm(r.headline)) end
    end
  end
  if opts.scratch_only then
    say(opts, "[evaluate] the from-scratch control's runs are in %s/tasks/*/scratch-*: a run with --scratch " ..
      "into this directory reads them", opts.output)
    return results
  end
  results.glue_average = M.glue_average(results)
  do   -- the control's GLUE average
    local scratch = {tasks = {}}
    for k, r in pairs(results.tasks) do if r.from_scratch then scratch.tasks[k] = r.from_scratch end end
    results.glue_average_scratch = M.glue_average(scratch)
  end
  if opts.control_model then
    local c = {}
    for k, v in pairs(opts) do c[k] = v end
    c.model, c.control_model, c.output, c._zs, c.hidden_size = opts.control_model, nil, opts.output .. "/control", nil, nil
    c.from_scratch_control = false
    say(opts, "[evaluate] the control model %s, the same protocol, into %s", opts.control_model, c.output)
    results.control = {model = opts.control_model, output = c.output, tasks = M.run(c).tasks}
  end
  results.seconds = bert.wall_time() - state.started
  write_json(opts.output .. "/results.json", results)
  local md = M.markdown(results)
  local ok, err = util.write_file(opts.output .. "/results.md", md)
  if not ok then error("evaluate: cannot write results.md: " .. tostring(err), 0) end
  say(opts, "\n%s", md)
  say(opts, "wrote %s/results.json and results.md (%.1f minutes)", opts.output, results.seconds / 60)
  return results
end

return M
