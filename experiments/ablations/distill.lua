-- DistilBERT's claim (Sanh et al., 2019): a student distilled from a
-- teacher beats the same student pretrained from scratch on the same
-- budget.  The teacher is the nsp grid's BERT-tiny MLM cell (2 layers of
-- 128, 2,000 steps of 32 x 128 tokens, one per seed); run next to that grid
-- (runs/ablate/) its finished runs are read, not pretrained again (the
-- `teacher` field: GRID/teacher-SEED/reused.json names them).  The student
-- is DistilBERT at the teacher's width and half its depth (1 layer of 128,
-- experiments/ablations/models/distilbert-1x128.json), as DistilBERT halved
-- BERT-base.  Two students per seed, the same steps on the same data:
--   from scratch   masked language modelling alone (--objective mlm);
--   DistilBERT     --objective distill: soft targets at T = 2 (x T²), MLM
--                  and the hidden-state cosine loss weighted 5/2/1, the
--                  student started from the teacher's embeddings, MLM head
--                  and first layer (the log says what was copied).
-- Then spam (1,000 examples) and Brown POS (10,000 sentences), fine-tuned
-- the same way for every cell.  teacher_mlm_accuracy in the table is the
-- teacher's held-out MLM accuracy on the same tokens (a reference), and
-- teacher_agreement how often the student predicts what the teacher does.
--
--   lua5.4 experiments/ablate.lua experiments/ablations/distill.lua
--   lua5.4 experiments/ablate.lua experiments/ablations/distill.lua --budget-scale 0.05   # a quick look
--
-- One deviation from DistilBERT's recipe, for the budget: the soft targets
-- cover the masked tokens only (distill_positions = "masked", distiller.py's
-- restrict_ce_to_mask); on every token the vocabulary projections of
-- teacher and student over all 4,096 tokens of a batch make a step ~2x as long.
--
-- Budget: two students of 600 steps per seed (2.5M tokens each) and six
-- fine-tunings; with the teachers read from the nsp grid, ~35 min of one
-- core in all (measured 2026-12-01: 19.5 min, 4.2-4.5 min a DistilBERT cell) (a DistilBERT step costs ~2.8x a scratch step: the teacher's
-- forward and the losses; without the nsp grid, +3 teachers of ~9 min).  An earlier version
-- distilled a BERT-mini teacher of 500 steps into a 2-layer-256 student:
-- ~1.6 h of one core, and a check run of that teacher at 150 steps was
-- still at the unigram plateau, so the teacher had little to teach.
-- TinyBERT's hidden-state and attention-score losses are one more value,
--   {label = "DistilBERT+TinyBERT", objective = "distill", tinybert = true, distill_positions = "masked"},
-- left out of the default grid.
return {
  name = "distill",
  description = "A 1-layer DistilBERT student (128 wide) distilled from the nsp grid's BERT-tiny MLM teacher " ..
    "(2 layers, 2,000 steps) vs the same student pretrained from scratch, 600 steps each.",
  axes = {
    {name = "student", values = {
      {label = "from scratch", objective = "mlm"},
      {label = "DistilBERT", objective = "distill", distill_positions = "masked"},
    }},
  },
  -- the nsp grid's objective=mlm cells: equal settings, so read from runs/ablate/nsp
  teacher = {model = "tiny", objective = "mlm", budget = {tokens = 2000 * 32 * 128}},
  fixed = {model = "experiments/ablations/models/distilbert-1x128.json", corpus = "brown", tokenizer = "wordpiece",
           vocab_size = 8000, batch_size = 32, seq_len = 128, masking = "dynamic", log_every = 50},
  seeds = {1, 2, 3},
  budget = {tokens = 600 * 32 * 128},
  downstream = {
    {task = "spam", max_train = 1000, epochs = 3, seq_len = 128, batch_size = 32},
    {task = "brown-pos", max_train = 10000, epochs = 2, seq_len = 128, batch_size = 32},
  },
}
