--- bert.finetune.runner: the command lines of experiments/finetune_*.lua.
-- One flow for the three kinds: load the task, the tokenizer and the model
-- (a checkpoint, or fresh weights with --from-scratch), encode, train with
-- bert.train.Trainer (AdamW, linear warmup and decay, an evaluation on
-- the dev set each epoch, the best checkpoint kept), then evaluate the
-- best checkpoint on the test set and write DIR/summary.json.
--
-- Run directory: metrics.jsonl (the Trainer's), best/ (the model to use:
-- config.json with labels and settings + model.safetensors), tokenizer/,
-- summary.json, test predictions, args.json, plots (tools/plot.lua).
local argparse = require("argparse")
local bert = require("bert")
local finetune = require("bert.finetune")
local tasks = require("bert.finetune.tasks")
local util = require("bert.finetune.util")
local batch = require("bert.finetune.batch")
local train = require("bert.train")

local M = {}

M.defaults = {
  classification = {task = "spam", epochs = 3, lr = 5e-5, seq_len = 128, script = "finetune_classify.lua",
    what = "Fine-tune BERT for sequence classification (single texts or sentence pairs)."},
  tagging = {task = "brown-pos", epochs = 3, lr = 5e-5, seq_len = 128, script = "finetune_tag.lua",
    what = "Fine-tune BERT for token classification (POS tagging, NER)."},
  qa = {task = "synthetic-qa", epochs = 2, lr = 5e-5, seq_len = 256, script = "finetune_qa.lua",
    what = "Fine-tune BERT for extractive question answering (SQuAD v1.1 / v2.0)."},
}

M.DEFAULT_MODEL = "runs/demo/checkpoint"
M.DEFAULT_VOCAB = "data/bert-base-uncased/vocab.txt"

local function num(v) return tonumber(v) end
local function int(v) local n = tonumber(v) return n and math.tointeger(n) end

