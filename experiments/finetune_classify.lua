-- Fine-tuning for sequence classification: SpamAssassin spam vs ham, Brown
-- genres, or your own TSV/JSONL of `text[, text_pair], label` (GLUE-style
-- sentence pairs included).  Reports accuracy, macro-F1, the confusion
-- matrix and the majority-class baseline; writes OUTPUT/summary.json.
--
--   lua5.4 experiments/finetune_classify.lua --task spam --model runs/demo/checkpoint --max-train 1000
--   lua5.4 experiments/finetune_classify.lua --task spam --model runs/demo/checkpoint --compare
--   lua5.4 experiments/finetune_classify.lua --task brown-genre --model mini --max-train 2000 --epochs 1
--   lua5.4 experiments/finetune_classify.lua --task my_data/ --model DIR    # train.tsv, dev.tsv[, test.tsv]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cli = require("bert.cli")
local experiment = require("bert.finetune.experiment")

local p = cli.parser("finetune_classify.lua", "Fine-tune BERT for sequence classification (single texts or sentence pairs).")
cli.add_finetune(p, "classification")
p:option("--text-column", "TSV/JSONL: the text column (name or 1-based index)")
p:option("--pair-column", "TSV/JSONL: the second text column (sentence pairs)")
p:option("--label-column", "TSV/JSONL: the label column")
p:option("--passage-words", "brown-genre: words per passage", "100"):convert(cli.integer("--passage-words", 1))
cli.add(p, "labels")
local args = p:parse()
-- the built-in tasks' data are fetched on first use
args.fetch = require("bert.fs").fetch_data
cli.main("finetune_classify.lua", args.compare and experiment.compare or experiment.run, "classification", args)
