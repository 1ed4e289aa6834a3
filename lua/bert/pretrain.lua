--- bert.pretrain: one pretraining run from a table of settings (what
-- experiments/pretrain.lua parses from its command line; names as the flags
-- with _ for -).  Reads the corpus, trains or loads the tokenizer, writes
-- the shards, builds the family's pretraining model, trains it with
-- bert.train.Trainer, evaluates it on the held-out documents and writes
-- OUTPUT/summary.json.  experiments/ablate.lua calls it once per cell.
--
--   local summary = require("bert.pretrain").run(settings)   -- the summary.json table
--
-- Errors (bad settings, missing files) are raised as "pretrain: ..." with
-- level 0, for the command line to print without a traceback.
local cjson = require("cjson")
local bert = require("bert")
local cli = require("bert.cli")
local dist = require("bert.distributed")
local fs = require("bert.fs")
local validate = require("bert.data.validate")
local objectives = require("bert.objectives")
local recipes = require("bert.recipes")

local M = {}

--- Converts an --objective value to its internal name (nsp, sop, none,
-- electra, ...: bert.objectives), or nil and a message naming the option
-- and the valid values.
M.objective = objectives.resolve

--- The command line of experiments/pretrain.lua (an argparse parser); its
-- defaults are those of every run: M.settings(overrides) fills them in.
function M.parser()
  local parser = cli.parser("pretrain.lua", "Pretrain a BERT-family model: MLM with NSP or SOP, ELECTRA, causal LMs, distillation, or a paper's --recipe.",
    "Writes OUTPUT/metrics.jsonl (and .csv), OUTPUT/summary.json (held-out metrics, fractions), " ..
    "OUTPUT/checkpoint/ (a self-contained model directory), OUTPUT/tokenizer/ and the plots.\n\n" .. recipes.help())
  parser:option("--recipe", "A family's pretraining recipe as its paper ran it: " .. table.concat(recipes.order, ", ") ..
    " (the settings are listed below; flags given explicitly override them)"):choices(recipes.order)
  cli.add(parser, "model", {help = "FAMILY-SIZE (albert-tiny, roberta-base, deberta-base...), a size " ..
    "(tiny, mini, small, medium, base, large: BERT) or a config.json",
    convert = function(v)   -- any family's size through the registry, else a config.json
      local r, why = bert.models.resolve(v)
      if r and r.size then return v end
      local ok, err = cli.choice_or_path("--model", cli.size_names(), "config.json")(v)
      if ok then return ok end
      if why and why:find("family has no size") then return nil, "option --model: " .. why end
      return nil, err
    end})
  cli.add(parser, "tokenizer", {default = "wordpiece", help = "wordpiece, bpe or unigram (train one), or a tokenizer file/directory to load",
    convert = cli.choice_or_path("--tokenizer", {"wordpiece", "bpe", "unigram"}, "tokenizer file or directory")})
  parser:option("--vocab-size", "Vocabulary size when training a tokenizer", "8000"):convert(cli.integer("--vocab-size", 10))
  parser:option("--corpus", "brown, kjv, english (tools/fetch_english.sh), multilingual (tools/fetch_multilingual.sh: " ..
    "languages mixed by --lang-alpha), or a file in BERT's plain format", "brown")
    :convert(cli.choice_or_path("--corpus", {"brown", "kjv", "english", "multilingual"}, "corpus file"))
  parser:option("--lang-alpha", "--corpus multilingual: each language's share of the sentences is p^alpha, " ..
    "normalised (p its share in the corpus): 1 keeps the corpus' shares, 0.7 mBERT's, 0.3 XLM-R's, 0 equal shares " ..
    "(default 0.7)"):convert(function(v)
    local n = tonumber(v)
    if not n or n ~= n or n < 0 or n > 1 then
      return nil, "option --lang-alpha: expected a number from 0 to 1, got '" .. v .. "'"
    end
    return n + 0.0
  end)
  parser:option("--objective", "mlm-nsp (BERT), mlm-sop (ALBERT), mlm (RoBERTa, full sentences), electra " ..
    "(replaced-token detection: ELECTRA, DeBERTa-v3), clm (GPT's left-to-right LM), bilm (ELMo's two " ..
    "one-directional LMs, Transformer stacks), elmo (ELMo itself: --model elmo-small, character CNN and LSTMs) " ..
    "or distill (DistilBERT, with --teacher); " ..
    "the old names nsp, sop, none still work", "mlm-nsp"):convert(M.objective)
  for _, objective in ipairs(objectives.each_module()) do
    if objective.add_options then objective.add_options(parser) end
  end
  parser:option("--masking", "static (pre-generated copies) or dynamic (fresh per batch)", "dynamic")
    :choices({"static", "dynamic"})
  parser:flag("--whole-word-mask", "Mask whole words")
  parser:flag("--recompute", "Recompute each encoder layer's activations in backward (less memory, ~1/3 more compute)")
  parser:flag("--span-mask", "SpanBERT's masking: spans of geometric length (p = 0.2, at most 10; in words " ..
    "with --whole-word-mask, else tokens)")
  parser:option("--ngram-mask", "ALBERT's n-gram masking: n-grams of 1..N with p(n) proportional to 1/n (ALBERT: 3)")
    :convert(cli.integer("--ngram-mask", 1))
  parser:flag("--phrase-mask", "ERNIE 1.0's phrase-level masking: whole phrases (learned from the training " ..
    "documents by a statistical chunker, saved as OUTPUT/data/phrases.txt) and whole words")
  parser:option("--mask-prob", "Share of the tokens masked (BERT: 0.15)", "0.15"):convert(function(v)
    local p = tonumber(v)
    if not p or not (p > 0 and p < 1) then return nil, "option --mask-prob: expected a number in (0, 1), got '" .. v .. "'" end
    return p + 0.0
  end)
  parser:option("--dupe-factor", "Copies with different masks (static masking)", "5"):convert(cli.integer("--dupe-factor", 1))
  cli.add(parser, "steps", "time_budget", "batch_size", "accum", "seq_len", "lr", "warmup", "weight_decay", "clip",
    "device", "threads", "seed", "eval_every",
    "max_eval", {help = "Held-out sequences per evaluation (default: all)"},
    "save_every", "log_every", "output", {default = "runs/pretrain"},
    "resume", "overwrite", "no_plot", "no_varlen")
  parser:option("--snapshots", "Also keep the model at these fractions of --steps (e.g. 0.0625,0.25) as " ..
    "OUTPUT/snapshot-STEP/: the points of a learning curve"):convert(function(v)
    local out = {}
    for item in v:gmatch("[^,]+") do
      local f = tonumber(item)
      if not f or not (f > 0 and f < 1) then
        return nil, "option --snapshots: expected fractions in (0, 1) separated by commas, got '" .. v .. "'"
      end
      out[#out + 1] = f
    end
    if #out == 0 then return nil, "option --snapshots: expected at least one fraction, got '" .. v .. "'" end
    table.sort(out)
    return table.concat(out, ",")
  end)
  cli.add(parser, "config_overrides", {help = "Model config keys over --model's, KEY=VALUE,... (as Hugging Face's " ..
    "run_mlm.py), e.g. pre_layer_norm=true,hidden_dropout_prob=0,attention_probs_dropout_prob=0"})
  parser:option("--schedule", "The learning rate's shape: linear (warmup, then linear decay to 0), one_cycle " ..
    "(a triangle from 0 up to the peak at --warmup, down to 0 at the end: Cramming's), cosine or constant (after " ..
    "the warmup)", "linear"):choices({"linear", "one_cycle", "cosine", "constant"})
  parser:option("--schedule-clock", "What the schedules (--schedule, --batch-ramp, --seq-len-schedule) follow: " ..
    "steps (the share of --steps done, or of the steps a calibration fits into --time-budget) or time (the share " ..
    "of --time-budget elapsed, counted across resumes: for runs whose steps grow slower as they go)", "steps")
    :choices({"steps", "time"})
  parser:option("--batch-ramp", "Grow the micro-batches per step linearly from 1 to --accum over this fraction " ..
    "of the run (Cramming's batch growth; a step is still one optimizer update)"):convert(cli.fraction("--batch-ramp"))
  parser:option("--seq-len-schedule", "Shorter sequences first: LEN:FRACTION,...[,SEQ_LEN], e.g. 64:0.5 trains " ..
    "the first half of the run on 64-token pieces of the --seq-len sequences (every token kept), the rest at " ..
    "--seq-len; each length must divide --seq-len (objectives without sentence pairs)"):convert(function(v)
    local stages, why = M.seq_len_stages(v)
    if not stages then return nil, "option --seq-len-schedule: " .. why end
    return v
  end)
  parser:option("--optimizer", "adamw or lamb (ALBERT's)", "adamw"):choices({"adamw", "lamb"})
  parser:option("--beta2", "The optimizer's beta2 (RoBERTa: 0.98)", "0.999"):convert(function(v)
    local b = tonumber(v)
    if not b or not (b >= 0 and b < 1) then return nil, "option --beta2: expected a number in [0, 1), got '" .. v .. "'" end
    return b + 0.0
  end)
  parser:option("--eps", "The optimizer's epsilon", "1e-6"):convert(cli.number("--eps", 0))
  parser:flag("--allow-invalid-utf8", "Replace invalid UTF-8 in the corpus with U+FFFD instead of refusing it")
  parser:option("--max-line-bytes", "Longest corpus line accepted (one sentence per line)", "65536")
    :convert(cli.integer("--max-line-bytes", 1))
  parser:flag("--repair", "On --resume, rebuild damaged data shards instead of refusing them")
  parser:flag("--detect-anomaly", "Stop at the first NaN/Inf naming the parameter and the op (slower)")
  parser:option("--on-nonfinite", "At a NaN/Inf loss or gradient: stop, or skip the update", "stop")
    :choices({"stop", "skip"})
  return parser
end

--- The keys of a --config-overrides value: bert.cli.config_overrides.
M.config_overrides = cli.config_overrides

--- The stages of a --seq-len-schedule value ("64:0.5,128"): a list of
-- {len, until} with increasing lengths and fractions, the last (the length
-- the run ends at) with until = 1; a final length without a fraction may
-- be left out (seq_len then: the shards' length).  nil, why when malformed.
function M.seq_len_stages(text, seq_len)
  local stages, last_until = {}, 0
  for item in tostring(text):gmatch("[^,]+") do
    local len, frac = item:match("^%s*(%d+)%s*:%s*([%d%.eE%-]+)%s*$")
    if not len then len = item:match("^%s*(%d+)%s*$") end
    len, frac = math.tointeger(tonumber(len)), frac and tonumber(frac)
    if not len or len < 1 or (frac and not (frac > last_until and frac < 1)) then
      return nil, string.format("expected LEN:FRACTION items with fractions rising in (0, 1), then at most " ..
        "one final LEN, got '%s'", tostring(text))
    end
    if #stages > 0 and (stages[#stages].until_fraction == 1 or len <= stages[#stages].len) then
      return nil, string.format("expected rising lengths, each but the last with a fraction, got '%s'", tostring(text))
    end
    stages[#stages + 1] = {len = len, until_fraction = frac or 1}
    last_until = frac or 1
  end
  if #stages == 0 then return nil, "expected at least one LEN:FRACTION item, got '" .. tostring(text) .. "'" end
  if seq_len then
    if stages[#stages].until_fraction < 1 then stages[#stages + 1] = {len = seq_len, until_fraction = 1} end
    if stages[#stages].len ~= seq_len then
      return nil, string.format("the last length %d is not --seq-len %d (the shards' length)", stages[#stages].len, seq_len)
    end
    for _, st in ipairs(stages) do
      if seq_len % st.len ~= 0 then
        return nil, string.format("%d does not divide --seq-len %d (the pieces of a sequence must not be cut short)",
          st.len, seq_len)
      end
    end
  end
  return stages
end

-- The command-line name of an internal objective name (mlm-nsp for nsp,
-- mlm for none): what the docs and --help call it.
local function objective_shown(internal)
  for _, name in ipairs(objectives.order) do
    if objectives.names[name] == internal then return name end
  end
  return internal
end

-- Why the schedules over the run (--schedule-clock, --batch-ramp,
-- --seq-len-schedule) cannot be followed with these settings, or nil.
local function schedules_problem(args)
  local clock = args.schedule_clock or "steps"
  if clock == "time" then
    if not args.time_budget then return "--schedule-clock time needs --time-budget: the schedules follow its share elapsed" end
    if args.warmup and args.warmup >= 1 then
      return string.format("--warmup %g is a number of steps; with --schedule-clock time give a fraction of the " ..
        "budget (< 1)", args.warmup)
    end
  elseif args.time_budget and (args.batch_ramp or args.seq_len_schedule) then
    -- the steps a calibration fits are those of its first, cheapest steps: the plan would overrun the budget
    return string.format("--%s with --time-budget needs --schedule-clock time (its steps grow slower as the run goes)",
      args.batch_ramp and "batch-ramp" or "seq-len-schedule")
  end
  if args.batch_ramp and (args.accum or 1) < 2 then
    return "--batch-ramp grows the micro-batches per step from 1 to --accum: give --accum 2 or more"
  end
  if args.seq_len_schedule then
    local _, why = M.seq_len_stages(args.seq_len_schedule, args.seq_len)
    if why then return "--seq-len-schedule: " .. why end
    local objective = objectives.get(args.objective)
    if objective and objective.data(args) ~= "none" then
      return string.format("--seq-len-schedule cuts sequences into pieces: --objective %s's sentence pairs would " ..
        "not survive it (use an objective without a pair task: mlm, clm, electra...)", objective_shown(args.objective))
    end
    if dist.size() > 1 then return "--seq-len-schedule under mpirun is not supported yet (the pieces of a rank's rows vary)" end
  end
  return nil
end

--- Why these settings cannot run (a message), or nil: options that exist
-- on the command line but are not implemented yet, and ones that exclude
-- each other.
function M.unsupported(args)
  local modes = {}
  for _, flag in ipairs({"span_mask", "ngram_mask", "phrase_mask"}) do
    if args[flag] then modes[#modes + 1] = "--" .. flag:gsub("_", "-") end
  end
  if #modes > 1 then return table.concat(modes, " and ") .. " exclude each other: give one" end
  local objective = args.objective and objectives.get(args.objective)
  local shown = objective_shown(args.objective)   -- mlm rather than the internal none
  local owners, keys = objectives.flag_owners(), {}
  for key in pairs(owners) do keys[#keys + 1] = key end
  table.sort(keys)
  for _, key in ipairs(keys) do
    if args[key] ~= nil and args[key] ~= false and objectives.get(owners[key]) ~= objective then
      return string.format("--%s is a setting of --objective %s; this run's objective is %s (drop --%s)",
        key:gsub("_", "-"), owners[key], tostring(shown), key:gsub("_", "-"))
    end
  end
  if objective and objective.masks == false then
    for _, key in ipairs({"span_mask", "ngram_mask", "phrase_mask", "whole_word_mask"}) do
      if args[key] then
        return string.format("--%s with --objective %s: every real token is a target, no token is masked",
          key:gsub("_", "-"), shown)
      end
    end
  end
  if objective and objective.check then
    local why = objective.check(args)
    if why then return why end
  end
  return schedules_problem(args)
end

--- Parses argv (a list of strings) with --recipe applied: the recipe's
-- flags go before the user's, so that every flag given explicitly wins
-- (bert.recipes).  Returns args (args.recipe_settings says what the recipe
-- set), or nil and a message.
function M.parse_argv(argv)
  local ok, args = M.parser():pparse(argv)
  if not ok or not args.recipe then return ok and args or nil, not ok and args or nil end
  local full, line = recipes.argv(args.recipe, argv, {has_objective = function(n) return objectives.names[n] ~= nil end,
    flag_owners = objectives.flag_owners()})
  if not full then return nil, line end
  ok, args = M.parser():pparse(full)
  if not ok then return nil, args end
  args.recipe_settings = line
  return args
end

--- The command line of experiments/pretrain.lua (default: the global arg), parsed with its recipe.
function M.parse(argv)
  argv = argv or arg
  local list = {}
  for i = 1, #argv do list[i] = argv[i] end
  local args, err = M.parse_argv(list)
  if not args then M.parser():error(err) end
  return args
end

--- A full settings table: the command line's defaults, then `overrides`
-- (names as the flags with _ for -, values as on the command line or as
-- Lua numbers and booleans), checked and converted by the same parser, so
-- that a typo or a bad value in an ablation file is an error naming it
-- rather than a silent default.  overrides.quiet passes through.
function M.settings(overrides)
  overrides = overrides or {}
  if type(overrides) ~= "table" then
    error("pretrain.settings: argument #1 expected a table, got " .. type(overrides), 2)
  end
  local keys = {}
  for k in pairs(overrides) do
    if type(k) ~= "string" then error("pretrain.settings: setting names must be strings, got " .. type(k), 2) end
    if k ~= "quiet" then keys[#keys + 1] = k end
  end
  table.sort(keys)
  local argv = {}
  for _, k in ipairs(keys) do
    local v, flag = overrides[k], "--" .. k:gsub("_", "-")
    if v == true then argv[#argv + 1] = flag
    elseif v ~= false then
      if type(v) ~= "string" and type(v) ~= "number" then
        error(string.format("pretrain.settings: setting '%s' expected a string, number or boolean, got %s", k, type(v)), 2)
      end
      argv[#argv + 1] = flag
      argv[#argv + 1] = math.type(v) == "float" and string.format("%.17g", v) or tostring(v)
    end
  end
  local args, perr = M.parse_argv(argv)
  if not args then error("pretrain.settings: " .. tostring(perr), 2) end
  local unsupported = M.unsupported(args)
  if unsupported then error("pretrain.settings: " .. unsupported, 2) end
  args.quiet = overrides.quiet
  return args
end

-- M.run goes in stages, each filling in its part of `run`, the table of one
-- run's state: settings, corpus, run directory, data, model, optimizer,
-- trainer, training, summary.

-- {============================================================ settings
local function die(msg) error("pretrain: " .. msg, 0) end

-- nil when the file is missing; a damaged file stops the run, naming it
local function read_saved(path, what)
  if not fs.exists(path) then return nil end
  local value, err = fs.read_json(path, what or "file")
  if not value then die(err) end
  return value
end

-- Every write is checked: a full disk stops the run with the file named
local function write_json(path, value)
  local ok, err = fs.write_atomic(path, cjson.encode(value) .. "\n")
  if not ok then die(err) end
end

-- args.json: the run's settings, not where they were read from (a run
-- directory is relocatable: --resume always names it) nor what this
-- invocation may replace.
local function args_to_save(args)
  local out = {}
  for k, v in pairs(args) do if k ~= "resume" and k ~= "overwrite" then out[k] = v end end
  return out
end

-- A resumed run takes its settings from the run directory, so that the
-- data, model and schedule are those of the interrupted run.
local function resume_settings(args)
  local dir = args.resume   -- the directory named now: a run may have been copied or moved since
  local saved = read_saved(dir .. "/args.json", "run settings")
  if not saved then die("--resume: " .. dir .. "/args.json is missing; not a run directory") end
  local control = {repair = args.repair or false, detect_anomaly = args.detect_anomaly or false}   -- this invocation's
  for k, v in pairs(saved) do args[k] = v end
  for k, v in pairs(control) do args[k] = v end
  args.resume, args.output = dir, dir   -- never a path recorded inside (older args.json kept "resume"/"output")
end

--- The learning-curve snapshots a run's settings (args.json) ask for:
-- {fraction, step, name} each, the step nearest the fraction of --steps.
function M.snapshot_plan(args)
  local snapshots = {}
  if args.snapshots and args.steps then
    for f in tostring(args.snapshots):gmatch("[^,]+") do
      local step = math.max(1, math.floor(tonumber(f) * args.steps + 0.5))
      -- the directory's name, not its path: a run directory may be moved
      snapshots[#snapshots + 1] = {fraction = tonumber(f), step = step, name = string.format("snapshot-%d", step)}
    end
  end
  return snapshots
end

-- Refuses settings that cannot run; run.objective, run.snapshots.
local function check_settings(run)
  local args = run.args
  local unsupported = M.unsupported(args)
  if unsupported then die(unsupported) end
  if args.recipe_settings and not args.resume and dist.is_main() then io.stderr:write("pretrain: ", args.recipe_settings, "\n") end
  local objective = objectives.get(args.objective)
  if objective.prepare then   -- settings that depend on files (distill: the teacher's tokenizer)
    local why = objective.prepare(args)
    if why then die(why) end
  end
  if not args.steps and not args.time_budget then args.steps = 1000 end
  run.seq_len_stages = args.seq_len_schedule and assert(M.seq_len_stages(args.seq_len_schedule, args.seq_len))
  -- learning-curve snapshots at fractions of a step budget (a time budget's total is not known ahead)
  if args.snapshots and not args.steps then die("--snapshots needs --steps: the fractions are of a fixed number of steps") end
  run.objective, run.snapshots = objective, M.snapshot_plan(args)
end
-- }============================================================

-- {============================================================ corpus
-- read and checked before anything is written to the run directory (rank 0
-- fetches; the other ranks read it once rank 0 is ready, in prepare_data)

-- The multilingual corpus mixed with language exponent alpha (built and
-- fetched on first use); its path and the mix's plan, printed.
local function ml_dir() return (os.getenv("BERT_DATA") or "data") .. "/multilingual" end

local function multilingual_corpus(alpha)
  local ml = require("bert.data.multilingual")
  local dir = ml_dir()
  if not fs.exists(dir .. "/stats.json") then
    io.stderr:write("pretrain: building the multilingual corpus (tools/fetch_data.sh multilingual)\n")
    if fs.fetch_data("multilingual") ~= true or not fs.exists(dir .. "/stats.json") then
      die("could not build the multilingual corpus")
    end
  end
  local path, plan = ml.prepare(dir, alpha, 1)
  if not path then die(tostring(plan)) end
  io.stderr:write(string.format("pretrain: multilingual corpus, alpha %g: %d sentences\n", alpha, plan.total_sentences))
  io.stderr:write(string.format("  %-8s %10s %8s %8s %8s\n", "language", "sentences", "share", "sampled", "passes"))
  local langs = {}
  for l in pairs(plan.languages) do langs[#langs + 1] = l end
  table.sort(langs)
  for _, l in ipairs(langs) do
    local x = plan.languages[l]
    io.stderr:write(string.format("  %-8s %10d %7.2f%% %7.2f%% %8.2f\n", l, x.sentences, 100 * x.share, 100 * x.rate,
      x.passes))
  end
  return path, plan
end

-- run.corpus_path: the corpus file, fetched on rank 0 for a named corpus
local function find_corpus(run)
  local args = run.args
  local corpus_path = args.corpus
  if args.lang_alpha ~= nil and args.corpus ~= "multilingual" then
    die("--lang-alpha samples the languages of --corpus multilingual, not of " .. tostring(args.corpus))
  end
  if args.corpus == "multilingual" then
    local alpha = args.lang_alpha or 0.7
    if dist.is_main() then run.corpus_path, run.language_plan = multilingual_corpus(alpha)
    else run.corpus_path = require("bert.data.multilingual").path(ml_dir(), alpha, 1) end
    return
  elseif args.corpus == "brown" or args.corpus == "kjv" or args.corpus == "english" then
    corpus_path = string.format("data/%s/%s.txt", args.corpus, args.corpus)
    if not fs.exists(corpus_path) and dist.is_main() then
      io.stderr:write("pretrain: fetching the ", args.corpus, " corpus (tools/fetch_data.sh)\n")
      if fs.fetch_data(args.corpus) ~= true or not fs.exists(corpus_path) then
        die("could not fetch " .. args.corpus)
      end
    end
  end
  run.corpus_path = corpus_path
end

-- The corpus' documents, checked.
local function read_corpus(run)
  local args, corpus_path = run.args, run.corpus_path
  if not fs.exists(corpus_path) then die("corpus file " .. corpus_path .. " not found") end
  local docs, cerr = validate.corpus(corpus_path, {allow_invalid_utf8 = args.allow_invalid_utf8,
                                                   max_line_bytes = args.max_line_bytes})
  if not docs then die(cerr) end
  return docs
end
-- }============================================================

-- Takes the run directory on rank 0: its one-writer lock (run.lock) and, for
-- a fresh run, the refusal of a finished or resumable run there unless
-- --overwrite (which says what it replaces).  Called before the corpus is
-- read, when the directory exists, and with create before the first write.
local function claim_output(run, create)
  local args = run.args
  if run.lock or not dist.is_main() or not (create or fs.isdir(args.output)) then return end
  local ok, err = bert.mkdir(args.output)
  if not ok then die(err) end
  local lock, lerr = fs.lock_run_dir(args.output)
  if not lock then die(lerr) end
  run.lock = lock
  if args.resume then return end
  local refused = fs.refuse_previous_run(args.output, args.overwrite)
  if refused then die(refused) end
  local previous = fs.previous_run(args.output)
  if previous then io.stderr:write(string.format("pretrain: --overwrite: replacing %s in %s\n", previous, args.output)) end
end

-- Creates the run directory and writes args.json there.
local function prepare_output(run)
  local args = run.args
  claim_output(run, true)
  if not args.resume and dist.is_main() then
    -- a fresh run in an old directory: keep the tokenizer and shards only if
    -- they were made with the same data settings, drop everything else
    local old = read_saved(args.output .. "/args.json")
    local same = old ~= nil
    for _, k in ipairs({"corpus", "lang_alpha", "tokenizer", "vocab_size", "seq_len", "objective", "masking", "dupe_factor",
                        "whole_word_mask", "seed",
                        "span_mask", "ngram_mask", "phrase_mask", "mask_prob"}) do
      if old and old[k] ~= args[k] then same = false end
    end
    local stale = {"metrics.jsonl", "summary.json", "checkpoint", "checkpoint.old", "checkpoint.tmp", "best"}
    if not same then stale[#stale + 1] = "data"; stale[#stale + 1] = "tokenizer" end
    for _, name in ipairs(stale) do os.execute(string.format("rm -rf '%s/%s'", args.output, name)) end
  end
  if dist.is_main() then write_json(args.output .. "/args.json", args_to_save(args)) end
end

-- {============================================================ data

-- run.tok, run.tok_dir: trained on the training documents only, then saved
-- with the run; or --tokenizer's file
local function load_tokenizer(run, train_docs)
  local args = run.args
  local tok_dir = args.output .. "/tokenizer"
  local tok
  if args.tokenizer == "wordpiece" or args.tokenizer == "bpe" or args.tokenizer == "unigram" then
    if fs.exists(tok_dir .. "/tokenizer.json") then
      local terr
      tok, terr = bert.tokenizer.load(tok_dir .. "/tokenizer.json")
      if not tok then die(tostring(terr)) end
    else
      -- the training documents only, never the held-out ones
      local made, merr = bert.mkdir(tok_dir)
      if not made then die(merr) end
      local text_path = tok_dir .. "/training-text.txt"
      -- every write checked: a tokenizer trained on a cut text would be kept by every rerun
      local f, oerr = io.open(text_path, "wb")
      if not f then die(oerr) end
      local written, werr = true, nil
      for _, doc in ipairs(train_docs) do
        for _, s in ipairs(doc) do
          if written then written, werr = f:write(s, "\n") end
        end
      end
      local closed, cerr = f:close()
      if not (written and closed) then
        os.remove(text_path)
        die(text_path .. ": " .. tostring(werr or cerr))
      end
      local t0 = bert.wall_time()
      -- a multilingual Unigram vocabulary as mBERT-era SentencePiece setups train it: the characters
      -- covering 99.95% of the text, the rest as UTF-8 byte pieces rather than unknown
      local multilingual_unigram = args.corpus == "multilingual" and args.tokenizer == "unigram"
      local terr
      tok, terr = bert.tokenizer.train{
        kind = args.tokenizer, vocab_size = args.vocab_size, lowercase = true, files = {text_path},
        character_coverage = multilingual_unigram and 0.9995 or nil, byte_fallback = multilingual_unigram or nil,
      }
      os.remove(text_path)
      if not tok then die(tostring(terr)) end
      local saved, serr = require("bert.model_dir").save_tokenizer(tok_dir, tok)
      if not saved then   -- no tokenizer.json left behind: a rerun trains it again
        for _, name in ipairs(fs.listdir(tok_dir) or {}) do os.remove(tok_dir .. "/" .. name) end
        die(tostring(serr))
      end
      io.stderr:write(string.format("pretrain: trained a %s vocabulary of %d in %.1f s\n",
        args.tokenizer, tok:vocab_size(), bert.wall_time() - t0))
      if args.corpus == "multilingual" then   -- what the shared vocabulary costs each language
        local ml = require("bert.data.multilingual")
        local by_lang = ml.read(ml_dir())
        if by_lang then
          run.fertility = ml.fertility(tok, by_lang)
          write_json(tok_dir .. "/fertility.json", run.fertility)
          io.stderr:write("pretrain: the vocabulary per language (first sentences of each document, up to 2,000):\n",
            ml.fertility_table(run.fertility), "\n")
        end
      end
    end
  else
    tok = bert.tokenizer.load(args.tokenizer)
    if not tok then die("cannot load tokenizer " .. args.tokenizer) end
  end
  run.tok, run.tok_dir = tok, tok_dir
end

-- ERNIE's phrases: learned from the training documents once, kept with the data
local function learn_phrases(run, train_docs)
  local args = run.args
  if not args.phrase_mask then return nil end
  assert(bert.mkdir(args.output .. "/data"))
  local phrases, how = require("bert.data.chunker").ensure(args.output .. "/data/phrases.txt",
    {documents = train_docs, tokenizer = run.tok, repair = args.repair})
  if not phrases then die(tostring(how) .. " (--repair learns it again from the corpus)") end
  io.stderr:write("pretrain: phrases: ", how, "\n")
  return phrases
end

-- A run directory carried to another machine without its shards
-- (bert.ablate.archive: they are rebuilt from the corpus rather than
-- committed) holds data/NAME/meta.json and sha256.json, the digest of each
-- shard file, and no shard.  They are moved to data/NAME.carried until the
-- rebuilt shards are checked to be the same bytes (a rebuild killed midway
-- starts again from there); returns them, or nil for any other state.
local function carried_shards(dir)
  local keep = dir .. ".carried"
  if fs.exists(keep .. "/sha256.json") then
    fs.remove_tree(dir)
  else
    local digests = fs.read_json(dir .. "/sha256.json")
    if not (digests and fs.exists(dir .. "/meta.json")) then return nil end
    for file in pairs(digests) do
      if fs.exists(dir .. "/" .. file) then return nil end
    end
    local ok, err = os.rename(dir, keep)
    if not ok then die(tostring(err)) end
  end
  local digests, derr = fs.read_json(keep .. "/sha256.json", "shard digests")
  if not digests then die(derr) end
  return {digests = digests, keep = keep}
end

local function check_rebuilt(dir, carried)
  for file, want in pairs(carried.digests) do
    local got, err = fs.sha256(dir .. "/" .. file)
    if got ~= want then
      -- the carried state is put back: a rerun must fail the same way, not train on other data
      fs.remove_tree(dir)
      os.rename(carried.keep, dir)
      die(string.format("%s/%s: the shards rebuilt from the corpus differ from those of the carried run " ..
        "(sha256 %s, carried %s): another corpus or tokenizer than the run's", dir, file, tostring(got or err), want))
    end
  end
  fs.remove_tree(carried.keep)
  io.stderr:write(string.format("pretrain: %s: rebuilt shards match the carried run's digests\n", dir))
end

-- The shard set OUTPUT/data/NAME of docs (checked, or with --repair
-- rebuilt, when it exists); returns its meta.json.
local function shards(run, name, docs, masking, dupe, seed, phrases)
  local args, objective, pre = run.args, run.objective, run.pre
  local dir = args.output .. "/data/" .. name
  local carried = carried_shards(dir)
  if fs.exists(dir .. "/meta.json") then
    -- every shard is read and checked now, not when training reaches it
    local ok, err = pre.read(dir)
    if ok then return read_saved(dir .. "/meta.json", "shard set description") end
    if not args.repair then die(tostring(err) .. " (--repair rebuilds the data from the corpus)") end
    io.stderr:write("pretrain: --repair: rebuilding ", dir, " (", tostring(err), ")\n")
    os.execute(string.format("rm -rf '%s'", dir))
  end
  local t0 = bert.wall_time()
  local ok, info, werr = pcall(pre.create_shards, {
    documents = docs, tokenizer = run.tok, output = dir, max_seq_length = args.seq_len,
    objective = objective.data(args), masking = masking, dupe_factor = dupe,
    whole_word_mask = args.whole_word_mask, seed = seed,
    masked_lm_prob = args.mask_prob,
    -- Google's 20 at 128 tokens and 0.15; more where the length and rate ask for more
    max_predictions_per_seq = math.max(20, math.ceil(args.seq_len * args.mask_prob)),
    mask_mode = args.span_mask and "span" or args.ngram_mask and "ngram" or args.phrase_mask and "phrase" or "tokens",
    max_span = args.ngram_mask, phrases = phrases,
  })
  if not ok then die(run.corpus_path .. ": " .. tostring(info)) end
  if not info then   -- a write failed (a full disk): no partial shard set is left to a rerun
    fs.remove_tree(dir)
    die(tostring(werr))
  end
  io.stderr:write(string.format("pretrain: %s: %d instances in %.1f s\n", name, info.instances, bert.wall_time() - t0))
  if carried then check_rebuilt(dir, carried) end
  return read_saved(dir .. "/meta.json") or info
end

-- The tokenizer and the training and held-out shards (rank 0 makes them,
-- the other ranks then read them): run.tok, run.tok_dir, run.train_meta,
-- run.eval_meta.
local function prepare_data(run, documents)
  local args = run.args
  dist.wait_for_main()   -- rank 0 fetches, trains the tokenizer and writes the shards; the others then read them
  documents = documents or read_corpus(run)
  local train_docs, eval_docs = run.pre.split_documents(documents, {heldout = 0.05, seed = args.seed})
  load_tokenizer(run, train_docs)
  local phrases = learn_phrases(run, train_docs)
  run.train_meta = shards(run, "train", train_docs, args.masking, args.masking == "static" and args.dupe_factor or 1,
    args.seed, phrases)
  -- held-out data: one fixed masking, so every evaluation sees the same targets
  run.eval_meta = shards(run, "eval", eval_docs, "static", 1, args.seed + 1000, phrases)
  if (run.eval_meta.instances or 0) < 1 then
    die(run.corpus_path .. ": the held-out documents give no sequences; use a larger corpus")
  end
  dist.main_ready()
end

-- run.loader: this rank's rows of the training batches (--batch-size is
-- the global batch), run.shard_rows
local function open_loader(run)
  local args = run.args
  local shard_first, shard_rows = dist.shard(args.batch_size, "pretrain: --batch-size")
  local loader, lerr = run.pre.Loader{dir = args.output .. "/data/train", batch_size = args.batch_size,
                                      seq_len = args.seq_len, masking = args.masking, seed = args.seed, shuffle = true,
                                      shard_first = shard_first, shard_rows = shard_rows}
  if not loader then die(lerr) end
  run.loader, run.shard_rows = loader, shard_rows
end
-- }============================================================

-- {============================================================ model
-- --model FAMILY-SIZE (albert-tiny), a bare size (BERT's) or a config.json:
-- the family's pretraining head, on the device; run.model, run.arch and
-- run.ctx (what the objective's functions are given)
-- The vocabulary and position sizes of the model: the tokenizer's
-- vocabulary (a config.json's other vocab_size is replaced, and said so);
-- a config.json's max_position_embeddings when it holds --seq-len, else
-- refused with the key and value; for a size name, 512 positions.
local function model_sizes(args, resolved, tok_size)
  local sizes = {vocab_size = tok_size, max_position_embeddings = math.max(512, args.seq_len)}
  if resolved then return sizes end
  local cfg = require("bert.models.config").read_json(args.model) or {}
  local v, p = tonumber(cfg.vocab_size), tonumber(cfg.max_position_embeddings)
  local function shown(x) return tostring(math.tointeger(x) or x) end
  if v and v ~= tok_size and dist.is_main() then   -- the tokenizer trained here decides the vocabulary: said
    io.stderr:write(string.format("pretrain: --model %s: vocab_size %s replaced by the tokenizer's %d tokens\n",
      args.model, shown(v), tok_size))
  end
  if p then
    if p < args.seq_len then
      die(string.format("--model %s: max_position_embeddings %s is smaller than --seq-len %d", args.model,
        shown(p), args.seq_len))
    end
    sizes.max_position_embeddings = p
  end
  return sizes
end

-- sizes with --config-overrides' keys over them (max_position_embeddings included), in
-- the family's key names; a key the family does not have stops the run, named
local function with_overrides(sizes, text, family)
  if text then
    local registry = require("bert.models.registry")
    local keys, why = require("bert.models.config").family_keys(
      registry.families[family] or registry.families[registry.default_model_type], assert(M.config_overrides(text)))
    if not keys then die("--config-overrides: " .. why) end
    for k, v in pairs(keys) do sizes[k] = v end
  end
  return sizes
end

local function build_model(run)
  local args, objective = run.args, run.objective
  local resolved = bert.models.resolve(args.model)
  local family = resolved and resolved.family
    or (require("bert.models.config").read_json(args.model) or {}).model_type or require("bert.models.registry").default_model_type
  local unigram_id = nil
  local ctx = {
    args = args, tokenizer = run.tok, family = family, size = resolved and resolved.size or args.model,
    config_overrides = with_overrides(model_sizes(args, resolved, run.tok:vocab_size()), args.config_overrides, family),
    unigram_id = function()
      if unigram_id == nil then unigram_id = run.pre.unigram_counts(args.output .. "/data/train"):argmax():item() end
      return unigram_id
    end,
  }
  local ok_model, model, arch = pcall(objective.build, ctx)
  if not ok_model then die(tostring(model)) end
  if args.device == "vulkan" then
    if not model.to then die("--device vulkan: this build has no Vulkan support") end
    local info = bert.backend_info().vulkan
    if not (info and info.available) then die("--device vulkan: " .. tostring(info and info.reason or "not available")) end
    model:to("vulkan")
  end
  if args.recompute then model:set_recompute(true) end
  -- packed batches (varlen) for the objectives whose model can take them:
  -- instances shorter than --seq-len cost only their tokens (dropout draws
  -- the padded path's masks: the same run on any rank count)
  if objective.varlen and not args.no_varlen then model:set_varlen(true) end
  run.model, run.arch, run.ctx = model, arch, ctx
end

-- run.lr (the peak), run.opt, and run.schedule: {total, warmup} steps and
-- lr_at(step).  With a time budget the schedule's length is fixed once by
-- a calibration before the first progress line (train's
-- Trainer:fit_to_budget: step, evaluation and save times), so that the
-- learning rate reaches zero as the budget runs out; --steps caps it.  The
-- total and the warmup are saved with the checkpoints (resume replays them).
-- With --schedule-clock time the schedules follow run.clock instead: the
-- share of the budget elapsed, evaluations and saves included, carried
-- over resumes in the checkpoints (so a resumed run goes on from where
-- the clock stood, though not at the very same steps: wall time varies).
local TICKS = 1000000   -- the time clock's resolution: a schedule of TICKS "steps" over the budget

local function make_optimizer(run)
  local args, model = run.args, run.model
  local lr = args.lr or cli.default_lr("pretrain", model.config.hidden_size)
  if dist.is_main() then
    io.stderr:write(string.format("pretrain: peak learning rate %g%s\n", lr,
      args.lr and "" or string.format(" (the default for hidden size %d; --lr to change)", model.config.hidden_size)))
  end
  -- (runs written before --optimizer/--beta2/--eps existed resume with what they used)
  run.opt = (args.optimizer == "lamb" and bert.optim.LAMB or bert.optim.AdamW)(model,
    {lr = lr, weight_decay = args.weight_decay, eps = args.eps or 1e-6, betas = {0.9, args.beta2 or 0.999}})
  local schedule = {total = not args.time_budget and args.steps or nil}
  schedule.warmup = schedule.total and math.max(1, cli.warmup_steps(args.warmup, schedule.total)) or nil
  local kind, by_time = args.schedule or "linear", args.schedule_clock == "time"
  if by_time then
    local clock = {before = 0}   -- seconds of the budget spent before this invocation (a resume's)
    function clock.elapsed() return clock.before + (clock.started and bert.wall_time() - clock.started or 0) end
    run.clock = clock
  end
  -- the share of the run done at the start of `step`, once per step (rank 0's clock on every rank)
  local progress_step, progress_value
  function schedule.progress(step)
    if step ~= progress_step then
      local p
      if by_time then
        p = run.clock.elapsed() / args.time_budget
        if dist.size() > 1 then p = dist.broadcast_number(p) end
      else
        p = step / math.max(1, schedule.total or math.huge)
      end
      progress_step, progress_value = step, math.min(1, math.max(0, p))
    end
    return progress_value
  end
  local shape, shape_total
  function schedule.lr_at(step)
    if not by_time and (kind == "linear" or not schedule.total) then
      -- BERT's: warmup from lr / warmup at step 0 (the calibration's steps warm up as over 10000 steps)
      local total = schedule.total or math.huge
      local warmup = schedule.warmup or math.max(1, cli.warmup_steps(args.warmup, 10000))
      if step < warmup then return lr * (step + 1) / warmup end
      if total == math.huge then return lr end
      return lr * math.max(0, (total - step) / math.max(1, total - warmup))
    end
    local total = by_time and TICKS or schedule.total
    if shape_total ~= total then
      local warmup = by_time and math.floor((args.warmup or 0.1) * TICKS + 0.5) or schedule.warmup
      shape, shape_total = bert.optim.schedule{kind = kind, warmup = math.min(warmup, total), total = total, lr = lr}, total
    end
    return shape(by_time and math.floor(schedule.progress(step) * TICKS) or math.min(step, total))
  end
  -- the micro-batches of `step`: 1 growing to --accum over --batch-ramp of the run
  function schedule.accum_at(step)
    local f, accum = schedule.progress(step) / args.batch_ramp, math.tointeger(args.accum)   -- (a float from args.json)
    return math.min(accum, 1 + math.floor((accum - 1) * f))
  end
  -- the sequence length of `step` (--seq-len-schedule)
  function schedule.seq_len_at(step)
    local p = schedule.progress(step)
    for _, st in ipairs(run.seq_len_stages) do
      if p < st.until_fraction then return st.len end
    end
    return args.seq_len
  end
  run.lr, run.schedule = lr, schedule
end
-- }============================================================

-- {============================================================ evaluation
-- The held-out metrics of model m (the objective's), over every rank.
local function evaluator(run)
  local args, objective, ctx = run.args, run.objective, run.ctx
  return function(m)
    local ev = assert(run.pre.Loader{dir = args.output .. "/data/eval",
                                     batch_size = math.min(args.batch_size, run.eval_meta.instances),
                                     seq_len = args.seq_len, masking = "static", seed = 0, shuffle = false})
    local nbatches = math.max(1, ev:batches_per_epoch())
    if args.max_eval then nbatches = math.min(nbatches, math.max(1, math.ceil(args.max_eval / args.batch_size))) end
    local sums = objective.eval_init(ctx)
    for b = 1, nbatches do
      local batch = ev:next()
      -- batches split over ranks, sums reduced below
      if dist.owns(b) then objective.eval_batch(ctx, m, batch, sums) end
    end
    ev:close()
    local keys = {}
    for k in pairs(sums) do keys[#keys + 1] = k end
    table.sort(keys)
    local values = {}
    for i, k in ipairs(keys) do values[i] = sums[k] end
    values = dist.all_reduce_numbers(values)
    for i, k in ipairs(keys) do sums[k] = values[i] end
    return objective.eval_finish(ctx, sums)
  end
end
-- }============================================================

-- run.trainer and run.evaluate; a resumed run continues from its checkpoint
local function make_trainer(run)
  local args, objective, ctx, loader, schedule = run.args, run.objective, run.ctx, run.loader, run.schedule
  run.evaluate = evaluator(run)
  local trainer
  -- --seq-len-schedule: the step's batch in pieces of its length (a pure
  -- function of the step and the loader's batch, so a resume replays it)
  local function next_batch()
    local batch = loader:next()
    if run.seq_len_stages then
      local len = schedule.seq_len_at(trainer.step)
      if len < args.seq_len then batch = run.pre.rechunk(batch, len) end
    end
    return batch
  end
  trainer = bert.train.Trainer{
    model = run.model, optimizer = run.opt, schedule = schedule.lr_at, next_batch = next_batch,
    steps = args.steps, time_budget = args.time_budget, accum = args.accum, clip = args.clip > 0 and args.clip or nil,
    accum_at = args.batch_ramp and schedule.accum_at or nil,
    output = args.output, save_every = args.save_every, eval_every = args.eval_every, tokenizer = run.tok,
    log_every = args.log_every, evaluate = run.evaluate,
    step_metrics = function(out, batch)
      local m = objective.step_metrics(ctx, out, batch)
      if run.seq_len_stages then m.seq_len = batch.input_ids:size(2) end
      return m
    end,
    sharded_batches = true, fingerprint = args,
    snapshot_steps = #run.snapshots > 0 and (function()
      local steps = {}
      for i, sn in ipairs(run.snapshots) do steps[i] = sn.step end
      return steps
    end)() or nil,
    on_nonfinite = args.on_nonfinite, repair = args.repair,
    get_state = function()
      return {loader = loader:state(), schedule_total = schedule.total, warmup_steps = schedule.warmup,
              elapsed_seconds = run.clock and run.clock.elapsed() or nil}
    end,
    set_state = function(s)
      loader:set_state(s.loader)
      schedule.total, schedule.warmup = s.schedule_total, s.warmup_steps
      if run.clock then run.clock.before = s.elapsed_seconds or 0 end
    end,
  }
  if args.resume then
    local ok, err = pcall(trainer.resume, trainer)
    if not ok then die(tostring(err)) end
    if schedule.total and trainer.step > schedule.total then   -- a time budget's plan, restored with the step
      die(string.format('resume: %s/checkpoint/trainer.json: "step": %d is beyond the %d steps this run plans',
        args.output, trainer.step, schedule.total))
    end
    if dist.is_main() then io.stderr:write(string.format("pretrain: resumed %s at step %d\n", args.output, trainer.step)) end
  end
  run.trainer = trainer
end

-- Trains to the end of the budget: run.summary (the Trainer's),
-- run.training_wall (seconds, evaluations and saves included).  With a
-- time budget, a short calibration (Trainer:fit_to_budget) fixes the
-- steps and the schedule once, before the first step line.
local function train(run)
  local args, trainer, schedule = run.args, run.trainer, run.schedule
  local started = bert.wall_time()
  if run.clock then   -- the budget's share left: the clock goes on from the checkpoint's
    run.clock.started = started
    trainer.time_budget = math.max(0, args.time_budget - run.clock.before)
    if run.clock.before > 0 and dist.is_main() then
      io.stderr:write(string.format("pretrain: %.0f s of the %g s budget spent before this resume\n",
        run.clock.before, args.time_budget))
    end
  elseif schedule.total == nil and args.time_budget then
    local total, per_step, timed, calibrated = trainer:fit_to_budget{max_steps = args.steps, time_evaluation = true,
      on_total = function(steps)
        schedule.total, schedule.warmup = steps, math.max(1, cli.warmup_steps(args.warmup, steps))
      end}
    if dist.is_main() then
      io.stderr:write(string.format("pretrain: %.3g s a step (a calibration of %d steps, %d timed): " ..
        "%d steps fit the %g s budget%s\n", per_step, calibrated, timed, total, args.time_budget, args.steps and total == args.steps and " (--steps caps it)" or ""))
    end
  elseif schedule.total and trainer.steps == nil then
    trainer.steps = schedule.total   -- a resumed time-budgeted run replays its saved schedule
  end

  if dist.is_main() then
    io.stderr:write(string.format("pretrain: %s (%s, %d parameters), objective %s, %s, %d training sequences%s\n",
      run.arch or "model", args.model, run.model:num_parameters(), objective_shown(args.objective),
      run.objective.masks == false and "every token a target" or args.masking .. " masking", run.train_meta.instances,
      dist.size() > 1 and string.format(", %d ranks x %d sequences", dist.size(), run.shard_rows) or ""))
  end
  run.summary = trainer:run()
  -- (the time clock's: the budget spent over every invocation of the run)
  run.training_wall = run.clock and run.clock.elapsed() or bert.wall_time() - started
  run.loader:close()
end

-- The final held-out evaluation and the run's figures: summary.json's table.
local function final_summary(run)
  local args, model, summary = run.args, run.model, run.summary
  model:evaluate()
  local final = bert.no_grad(function() return run.evaluate(model) end)
  final.tokens_per_s = summary.tokens_per_s
  final.steps = summary.step
  final.train_seconds = summary.train_seconds
  final.wall_seconds = run.training_wall   -- steps, evaluations and saves: what --time-budget limits
  final.objective = args.objective
  final.model = args.model
  final.parameters = model:num_parameters()
  final.kind = "pretraining"
  final.corpus = args.corpus
  final.lang_alpha = args.corpus == "multilingual" and (args.lang_alpha or 0.7) or nil
  final.fertility = args.corpus == "multilingual" and read_saved(run.tok_dir .. "/fertility.json") or nil
  final.settings = {lr = run.lr, batch_size = args.batch_size, accum = args.accum, seq_len = args.seq_len,
    warmup_steps = run.schedule.warmup, weight_decay = args.weight_decay, seed = args.seed, masking = args.masking,
    whole_word_mask = args.whole_word_mask == true, corpus = args.corpus, time_budget = args.time_budget,
    mask_prob = args.mask_prob, span_mask = args.span_mask == true, ngram_mask = args.ngram_mask,
    phrase_mask = args.phrase_mask == true, schedule = args.schedule or "linear",
    schedule_clock = args.schedule_clock or "steps", batch_ramp = args.batch_ramp, seq_len_schedule = args.seq_len_schedule,
    config_overrides = args.config_overrides,
    optimizer = args.optimizer or "adamw", beta2 = args.beta2 or 0.999, eps = args.eps or 1e-6, recipe = args.recipe}
  final.snapshots = #run.snapshots > 0 and run.snapshots or nil   -- {fraction, step, name}: a learning curve's points
  final.ranks = dist.size()
  final.distributed = summary.distributed   -- gradient all-reduce: wait after backward, overlap
  -- the passes over the training sequences that ran (summary.json records what ran)
  final.micro_batches = run.trainer.micro_batches   -- with --batch-ramp fewer than steps x --accum
  local epochs = final.micro_batches * args.batch_size / math.max(run.train_meta.instances, 1)
  final.epochs = math.floor(epochs * 100 + 0.5) / 100
  -- a sentence-pair task (NSP, SOP: two balanced classes) within two standard errors of 50% has
  -- learned nothing yet: flagged as fine-tuning flags a model that predicts one class
  local pair = final[args.objective .. "_accuracy"]
  if pair then
    local pairs = math.min(run.eval_meta.instances, args.max_eval or math.huge)
    final[args.objective .. "_at_chance"] = math.abs(pair - 0.5) <= 2 * math.sqrt(0.25 / pairs)
    run.chance_band, run.pairs = 2 * math.sqrt(0.25 / pairs), pairs
  end
  return final
end

-- Rank 0: summary.json, metrics.csv and the plots; the closing printout
-- unless args.quiet.
local function write_results(run, final)
  local args = run.args
  run.trainer:log({step = run.trainer.step, eval = final})
  write_json(args.output .. "/summary.json", final)

  local csv, cerr = require("bert.plot").write_csv(args.output)
  if not csv then die(tostring(cerr)) end
  local plotted = not args.no_plot and require("bert.plot").runs({args.output})

  if args.quiet then return end
  print("\n" .. run.objective.describe(run.ctx, final))
  if final[args.objective .. "_at_chance"] then
    print(string.format("WARNING: %s accuracy %.2f%% is at chance (50%% +- %.1f%% over %d held-out pairs): the " ..
      "model has not learned %s yet (train longer)", objective_shown(args.objective):gsub("^mlm%-", ""):upper(),
      100 * final[args.objective .. "_accuracy"], 100 * run.chance_band, run.pairs,
      args.objective == "sop" and "the sentence order" or "next-sentence prediction"))
  end
  print(string.format("%d steps in %.0f s (%.0f s with evaluations and saves%s), %.0f tokens/s", final.steps,
    final.train_seconds, run.training_wall, args.time_budget and string.format(", %.1f%% of the budget",
    100 * run.training_wall / args.time_budget) or "", final.tokens_per_s))
  print("run directory: " .. args.output)
  print("  checkpoint:  " .. args.output .. "/checkpoint  (config.json, model.safetensors and the tokenizer files)")
  print("  tokenizer:   " .. run.tok_dir)
  print("  metrics:     " .. args.output .. "/metrics.jsonl (and .csv), " .. args.output .. "/summary.json")
  if plotted then print("  plots:       " .. args.output .. "/loss.png, " .. args.output .. "/accuracy.png") end
end

--- Runs (or, with args.resume = DIR, resumes) one pretraining run; see the
-- module comment.  args.quiet leaves out the closing printout.
function M.run(args)
  if args.resume then resume_settings(args) end
  local run = {args = args}
  -- the run directory's lock goes when the run ends, as it may (ablate runs many in one process)
  local _ <close> = setmetatable({}, {__close = function() if run.lock then run.lock:release() end end})
  check_settings(run)
  claim_output(run)   -- a directory that is refused costs no corpus reading
  find_corpus(run)
  local documents = dist.is_main() and read_corpus(run) or nil
  if args.detect_anomaly then bert.set_detect_anomaly(true) end
  prepare_output(run)
  if args.threads then bert.set_num_threads(args.threads) end
  bert.manual_seed(args.seed)
  run.pre = require("bert.data.pretraining")
  prepare_data(run, documents)
  documents = nil
  collectgarbage()
  open_loader(run)
  build_model(run)
  make_optimizer(run)
  make_trainer(run)
  train(run)
  local final = final_summary(run)
  if dist.is_main() then write_results(run, final) end   -- rank 0 writes the summary
  return final
end

--- The command line's run: M.run(args), a failure printed on stderr (a
-- reported problem as it is, a bug with its traceback) and exit status 1;
-- finalizes MPI when it succeeds.
function M.main(args)
  local ok, err = xpcall(M.run, function(e)
    if type(e) == "string" and e:find("^pretrain: ") then return e end   -- a reported problem: no traceback
    -- one without a file:line position (a failed write: "FILE: No space left on device")
    if type(e) == "string" and not e:find("^[%w_/%.%-]+%.lua:%d+:") then return "pretrain: " .. e end
    return debug.traceback(tostring(e), 2)
  end, args)
  if not ok then
    io.stderr:write(tostring(err), "\n")
    os.exit(1)
  end
  dist.finalize()
  return err
end

return M
