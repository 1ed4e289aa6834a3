--- bert.finetune.experiment: one fine-tuning experiment from a table of
-- settings (what experiments/finetune_*.lua parse from their command
-- lines; names as the flags with _ for -).  One flow for the three kinds:
-- load the task, the tokenizer and the model (a checkpoint, or fresh
-- weights with from_scratch), encode, train with bert.train.Trainer
-- (AdamW, linear warmup and decay, an evaluation on the dev set each epoch,
-- the best checkpoint kept, early stopping with `patience`), then evaluate
-- the best checkpoint on the test set and write DIR/summary.json.
--
--   local experiment = require("bert.finetune.experiment")
--   local summary = experiment.run("classification", {task = "spam", model = "runs/demo/checkpoint", max_train = 1000})
--   local pre, scratch = experiment.compare("classification", {...})   -- the same steps from scratch
--
-- Run directory: metrics.jsonl (+ .csv), best/ (the model to use, self-
-- contained: config.json with labels and settings, model.safetensors and
-- the tokenizer files), summary.json (metrics as fractions), test
-- predictions, args.json, plots.
local bert = require("bert")
local cli = require("bert.cli")
local finetune = require("bert.finetune")
local tasks = require("bert.finetune.tasks")
local util = require("bert.finetune.util")
local batch = require("bert.finetune.batch")
local train = require("bert.train")
local fs = require("bert.fs")

local M = {}

M.DEFAULT_MODEL = "runs/demo/checkpoint"
M.DEFAULT_VOCAB = "data/bert-base-uncased/vocab.txt"

-- Per kind: the defaults that differ.
M.kinds = {
  classification = {task = "spam", epochs = 3, seq_len = 128},
  tagging = {task = "brown-pos", epochs = 3, seq_len = 128},
  qa = {task = "synthetic-qa", epochs = 2, seq_len = 256},
}

-- The defaults every kind shares (lr: by model size, see bert.cli.default_lr).
M.common = {
  model = M.DEFAULT_MODEL, batch_size = 32, accum = 1, warmup = 0.1, weight_decay = 0.01, device = "cpu", seed = 42,
  data_dir = os.getenv("BERT_DATA") or "data", eval_batch_size = 64, log_every = 10, clip = 1.0,
  passage_words = 100, max_answer_length = 30, max_query_length = 64, n_best = 20,
}

--- Settings with the defaults filled in (a new table).
function M.settings(kind, opts)
  local k = M.kinds[kind]
  if not k then error("finetune.experiment: unknown kind '" .. tostring(kind) .. "' (classification, tagging, qa)", 2) end
  local out = {}
  for key, v in pairs(M.common) do out[key] = v end
  for key, v in pairs(k) do out[key] = v end
  for key, v in pairs(opts or {}) do out[key] = v end
  return out
end

local function int(v) local n = tonumber(v) return n and math.tointeger(n) end

local dist = require("bert.distributed")   -- under mpirun: data-parallel, rank 0 prints and writes

local quiet = false
local function say(fmt, ...)
  if quiet or not dist.is_main() then return end
  io.stdout:write(string.format(fmt, ...), "\n")
  io.stdout:flush()
end

-- Writes an output file (atomically) or stops the run with the reason: a
-- run must not report files it could not write.
local function write_output(path, text)
  if not dist.is_main() then return end
  local ok, err = util.write_file(path, text)
  if not ok then error(string.format("cannot write %s: %s", path, tostring(err)), 0) end
end


-- A write that failed (a full disk) stops the run with one line naming the file.
local function written(ok, err)
  if not ok then error(tostring(err), 0) end
  return ok
end

-- A fixed random subset of at most n items (the same for every run).
local function subset(list, n, salt)
  if not n or n >= #list then return list end
  local copy = {}
  for i, v in ipairs(list) do copy[i] = v end
  util.rng(tasks.SPLIT_SEED + salt):shuffle(copy)
  return util.take(copy, n)
end
M.subset = subset   -- the evaluation suite's baselines see the same examples

