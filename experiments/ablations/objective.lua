-- MLM against its predecessors: BERT's masked LM vs GPT's left-to-right LM
-- vs ELMo-style two one-directional LMs combined vs ELECTRA's replaced-token
-- detection -- the seed's "can't see information to the right" and ELECTRA's
-- "higher information density".  BLiMP is where a left-to-right model is
-- expected to do well (it scores whole sentences left to right, as GPT-2 in
-- the BLiMP paper) and a masked one by pseudo-log-likelihood; the GLUE tasks
-- are where BERT's paper places the gap.
--
--   lua5.4 experiments/ablate.lua experiments/ablations/objective.lua --shard 1/2 --threads 1 &
--   lua5.4 experiments/ablate.lua experiments/ablations/objective.lua --shard 2/2 --threads 1
--   lua5.4 experiments/ablate.lua experiments/ablations/objective.lua --budget-scale 0.01   # a quick look
--
-- The cells (the same English corpus, WordPiece vocabulary of 8,000, packed
-- full sentences, BERT-mini's shapes):
--   mlm   RoBERTa-style MLM (15% of the tokens predicted); the same settings
--         as the nsp grid's objective=mlm cell, so next to runs/ablate/nsp it is
--         read, not pretrained again
--   clm   GPT: the encoder made causal, next-token loss on every position;
--         fine-tuned causal, the classifier reading the last real token
--   bilm  ELMo-style: a left-to-right and a right-to-left causal stack (two
--         stacks of half BERT-mini's depth, so the pair has its parameters)
--         sharing embeddings and softmax, representation [forward ; backward]
--   elmo  ELMo itself (Peters et al. 2018): elmo-small's character CNN and
--         two independent left-to-right / right-to-left 2-layer LSTM LMs
--         (512 cells, 128 projection) sharing the softmax; fine-tuned frozen,
--         each task reading a learned scalar mix of its layers, as ELMo was used
--   electra  replaced-token detection, electra-mini's discriminator (BERT-mini's
--         shapes) and a generator a quarter as wide, lambda 50, at
--         ELECTRA-Small's peak rate 5e-4 (Clark et al. 2020, table 6; their
--         batch was 128, ours 32); experiments/ablations/electra-lr.lua sweeps
--         the rate at 1/16 of the budget: no conclusion about RTD before it ran
--
-- Equal compute, as read here: every cell gets the same pretraining tokens
-- (20,000 steps x 32 x 128) through encoders of the same size, so the encoder
-- FLOPs per token are equal.  What differs is each objective's output cost:
-- clm decodes every position and bilm every position twice (an 8,000-way
-- softmax each) where MLM decodes 15%, and ELECTRA adds its generator (not
-- counted in the table's PFLOP column, as in the ELECTRA paper it would be).
-- The table states each cell's FLOPs and tokens/s; a cell that used more
-- compute and scores lower is then read as such.
--
-- Budget: one pretraining seed per objective, the suite with 5 fine-tuning
-- seeds and a from-scratch control per architecture, snapshots at 1/16 and
-- 1/4.  ~6.5 h of one core for the mlm cell (read from nsp), clm and bilm
-- ~1.5x that (the softmax on every position), electra ~1.3x: ~30 h of one
-- core for the three new cells.  Target: every MLM-style cell at held-out
-- MLM accuracy >= 0.30 and every left-to-right cell well below the unigram
-- model's cross-entropy (the floor the report marks).
return {
  name = "objective",
  description = "MLM vs left-to-right LM (GPT) vs two one-directional LMs (ELMo-style) vs replaced-token " ..
    "detection (ELECTRA), BERT-mini, equal tokens and encoder size, scored on GLUE, BLiMP and bits per byte.",
  axes = {
    {name = "objective", values = {"mlm", "clm", "bilm",
      -- mlm_accuracy in ELECTRA's row is its generator's
      {label = "electra", objective = "electra", model = "electra-mini", lr = 5e-4},
      -- ELMo as it was: character CNN, two independent 2-layer LSTM LMs with projection,
      -- fine-tuned frozen through a scalar mix
      {label = "elmo", objective = "elmo", model = "elmo-small"}}},
  },
  fixed = {model = "mini", corpus = "english", tokenizer = "wordpiece", vocab_size = 8000,
           batch_size = 32, seq_len = 128, masking = "dynamic", log_every = 50, snapshots = "0.0625,0.25"},
  seeds = {1},
  budget = {steps = 20000},
  evaluation = {tasks = {"mrpc", "rte", "stsb", "sst2", "cola", "blimp", "lm"}, seeds = {1, 2, 3, 4, 5},
                from_scratch_control = true},
}
