--- bert.cli: the command-line vocabulary shared by every script in
-- experiments/ and tools/.  The same thing has the same name, unit and
-- default everywhere (`--seed 42`, `--warmup` as a fraction or a step
-- count, `--time-budget` in seconds, `--resume DIR`), a malformed value
-- names its option, and a wrong choice lists the valid ones.
--
--   local cli = require("bert.cli")
--   local p = cli.parser("pretrain.lua", "Pretrain a BERT model.")
--   cli.add(p, "model", "steps", "time_budget", "lr", "warmup", "seed", "resume")
--   p:option("--corpus", "...", "brown"):convert(cli.choice_or_path("--corpus", {"brown", "kjv", "english"}, "a corpus file"))
--   local args = p:parse()
--
-- Tools that parse their own arguments call cli.help(arg, usage) first, so
-- that `--help` prints and exits 0 before anything is read or written.
local argparse = require("argparse")

local M = {}

local function quote(v) return "'" .. tostring(v) .. "'" end

local function file_exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

-- "an integer >= 1" or "an integer from 1 to 65536": the range a converter says
local function range(kind, min, max)
  if max then return string.format("%s from %s to %s", kind, min, max) end
  return string.format("%s >= %s", kind, min)
end

--- A converter for an integer option (`min` inclusive, default 0; `max`
-- inclusive when given: a value beyond it names the limit).
function M.integer(name, min, max)
  min = min or 0
  return function(v)
    local n = math.tointeger(tonumber(v))
    if n == nil then return nil, string.format("option %s: expected an integer, got %s", name, quote(v)) end
    if n < min or (max and n > max) then
      return nil, string.format("option %s: expected %s, got %s", name, range("an integer", min, max), quote(v))
    end
    return n
  end
end

--- A converter for a number option (`min` and `max` inclusive when given).
function M.number(name, min, max)
  return function(v)
    local n = tonumber(v)
    if n == nil or n ~= n then return nil, string.format("option %s: expected a number, got %s", name, quote(v)) end
    if (min and n < min) or (max and n > max) then
      return nil, string.format("option %s: expected %s, got %s", name, range("a number", string.format("%g", min or -math.huge),
        max and string.format("%g", max)), quote(v))
    end
    return n + 0.0
  end
end

--- A converter for a fraction of a run, in (0, 1].
function M.fraction(name)
  return function(v)
    local f = tonumber(v)
    if not f or not (f > 0 and f <= 1) then
      return nil, string.format("option %s: expected a fraction in (0, 1], got %s", name, quote(v))
    end
    return f + 0.0
  end
end

--- A converter for a value that is one of `choices` or an existing path
-- (`what` says what the path should be, for the error).
function M.choice_or_path(name, choices, what)
  return function(v)
    for _, c in ipairs(choices) do if v == c then return v end end
    if file_exists(v) then return v end
    return nil, string.format("option %s: %s is not one of %s, nor an existing %s", name, quote(v),
      table.concat(choices, ", "), what or "file or directory")
  end
end

-- Config keys a run sets itself, never a --config-overrides item: why.
local OWNED_CONFIG_KEYS = {
  vocab_size = "vocab_size is the tokenizer's (--vocab-size in pretraining)",
  num_labels = "num_labels is the task's (its label set, --labels)",
  id2label = "id2label is the task's (its label set, --labels)",
  label2id = "label2id is the task's (its label set, --labels)",
}

--- The keys of a --config-overrides value ("hidden_dropout_prob=0,pre_layer_norm=true"), as Hugging
-- Face's run_mlm.py and from_pretrained(..., key=value) take them: true/false as booleans, numbers as
-- numbers, anything else as a string.  nil, why when malformed or naming a key the run sets itself.
function M.config_overrides(text)
  local keys = {}
  for item in tostring(text):gmatch("[^,]+") do
    local k, v = item:match("^%s*([%a_][%w_]*)%s*=%s*(.-)%s*$")
    if not k or v == "" then
      return nil, string.format("expected KEY=VALUE items separated by commas, got %s", quote(text))
    end
    if OWNED_CONFIG_KEYS[k] then return nil, OWNED_CONFIG_KEYS[k] end
    if v == "true" or v == "false" then keys[k] = v == "true"
    else keys[k] = math.tointeger(tonumber(v)) or tonumber(v) or v end
  end
  if next(keys) == nil then return nil, "expected at least one KEY=VALUE, got " .. quote(text) end
  return keys
end

--- A converter for --config-overrides: the text, kept as given (run
-- directories record it), once it reads.
function M.overrides(name)
  return function(v)
    local keys, why = M.config_overrides(v)
    if not keys then return nil, "option " .. name .. ": " .. why end
    return v
  end
