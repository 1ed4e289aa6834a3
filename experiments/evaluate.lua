-- The evaluation suite on one checkpoint: GLUE (CoLA, SST-2, MRPC, STS-B,
-- RTE, WNLI), BLiMP zero-shot, SQuAD v1.1 (an article split of dev),
-- WNUT-17 NER, UD English-EWT POS and bits per byte of held-out text, each
-- with its floors (majority class, bag of words, most frequent tag, the
-- BLiMP paper's n-gram).  Resumable per task.  The engine is
-- lua/bert/evaluate/init.lua; docs/evaluation.md describes every task.
--
--   lua5.4 experiments/evaluate.lua --model runs/pretrain/checkpoint --suite all
--   lua5.4 experiments/evaluate.lua --model DIR --suite glue --seeds 1,2,3,4,5 --scratch
--   BERT_DATA_MIRROR=../shared/data lua5.4 experiments/evaluate.lua --model DIR --suite blimp --blimp-pairs 100
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cli = require("bert.cli")
local evaluate = require("bert.evaluate")

local suites = {}
for k in pairs(evaluate.SUITES) do suites[#suites + 1] = k end
table.sort(suites)

local function number_list(name, integer)
  return function(v)
    local out = {}
    for item in v:gmatch("[^,]+") do
      local n = tonumber(item)
      if integer then n = math.tointeger(n) end
      if n == nil or n ~= n or n <= 0 then
        return nil, string.format("option %s: expected a comma-separated list of %s, got '%s'", name,
          integer and "positive integers" or "positive numbers", v)
      end
      out[#out + 1] = n
    end
    if #out == 0 then return nil, string.format("option %s: expected at least one value, got '%s'", name, v) end
    return out
  end
end

local d = evaluate.defaults
local p = cli.parser("evaluate.lua", "Evaluate a checkpoint on GLUE, BLiMP, SQuAD, WNUT-17, UD POS and held-out " ..
  "bits per byte, with the floors printed beside every score.",
  "Writes OUTPUT/results.json, OUTPUT/results.md and OUTPUT/tasks/TASK/ (every fine-tuning run; result.json marks a " ..
  "finished task, skipped on a rerun).  Data: sh tools/fetch_data.sh glue blimp squad wnut17 ud xnli pawsx english " ..
  "(run on first use; BERT_DATA_MIRROR=DIR unpacks a local mirror instead of downloading).")
p:option("--model", "Checkpoint directory (config.json + model.safetensors + tokenizer), e.g. a pretraining run's " ..
  "checkpoint/"):args(1)
p:option("--suite", "glue, blimp, squad, wnut17, pos, lm or all (English); xnli, pawsx or ud-xling (fine-tuned on " ..
  "English, scored per language)", "all")
  :convert(function(v)
    if evaluate.SUITES[v] then return v end
    return nil, "option --suite: '" .. v .. "' is not one of " .. table.concat(suites, ", ")
  end)
p:option("--tasks", "Comma-separated task names instead of a suite (cola, sst2, mrpc, stsb, rte, wnli, qnli, squad, " ..
  "wnut17, pos-en, pos-de, pos-fr, pos-zh, xnli, pawsx, pos-xling, blimp, lm)")
p:option("--output", "Output directory (default runs/evaluate/MODEL)")
p:option("--control-model", "A second checkpoint (e.g. pretrained on English alone) run with the same protocol into " ..
  "OUTPUT/control/; the table gives each language's difference with its 95% Welch interval over the seeds")
p:option("--steps", "Optimizer steps per fine-tuning run", tostring(d.steps)):convert(cli.integer("--steps", 1))
p:option("--seeds", "Fine-tuning seeds: the first chooses the learning rate, all are reported",
  table.concat(d.seeds, ",")):convert(number_list("--seeds", true))
p:option("--lr-grid", "Learning rates tried on dev (default: the fine-tuning default for the model's hidden size " ..
  "times 1/10, 1/3, 1)"):convert(number_list("--lr-grid"))
p:option("--max-train", "Fine-tune on a fixed subset of N training examples (the small-N regime)")
  :convert(cli.integer("--max-train", 1))
p:option("--max-dev", "Choose the rate and checkpoint on at most N dev examples", tostring(d.max_dev))
  :convert(cli.integer("--max-dev", 1))
p:flag("--scratch", "Also run every fine-tuning task from random weights of the same architecture (the control)")
p:flag("--scratch-only", "Run only the control's fine-tuning runs (they need the architecture and tokenizer, not the " ..
  "weights: e.g. while the checkpoint is still training); a later --scratch run into the same --output reads them")
p:option("--scratch-from", "Other evaluation outputs (comma-separated) whose finished control is read instead of run " ..
  "where it is this model's too: the same config, tokenizer files and protocol (e.g. other checkpoints of one " ..
  "pretraining recipe)")
p:option("--blimp-pairs", "BLiMP: the first N pairs of each of the 67 paradigms (1000: all of them)",
  tostring(d.blimp_pairs)):convert(cli.integer("--blimp-pairs", 1))
p:option("--heldout", "Held-out text for bits per byte (BERT's plain format)", d.heldout)
p:option("--lm-max-bytes", "Score at most this many bytes of the held-out text"):convert(cli.integer("--lm-max-bytes", 1))
p:option("--qa-seq-len", "SQuAD: tokens per window (default 128: the length our pretraining runs train " ..
  "positions to; BERT's is 384)", tostring(d.qa_seq_len)):convert(cli.integer("--qa-seq-len", 8))
p:option("--qa-batch-size", "SQuAD: windows per batch", tostring(d.qa_batch_size))
  :convert(cli.integer("--qa-batch-size", 1))
p:flag("--keep-models", "Keep every fine-tuned model (default: only summaries and predictions)")
p:flag("--verbose", "Print every fine-tuning run's own log")
cli.add(p, "tokenizer", "batch_size", "warmup", "weight_decay", "seq_len", "config_overrides", {help = "Model config " ..
  "keys over the checkpoint's in every fine-tuning run (and its control), KEY=VALUE,..., e.g. hidden_dropout_prob=0"},
  "threads", "data_dir", "device", "no_varlen", "quiet")
local args = p:parse()

cli.main("evaluate.lua", function()
  local tasks
  if args.tasks then
    tasks = {}
    for t in args.tasks:gmatch("[^,]+") do tasks[#tasks + 1] = t end
  end
  local control_from
  if args.scratch_from then
    if not (args.scratch or args.scratch_only) then
      error("--scratch-from reads a from-scratch control: pass --scratch too", 0)
    end
    control_from = {}
    for dir in args.scratch_from:gmatch("[^,]+") do control_from[#control_from + 1] = dir end
  end
  local quoted = {}
  for i = 0, #arg do quoted[#quoted + 1] = arg[i] end
  evaluate.run{
    model = args.model, suite = args.suite, tasks = tasks, output = args.output, steps = args.steps, seeds = args.seeds,
    lr_grid = args.lr_grid, max_train = args.max_train, max_dev = args.max_dev,
    from_scratch_control = args.scratch or args.scratch_only, scratch_only = args.scratch_only,
    control_model = args.control_model, control_from = control_from,
    blimp_pairs = args.blimp_pairs, heldout = args.heldout, lm_max_bytes = args.lm_max_bytes,
    qa_seq_len = args.qa_seq_len, qa_batch_size = args.qa_batch_size, keep_models = args.keep_models, verbose = args.verbose, quiet = args.quiet,
    tokenizer = args.tokenizer, batch_size = args.batch_size, warmup = args.warmup, weight_decay = args.weight_decay,
    seq_len = args.seq_len, config_overrides = args.config_overrides, threads = args.threads, data_dir = args.data_dir, device = args.device,
    no_varlen = args.no_varlen, command = "lua5.4 " .. table.concat(quoted, " "),
    -- the datasets are fetched on first use (BERT_DATA_MIRROR selects a local mirror)
    fetch = require("bert.fs").fetch_data,
  }
end)
