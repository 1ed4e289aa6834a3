-- Pretraining BERT: masked language modelling plus next-sentence prediction
-- (or sentence-order prediction, or neither), on Brown, the KJV Bible, the
-- English corpus (six sources, evaluation texts removed) or any corpus in
-- BERT's plain format.  `--help` lists the flags.
--
--   lua5.4 experiments/pretrain.lua --model tiny --corpus brown --time-budget 600 --output runs/x
--   lua5.4 experiments/pretrain.lua --objective none ...     # RoBERTa's ablation of NSP
--   lua5.4 experiments/pretrain.lua --resume runs/x          # continue a killed run exactly
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath

local pretrain = require("bert.pretrain")
local dist = require("bert.distributed")
dist.init()   -- under mpirun: data-parallel, rank 0 prints and writes (docs/distributed.md)

local args = pretrain.parse(arg)   -- with --recipe applied
pretrain.main(args)