--- The argparse parser of a kind's script.
function M.parser(kind)
  local d = M.defaults[kind]
  local names = table.concat(tasks.names(kind), ", ")
  local p = argparse(d.script, d.what)
  p:epilog("Tasks by name: " .. names .. "; or a path: a file (split 80/10/10), a directory with " ..
    "train.* / dev.* [/ test.*], or train,dev[,test] paths.  Writes DIR/summary.json with the test metrics.")
  local kinds_files = {classification = "TSV/JSONL file", tagging = "CoNLL file", qa = "SQuAD JSON file"}
  p:option("--task", "Task name (" .. names .. ") or " .. kinds_files[kind] .. "/directory", d.task)
  p:option("--model", "Checkpoint directory (config.json + model.safetensors, ours or Hugging Face's; " ..
    "a run directory's best/ is used) or a size name (tiny, mini, small, medium, base, large: random init)",
    M.DEFAULT_MODEL)
  p:flag("--from-scratch", "Random initialisation (with a directory: its config, fresh weights)")
  p:option("--tokenizer", "Tokenizer file or directory (default: next to the model: DIR/tokenizer.json, " ..
    "DIR/vocab.txt, DIR/../tokenizer/; for a size name " .. M.DEFAULT_VOCAB .. ")")
  p:option("--epochs", "Training epochs", tostring(d.epochs)):convert(int)
  p:option("--batch-size", "Training batch size", "32"):convert(int)
  p:option("--lr", "Peak learning rate (AdamW)", tostring(d.lr)):convert(num)
  p:option("--warmup", "Warmup fraction of the steps (linear warmup, then linear decay)", "0.1"):convert(num)
  p:option("--weight-decay", "Decoupled weight decay", "0.01"):convert(num)
  p:option("--max-train", "Use at most N training examples (a fixed random subset)"):convert(int)
  p:option("--max-eval", "Use at most N dev and N test examples (a fixed random subset)"):convert(int)
  p:option("--seq-len", "Maximum sequence length in tokens", tostring(d.seq_len)):convert(int)
  p:option("--device", "cpu or vulkan", "cpu"):choices({"cpu", "vulkan"})
  p:option("--seed", "Random seed (initialisation, dropout, batch order)", "42"):convert(int)
  p:option("--output", "Run directory (default runs/finetune/TASK-MODEL[-scratch])")
  p:option("--threads", "CPU threads"):convert(int)
  p:option("--data-dir", "Where the built-in tasks' data live", os.getenv("BERT_DATA") or "data")
  p:option("--eval-every", "Evaluate on the dev set every N steps (default: each epoch)"):convert(int)
  p:option("--eval-batch-size", "Batch size for evaluation", "64"):convert(int)
  p:option("--time-budget", "Stop training after this many seconds"):convert(num)
  p:option("--log-every", "Log training metrics every N steps", "10"):convert(int)
  p:option("--clip", "Gradient clipping (global norm)", "1.0"):convert(num)
  p:flag("--resume", "Continue the run in --output from its checkpoint")
  p:flag("--keep-checkpoint", "Keep DIR/checkpoint/ (optimizer state, for --resume) after a finished run")
  p:flag("--no-plot", "Skip the plots")
  p:flag("--quiet", "Print nothing but errors")
  p:flag("--compare", "Fine-tune twice, from the --model checkpoint and from scratch (same config, data, " ..
    "seed and settings), and print the test metrics side by side (OUTPUT/pretrained, OUTPUT/scratch, " ..
    "OUTPUT/comparison.json)")
  if kind == "classification" then
    p:option("--text-column", "TSV/JSONL: the text column (name or 1-based index)")
    p:option("--pair-column", "TSV/JSONL: the second text column (sentence pairs)")
    p:option("--label-column", "TSV/JSONL: the label column")
    p:option("--passage-words", "brown-genre: words per passage", "100"):convert(int)
  elseif kind == "tagging" then
    p:flag("--fine-tags", "brown-pos: keep Brown's full tags (default: base tags, -tl/-hl/-nc and fw- dropped)")
  else
    p:option("--doc-stride", "Overlap in tokens between consecutive windows of a long context " ..
      "(default: a quarter of --seq-len, at most 128)"):convert(int)
    p:option("--max-answer-length", "Longest answer in tokens", "30"):convert(int)
    p:option("--max-query-length", "Questions are cut to this many tokens", "64"):convert(int)
    p:option("--n-best", "Start and end candidates per window", "20"):convert(int)
    p:flag("--version-2", "SQuAD v2.0: unanswerable questions (synthetic-qa: generate them)")
    p:option("--null-threshold", "v2.0: answer \"\" when null score - best span score exceeds this " ..
      "(default: tuned on the dev set)"):convert(num)
  end
  if kind ~= "qa" then
    p:option("--labels", "Comma-separated label set (default: the labels seen in the data)")
  end
  return p
end

local quiet = false
local function say(fmt, ...)
  if quiet then return end
  io.stdout:write(string.format(fmt, ...), "\n")
  io.stdout:flush()
end

-- Writes an output file (atomically) or stops the run with the reason: a
-- run must not report files it could not write.
local function write_output(path, text)
  local ok, err = util.write_file(path, text)
  if not ok then error(string.format("cannot write %s: %s", path, tostring(err)), 0) end
end

local function shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- A fixed random subset of at most n items (the same for every run).
local function subset(list, n, salt)
  if not n or n >= #list then return list end
  local copy = {}
  for i, v in ipairs(list) do copy[i] = v end
  util.rng(tasks.SPLIT_SEED + salt):shuffle(copy)
  return util.take(copy, n)
end

