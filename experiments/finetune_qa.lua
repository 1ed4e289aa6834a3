package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path; package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
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
require("bert.finetune.runner").main("qa")
