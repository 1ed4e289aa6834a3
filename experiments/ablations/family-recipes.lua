-- Each family as its paper pretrained it: the architecture together with
-- the paper's tokenizer, objective, masking and optimizer settings
-- (`recipe = NAME`, bert.recipes; `lua5.4 experiments/pretrain.lua --help`
-- lists them), at BERT-mini size on the same corpus and budget.  A row
-- here changes several factors at once: family.lua holds the architecture
-- alone, objective.lua the objective alone; this grid says what the papers'
-- whole packages give at this scale.  ELECTRA and DeBERTa-v3 train by
-- replaced-token detection (a generator beside the discriminator; their
-- mlm_accuracy is the generator's), so equal steps are not equal compute for
-- them: the table's PFLOP and tokens/s columns say by how much.  The peak
-- learning rate is the size's default for every row (the papers' rates are
-- for batches of 256 to 8K).
--
--   lua5.4 experiments/ablate.lua experiments/ablations/family-recipes.lua --shard 1/2 --threads 1 &
--   lua5.4 experiments/ablate.lua experiments/ablations/family-recipes.lua --shard 2/2 --threads 1
--
-- Budget: the nsp grid's per cell (20,000 steps x 32 x 128, BERT-mini sizes,
-- one pretraining seed, the suite with 5 fine-tuning seeds and a
-- from-scratch control per architecture): six cells, ~45 h of one core
-- (DeBERTa ~2x and the replaced-token detectors ~1.3-2.5x BERT's step).
return {
  name = "family-recipes",
  description = "Each family with its paper's recipe (tokenizer, objective, masking, optimizer) at BERT-mini size.",
  axes = {
    {name = "recipe", values = {
      {label = "bert", recipe = "bert", model = "mini"},
      {label = "roberta", recipe = "roberta", model = "mini"},
      {label = "albert", recipe = "albert", model = "mini"},
      {label = "deberta", recipe = "deberta", model = "mini"},
      {label = "electra", recipe = "electra", model = "mini"},
      {label = "deberta-v3", recipe = "deberta-v3", model = "mini"},
    }},
  },
  fixed = {corpus = "english", vocab_size = 8000, batch_size = 32, seq_len = 128, log_every = 50,
           snapshots = "0.0625,0.25"},
  seeds = {1},
  budget = {steps = 20000},
  evaluation = {tasks = {"mrpc", "rte", "stsb", "sst2", "cola", "blimp", "lm"}, seeds = {1, 2, 3, 4, 5},
                from_scratch_control = true},
}
