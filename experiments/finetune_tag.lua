-- Fine-tuning for token classification: Brown part-of-speech tagging, or
-- any CoNLL column file (`word ... tag`, blank lines between sentences,
-- IOB1 or IOB2 entity tags scored the conlleval way).  Labels sit on the
-- first sub-token of each word.  Reports token accuracy (and entity
-- precision/recall/F1 for B-/I- tags); writes OUTPUT/summary.json.
--
--   lua5.4 experiments/finetune_tag.lua --task brown-pos --model runs/demo/checkpoint
--   lua5.4 experiments/finetune_tag.lua --task brown-pos --model mini --max-train 2000 --epochs 1
--   lua5.4 experiments/finetune_tag.lua --task conll2003/ --model DIR      # train.txt, valid.txt, test.txt
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cli = require("bert.cli")
local experiment = require("bert.finetune.experiment")

local p = cli.parser("finetune_tag.lua", "Fine-tune BERT for token classification (POS tagging, NER).")
cli.add_finetune(p, "tagging")
p:flag("--fine-tags", "brown-pos: keep Brown's full tags (default: base tags, -tl/-hl/-nc and fw- dropped)")
cli.add(p, "labels")
local args = p:parse()
args.fetch = require("bert.fs").fetch_data
cli.main("finetune_tag.lua", args.compare and experiment.compare or experiment.run, "tagging", args)
