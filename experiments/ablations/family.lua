-- BERT vs RoBERTa vs ALBERT vs DeBERTa at this size, the same budget in
-- tokens; the table's parameter column shows ALBERT's sharing ("1/10 of the
-- parameters, similar performance").
--
--   lua5.4 experiments/ablate.lua experiments/ablations/family.lua [--budget-scale 0.05]
--
-- Missing (issue 13): the --recipe presets (each paper's optimizer, LAMB for
-- ALBERT, schedule, packing); here every family gets the same AdamW
-- schedule and only the architecture, tokenizer and objective that the
-- families' papers used.  ELECTRA is `planned` (its replaced-token
-- detection objective is not written; an ELECTRA model trained with MLM
-- would be something else), and so is DeBERTa-v3's RTD with
-- gradient-disentangled embedding sharing.
-- Budget: 12 cells of 2,000 steps x 32 x 128 tokens on the tiny sizes.
-- NOT YET TIMED on the 2-core machine (the issue asks for at most 2 hours).
return {
  name = "family",
  description = "Model families at the tiny size with their papers' tokenizer and objective, equal tokens.",
  axes = {
    {name = "family", values = {
      {label = "bert", model = "tiny", tokenizer = "wordpiece", objective = "mlm-nsp"},
      {label = "roberta", model = "roberta-tiny", tokenizer = "bpe", objective = "mlm"},
      {label = "albert", model = "albert-tiny", tokenizer = "wordpiece", objective = "mlm-sop", ngram_mask = 3},
      {label = "deberta", model = "deberta-tiny", tokenizer = "bpe", objective = "mlm"},
    }},
  },
  planned = {
    {axis = "family", values = {"electra", "deberta-v3"}, missing = "the electra objective (replaced-token detection)"},
  },
  fixed = {corpus = "brown", vocab_size = 8000, batch_size = 32, seq_len = 128, masking = "dynamic", log_every = 50},
  seeds = {1, 2, 3},
  budget = {tokens = 2000 * 32 * 128},
  downstream = {
    {task = "spam", max_train = 1000, epochs = 3, seq_len = 128, batch_size = 32},
    {task = "brown-pos", max_train = 10000, epochs = 2, seq_len = 128, batch_size = 32},
  },
}
