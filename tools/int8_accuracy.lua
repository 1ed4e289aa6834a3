-- What int8 inference costs in accuracy: a fine-tuned classifier scored on
-- a task's test split in float32, then with every linear layer quantised
-- (model:quantize("int8"), bert.quantize), on the same features.
--
--   lua5.4 tools/int8_accuracy.lua --model runs/finetune/sst2-mini/best --task sst2
--   lua5.4 tools/int8_accuracy.lua --model DIR --task cola --split dev --threads 2
--
-- Prints both scores (accuracy, macro F1, MCC; Pearson/Spearman for STS-B),
-- their difference in points and the share of examples whose prediction
-- changed.  Issue 33's bar: <= 0.5 points on SST-2 and CoLA for BERT-mini.
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local bert = require("bert")
local cli = require("bert.cli")
local tasks = require("bert.finetune.tasks")
local classify = require("bert.finetune.classify")

local parser = cli.parser("int8_accuracy.lua", "A fine-tuned classifier's score in float32 and with int8 linear layers.")
parser:option("--model", "A fine-tuned sequence-classification model directory (config.json, weights, tokenizer)")
  :count(1)
parser:option("--task", "A built-in classification task (sst2, cola, mrpc, stsb, rte, spam, ...)"):count(1)
parser:option("--split", "The split to score", "test"):choices({"dev", "test"})
parser:option("--max-examples", "Score at most N examples (the first N)"):convert(cli.integer("--max-examples", 1))
parser:option("--batch-size", "Examples per forward", "64"):convert(cli.integer("--batch-size", 1))
parser:option("--seq-len", "Maximum tokens per example (default: the length the model was fine-tuned at, " ..
  "config.json's finetune.max_length, else 128; at most its positions)"):convert(cli.integer("--seq-len", 8))
cli.add(parser, "threads")

cli.main("int8_accuracy", function()
  local args = parser:parse()
  if args.threads then bert.set_num_threads(args.threads) end
  local task = tasks.load(args.task, {kind = "classification"})
  local examples = task[args.split]
  if not examples or #examples == 0 then error(string.format("task %s has no %s split", args.task, args.split), 0) end
  if args.max_examples and #examples > args.max_examples then
    examples = table.move(examples, 1, args.max_examples, 1, {})
  end
  local model = bert.from_pretrained(args.model, {verbose = false})
  local tok = bert.tokenizer.load(args.model)
  local regression = task.regression or (task.labels and #task.labels == 1) or false
  -- the length the model was fine-tuned at, as bert.finetune.pipeline reads it
  local settings = type(model.config.finetune) == "table" and model.config.finetune or {}
  local seq_len = math.min(args.seq_len or settings.max_length or 128,
                           model.config.max_position_embeddings or math.huge)
  local features = classify.encode(tok, examples, {max_length = seq_len, labels = task.labels,
                                                   regression = regression})
  local opts = {labels = not regression and task.labels or nil, regression = regression,
                positive_label = task.positive_label, batch_size = args.batch_size,
                pad_id = tok:token_to_id("[PAD]") or tok:token_to_id("<pad>") or 0}
  local t0 = os.clock()
  local fp32, fp32_details = classify.evaluate(model, features, opts)
  local fp32_cpu = os.clock() - t0
  model:quantize("int8")
  t0 = os.clock()
  local int8, int8_details = classify.evaluate(model, features, opts)
  local int8_cpu = os.clock() - t0
  local changed = 0
  for i, p in ipairs(fp32_details.predictions) do
    if regression then
      if math.abs(p - int8_details.predictions[i]) > 1e-3 then changed = changed + 1 end
    elseif p ~= int8_details.predictions[i] then changed = changed + 1 end
  end
  print(string.format("%s %s split, %d examples at %d tokens, model %s", args.task, args.split, #features, seq_len,
    args.model))
  local keys = regression and {"pearson", "spearman"} or {"accuracy", "macro_f1", "mcc", "f1"}
  print(string.format("%-10s %10s %10s %12s", "metric", "float32", "int8", "difference"))
  for _, k in ipairs(keys) do
    if fp32[k] then
      print(string.format("%-10s %10.2f %10.2f %+12.2f", k, 100 * fp32[k], 100 * int8[k], 100 * (int8[k] - fp32[k])))
    end
  end
  print(string.format("predictions changed: %d of %d (%.2f%%)%s", changed, #features, 100 * changed / #features,
    regression and " (by more than 0.001)" or ""))
  print(string.format("CPU seconds: float32 %.1f, int8 %.1f", fp32_cpu, int8_cpu))
end)
