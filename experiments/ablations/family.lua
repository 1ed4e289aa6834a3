-- BERT vs RoBERTa vs ALBERT vs DeBERTa vs ELECTRA vs DeBERTa-v3 at this
-- size, the same budget in tokens; the table's parameter column shows
-- ALBERT's sharing ("1/10 of the parameters, similar performance").
--
--   lua5.4 experiments/ablate.lua experiments/ablations/family.lua [--budget-scale 0.05]
--
-- Every family gets the same AdamW schedule and only the architecture,
-- tokenizer and objective that the families' papers used (a value may
-- say `recipe = "roberta"` instead, for the paper's whole recipe: optimizer,
-- betas, warmup, clipping, masking; see pretrain.lua --help).  ELECTRA and
-- DeBERTa-v3 train by replaced-token detection (a generator beside the
-- discriminator; DeBERTa-v3 with gradient-disentangled embedding sharing):
-- their mlm_accuracy is the generator's, and a step costs more than an MLM
-- step (the generator's forward and backward on top), so equal tokens are
-- not equal compute for them.
-- Budget: 18 cells of 1,000 steps x 32 x 128 tokens (4.1M tokens) on the
-- tiny sizes, half the nsp grid's: timed on the 2-core machine (2026-12-01,
-- one thread per process, two processes) at 40 steps of each family, a
-- cell pretrains in 5 min (BERT, RoBERTa, ALBERT) to 10-12 min (DeBERTa
-- 2.1x, ELECTRA 2.0x, DeBERTa-v3 2.5x BERT's time per step), about 2.5 h of
-- one core for the grid with fine-tuning: 75 min on two cores (--shard).
-- Measured end to end on 2026-12-01: ~2.7 h of one core (the cells' own
-- times, two to three processes on the two cores); DeBERTa-v3 took 18-20
-- min a cell, BERT/RoBERTa/ALBERT 6-7 min.
return {
  name = "family",
  description = "Model families at the tiny size with their papers' tokenizer and objective, equal tokens.",
  axes = {
    {name = "family", values = {
      {label = "bert", model = "tiny", tokenizer = "wordpiece", objective = "mlm-nsp"},
      {label = "roberta", model = "roberta-tiny", tokenizer = "bpe", objective = "mlm"},
      {label = "albert", model = "albert-tiny", tokenizer = "wordpiece", objective = "mlm-sop", ngram_mask = 3},
      {label = "deberta", model = "deberta-tiny", tokenizer = "bpe", objective = "mlm"},
      {label = "electra", model = "electra-tiny", tokenizer = "wordpiece", objective = "electra"},
      {label = "deberta-v3", model = "deberta-v3-tiny", tokenizer = "unigram", objective = "electra"},
    }},
  },
  fixed = {corpus = "brown", vocab_size = 8000, batch_size = 32, seq_len = 128, masking = "dynamic", log_every = 50},
  seeds = {1, 2, 3},
  budget = {tokens = 1000 * 32 * 128},
  downstream = {
    {task = "spam", max_train = 1000, epochs = 3, seq_len = 128, batch_size = 32},
    {task = "brown-pos", max_train = 10000, epochs = 2, seq_len = 128, batch_size = 32},
  },
}
