-- BERT vs RoBERTa vs ALBERT vs DeBERTa as architectures, one factor at a
-- time: the same tokenizer (WordPiece, 8,000), objective (MLM on full
-- sentences), corpus, schedule and budget for every row, so a difference is
-- the architecture's.  The papers' whole recipes (each family's tokenizer,
-- objective, masking and optimizer settings) are family-recipes.lua; ELECTRA's
-- replaced-token detection is an objective and sits in objective.lua.
--
--   lua5.4 experiments/ablate.lua experiments/ablations/family.lua --shard 1/2 --threads 1 &
--   lua5.4 experiments/ablate.lua experiments/ablations/family.lua --shard 2/2 --threads 1
--   lua5.4 experiments/ablate.lua experiments/ablations/family.lua --budget-scale 0.01   # a quick look
--
-- What differs between the architectures at this size: RoBERTa's is BERT's
-- (position ids offset past the padding id, no token types in use: a
-- control that should score as BERT), ALBERT shares one layer's weights
-- across the depth and factorises the embedding (128), DeBERTa-v2 replaces
-- absolute positions by disentangled relative attention.  ALBERT's claim is
-- about parameters: the table's parameter column is the measure, and
-- docs/results.md sets the published shapes' counts beside it
-- (`lua5.4 -e 'print(require("bert").model("AlbertForMaskedLM", "base"):num_parameters())'`).
--
-- Budget: the nsp grid's (20,000 steps x 32 x 128 a cell, BERT-mini sizes,
-- one pretraining seed, the suite with 5 fine-tuning seeds and a
-- from-scratch control per architecture, snapshots at 1/16 and 1/4).  The
-- bert row has the settings of nsp's objective=mlm cell and is read from
-- runs/ablate/nsp; DeBERTa's step costs ~2x BERT's (relative attention), so
-- its cell is ~8 h of pretraining on one core.  Target: held-out MLM
-- accuracy >= 0.30 for every cell.
return {
  name = "family",
  description = "BERT, RoBERTa, ALBERT and DeBERTa-v2 architectures at BERT-mini size with the same tokenizer, " ..
    "objective (MLM) and budget, scored on GLUE, BLiMP and bits per byte.",
  axes = {
    {name = "family", values = {
      {label = "bert", model = "mini"},
      {label = "roberta", model = "roberta-mini"},
      {label = "albert", model = "albert-mini"},
      {label = "deberta", model = "deberta-mini"},
    }},
  },
  fixed = {corpus = "english", tokenizer = "wordpiece", vocab_size = 8000, objective = "mlm",
           batch_size = 32, seq_len = 128, masking = "dynamic", log_every = 50, snapshots = "0.0625,0.25"},
  seeds = {1},
  budget = {steps = 20000},
  evaluation = {tasks = {"mrpc", "rte", "stsb", "sst2", "cola", "blimp", "lm"}, seeds = {1, 2, 3, 4, 5},
                from_scratch_control = true},
}
