-- DistilBERT's claim (Sanh et al., 2019): a student distilled from a
-- teacher beats the same student pretrained from scratch.  The teacher is
-- the nsp grid's BERT-mini MLM cell (4 layers of 256, 20,000 steps of
-- 32 x 128 tokens on the English corpus); run next to that grid
-- (runs/ablate/) the finished run is read, not pretrained again.  The
-- student is DistilBERT at the teacher's width and half its depth (2 layers
-- of 256, experiments/ablations/models/distilbert-2x256.json), as
-- DistilBERT halved BERT-base.  Four students, 5,000 steps each on the same
-- data:
--   from scratch    masked language modelling alone (--objective mlm);
--   scratch, equal compute
--                   the same at 1.6x the steps: a distillation step also runs
--                   the teacher's forward pass (bert.models.flops: student
--                   step 3 x 4.0 MFLOP a token, teacher forward 7.4 MFLOP, so
--                   19.5 against 12.1 MFLOP a token);
--   initialised only
--                   --objective distill with the soft-target and cosine
--                   weights at 0: the student starts from the teacher's
--                   embeddings, MLM head and layers as DistilBERT does, then
--                   learns by MLM alone -- how much is the initialisation's;
--   DistilBERT      --objective distill: soft targets at T = 2 (x T^2), MLM
--                   and the hidden-state cosine loss weighted 5/2/1, started
--                   from the teacher as above (the log says what was copied).
-- Then the evaluation suite on every student, with the from-scratch control
-- and 5 fine-tuning seeds.  teacher_mlm_accuracy in the table is the
-- teacher's held-out MLM accuracy on the same tokens (a reference), and
-- teacher_agreement how often the student predicts what the teacher does.
--
--   lua5.4 experiments/ablate.lua experiments/ablations/distill.lua --shard 1/2 --threads 1 &
--   lua5.4 experiments/ablate.lua experiments/ablations/distill.lua --shard 2/2 --threads 1
--
-- One deviation from DistilBERT's recipe, for the budget: the soft targets
-- cover the masked tokens only (distill_positions = "masked", distiller.py's
-- restrict_ce_to_mask); on every token the vocabulary projections of teacher
-- and student over all 4,096 tokens of a batch make a step ~2x as long.
--
-- Budget: four students of 5,000-8,000 steps (~40-70 min of one core each)
-- and their suites (~2 h each); with the teacher read from the nsp grid,
-- ~12 h of one core.  TinyBERT's hidden-state and attention-score losses are
-- one more value,
--   {label = "DistilBERT+TinyBERT", objective = "distill", tinybert = true, distill_positions = "masked"},
-- left out of the default grid.
return {
  name = "distill",
  description = "A 2-layer DistilBERT student (256 wide) distilled from the nsp grid's BERT-mini MLM teacher " ..
    "vs the same student from scratch (equal steps and equal compute) and initialised from the teacher only.",
  axes = {
    {name = "student", values = {
      {label = "from scratch", objective = "mlm"},
      {label = "scratch, equal compute", objective = "mlm", budget_factor = 1.6},
      {label = "initialised only", objective = "distill", alpha_ce = 0, alpha_cos = 0, alpha_mlm = 1,
       distill_positions = "masked"},
      {label = "DistilBERT", objective = "distill", distill_positions = "masked"},
    }},
  },
  -- the nsp grid's objective=mlm cell: equal settings, so read from runs/ablate/nsp
  teacher = {model = "mini", objective = "mlm", budget = {steps = 20000}},
  fixed = {model = "experiments/ablations/models/distilbert-2x256.json", corpus = "english", tokenizer = "wordpiece",
           vocab_size = 8000, batch_size = 32, seq_len = 128, masking = "dynamic", log_every = 50,
           snapshots = "0.0625,0.25"},
  seeds = {1},
  budget = {steps = 5000},
  evaluation = {tasks = {"mrpc", "rte", "stsb", "sst2", "cola", "blimp", "lm"}, seeds = {1, 2, 3, 4, 5},
                from_scratch_control = true},
}