local function fmt_metrics(m)
  local keys = {}
  for k, v in pairs(m) do if type(v) == "number" and k ~= "n" then keys[#keys + 1] = k end end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do
    local v = m[k]
    if k:find("accuracy") or k:find("f1$") or k:find("exact") or k:find("precision$") or k:find("recall$")
      or k == "mcc" or k:find("pearson") or k:find("spearman") then
      parts[#parts + 1] = string.format("%s %.2f%%", k, 100 * v)   -- fractions, printed as percentages
    else
      parts[#parts + 1] = string.format(math.type(v) == "integer" and "%s %d" or "%s %.4g", k, v)
    end
  end
  return table.concat(parts, ", ")
end

local function default_output(task_name, args)
  local tname = task_name:gsub("^.*/", ""):gsub("%.[%w]+$", ""):gsub("[^%w%-_]", "_")
  local mname = args.model:gsub("/+$", ""):gsub("/checkpoint$", ""):gsub("/best$", ""):gsub("^.*/", "")
  return string.format("runs/finetune/%s-%s%s", tname, mname, args.from_scratch and "-scratch" or "")
end

-- {============================================================ the kinds
-- What differs between classification, tagging and QA, in one table:
-- options(args, ctx) -> the kind's encoding and evaluation options (and
-- the settings kept in config.json); labels(x) -> the class labels of an
-- example or a prediction (for the majority baseline; nil for QA);
-- report(details, ctx) -> prints and writes the test predictions.
local KINDS = {}

KINDS.classification = {
  -- regression (STS-B) and the positive class of a binary F1 (MRPC) come
  -- from the task and are kept in config.json for the pipeline
  options = function(_, ctx)
    local o = {regression = ctx.task.regression or nil, positive_label = ctx.task.positive_label}
    return o, {regression = o.regression, positive_label = o.positive_label}
  end,
  evaluate = function(mod, m, feats, _, opts) return mod.evaluate(m, feats, opts) end,
  labels = function(x) if type(x) == "table" then return {x.label} end return {x} end,
  step_metrics = true,
  report = function(details, ctx)
    if details.confusion then say("confusion matrix (rows gold, columns predicted):\n%s", details.confusion:format()) end
    local task = ctx.task
    if task.label_names then
      local parts = {}
      for _, l in ipairs(task.labels) do parts[#parts + 1] = l .. " = " .. (task.label_names[l] or l) end
      say("  %s", table.concat(parts, "; "))
    end
    local lines = {}
    for i, ex in ipairs(ctx.test_ex) do
      lines[i] = util.json({id = ex.id or ex.line or i, gold = ex.label, predicted = details.predictions[i]})
    end
    write_output(ctx.out .. "/test_predictions.jsonl", table.concat(lines, "\n") .. "\n")
    if details.confusion then ctx.summary.confusion = details.confusion:totable() end
  end,
}

KINDS.tagging = {
  options = function(_, ctx)
    -- words without a sub-token (cut by max_length) get the commonest tag
    local counts = {}
    for _, s in ipairs(ctx.train_ex) do for _, t in ipairs(s.tags) do counts[t] = (counts[t] or 0) + 1 end end
    local fallback = finetune.tagging.fallback(ctx.task.labels, counts)
    return {fallback = fallback}, {fallback = fallback}
  end,
  evaluate = function(mod, m, feats, examples, opts) return mod.evaluate(m, feats, examples, opts) end,
  labels = function(x) if x.tags then return x.tags end return x end,
  step_metrics = true,
  report = function(details, ctx)
    if details.report then say("conlleval:\n%s", details.report) end
    if dist.is_main() then
      require("bert.finetune.readers").write_conll(ctx.out .. "/test_predictions.conll", ctx.test_ex, details.predictions)
    end
  end,
}

KINDS.qa = {
  options = function(args, ctx)
    local o = {doc_stride = args.doc_stride or math.min(128, ctx.seq_len // 4), max_query_length = args.max_query_length,
      n_best = args.n_best, max_answer_length = args.max_answer_length,
      version_2 = args.version_2 or ctx.task.version_2 == true, null_threshold = args.null_threshold or 0}
    local kept = {}
    for k, v in pairs(o) do kept[k] = v end
    return o, kept
  end,
  evaluate = function(mod, m, feats, examples, opts) return mod.evaluate(m, feats, examples, opts) end,
  report = function(details, ctx)
    write_output(ctx.out .. "/test_predictions.json", util.json(details.predictions) .. "\n")
  end,
  late_eval_features = true,
  -- SQuAD v2.0: the null threshold is tuned on dev and applied to test
  reads_dev = function(run) return run.opts.version_2 and run.args.null_threshold == nil end,
  after_dev = function(dev_best, ctx)
    if not (ctx.opts.version_2 and ctx.args.null_threshold == nil and dev_best.best_threshold) then return end
    ctx.opts.null_threshold, ctx.settings.null_threshold = dev_best.best_threshold, dev_best.best_threshold
    say("  v2.0 null threshold tuned on dev: %.3f (dev F1 %.2f%%)", dev_best.best_threshold, 100 * dev_best.best_threshold_f1)
    ctx.model.config.finetune = ctx.settings
    if dist.is_main() then written(ctx.model:save_pretrained(ctx.out .. "/best")) end
  end,
}
-- }============================================================

-- The task's examples, with the proportional evaluation of quick runs.
local function load_data(kind, args)
  local labels_opt
  if args.labels then
    labels_opt = {}
    for l in args.labels:gmatch("[^,]+") do labels_opt[#labels_opt + 1] = l end
  end
  local task = tasks.load(args.task, {
    kind = kind, data_dir = args.data_dir, version_2 = args.version_2, fine_tags = args.fine_tags,
    passage_words = args.passage_words, labels = labels_opt, fetch = args.fetch,
    text_column = int(args.text_column) or args.text_column, pair_column = int(args.pair_column) or args.pair_column,
    label_column = int(args.label_column) or args.label_column,
  })
  if args.max_train and not args.max_eval then
    -- a quick run gets a proportional evaluation, not every held-out example
    args.max_eval = math.max(1000, args.max_train)
    if #task.dev > args.max_eval or #task.test > args.max_eval then
      say("note: --max-train %d: evaluating on at most %d dev and %d test examples (--max-eval to change)",
        args.max_train, args.max_eval, args.max_eval)
    end
  end
  local train_ex = subset(task.train, args.max_train, 1)
  -- max_dev: a smaller dev set for model selection alone (the evaluation suite's)
  local dev_ex = subset(task.dev, args.max_dev or args.max_eval, 2)
  local test_ex = subset(task.test, args.max_eval, 3)
  say("task %s: %s", task.name, task.description or "")
  if task.note then say("note: %s", task.note) end
  say("  examples: train %d%s, dev %d, test %d%s", #train_ex,
    #train_ex < #task.train and (" (of " .. #task.train .. ")") or "", #dev_ex, #test_ex,
    task.labels and string.format("; %d labels", #task.labels) or "")
  return task, train_ex, dev_ex, test_ex
end

-- The tokenizer: --tokenizer, else the model's, else bert-base-uncased's vocabulary.
local function load_tokenizer(args, model_src)
  if args.tokenizer then return finetune.find_tokenizer(nil, args.tokenizer) end
  if model_src then return finetune.find_tokenizer(model_src) end
  if util.exists(M.DEFAULT_VOCAB) then return finetune.find_tokenizer(nil, M.DEFAULT_VOCAB) end
  error("no tokenizer: pass --tokenizer PATH (or run sh tools/fetch_bert_vocab.sh for " .. M.DEFAULT_VOCAB .. ")", 0)
end

-- The majority class of the training labels, scored on the test set, and
-- how many classes the model predicted (1: it learned only the prior).
local function majority_baseline(K, task, train_ex, test_ex, predictions)
  local counts = {}
  for _, ex in ipairs(train_ex) do for _, l in ipairs(K.labels(ex)) do counts[l] = (counts[l] or 0) + 1 end end
  local best_label, best_n = nil, -1
  for _, l in ipairs(task.labels) do if (counts[l] or 0) > best_n then best_label, best_n = l, counts[l] or 0 end end
  local right, n = 0, 0
  for _, ex in ipairs(test_ex) do
    for _, l in ipairs(K.labels(ex)) do
      n = n + 1
      if l == best_label then right = right + 1 end
    end
  end
  local seen, distinct = {}, 0
  for _, pred in ipairs(predictions) do
    for _, l in ipairs(K.labels(pred)) do
      if not seen[l] then seen[l] = true; distinct = distinct + 1 end
    end
  end
  return {label = best_label, accuracy = n > 0 and right / n or 0, predicted_classes = distinct}
end

-- A progress function for the evaluations (a line rewritten in place on a
-- terminal, quarter steps otherwise); name() says which set.
local function eval_progress(name)
  local tty = os.getenv("TERM") ~= nil and os.execute("test -t 2") == true
  local last = -1
  return function(done, total)
    if done == 0 then last = -1 end   -- a new evaluation
    local pct = total > 0 and (100 * done // total) or 100
    if tty then
      io.stderr:write(string.format("\r  evaluating %s: %d/%d batches\27[K", name(), done, total))
      if done == total then io.stderr:write("\r\27[K") end
    elseif done > 0 and (pct >= last + 25 or done == total) then
      io.stderr:write(string.format("  evaluating %s: %d/%d batches\n", name(), done, total))
      last = pct
    end
    io.stderr:flush()
  end
end

-- {============================================================ run
-- M.run goes in stages, each filling in its part of `run`, the table of one
-- experiment's state: settings, data, tokenizer and model, features, run
-- directory, trainer, training, test, summary.

-- A resumed run's settings: its args.json, except where to resume from.
local function resumed_settings(args)
  local text = util.read_file(args.resume .. "/args.json")
  local saved = text and util.decode_json(text)
  if type(saved) ~= "table" then
    error("--resume: " .. args.resume .. "/args.json is missing or unreadable; not a fine-tuning run directory", 0)
  end
  local resume, fetch = args.resume, args.fetch
  args = {}
  for k, v in pairs(saved) do   -- JSON has one number type: whole numbers come back as integers
    args[k] = (math.type(v) == "float" and v == math.floor(v) and math.tointeger(v)) or v
  end
  args.resume, args.output, args.fetch = resume, resume, fetch
  return args
end

-- The run's settings (defaults filled in), threads and seed: a new `run`.
local function start(kind, args)
  args = M.settings(kind, args)
  local run = {kind = kind, args = args, K = KINDS[kind], mod = finetune.kind_module(kind), t_start = bert.wall_time(),
    cpu_start = os.clock(), cpu = {encode = 0, train = 0, dev = 0, test = 0}, evaluated = {}}
  quiet = args.quiet == true
  run.sizes = setmetatable({}, {__index = function(_, name)   -- FAMILY-SIZE or a bare size name
    local r = bert.models.resolve(name)
    return r and r.size ~= nil or nil
  end})
  if args.threads then bert.set_num_threads(args.threads) end
  bert.manual_seed(args.seed)
  if run.sizes[args.model] and not args.from_scratch then
    say("note: --model %s is a size name: random initialisation (as --from-scratch)", args.model)
    args.from_scratch = true
  end
  if not run.sizes[args.model] and not finetune.model_dir(args.model) then   -- said before the data are read
    if args.model == M.DEFAULT_MODEL then
      error(string.format("no model at %s (the demo's pretrained checkpoint): pass --model DIR, " ..
        "or --model mini --from-scratch", M.DEFAULT_MODEL), 0)
    end
    local _, why = bert.models.resolve(args.model)   -- FAMILY-SIZE's own reason (an unknown family or size)
    error("--model: " .. (why or (args.model .. " holds no config.json (nor best/ or checkpoint/)")), 0)
  end
  return run
end

-- run.tok (and tok_path, pad_id), run.model (and info, seq_len, packs),
-- the kind's run.opts and run.settings (kept in config.json), run.ctx.
local function load_model(run)
  local args, K, task = run.args, run.K, run.task
  local model_src = not run.sizes[args.model] and finetune.model_dir(args.model) or nil
  local tok, tok_path = load_tokenizer(args, model_src)
  run.tok, run.tok_path = tok, tok_path
  run.pad_id = tok:token_to_id("[PAD]") or tok:token_to_id("<pad>") or 0
  run.ctx = {args = args, task = task, train_ex = run.train_ex, test_ex = run.test_ex, seq_len = args.seq_len}
  local opts, kept = K.options(args, run.ctx)
  local settings = {task = task.name, kind = run.kind, max_length = args.seq_len}
  for k, v in pairs(kept or {}) do settings[k] = v end
  run.opts, run.kept, run.settings = opts, kept, settings
  local model, info = finetune.load_model(model_src or args.model, {
    kind = run.kind, labels = task.labels, regression = task.regression, from_scratch = args.from_scratch, tokenizer = tok,
    finetune = settings, config = args.config_overrides and assert(cli.config_overrides(args.config_overrides)),
    config_source = "--config-overrides",
  })
  local seq_len = args.seq_len
  local maxpos = model.config.max_position_embeddings
  if seq_len > maxpos then
    say("note: --seq-len %d exceeds the model's %d positions: using %d", seq_len, maxpos, maxpos)
    seq_len = maxpos
    settings.max_length = maxpos
  end
  if args.device == "vulkan" then
    if not model.to then error("--device vulkan: this build has no Vulkan support", 0) end
    model:to("vulkan")
  end
  -- packed batches (varlen): the padding is never computed, in training and
  -- evaluation (dropout draws the padded path's masks: the same run on any rank count)
  local varlen = args.varlen ~= false and not args.no_varlen
  local _, packs = model:set_varlen(varlen)
  if varlen and not packs then
    say("note: %s runs padded batches (its relative attention needs the [batch x seq] grid)", model.architecture)
  end
  say("model: %s, %s (%.1fM parameters, hidden %d, %d layers), %s", model.architecture,
    info.from_scratch and ("random init, config of " .. info.source) or ("pretrained " .. info.source),
    model:num_parameters() / 1e6, model.config.hidden_size, model.config.num_hidden_layers,
    "tokenizer " .. tok_path .. " (" .. tok:vocab_size() .. " tokens)")
  if info.missing and #info.missing > 0 then
    say("  newly initialised: %s", table.concat(info.missing, ", "))
  end
  run.model, run.info, run.seq_len, run.maxpos, run.packs = model, info, seq_len, maxpos, packs
end

-- run.train_f: the training examples as model inputs
local function encode(run)
  local opts, tok, mod = run.opts, run.tok, run.mod
  local t0, c0 = bert.wall_time(), os.clock()
  opts.max_length, opts.labels, opts.pad_id, opts.batch_size = run.seq_len, run.task.labels, run.pad_id, run.args.eval_batch_size
  -- training features carry what the loss reads (QA's windows leave their character offsets out)
  run.train_f = mod.encode(tok, run.train_ex, setmetatable({training = true}, {__index = opts}))
  run.cpu.encode = os.clock() - c0
  run.n_train_features = #run.train_f
  if not run.K.late_eval_features then   -- their errors (an unknown label) come before the training
    run.dev_f, run.test_f = mod.encode(tok, run.dev_ex, opts), mod.encode(tok, run.test_ex, opts)
    run.cpu.encode = os.clock() - c0
  end
  local ntok = 0
  for _, f in ipairs(run.train_f) do ntok = ntok + #f.ids end
  say("encoded in %.1fs: %d training features (mean %.0f tokens), %s", bert.wall_time() - t0, #run.train_f,
    ntok / math.max(#run.train_f, 1), run.dev_f and string.format("%d dev, %d test", #run.dev_f, #run.test_f)
      or "dev and test when they are evaluated")
end

-- The dev or test set's features (run.dev_f, run.test_f); a kind with
-- late_eval_features encodes them on first use: every garbage collection
-- walks the live features (a full one after each backward), and SQuAD's
-- dev and test windows alive while training made a BERT-mini's steps 20%
-- slower.
local function features(run, set)
  local key = set .. "_f"
  if not run[key] then
    local c0 = os.clock()
    run[key] = run.mod.encode(run.tok, run[set .. "_ex"], run.opts)
    run.cpu.encode = run.cpu.encode + os.clock() - c0
  end
  return run[key]
end

-- run.out: the run directory, locked (run.lock: one writer), with args.json
-- and the tokenizer; a fresh run refuses a finished or resumable run there
-- unless --overwrite, which drops that run's results and says so
local function prepare_output(run)
  local args = run.args
  local out = args.output or default_output(run.task.name, args)
  if dist.is_main() then
    local ok, err = bert.mkdir(out)
    if not ok then error(err, 0) end
    local lock, lerr = fs.lock_run_dir(out)
    if not lock then error(lerr, 0) end
    run.lock = lock
  end
  if not args.resume and dist.is_main() then
    local refused = fs.refuse_previous_run(out, args.overwrite)
    if refused then error(refused, 0) end
    local previous = fs.previous_run(out)
    if previous then say("--overwrite: replacing %s in %s", previous, out) end
    for _, p in ipairs({"metrics.jsonl", "metrics.csv", "summary.json"}) do os.remove(out .. "/" .. p) end
    fs.remove_tree(out .. "/checkpoint")
    fs.remove_tree(out .. "/best")
  end
  local saved_args = {}   -- the run's settings, not what this invocation may replace
  for k, v in pairs(args) do
    if type(v) ~= "function" and type(v) ~= "userdata" and k ~= "overwrite" then saved_args[k] = v end
  end
  write_output(out .. "/args.json", util.json(saved_args) .. "\n")
  local tok_dir = out .. "/tokenizer"
  if dist.is_main() then
    written(bert.mkdir(tok_dir))
    written(require("bert.model_dir").save_tokenizer(tok_dir, run.tok, {model_max_length = run.maxpos}))
  end
  run.out = out
end

-- run.trainer (resumed from the checkpoint with args.resume), with
-- run.evaluate(m, feats, examples, name), run.lr, run.total (steps; a time
-- budget fixes it before training), run.per_epoch, run.epoch_evals (the
-- dev results) and run.warmup_of(n)
local function make_trainer(run)
  local args, K, task, model, opts = run.args, run.K, run.task, run.model, run.opts
  local eval_name = "dev"
  if not quiet and dist.is_main() then opts.progress = eval_progress(function() return eval_name end) end
  -- each evaluation's CPU time and work, by set (dev; test and the other test sets)
  function run.evaluate(m, feats, examples, name)
    eval_name = name
    local c0 = os.clock()
    local r, details = K.evaluate(run.mod, m, feats, examples, opts)
    local set = name == "dev" and "dev" or "test"
    run.cpu[set] = run.cpu[set] + os.clock() - c0
    local e = run.evaluated[set] or {evaluations = 0, features = 0, tokens = 0}
    run.evaluated[set] = e
    e.evaluations, e.features = e.evaluations + 1, e.features + #feats
    for _, f in ipairs(feats) do e.tokens = e.tokens + #f.ids end
    return r, details
  end
  -- packed, a training batch is as wide as its longest sequence: the varlen
  -- attention then draws the padded path's dropout masks (packing.attention)
  local loader = batch.Loader(run.train_f, {batch_size = args.batch_size, seed = args.seed,
    collate = {pad_id = run.pad_id, pad_multiple = run.packs and 1 or nil}})
  local per_epoch = math.max(1, math.ceil(loader:steps_per_epoch() / args.accum))   -- optimizer steps
  run.per_epoch, run.total = per_epoch, args.steps or per_epoch * args.epochs
  local lr = args.lr or cli.default_lr("finetune", model.config.hidden_size)
  if not args.lr then
    say("learning rate %g: the default for hidden size %d (--lr to change)", lr, model.config.hidden_size)
  end
  run.lr = lr
  -- linear warmup and decay over `total` steps; with a time budget the
  -- total becomes the steps that fit, once, before training (fit)
  function run.warmup_of(n) return cli.warmup_steps(args.warmup, n) end
  local function lr_at(step)
    local total = run.total
    local w = run.warmup_of(total)
    if step < w then return lr * (step + 1) / w end
    return lr * math.max(0, (total - step) / math.max(1, total - w))
  end
  -- a frozen encoder (ELMo's biLM under its scalar mix) is neither updated nor decayed
  local params = model.trainable_parameters and model:trainable_parameters() or model:named_parameters()
  local opt = bert.optim.AdamW(params, {lr = lr, weight_decay = args.weight_decay})
  run.epoch_evals = {}
  local trainer
  trainer = train.Trainer{
    model = model, optimizer = opt,
    schedule = lr_at,
    next_batch = function() return loader:next() end,
    steps = run.total, time_budget = args.time_budget, clip = args.clip > 0 and args.clip or nil,
    patience = args.patience, tokenizer = run.tok, accum = args.accum, fingerprint = args,   -- same on every rank
    output = run.out, save_every = per_epoch, eval_every = args.eval_every or per_epoch, log_every = args.log_every,
    keep_best = task.metric,
    evaluate = not args.no_dev_eval and function(m)   -- on the dev set; the Trainer prints and logs the result
      local r = run.evaluate(m, features(run, "dev"), run.dev_ex, "dev")
      r.epoch = trainer.step / per_epoch
      run.epoch_evals[#run.epoch_evals + 1] = r
      return r
    end or nil,
    step_metrics = K.step_metrics and not task.regression and function(o, b)
      -- packed per-token logits [N, C]: the labels of the same rows
      local labels = (o.packing and b.labels:dim() == 2) and o.packing:pack(b.labels) or b.labels
      return {accuracy = (train.accuracy(o.logits, labels))}
    end or nil,
    progress = not quiet,
    get_state = function() return loader:state() end,
    set_state = function(s) loader:set_state(s) end,
  }
  if args.resume and trainer:resume() then say("resumed from %s/checkpoint at step %d", run.out, trainer.step) end
  run.trainer = trainer
end

-- Trains: run.result (the Trainer's summary); a run that never evaluated
-- (a time budget ran out first) is evaluated and kept as best/ now.
local function fit(run)
  local args, trainer, per_epoch = run.args, run.trainer, run.per_epoch
  local planned = run.total
  if args.time_budget then   -- the steps that fit, fixed once after a short calibration
    trainer:fit_to_budget{max_steps = run.total, on_total = function(t) run.total = t end,
      time_evaluation = not args.no_dev_eval and function(m) return run.evaluate(m, features(run, "dev"), run.dev_ex, "dev") end
        or nil}
  end
  local total = run.total
  say("training: %d steps (%s x %d steps, batch %d), lr %.1e, warmup %d steps, %s%s -> %s",
    total, (args.steps or total ~= planned) and string.format("%.2f epochs", total / per_epoch)
      or (args.epochs .. (args.epochs == 1 and " epoch" or " epochs")), per_epoch, args.batch_size, run.lr, run.warmup_of(total),
    args.no_dev_eval and "no dev evaluation (the last step's model is tested)"
      or string.format("eval on dev each %d steps", args.eval_every or per_epoch),
    args.time_budget and string.format(" (what fits %g s%s)", args.time_budget,
      total == planned and ", capped by " .. (args.steps and "--steps" or "--epochs") or "") or "", run.out)
  local c0, dev0 = os.clock(), run.cpu.dev
  run.result = trainer:run()
  run.cpu.train = os.clock() - c0 - (run.cpu.dev - dev0)
  if args.no_dev_eval then
    trainer.best_step = trainer.step
    written(trainer:save("best"))
  elseif trainer.best == nil then
    -- no evaluation happened (a time budget ran out first): evaluate and keep this model
    local r = bert.no_grad(function() return run.evaluate(run.model, features(run, "dev"), run.dev_ex, "dev") end)
    say("  dev at step %d: %s", trainer.step, fmt_metrics(r))
    r.epoch = trainer.step / per_epoch
    run.epoch_evals[#run.epoch_evals + 1] = r   -- test_best reads it: dev is not scored twice
    trainer.best, trainer.best_step = r[run.task.metric], trainer.step
    trainer:log({step = trainer.step, eval = r})
    written(trainer:save("best"))
  end
end

-- The checkpoint chosen on dev, in run.model, and its dev result
-- (run.dev_best; nil for a run without dev evaluations).
local function choose_checkpoint(run)
  local K, model, trainer, ctx = run.K, run.model, run.trainer, run.ctx
  local best_dir = run.out .. "/best"
  if run.args.no_dev_eval then
    run.dev_best = nil
  elseif trainer.best_step == trainer.step and #run.epoch_evals > 0 then
    -- the last evaluation was the best: the model in memory is best/ and its dev result is known
    run.dev_best = run.epoch_evals[#run.epoch_evals]
  else
    local weights = assert(bert.load_safetensors(best_dir .. "/model.safetensors"))
    model:load_state_dict(weights)
    model:evaluate()
    run.dev_best = bert.no_grad(function() return (run.evaluate(model, features(run, "dev"), run.dev_ex, "dev")) end)
  end
  model:evaluate()
  ctx.opts, ctx.settings, ctx.model, ctx.out = run.opts, run.settings, model, run.out
  if K.after_dev and run.dev_best then K.after_dev(run.dev_best, ctx) end
end

-- The chosen checkpoint on test (run.test_r, run.details), and the
-- majority-class baseline (run.majority): a model must beat it; one that
-- predicts a single class is flagged.
local function test_checkpoint(run)
  local K, task, model = run.K, run.task, run.model
  model:evaluate()
  local tt = bert.wall_time()
  run.test_r, run.details = bert.no_grad(function() return run.evaluate(model, features(run, "test"), run.test_ex, "test") end)
  say("test (%d examples, %.1fs): %s", #run.test_ex, bert.wall_time() - tt, fmt_metrics(run.test_r))
  -- a cross-lingual task: the same model on every language's test set
  for _, set in ipairs(task.test_sets or {}) do
    local ex = subset(set.examples, run.args.max_eval, 3)
    run.test_sets = run.test_sets or {}
    run.test_sets[set.name] = set.examples == task.test and run.test_r or bert.no_grad(function()
      return (run.evaluate(model, run.mod.encode(run.tok, ex, run.opts), ex, "test " .. set.name)) end)
    say("  test %s (%d examples): %s", set.name, #ex, fmt_metrics(run.test_sets[set.name]))
  end

  if K.labels and not task.regression then
    local majority = majority_baseline(K, task, run.train_ex, run.test_ex, run.details.predictions)
    say("  majority-class baseline (always '%s'): accuracy %.2f%%", tostring(majority.label), 100 * majority.accuracy)
    if majority.predicted_classes <= 1 then
      say("  WARNING: the model predicts one class for every test example: it has learned nothing beyond the " ..
        "class prior (train longer, raise --lr, or use more data)")
    end
    run.majority = majority
  end
end

--- The epochs `steps` optimizer steps make, to two decimals (an integer when whole).
function M.epochs_run(steps, per_epoch)
  local e = math.floor(100 * steps / per_epoch + 0.5) / 100
  return math.tointeger(e) or e
end

-- summary.json's table; the kind's report (its printout, the test
-- predictions) and summary.json written.
local function write_summary(run)
  local args, task, model, info, result, test_r = run.args, run.task, run.model, run.info, run.result, run.test_r
  local summary = {
    task = task.name, kind = run.kind, model = args.model, from_scratch = info.from_scratch == true,
    architecture = model.architecture, parameters = model:num_parameters(),
    test = test_r, test_sets = run.test_sets, dev = run.dev_best, dev_per_eval = run.epoch_evals,
    majority_baseline = run.majority,
    stopped_early = result.stopped_early,
    -- what ran, not what was asked for (a time budget or --steps may stop mid-epoch)
    steps = result.step, epochs = M.epochs_run(result.step, run.per_epoch), train_seconds = result.train_seconds, tokens_per_s = result.tokens_per_s,
    wall_seconds = run.wall_seconds,
    -- CPU seconds (every thread; meaningful on a loaded machine) by phase, and what each evaluation set cost
    cpu_seconds = run.cpu, evaluated = run.evaluated,
    n_train = #run.train_ex, n_train_features = run.n_train_features, n_dev = #run.dev_ex, n_test = #run.test_ex,
    settings = {lr = run.lr, batch_size = args.batch_size, accum = args.accum, seq_len = run.seq_len,
      warmup = run.warmup_of(run.total), weight_decay = args.weight_decay, seed = args.seed, tokenizer = run.tok_path,
      labels = task.labels},
  }
  for k, v in pairs(run.kept or {}) do summary.settings[k] = run.settings[k] or v end
  for _, k in ipairs({"accuracy", "macro_f1", "mcc", "pearson", "spearman", "entity_f1", "entity_precision",
                      "entity_recall", "exact_match", "f1"}) do
    if test_r and test_r[k] ~= nil then summary[k] = test_r[k] end
  end
  run.ctx.summary = summary
  if run.details then run.K.report(run.details, run.ctx) end
  write_output(run.out .. "/summary.json", util.json(summary) .. "\n")
  return summary
end

-- Rank 0: the kept model needs no optimizer state; the resumable
-- checkpoint goes unless asked for; the metrics as CSV and the plots.
local function tidy_up(run)
  local args, out = run.args, run.out
  local best_dir = out .. "/best"
  os.remove(best_dir .. "/optimizer.safetensors")
  if not args.keep_checkpoint then fs.remove_tree(out .. "/checkpoint") end
  written(require("bert.plot").write_csv(out))
  if not args.no_plot then
    local ok, perr = require("bert.plot").runs({out})
    if not ok then say("note: no plots: %s", perr) end
  end
  say("wrote %s/summary.json; model: %s (predict: lua5.4 experiments/predict.lua --model %s --text ...)",
    out, best_dir, out)
end

-- A run trained with defer_test: its dev-only summary.json written and
-- its directory tidied, the model and test data kept for handle.test();
-- handle.release() drops them.
local function deferred_test(run)
  local summary = write_summary(run)
  if dist.is_main() then tidy_up(run) end
  run.trainer, run.train_f, run.dev_f = nil, nil, nil   -- the optimizer's state and the features the test does not read
  local handle = {}
  function handle.test()
    local _ <close> = setmetatable({}, {__close = function() handle.release() end})
    local w0, c0 = bert.wall_time(), os.clock()
    test_checkpoint(run)
    run.wall_seconds, run.cpu.total = run.wall_seconds + bert.wall_time() - w0, run.cpu.total + os.clock() - c0
    return write_summary(run)
  end
  function handle.release()
    if run and run.lock then run.lock:release() end
    run = nil
  end
  return summary, handle
end

--- Runs a fine-tuning experiment from settings (the flags' names with _);
-- returns the summary (also written to OUTPUT/summary.json).
--
-- Two settings for protocols that read only part of a run (the evaluation
-- suite's): no_dev_eval trains without evaluating on dev (the model after
-- the last step is tested; summary.dev is nil), unless the kind reads dev
-- before testing (SQuAD v2.0's null threshold); defer_test stops after
-- the checkpoint is chosen on dev and returns the summary without test
-- figures (written to summary.json) and a handle: handle.test() evaluates
-- the test sets and returns the full summary (written over it),
-- handle.release() drops the model untested.
function M.run(kind, args)
  dist.init()
  if args.resume then args = resumed_settings(args) end
  if not args.resume and args.output and dist.is_main() then   -- refused before the data are read
    local refused = fs.refuse_previous_run(args.output, args.overwrite)
    if refused then error(refused, 0) end
  end
  local run = start(kind, args)
  -- the run directory's lock goes when the run ends, as it may (--compare and the ablations run several);
  -- a deferred test holds it until the test or the release
  local deferred = false
  local _ <close> = setmetatable({}, {__close = function() if run.lock and not deferred then run.lock:release() end end})
  run.task, run.train_ex, run.dev_ex, run.test_ex = load_data(kind, run.args)
  load_model(run)
  if run.args.no_dev_eval and run.K.reads_dev and run.K.reads_dev(run) then run.args.no_dev_eval = nil end
  encode(run)
  prepare_output(run)
  make_trainer(run)
  fit(run)
  choose_checkpoint(run)
  if run.args.defer_test then
    run.wall_seconds, run.cpu.total = bert.wall_time() - run.t_start, os.clock() - run.cpu_start
    deferred = true
    return deferred_test(run)
  end
  test_checkpoint(run)
  run.wall_seconds, run.cpu.total = bert.wall_time() - run.t_start, os.clock() - run.cpu_start
  local summary = write_summary(run)
  if dist.is_main() then tidy_up(run) end   -- rank 0 tidies up and plots
  return summary
end
-- }============================================================

M.headline = {
  classification = {"accuracy", "macro_f1"},
  tagging = {"accuracy", "entity_f1"},
  qa = {"exact_match", "f1", "has_answer_f1", "no_answer_f1"},
}

--- The pretrained-vs-scratch table of two summaries, as text
-- (percentages, with the majority-class baseline and a flag for a model
-- that predicts one class).
function M.comparison_table(kind, pre, scratch)
  local rows = {string.format("%-24s %12s %12s", "test metric, %", "pretrained", "from scratch")}
  for _, k in ipairs(M.headline[kind]) do
    local a, b = pre.test[k], scratch.test[k]
    if a ~= nil or b ~= nil then
      rows[#rows + 1] = string.format("%-24s %12.2f %12.2f", k, 100 * (a or 0 / 0), 100 * (b or 0 / 0))
    end
  end
  local mb = pre.majority_baseline
  if mb then
    rows[#rows + 1] = string.format("%-24s %12.2f %12.2f", "majority class baseline", 100 * mb.accuracy,
      100 * (scratch.majority_baseline or mb).accuracy)
    local function flag(s) return s.majority_baseline and s.majority_baseline.predicted_classes <= 1 and "ONE CLASS" or "" end
    if flag(pre) ~= "" or flag(scratch) ~= "" then
      rows[#rows + 1] = string.format("%-24s %12s %12s", "predicts", flag(pre), flag(scratch))
    end
  end
  rows[#rows + 1] = string.format("%-24s %12d %12d", "steps", pre.steps, scratch.steps)
  rows[#rows + 1] = string.format("%-24s %12.0f %12.0f", "training seconds", pre.train_seconds, scratch.train_seconds)
  return table.concat(rows, "\n")
end

--- The same run from the checkpoint and from scratch, with the same
-- number of steps: the pretrained run goes first (within the time budget,
-- if any), and the from-scratch run then takes exactly as many steps.
function M.compare(kind, args)
  args = M.settings(kind, args)
  local r = bert.models.resolve(args.model)
  if r and r.size then
    error("--compare needs a pretrained checkpoint directory as --model, not a size name", 0)
  end
  local base = args.output or (default_output(args.task, {model = args.model}) .. "-compare")
  local function with(from_scratch, dir)
    local a = {}
    for k, v in pairs(args) do a[k] = v end
    a.compare, a.from_scratch, a.output = false, from_scratch, base .. "/" .. dir
    return a
  end
  for _, dir in ipairs({"pretrained", "scratch"}) do   -- both refused before either trains
    local refused = not args.resume and fs.refuse_previous_run(base .. "/" .. dir, args.overwrite)
    if refused then error(refused, 0) end
  end
  say("== fine-tuning from the pretrained checkpoint %s", args.model)
  local pre = M.run(kind, with(false, "pretrained"))
  say("== fine-tuning the same model from scratch (random initialisation), the same %d steps", pre.steps)
  local sa = with(true, "scratch")
  sa.steps, sa.time_budget, sa.patience = pre.steps, nil, nil
  sa.epochs = nil
  local scratch = M.run(kind, sa)
  local text = M.comparison_table(kind, pre, scratch)
  say("\n%s: %s\n%s", kind, pre.task, text)
  write_output(base .. "/comparison.json", util.json({task = pre.task, kind = kind, model = args.model,
    pretrained = pre.test, scratch = scratch.test, majority_baseline = pre.majority_baseline,
    steps = pre.steps, pretrained_train_seconds = pre.train_seconds, scratch_train_seconds = scratch.train_seconds}) .. "\n")
  return pre, scratch, text
end

return M
