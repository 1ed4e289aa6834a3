-- DistilBERT's claim (Sanh et al., 2019): a student distilled from a
-- teacher beats the same student pretrained from scratch on the same
-- budget.  The teacher is BERT-mini (4 layers of 256), pretrained once per
-- seed by the grid (the `teacher` field: GRID/teacher-SEED); the student is
-- DistilBERT at the teacher's width and half its depth (distilbert-mini: 2
-- layers of 256), as DistilBERT halved BERT-base.  Three students per
-- seed, each the same number of steps on the same data:
--   from scratch      masked language modelling alone (--objective mlm);
--   DistilBERT        --objective distill: soft targets at T = 2 (x T²),
--                     MLM and the hidden-state cosine loss weighted 5/2/1,
--                     the student started from the teacher's embeddings,
--                     MLM head and layers 0 and 3;
--   + TinyBERT        the same plus TinyBERT's hidden-state and attention-
--                     score MSEs over the layer map 0->0, 1->2, 2->4.
-- Then spam (1,000 examples) and Brown POS (10,000 sentences), fine-tuned
-- the same way for every cell.  The table's teacher_mlm_accuracy is the
-- teacher's held-out MLM accuracy on the same tokens (an upper reference).
--
--   lua5.4 experiments/ablate.lua experiments/ablations/distill.lua [--threads 2]
--   lua5.4 experiments/ablate.lua experiments/ablations/distill.lua --budget-scale 0.05   # a quick look
--
-- One deviation from DistilBERT's recipe, for the budget: the soft targets
-- cover the masked tokens only (distill_positions = "masked", distiller.py's
-- restrict_ce_to_mask); on every token (DistilBERT's default) the
-- vocabulary projection of teacher and student over all 4,096 tokens of a
-- batch makes a step 2.2x as long (2.38 s against 1.06 s of CPU, --threads 1).
--
-- Budget: per seed a teacher of 600 steps and three students of 400 steps,
-- 32 x 128 tokens a step.  TIMING: see below.
return {
  name = "distill",
  description = "A DistilBERT-mini student (2 layers of 256): distilled from a BERT-mini teacher (4 layers of 256, " ..
    "pretrained per seed) vs the same student pretrained from scratch, equal student steps.",
  axes = {
    {name = "student", values = {
      {label = "from scratch", objective = "mlm"},
      {label = "DistilBERT", objective = "distill"},
      {label = "DistilBERT+TinyBERT", objective = "distill", tinybert = true},
    }},
  },
  teacher = {model = "mini", objective = "mlm", budget = {steps = 600}},
  fixed = {model = "distilbert-mini", corpus = "brown", tokenizer = "wordpiece", vocab_size = 8000, batch_size = 32,
           seq_len = 128, masking = "dynamic", log_every = 50, distill_positions = "masked"},
  seeds = {1, 2, 3},
  budget = {steps = 400},
  downstream = {
    {task = "spam", max_train = 1000, epochs = 3, seq_len = 128, batch_size = 32},
    {task = "brown-pos", max_train = 10000, epochs = 2, seq_len = 128, batch_size = 32},
  },
}
