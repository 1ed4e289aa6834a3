-- WordPiece, byte-level BPE or Unigram?  The same BERT-tiny, corpus and
-- budget, a vocabulary of the same size trained on the training documents
-- by each tokenizer; spam with 1,000 labelled examples downstream.
--
--   lua5.4 experiments/ablate.lua experiments/ablations/tokenizer.lua [--budget-scale 0.05]
--
-- Missing: nothing of the axis (Unigram came with the tokenizer issue).
-- Budget: 9 cells of 2,000 steps x 32 x 128 tokens on BERT-tiny, timed as
-- the nsp grid's (8-10 min a cell on one core, ~50 min for the grid on two);
-- next to runs/ablate/nsp the wordpiece cells are nsp's mlm cells, read.
return {
  name = "tokenizer",
  description = "WordPiece vs byte-level BPE vs Unigram at equal vocabulary size (8,000).",
  axes = {
    {name = "tokenizer", values = {"wordpiece", "bpe", "unigram"}},
  },
  fixed = {model = "tiny", corpus = "brown", vocab_size = 8000, objective = "mlm",
           batch_size = 32, seq_len = 128, masking = "dynamic", log_every = 50},
  seeds = {1, 2, 3},
  budget = {tokens = 2000 * 32 * 128},
  downstream = {
    {task = "spam", max_train = 1000, epochs = 3, seq_len = 128, batch_size = 32},
    {task = "brown-pos", max_train = 10000, epochs = 2, seq_len = 128, batch_size = 32},
  },
}