end

--- The model size names (tiny, mini, ...), smallest first.
function M.size_names()
  local sizes = require("bert.models.config").sizes
  local names = {}
  for k in pairs(sizes) do names[#names + 1] = k end
  table.sort(names, function(a, b)
    local ha, hb = sizes[a].hidden_size or 0, sizes[b].hidden_size or 0
    if ha ~= hb then return ha < hb end
    local la, lb = sizes[a].num_hidden_layers or 0, sizes[b].num_hidden_layers or 0
    if la ~= lb then return la < lb end
    return a < b
  end)
  return names
end

--- Warmup as given on the command line (`--warmup`): below 1 a fraction of
-- the total steps, from 1 up a number of steps.  Returns steps.
function M.warmup_steps(warmup, total)
  if warmup == nil then warmup = 0.1 end
  if warmup < 1 then return math.floor(warmup * total + 0.5) end
  return math.floor(warmup)
end

--- The default peak learning rate for a model of this hidden size:
-- `purpose` is "pretrain" or "finetune".  Small models need far larger
-- rates than BERT-base's 5e-5 (fine-tuning) / 1e-4 (pretraining): BERT-tiny
-- fine-tuned on Brown POS reached 94.9% at 1e-3 and 86.7% at 2e-4 (README).
function M.default_lr(purpose, hidden_size)
  hidden_size = hidden_size or 768
  if purpose == "pretrain" then
    if hidden_size <= 256 then return 1e-3 elseif hidden_size <= 512 then return 5e-4 end
    return 1e-4
  end
  if hidden_size <= 256 then return 1e-3 elseif hidden_size <= 512 then return 2e-4 end
  return 5e-5
end

--- A duration for people: "42 s", "7.5 min", "2.1 h".
function M.format_duration(s)
  if s < 90 then return string.format("%.0f s", s) end
  if s < 5400 then return string.format("%.1f min", s / 60) end
  return string.format("%.1f h", s / 3600)
end

-- The families' short names (albert, roberta, ...) in the registry's
-- order: --model FAMILY-SIZE.
function M.family_names()
  require("bert.models")
  local registry = require("bert.models.registry")
  local names = {}
  for _, mt in ipairs(registry.order) do names[#names + 1] = registry.families[mt].short_name or mt end
  return names
end

-- --model's help: a size, FAMILY-SIZE, a config.json, or what `more` adds.
local function model_help(more)
  return string.format("A size (%s: BERT), FAMILY-SIZE (family %s; e.g. albert-tiny, roberta-base), a config.json, %s",
    table.concat(M.size_names(), ", "), table.concat(M.family_names(), ", "), more)
end

-- The shared options: {flag, help, default, converter-maker | "flag" | choices, min, max}.
-- The limits are checked when the command line is read, before anything is
-- written: a value past one is a typo or a run that would never end or fit
-- (BERT-large pretrained 1M steps with batches of 256; the thread limit is
-- the library's, bert.set_num_threads).
M.OPTIONS = {
  model = {"--model", function() return model_help("or a checkpoint directory") end, "tiny"},   -- (loads the families)
  tokenizer = {"--tokenizer", "Tokenizer file or directory"},
  steps = {"--steps", "Optimizer steps (with --time-budget: at most; the steps that fit are fixed after a short " ..
    "calibration)", nil, M.integer, 1, 100000000},
  epochs = {"--epochs", "Training epochs", "3", M.integer, 1, 100000},
  time_budget = {"--time-budget", "Seconds of training (evaluations and saves included)", nil, M.number, 0},
  batch_size = {"--batch-size", "Sequences per micro-batch (all ranks together under mpirun)", "32", M.integer, 1, 65536},
  accum = {"--accum", "Micro-batches per optimizer step (gradient accumulation)", "1", M.integer, 1, 4096},
  seq_len = {"--seq-len", "Maximum sequence length in tokens", "128", M.integer, 8, 8192},
  lr = {"--lr", "Peak learning rate (default: by model size, printed at the start: hidden <= 256: 1e-3 " ..
    "fine-tuning and pretraining; <= 512: 2e-4 / 5e-4; larger: 5e-5 / 1e-4)", nil, M.number, 0},
  warmup = {"--warmup", "Linear warmup: a fraction of the steps (< 1, e.g. 0.1) or a number of steps (>= 1)",
    "0.1", M.number, 0},
  weight_decay = {"--weight-decay", "Decoupled weight decay (AdamW)", "0.01", M.number, 0},
  clip = {"--clip", "Clip the gradients' global norm to this (0: no clipping)", "1.0", M.number, 0},
  seed = {"--seed", "Random seed (initialisation, dropout, data order)", "42", M.integer, 0},
  device = {"--device", "Where to compute", "cpu", {"cpu", "vulkan"}},
  threads = {"--threads", "CPU threads (default: all cores)", nil, M.integer, 1, 1024},
  output = {"--output", "Run directory"},
  resume = {"--resume", "Continue the run in DIR from its checkpoint"},
  overwrite = {"--overwrite", "Replace a finished or resumable run in the run directory (without it such a " ..
    "directory is refused)", nil, "flag"},
  eval_every = {"--eval-every", "Evaluate on held-out data every N steps", nil, M.integer, 1},
  max_eval = {"--max-eval", "Evaluate on at most N held-out examples (a fixed subset)", nil, M.integer, 1},
  save_every = {"--save-every", "Checkpoint every N steps", "200", M.integer, 1},
  log_every = {"--log-every", "Log training metrics every N steps", "10", M.integer, 1},
  patience = {"--patience", "Stop when the dev metric has not improved for N evaluations", nil, M.integer, 1},
  no_plot = {"--no-plot", "Skip the plots", nil, "flag"},
  config_overrides = {"--config-overrides", "Model config keys over the model's, KEY=VALUE,... (as Hugging " ..
    "Face's run_mlm.py and from_pretrained), e.g. hidden_dropout_prob=0,attention_probs_dropout_prob=0", nil,
    M.overrides},
  -- fine-tuning
  task = {"--task", "Task name or data path"},
  from_scratch = {"--from-scratch", "Random initialisation (with a directory: its config, fresh weights)", nil, "flag"},
  max_train = {"--max-train", "Use at most N training examples (a fixed random subset)", nil, M.integer, 1},
  eval_batch_size = {"--eval-batch-size", "Batch size for evaluation", "64", M.integer, 1, 65536},
  data_dir = {"--data-dir", "Where the built-in tasks' data live (default: $BERT_DATA or data)"},
  keep_checkpoint = {"--keep-checkpoint", "Keep DIR/checkpoint/ (optimizer state, for --resume) after a finished run",
    nil, "flag"},
  compare = {"--compare", "Fine-tune twice, from the --model checkpoint and from scratch, the same number of steps " ..
    "and settings, and print the test metrics side by side with the majority-class baseline " ..
    "(OUTPUT/pretrained, OUTPUT/scratch, OUTPUT/comparison.json)", nil, "flag"},
  labels = {"--labels", "Comma-separated label set (default: the labels seen in the data)"},
  quiet = {"--quiet", "Print nothing but errors", nil, "flag"},
  no_varlen = {"--no-varlen", "Run batches padded (default: packed, the padding never computed; DeBERTa always pads)",
    nil, "flag"},
}

-- argv with each negative number after an option that takes a value
-- joined to it (--lr -3 -> --lr=-3): argparse would read "-3" as a flag.
local function join_negative_values(parser, argv)
  local takes_value = {}
  local function collect(q)   -- the parser's options and its commands'
    for _, o in ipairs(q._options) do
      if o._maxargs > 0 then for _, alias in ipairs(o._aliases) do takes_value[alias] = true end end
    end
    for _, c in ipairs(q._commands or {}) do collect(c) end
  end
  collect(parser)
  local out, i = {}, 1
  while i <= #argv do
    local a, v = argv[i], argv[i + 1]
    if a == "--" then   -- the rest are values
      table.move(argv, i, #argv, #out + 1, out)
      break
    end
    if takes_value[a] and type(v) == "string" and v:find("^%-[%d.]") and tonumber(v) then
      out[#out + 1], i = a .. "=" .. v, i + 2
    else
      out[#out + 1], i = a, i + 1
    end
  end
  return out
end

--- An argparse parser with the shared conventions (usage and help in one
-- place).  `epilog` is optional text printed after the options.  A
-- negative number is an option's value, not a flag; a command-line error
-- prints one line (with argparse's "Did you mean" hint) and where the
-- usage is, not the whole usage.
function M.parser(name, description, epilog)
  local p = argparse(name, description)
  if epilog then p:epilog(epilog) end
  local parse, pparse = p.parse, p.pparse
  function p.parse(self, argv) return parse(self, join_negative_values(self, argv or rawget(_G, "arg") or {})) end
  function p.pparse(self, argv) return pparse(self, join_negative_values(self, argv or rawget(_G, "arg") or {})) end
  function p.error(_, msg)
    io.stderr:write(name, ": ", msg, "\n", name, " --help lists the options\n")
    os.exit(1)
  end
  return p
end

--- Adds shared options to p: names from M.OPTIONS, each optionally
-- followed by a table of overrides ({default = ..., help = ...}).
function M.add(p, ...)
  local list = {...}
  local i = 1
  while i <= #list do
    local key = list[i]
    local spec = M.OPTIONS[key] or error("cli.add: unknown shared option " .. tostring(key), 2)
    local over = type(list[i + 1]) == "table" and list[i + 1] or {}
    i = i + (type(list[i + 1]) == "table" and 2 or 1)
    local flag, help, default, kind, min, max = spec[1], over.help or spec[2], spec[3], spec[4], spec[5], spec[6]
    if type(help) == "function" then help = help() end
    if over.default ~= nil then default = over.default end
    if over.nodefault then default = nil end
    if kind == "flag" then
      p:flag(flag, help)
    else
      local o = p:option(flag, help, default ~= nil and tostring(default) or nil)
      if type(kind) == "function" then o:convert(kind(flag, min, max)) end
      if type(kind) == "table" then o:choices(over.choices or kind) end
      if over.convert then o:convert(over.convert) end
    end
  end
  return p
end

--- The options the three fine-tuning scripts share (experiments/finetune_*.lua).
function M.add_finetune(p, kind)
  local tasks = require("bert.finetune.tasks")
  local experiment = require("bert.finetune.experiment")
  local d = experiment.settings(kind, {})
  local names = table.concat(tasks.names(kind), ", ")
  local files = {classification = "TSV/JSONL file", tagging = "CoNLL file", qa = "SQuAD JSON file"}
  p:epilog("Tasks by name: " .. names .. "; or a path: a file (split 80/10/10), a directory with " ..
    "train.* / dev.* [/ test.*], or train,dev[,test] paths.  Writes OUTPUT/summary.json with the test metrics " ..
    "(fractions), OUTPUT/best/ (a self-contained model directory for experiments/predict.lua and bert.pipeline).")
  M.add(p, "task", {default = d.task, help = "Task name (" .. names .. ") or " .. files[kind] .. "/directory"},
    "model", {default = d.model, help = model_help("or a checkpoint directory (config.json + model.safetensors, " ..
      "ours or Hugging Face's; a run directory's best/ or checkpoint/ is used); all but a checkpoint start from " ..
      "random weights")},
    "from_scratch", "tokenizer", {help = "Tokenizer file or directory (default: the one in the model directory, " ..
      "or its run's tokenizer/; for a size name " .. experiment.DEFAULT_VOCAB .. ")"},
    "epochs", {default = d.epochs}, "steps", {help = "Optimizer steps (instead of --epochs; with --time-budget: at most)"},
    "time_budget", "batch_size", "accum", "lr", "warmup", "weight_decay", "clip", "max_train", "max_eval",
    "seq_len", {default = d.seq_len}, "config_overrides", {help = "Model config keys over the checkpoint's, " ..
      "KEY=VALUE,... (as Hugging Face's from_pretrained(..., key=value)), e.g. hidden_dropout_prob=0.2,classifier_dropout=0"}, "device", "seed", "output", {help = "Run directory (default runs/finetune/TASK-MODEL[-scratch])"},
    "threads", "data_dir", "eval_every", {help = "Evaluate on the dev set every N steps (default: each epoch)"},
    "eval_batch_size", "log_every", "patience", "resume", "overwrite", "keep_checkpoint", "no_plot", "quiet", "compare",
    {help = kind == "qa" and "Fine-tune twice, from the --model checkpoint and from scratch, the same number of " ..
      "steps and settings, and print the test metrics side by side (QA has no majority-class baseline; " ..
      "OUTPUT/pretrained, OUTPUT/scratch, OUTPUT/comparison.json)" or nil}, "no_varlen")
  return p
end

--- Runs fn(...) as a script's body: an error is printed as "NAME: message"
-- (a traceback only for errors that come from a bug, i.e. carry a
-- file:line position) and the process exits with status 1.
function M.main(name, fn, ...)
  local ok, err = xpcall(fn, function(e)
    if type(e) == "string" and not e:find("^[%w_/%.%-]+%.lua:%d+:") then return e end
    return debug.traceback(tostring(e), 2)
  end, ...)
  if not ok then
    io.stderr:write(name, ": ", tostring(err), "\n")
    os.exit(1)
  end
  require("bert.distributed").finalize()   -- under mpirun every rank leaves MPI before exiting
  return err
end

--- For a script that parses `arg` itself: prints `usage` and exits 0
-- when --help or -h is among the arguments.
function M.help(argv, usage)
  for _, a in ipairs(argv or {}) do
    if a == "--help" or a == "-h" then
      io.stdout:write(usage:gsub("\n*$", "\n"))
      os.exit(0)
    end
  end
end

return M
