-- Fine-tuning for extractive question answering on SQuAD-format JSON
-- (v1.1, or v2.0 with --version-2): sliding windows over long contexts
-- (--seq-len, --doc-stride = overlap), n-best span search with
-- --max-answer-length, answers mapped back to characters of the context,
-- exact match and F1 with the official normalisation.  The built-in task
-- `synthetic-qa` is SYNTHETIC (cloze questions generated from the Brown
-- corpus by tools/make_synthetic_qa.lua), not SQuAD.
--
--   lua5.4 experiments/finetune_qa.lua --task synthetic-qa --model runs/demo/checkpoint
--   lua5.4 experiments/finetune_qa.lua --task synthetic-qa --version-2 --model mini --max-train 2000
--   lua5.4 experiments/finetune_qa.lua --task train-v1.1.json,dev-v1.1.json --model DIR
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cli = require("bert.cli")
local experiment = require("bert.finetune.experiment")

local p = cli.parser("finetune_qa.lua", "Fine-tune BERT for extractive question answering (SQuAD v1.1 / v2.0).")
cli.add_finetune(p, "qa")
p:option("--doc-stride", "Overlap in tokens between consecutive windows of a long context " ..
  "(default: a quarter of --seq-len, at most 128)"):convert(cli.integer("--doc-stride", 1))
p:option("--max-answer-length", "Longest answer in tokens", "30"):convert(cli.integer("--max-answer-length", 1))
p:option("--max-query-length", "Questions are cut to this many tokens", "64"):convert(cli.integer("--max-query-length", 1))
p:option("--n-best", "Start and end candidates per window", "20"):convert(cli.integer("--n-best", 1))
p:flag("--version-2", "SQuAD v2.0: unanswerable questions (synthetic-qa: generate them)")
p:option("--null-threshold", "v2.0: answer \"\" when null score - best span score exceeds this " ..
  "(default: tuned on the dev set)"):convert(cli.number("--null-threshold"))
local args = p:parse()
args.fetch = require("bert.fs").fetch_data
cli.main("finetune_qa.lua", args.compare and experiment.compare or experiment.run, "qa", args)
