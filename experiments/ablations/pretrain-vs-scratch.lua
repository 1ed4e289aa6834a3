-- The central claim: pretraining pays most when labelled data are scarce.
-- One pretraining run per seed (shared by its cells), then fine-tuning on
-- spam with 100 to 3,000 labelled examples, from the pretrained checkpoint
-- and from the same architecture with fresh weights, the same steps.
--
--   lua5.4 experiments/ablate.lua experiments/ablations/pretrain-vs-scratch.lua [--budget-scale 0.05]
--
-- ablate.lua draws the learning curve (plots/curve-finetune.max_train-METRIC.png:
-- the metric against the set size, one line per initialisation, mean ± sd).
-- Brown POS with 10,000 sentences as a second task is left out to keep
-- within the budget.
-- Budget: 3 pretraining runs of 2,000 steps x 32 x 128 tokens on BERT-tiny,
-- the settings of the nsp grid's "mlm" cells: run next to that grid (the
-- default runs/ablate/), the finished runs are read from it, not repeated.
-- Then 24 fine-tuning runs of a minute or two each on 2 cores.
return {
  name = "pretrain-vs-scratch",
  description = "Fine-tuning from the pretrained checkpoint vs from scratch, over labelled set sizes.",
  axes = {
    {name = "finetune.from_scratch", values = {
      {label = "pretrained", ["finetune.from_scratch"] = false},
      {label = "scratch", ["finetune.from_scratch"] = true},
    }},
    {name = "finetune.max_train", values = {100, 300, 1000, 3000}},
  },
  fixed = {model = "tiny", corpus = "brown", tokenizer = "wordpiece", vocab_size = 8000, objective = "mlm",
           batch_size = 32, seq_len = 128, masking = "dynamic", log_every = 50},
  seeds = {1, 2, 3},
  budget = {tokens = 2000 * 32 * 128},
  downstream = {
    {task = "spam", epochs = 3, seq_len = 128, batch_size = 32},
  },
}
