-- Does next-sentence prediction help?  BERT pretrains with MLM + NSP;
-- RoBERTa (Liu et al. 2019, table 2) found that dropping NSP and packing full
-- sentences matches or beats it; ALBERT (Lan et al. 2019, table 5) replaced
-- NSP with sentence-order prediction.  Three objectives, three seeds, the
-- same pretraining budget in tokens for each, then spam with 1,000 labelled
-- examples fine-tuned with the same settings for every cell.
--
--   lua5.4 experiments/ablate.lua experiments/ablations/nsp.lua                      # the full grid
--   lua5.4 experiments/ablate.lua experiments/ablations/nsp.lua --budget-scale 0.05  # a quick look
--
-- Budget: 9 cells of 2,000 steps x 32 sequences x 128 tokens (8.2M tokens)
-- on BERT-tiny.  Timed 2026-12-01 on the 2-core development machine, one
-- thread per process, two processes (--shard 1/2 and 2/2): a cell pretrains
-- in 8-9 min and fine-tunes in ~1 min, the grid ~50 min of wall clock.
return {
  name = "nsp",
  description = "MLM + NSP (BERT) vs MLM alone on full sentences (RoBERTa) vs MLM + SOP (ALBERT).",
  axes = {
    {name = "objective", values = {"mlm-nsp", "mlm", "mlm-sop"}},
  },
  fixed = {model = "tiny", corpus = "brown", tokenizer = "wordpiece", vocab_size = 8000,
           batch_size = 32, seq_len = 128, masking = "dynamic", log_every = 50},
  seeds = {1, 2, 3},
  budget = {tokens = 2000 * 32 * 128},
  downstream = {
    {task = "spam", max_train = 1000, epochs = 3, seq_len = 128, batch_size = 32},
    {task = "brown-pos", max_train = 10000, epochs = 2, seq_len = 128, batch_size = 32},
  },
}
