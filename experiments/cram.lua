-- Cramming: the best BERT this machine can pretrain in a wall-clock budget
-- (default one day), after Geiping & Goldstein, "Cramming: Training a
-- Language Model on a Single GPU in One Day" (2022), and the BabyLM
-- challenge's small-compute findings.  A thin command over
-- experiments/pretrain.lua (bert.pretrain) whose defaults are the choices
-- those found to matter at small compute, each of which a flag switches off:
--
--   pre-LayerNorm layers and a final LayerNorm    --no-pre-ln
--   no dropout in pretraining                     --dropout 0.1
--   a one-cycle (triangular) learning rate        --no-one-cycle (BERT's: 10% warmup, linear decay)
--   batch growth by accumulation                  --no-batch-ramp
--   shorter sequences first                       --no-short-first
--   masked-token-only decoding                    (always: the MLM head decodes the masked rows only)
--
-- The schedules follow the share of --time-budget elapsed (pretrain's
-- --schedule-clock time), which a resume carries over.  When pretraining
-- ends, the checkpoint is copied to OUTPUT/final/ with BERT's fine-tuning
-- dropout restored in its config.json, and the evaluation suite runs on it
-- (experiments/evaluate.lua --suite all; --no-evaluate prints the command).
-- The effect of each choice at this scale is measured by
-- experiments/ablations/cram.lua, not by this command.
--
--   lua5.4 experiments/cram.lua --threads 2 --output runs/cram            # 24 h, then the suite
--   lua5.4 experiments/cram.lua --resume runs/cram                        # after a kill
--   lua5.4 experiments/cram.lua --time-budget 600 --model tiny --dry-run  # the commands, nothing run
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath

local cli = require("bert.cli")
local dist = require("bert.distributed")
local fs = require("bert.fs")

local p = cli.parser("cram.lua", "Pretrain a BERT for a wall-clock budget with the choices Cramming (Geiping & " ..
  "Goldstein 2022) and BabyLM found to matter at small compute, then score it with the evaluation suite.",
  "Writes the pretraining run directory (OUTPUT: checkpoint/, metrics, summary.json; see experiments/pretrain.lua), " ..
  "OUTPUT/final/ (the model to fine-tune: the checkpoint with --finetune-dropout in its config.json) and " ..
  "OUTPUT/evaluation/ (experiments/evaluate.lua --suite all).  The effect of each choice at this scale has not been " ..
  "measured yet: experiments/ablations/cram.lua is the grid that measures it.")
p:option("--model", "A BERT size (tiny, mini, small, medium, base, large) or a BERT config.json", "small")
p:option("--corpus", "brown, kjv, english or a corpus file (as experiments/pretrain.lua)", "english")
p:option("--vocab-size", "WordPiece vocabulary trained on the corpus", "8000"):convert(cli.integer("--vocab-size", 10))
cli.add(p, "time_budget", {default = "86400", help = "Seconds of pretraining (evaluations and saves included; a " ..
    "resume goes on with what is left)"},
  "batch_size", "accum", {default = "8", help = "Micro-batches per step at the end of the batch ramp (the final " ..
    "batch is --batch-size x --accum)"},
  "seq_len", {help = "Sequence length at the end of the run"}, "lr", {default = "1e-3", help = "Peak learning rate"})
p:option("--warmup", "Where the learning rate peaks, as a fraction of the budget", "0.5"):convert(cli.fraction("--warmup"))
p:option("--batch-ramp", "Fraction of the budget over which the micro-batches per step grow from 1 to --accum", "0.5")
  :convert(cli.fraction("--batch-ramp"))
p:option("--seq-len-schedule", "Shorter sequences first (experiments/pretrain.lua --seq-len-schedule)", "64:0.5")
p:option("--dropout", "Hidden and attention dropout in pretraining (BERT's 0.1 switches the choice off)", "0")
  :convert(cli.number("--dropout", 0, 0.99))
p:flag("--no-pre-ln", "Post-LN layers, as BERT (no final LayerNorm)")
p:flag("--no-one-cycle", "BERT's schedule instead: linear warmup over 10% of the budget, then linear decay")
p:flag("--no-batch-ramp", "Every step --accum micro-batches from the start")
p:flag("--no-short-first", "Every step at --seq-len")
p:option("--finetune-dropout", "Dropout written into OUTPUT/final/config.json for fine-tuning", "0.1")
  :convert(cli.number("--finetune-dropout", 0, 0.99))
p:flag("--no-evaluate", "Print the evaluation command instead of running it")
p:flag("--dry-run", "Print the pretraining settings and the evaluation command, run nothing")
cli.add(p, "threads", "seed", "output", {default = "runs/cram"},
  "resume", {help = "Continue the run in DIR (its saved settings; the evaluation flags are this invocation's)"},
  "overwrite")

local args = p:parse()

-- a shell word: quoted unless plain
local function quote(v)
  v = tostring(v)
  if v:find("^[%w%._:/,=%-]+$") then return v end
  return "'" .. v:gsub("'", "'\\''") .. "'"
end

local function shown(v) return type(v) == "number" and (math.tointeger(v) or string.format("%.14g", v)) or v end

-- The bert.pretrain settings of these choices (pretrain.settings checks them).
local function pretrain_settings(a)
  local s = {model = a.model, corpus = a.corpus, tokenizer = "wordpiece", vocab_size = a.vocab_size,
    objective = "mlm", masking = "dynamic", time_budget = a.time_budget, schedule_clock = "time",
    batch_size = a.batch_size, accum = a.accum, seq_len = a.seq_len, lr = a.lr, seed = a.seed,
    output = a.output, overwrite = a.overwrite, threads = a.threads,
    save_every = 200, eval_every = 1000, max_eval = 512, log_every = 50}
  local config = {}
  if not a.no_pre_ln then config[#config + 1] = "pre_layer_norm=true" end
  config[#config + 1] = string.format("hidden_dropout_prob=%s,attention_probs_dropout_prob=%s", shown(a.dropout),
    shown(a.dropout))
  s.config_overrides = table.concat(config, ",")
  if a.no_one_cycle then s.schedule, s.warmup = "linear", 0.1
  else s.schedule, s.warmup = "one_cycle", a.warmup end
  if not a.no_batch_ramp and a.accum > 1 then s.batch_ramp = a.batch_ramp end
  if not a.no_short_first then s.seq_len_schedule = a.seq_len_schedule end
  return s
end

local function command_line(settings)
  local keys, parts = {}, {"lua5.4 experiments/pretrain.lua"}
  for k in pairs(settings) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v = settings[k]
    if v == true then parts[#parts + 1] = "--" .. k:gsub("_", "-")
    elseif v ~= false then parts[#parts + 1] = "--" .. k:gsub("_", "-") .. " " .. quote(shown(v)) end
  end
  return table.concat(parts, " ")
end

local output = args.resume or args.output
local final_dir = output .. "/final"
local evaluate_command = string.format("lua5.4 experiments/evaluate.lua --model %s --suite all --output %s",
  quote(final_dir), quote(output .. "/evaluation"))

local settings = args.resume and {resume = args.resume} or pretrain_settings(args)
local pretrain = require("bert.pretrain")
local ok_settings, checked = pcall(pretrain.settings, settings)
if not ok_settings then
  io.stderr:write("cram: ", (tostring(checked):gsub("^pretrain%.settings: ", "")), "\n")
  os.exit(1)
end
if args.dry_run then
  print(args.resume and "lua5.4 experiments/pretrain.lua --resume " .. quote(args.resume) or command_line(settings))
  print(evaluate_command)
  os.exit(0)
end

dist.init()   -- under mpirun: data-parallel, rank 0 prints and writes (docs/distributed.md)
pretrain.main(checked)
if not dist.is_main() then return end

-- OUTPUT/final/: the checkpoint's model and tokenizer (not its optimizer
-- state) with fine-tuning's dropout: pretraining's 0 would carry over into
-- every fine-tuning run of the suite
local function write_final()
  local source = output .. "/checkpoint"
  fs.remove_tree(final_dir)
  assert(require("bert").mkdir(final_dir))
  for _, name in ipairs(assert(fs.listdir(source))) do
    if name ~= "optimizer.safetensors" and name ~= "trainer.json" then
      local data = assert(fs.read_file(source .. "/" .. name))
      if name == "config.json" then
        local config = require("cjson").decode(data)
        config.hidden_dropout_prob, config.attention_probs_dropout_prob = args.finetune_dropout, args.finetune_dropout
        data = require("bert.models.config").to_json(config, config.architectures and config.architectures[1])
      end
      assert(fs.write_atomic(final_dir .. "/" .. name, data))
    end
  end
end
write_final()
print("cram: the model to fine-tune: " .. final_dir .. string.format(" (dropout %g)", args.finetune_dropout))
if args.no_evaluate then
  print("cram: score it with\n  " .. evaluate_command)
  return
end
print("cram: " .. evaluate_command)
if not os.execute(evaluate_command) then
  io.stderr:write("cram: the evaluation failed; rerun it (finished tasks are kept):\n  ", evaluate_command, "\n")
  os.exit(1)
end
