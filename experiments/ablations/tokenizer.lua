-- WordPiece, byte-level BPE or Unigram?  BERT used WordPiece, RoBERTa a
-- byte-level BPE, ALBERT and DeBERTa-v3 SentencePiece's Unigram; Bostrom &
-- Durrett (2020) found Unigram at or above BPE on downstream tasks.  The same
-- BERT-mini, corpus, objective (MLM on full sentences) and budget, a
-- vocabulary of 8,000 trained on the training documents by each tokenizer.
-- Per-token metrics do not compare across tokenizers (a token is a
-- different amount of text), so the suite's bits per byte of the fixed
-- held-out text is the language-modelling measure here, with BLiMP and the
-- GLUE tasks.
--
--   lua5.4 experiments/ablate.lua experiments/ablations/tokenizer.lua --shard 1/2 --threads 1 &
--   lua5.4 experiments/ablate.lua experiments/ablations/tokenizer.lua --shard 2/2 --threads 1
--   lua5.4 experiments/ablate.lua experiments/ablations/tokenizer.lua --budget-scale 0.01   # a quick look
--
-- Budget: the nsp grid's (20,000 steps x 32 x 128 per cell, BERT-mini, one
-- pretraining seed, the suite with 5 fine-tuning seeds and a from-scratch
-- control per tokenizer, snapshots at 1/16 and 1/4).  The wordpiece cell has
-- exactly the settings of nsp's objective=mlm cell: next to runs/ablate/nsp
-- it is read, not pretrained again, so the grid adds two cells (~6.5 h of one
-- core each, pretraining and suite).  Target: held-out MLM accuracy >= 0.30
-- for every cell (the unigram floor is ~0.05).
return {
  name = "tokenizer",
  description = "WordPiece vs byte-level BPE vs Unigram at equal vocabulary size (8,000), BERT-mini, " ..
    "scored by bits per byte, BLiMP and GLUE.",
  axes = {
    {name = "tokenizer", values = {"wordpiece", "bpe", "unigram"}},
  },
  fixed = {model = "mini", corpus = "english", vocab_size = 8000, objective = "mlm",
           batch_size = 32, seq_len = 128, masking = "dynamic", log_every = 50, snapshots = "0.0625,0.25"},
  seeds = {1},
  budget = {steps = 20000},
  evaluation = {tasks = {"mrpc", "rte", "stsb", "sst2", "cola", "blimp", "lm"}, seeds = {1, 2, 3, 4, 5},
                from_scratch_control = true},
}
