package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path; package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
-- Fine-tuning for sequence classification: SpamAssassin spam vs ham, Brown
-- genres, or your own TSV/JSONL of `text[, text_pair], label` (GLUE-style
-- sentence pairs included).  Reports accuracy, macro-F1 and the confusion
-- matrix; writes OUTPUT/summary.json.  `--help` lists the flags.
--
--   lua5.4 experiments/finetune_classify.lua --task spam --model runs/demo/checkpoint
--   lua5.4 experiments/finetune_classify.lua --task spam --model runs/demo/checkpoint --from-scratch
--   lua5.4 experiments/finetune_classify.lua --task brown-genre --model mini --max-train 2000 --epochs 1
--   lua5.4 experiments/finetune_classify.lua --task my_data/ --model DIR    # train.tsv, dev.tsv[, test.tsv]
require("bert.finetune.runner").main("classification")