local function fmt_metrics(m)
  local keys = {}
  for k, v in pairs(m) do if type(v) == "number" and k ~= "n" then keys[#keys + 1] = k end end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do
    local v = m[k]
    parts[#parts + 1] = string.format(math.type(v) == "integer" and "%s %d" or "%s %.4f", k, v)
  end
  return table.concat(parts, ", ")
end

local function default_output(task_name, args)
  local tname = task_name:gsub("^.*/", ""):gsub("%.[%w]+$", ""):gsub("[^%w%-_]", "_")
  local mname = args.model:gsub("/+$", ""):gsub("/checkpoint$", ""):gsub("/best$", ""):gsub("^.*/", "")
  return string.format("runs/finetune/%s-%s%s", tname, mname, args.from_scratch and "-scratch" or "")
end

--- Runs a fine-tuning experiment from parsed arguments; returns the summary.
function M.run(kind, args)
  local t_start = bert.wall_time()
  quiet = args.quiet == true
  local sizes = require("bert.models.config").sizes
  if args.threads then bert.set_num_threads(args.threads) end
  bert.manual_seed(args.seed)
  if sizes[args.model] and not args.from_scratch then
    say("note: --model %s is a size name: random initialisation (as --from-scratch)", args.model)
    args.from_scratch = true
  end
  if not sizes[args.model] and not finetune.model_dir(args.model) then
    if args.model == M.DEFAULT_MODEL then
      error(string.format("no model at %s (the demo's pretrained checkpoint): pass --model DIR, " ..
        "or --model mini --from-scratch", M.DEFAULT_MODEL), 0)
    end
  end

  -- {------------------------------------------------ data
  local t0 = bert.wall_time()
  local labels_opt
  if args.labels then
    labels_opt = {}
    for l in args.labels:gmatch("[^,]+") do labels_opt[#labels_opt + 1] = l end
  end
  local task = tasks.load(args.task, {
    kind = kind, data_dir = args.data_dir, version_2 = args.version_2, fine_tags = args.fine_tags,
    passage_words = args.passage_words, labels = labels_opt,
    text_column = int(args.text_column) or args.text_column, pair_column = int(args.pair_column) or args.pair_column,
    label_column = int(args.label_column) or args.label_column,
  })
  local version_2 = kind == "qa" and (args.version_2 or task.version_2 == true) or nil
  local train_ex = subset(task.train, args.max_train, 1)
  local dev_ex = subset(task.dev, args.max_eval, 2)
  local test_ex = subset(task.test, args.max_eval, 3)
  say("task %s: %s", task.name, task.description or "")
  if task.note then say("note: %s", task.note) end
  say("  examples: train %d%s, dev %d, test %d%s", #train_ex,
    #train_ex < #task.train and (" (of " .. #task.train .. ")") or "", #dev_ex, #test_ex,
    task.labels and string.format("; %d labels", #task.labels) or "")

  -- {------------------------------------------------ tokenizer and model
  local model_src = not sizes[args.model] and finetune.model_dir(args.model) or nil
  local tok, tok_path
  if args.tokenizer then
    tok, tok_path = finetune.find_tokenizer(nil, args.tokenizer)
  elseif model_src then
    tok, tok_path = finetune.find_tokenizer(model_src)
  elseif util.exists(M.DEFAULT_VOCAB) then
    tok, tok_path = finetune.find_tokenizer(nil, M.DEFAULT_VOCAB)
  else
    error("no tokenizer: pass --tokenizer PATH (or run sh tools/fetch_bert_vocab.sh for " .. M.DEFAULT_VOCAB .. ")", 0)
  end
  local pad_id = tok:token_to_id("[PAD]") or tok:token_to_id("<pad>") or 0

  local seq_len = args.seq_len
  local settings = {task = task.name, kind = kind, max_length = seq_len}
  local qa_opts
  if kind == "qa" then
    local stride = args.doc_stride or math.min(128, seq_len // 4)
    qa_opts = {max_length = seq_len, doc_stride = stride, max_query_length = args.max_query_length,
      n_best = args.n_best, max_answer_length = args.max_answer_length, version_2 = version_2,
      null_threshold = args.null_threshold or 0, batch_size = args.eval_batch_size, pad_id = pad_id}
    for _, k in ipairs({"doc_stride", "max_query_length", "n_best", "max_answer_length", "version_2", "null_threshold"}) do
      settings[k] = qa_opts[k]
    end
  end
  local model, info = finetune.load_model(model_src or args.model, {
    kind = kind, labels = task.labels, from_scratch = args.from_scratch, tokenizer = tok, finetune = settings,
  })
  local maxpos = model.config.max_position_embeddings
  if seq_len > maxpos then
    say("note: --seq-len %d exceeds the model's %d positions: using %d", seq_len, maxpos, maxpos)
    seq_len = maxpos
    settings.max_length = maxpos
    if qa_opts then qa_opts.max_length = maxpos end
  end
  if args.device == "vulkan" then
    if not model.to then error("--device vulkan: this build has no Vulkan support", 0) end
    model:to("vulkan")
  end
  say("model: %s, %s (%.1fM parameters, hidden %d, %d layers), %s", model.architecture,
    info.from_scratch and ("random init, config of " .. info.source) or ("pretrained " .. info.source),
    model:num_parameters() / 1e6, model.config.hidden_size, model.config.num_hidden_layers,
    "tokenizer " .. tok_path .. " (" .. tok:vocab_size() .. " tokens)")
  if info.missing and #info.missing > 0 then
    say("  newly initialised: %s", table.concat(info.missing, ", "))
  end

  -- {------------------------------------------------ features
  t0 = bert.wall_time()
  local mod = finetune.kind_module(kind)
  local enc_opts = {max_length = seq_len, labels = task.labels}
  local train_f, dev_f, test_f
  if kind == "qa" then
    train_f = mod.encode(tok, train_ex, qa_opts)
    dev_f = mod.encode(tok, dev_ex, qa_opts)
    test_f = mod.encode(tok, test_ex, qa_opts)
  else
    train_f = mod.encode(tok, train_ex, enc_opts)
    dev_f = mod.encode(tok, dev_ex, enc_opts)
    test_f = mod.encode(tok, test_ex, enc_opts)
  end
  local tag_fallback
  if kind == "tagging" then
    local counts = {}
    for _, s in ipairs(train_ex) do for _, t in ipairs(s.tags) do counts[t] = (counts[t] or 0) + 1 end end
    tag_fallback = mod.fallback(task.labels, counts)
    settings.fallback = tag_fallback
  end
  local ntok = 0
  for _, f in ipairs(train_f) do ntok = ntok + #f.ids end
  say("encoded in %.1fs: %d training features (mean %.0f tokens), %d dev, %d test", bert.wall_time() - t0,
    #train_f, ntok / math.max(#train_f, 1), #dev_f, #test_f)

  -- {------------------------------------------------ output directory
  local out = args.output or default_output(task.name, args)
  assert(bert.mkdir(out))
  if not args.resume then
    for _, p in ipairs({"metrics.jsonl", "summary.json"}) do os.remove(out .. "/" .. p) end
    os.execute("rm -rf " .. shell_quote(out .. "/checkpoint") .. " " .. shell_quote(out .. "/best"))
  end
  local saved_args = {}
  for k, v in pairs(args) do if type(v) ~= "function" then saved_args[k] = v end end
  write_output(out .. "/args.json", util.json(saved_args) .. "\n")
  local tok_dir = out .. "/tokenizer"
  assert(bert.mkdir(tok_dir))
  assert(tok:save(tok_dir))

  -- {------------------------------------------------ training
  local eval_opts = {labels = task.labels, batch_size = args.eval_batch_size, pad_id = pad_id, fallback = tag_fallback}
  if qa_opts then for k, v in pairs(qa_opts) do eval_opts[k] = v end end
  local function evaluate(m, feats, examples)
    if kind == "classification" then return mod.evaluate(m, feats, eval_opts) end
    return mod.evaluate(m, feats, examples, eval_opts)
  end
  local metric = task.metric
  local loader = batch.Loader(train_f, {batch_size = args.batch_size, seed = args.seed, collate = {pad_id = pad_id}})
  local per_epoch = loader:steps_per_epoch()
  local total = per_epoch * args.epochs
  local warmup = math.floor(args.warmup * total + 0.5)
  local opt = bert.optim.AdamW(model:named_parameters(), {lr = args.lr, weight_decay = args.weight_decay})
  local epoch_evals = {}
  local trainer
  trainer = train.Trainer{
    model = model, optimizer = opt,
    schedule = bert.optim.schedule{kind = "linear", warmup = warmup, total = total, lr = args.lr},
    next_batch = function() return loader:next() end,
    steps = total, time_budget = args.time_budget, clip = args.clip,
    output = out, save_every = per_epoch, eval_every = args.eval_every or per_epoch, log_every = args.log_every,
    keep_best = metric,
    evaluate = function(m)   -- on the dev set; the Trainer prints and logs the result
      local r = evaluate(m, dev_f, dev_ex)
      r.epoch = trainer.step / per_epoch
      epoch_evals[#epoch_evals + 1] = r
      return r
    end,
    step_metrics = kind ~= "qa" and function(o, b)
      return {accuracy = (train.accuracy(o.logits, b.labels))}
    end or nil,
    progress = not quiet,
    get_state = function() return loader:state() end,
    set_state = function(s) loader:set_state(s) end,
  }
  if args.resume and trainer:resume() then say("resumed from %s/checkpoint at step %d", out, trainer.step) end
  say("training: %d epochs x %d steps (batch %d), lr %.1e, warmup %d steps, eval on dev each %d steps -> %s",
    args.epochs, per_epoch, args.batch_size, args.lr, warmup, args.eval_every or per_epoch, out)
  local run = trainer:run()
  if trainer.best == nil then
    -- no evaluation happened (a time budget ran out first): evaluate and keep this model
    local r = bert.no_grad(function() return evaluate(model, dev_f, dev_ex) end)
    say("  dev at step %d: %s", trainer.step, fmt_metrics(r))
    trainer.best = r[metric]
    trainer:log({step = trainer.step, eval = r})
    assert(trainer:save("best"))
  end

  -- {------------------------------------------------ test with the best checkpoint
  local best_dir = out .. "/best"
  local weights = assert(bert.load_safetensors(best_dir .. "/model.safetensors"))
  model:load_state_dict(weights)
  model:evaluate()
  local dev_best = bert.no_grad(function() return (evaluate(model, dev_f, dev_ex)) end)
  if kind == "qa" and version_2 and args.null_threshold == nil and dev_best.best_threshold then
    -- SQuAD v2.0: tune the null threshold on dev, apply it to test
    eval_opts.null_threshold = dev_best.best_threshold
    settings.null_threshold = dev_best.best_threshold
    say("  v2.0 null threshold tuned on dev: %.3f (dev F1 %.2f)", dev_best.best_threshold, dev_best.best_threshold_f1)
    model.config.finetune = settings
    assert(model:save_pretrained(best_dir))
  end
  local tt = bert.wall_time()
  local test_r, details = bert.no_grad(function() return evaluate(model, test_f, test_ex) end)
  say("test (%d examples, %.1fs): %s", #test_ex, bert.wall_time() - tt, fmt_metrics(test_r))

  -- {------------------------------------------------ reports
  if kind == "classification" then
    say("confusion matrix (rows gold, columns predicted):\n%s", details.confusion:format())
    if task.label_names then
      local parts = {}
      for _, l in ipairs(task.labels) do parts[#parts + 1] = l .. " = " .. (task.label_names[l] or l) end
      say("  %s", table.concat(parts, "; "))
    end
    local lines = {}
    for i, ex in ipairs(test_ex) do
      lines[i] = util.json({id = ex.id or ex.line or i, gold = ex.label, predicted = details.predictions[i]})
    end
    write_output(out .. "/test_predictions.jsonl", table.concat(lines, "\n") .. "\n")
  elseif kind == "tagging" then
    if details.report then say("conlleval:\n%s", details.report) end
    require("bert.finetune.readers").write_conll(out .. "/test_predictions.conll", test_ex, details.predictions)
  else
    write_output(out .. "/test_predictions.json", util.json(details.predictions) .. "\n")
  end

  local summary = {
    task = task.name, kind = kind, model = args.model, from_scratch = info.from_scratch == true,
    architecture = model.architecture, parameters = model:num_parameters(),
    test = test_r, dev = dev_best, dev_per_eval = epoch_evals,
    steps = run.step, epochs = args.epochs, train_seconds = run.train_seconds, tokens_per_s = run.tokens_per_s,
    wall_seconds = bert.wall_time() - t_start,
    n_train = #train_ex, n_train_features = #train_f, n_dev = #dev_ex, n_test = #test_ex,
    settings = {lr = args.lr, batch_size = args.batch_size, seq_len = seq_len, warmup = warmup,
      weight_decay = args.weight_decay, seed = args.seed, tokenizer = tok_path, labels = task.labels},
  }
  for _, k in ipairs({"accuracy", "macro_f1", "entity_f1", "entity_precision", "entity_recall", "exact_match", "f1"}) do
    if test_r[k] ~= nil then summary[k] = test_r[k] end
  end
  if kind == "classification" then summary.confusion = details.confusion:totable() end
  if kind == "qa" then for k, v in pairs(settings) do summary.settings[k] = v end end
  write_output(out .. "/summary.json", util.json(summary) .. "\n")

  -- the kept model needs no optimizer state; the resumable checkpoint goes
  -- unless asked for
  os.remove(best_dir .. "/optimizer.safetensors")
  if not args.keep_checkpoint then os.execute("rm -rf " .. shell_quote(out .. "/checkpoint")) end
  if not args.no_plot and util.exists("tools/plot.lua") then
    os.execute("lua5.4 tools/plot.lua " .. shell_quote(out) .. " >/dev/null 2>&1")
  end
  say("wrote %s/summary.json; model: %s (predict: lua5.4 experiments/predict.lua --model %s --text ...)",
    out, best_dir, out)
  return summary
end

M.headline = {
  classification = {"accuracy", "macro_f1"},
  tagging = {"accuracy", "entity_f1"},
  qa = {"exact_match", "f1", "has_answer_f1", "no_answer_f1"},
}

--- The pretrained-vs-scratch table of two summaries, as text.
function M.comparison_table(kind, pre, scratch)
  local rows = {string.format("%-22s %12s %12s", "test metric", "pretrained", "from scratch")}
  for _, k in ipairs(M.headline[kind]) do
    local a, b = pre.test[k], scratch.test[k]
    if a ~= nil or b ~= nil then
      local f = kind == "qa" and "%12.2f" or "%12.4f"
      rows[#rows + 1] = string.format("%-22s " .. f .. " " .. f, k, a or 0 / 0, b or 0 / 0)
    end
  end
  rows[#rows + 1] = string.format("%-22s %12.0f %12.0f", "training seconds", pre.train_seconds, scratch.train_seconds)
  rows[#rows + 1] = string.format("%-22s %12d %12d", "steps", pre.steps, scratch.steps)
  return table.concat(rows, "\n")
end

--- --compare: the same run from the checkpoint and from scratch.
function M.compare(kind, args)
  if require("bert.models.config").sizes[args.model] then
    error("--compare needs a pretrained checkpoint directory as --model, not a size name", 0)
  end
  local base = args.output or (default_output(args.task, {model = args.model}) .. "-compare")
  local function with(from_scratch, dir)
    local a = {}
    for k, v in pairs(args) do a[k] = v end
    a.compare, a.from_scratch, a.output = false, from_scratch, base .. "/" .. dir
    return a
  end
  say("== fine-tuning from the pretrained checkpoint %s", args.model)
  local pre = M.run(kind, with(false, "pretrained"))
  say("== fine-tuning the same model from scratch (random initialisation)")
  local scratch = M.run(kind, with(true, "scratch"))
  local text = M.comparison_table(kind, pre, scratch)
  say("\n%s: %s\n%s", kind, pre.task, text)
  write_output(base .. "/comparison.json", util.json({task = pre.task, kind = kind, model = args.model,
    pretrained = pre.test, scratch = scratch.test,
    pretrained_train_seconds = pre.train_seconds, scratch_train_seconds = scratch.train_seconds}) .. "\n")
  return pre, scratch, text
end

--- Parses the command line and runs; errors are printed without a traceback.
function M.main(kind)
  local args = M.parser(kind):parse()
  local ok, err = xpcall(args.compare and M.compare or M.run, function(e)
    if type(e) == "string" and not e:find("^[%w_/%.%-]+%.lua:%d+:") then return e end
    return debug.traceback(tostring(e), 2)
  end, kind, args)
  if not ok then
    io.stderr:write(M.defaults[kind].script, ": ", tostring(err), "\n")
    os.exit(1)
  end
end

return M
