-- Which of Cramming's choices help at this machine's scale?  Geiping &
-- Goldstein (2022, "Cramming: Training a Language Model on a Single GPU in
-- One Day") and the BabyLM challenge report that at small compute
-- pre-LayerNorm layers, no dropout in pretraining, a one-cycle learning
-- rate, growing the batch by accumulation and shorter sequences first pay
-- off; experiments/cram.lua makes them its defaults.  Each cell here
-- switches one of them off, beside the run with all of them ("cram"):
--
--   no-pre-ln       post-LN layers (BERT's), no final LayerNorm
--   dropout         hidden and attention dropout 0.1 in pretraining
--   no-one-cycle    BERT's schedule: linear warmup over 10% of the steps, linear decay
--   no-batch-ramp   --accum 4 micro-batches from the first step
--   no-short-first  every step at 128 tokens (the others: 64-token pieces for the first half)
--
-- (Masked-token-only decoding is not a cell: the MLM head always decodes
-- the masked rows only; it changes the compute, not the loss.)
--
--   lua5.4 experiments/ablate.lua experiments/ablations/cram.lua --threads 1
--   lua5.4 experiments/ablate.lua experiments/ablations/cram.lua --budget-scale 0.01   # a quick end-to-end look
--
-- Budget: 6,000 optimizer steps per cell on BERT-mini, 32 sequences of 128
-- tokens per micro-batch, --accum 4 at the end of the ramp.  The grid runs
-- cells at equal steps, not at equal time (it takes no time budget): the
-- batch ramp (1 -> 4 over the first half) draws 3 micro-batches a step on
-- average, so the no-batch-ramp cell gets budget_factor 0.75 to see the same
-- 18,000 micro-batches (576k sequences, 74M token slots) as the others;
-- shorter sequences first keeps every token (the pieces are cut from the
-- 128-token sequences), so it saves only attention's quadratic share.
-- Cramming's claims are per wall-clock hour: a cell that wins here per
-- token may not per hour, and the reverse; the tokens/s of each cell is in
-- its summary.json.  At ~0.7 s a micro-batch on one core a cell pretrains
-- in ~3.5 h, the grid in ~21 h plus its evaluation.  Target: held-out MLM
-- accuracy >= 0.30 in every cell (BERT-mini on this corpus reached 0.145
-- after 5.3k steps of batch 32; these cells see ~3.4x those sequences).
-- The compute column (bert.models.flops.pretraining) counts the
-- micro-batches each run took (summary.json), at --seq-len: it overstates
-- only the short-first cells' attention.  Nothing has been measured yet: no result of
-- this grid is reported anywhere until it has run.
local dropout_off = "hidden_dropout_prob=0,attention_probs_dropout_prob=0"
local cram_model = "pre_layer_norm=true," .. dropout_off

return {
  name = "cram",
  description = "Cramming's choices (pre-LN, no dropout, one-cycle, batch ramp, short sequences first), each " ..
    "switched off in turn, at equal steps on BERT-mini.",
  axes = {
    {name = "choice", values = {
      {label = "cram"},
      {label = "no-pre-ln", config_overrides = dropout_off},
      {label = "dropout", config_overrides = "pre_layer_norm=true,hidden_dropout_prob=0.1,attention_probs_dropout_prob=0.1"},
      {label = "no-one-cycle", schedule = "linear", warmup = 0.1},
      {label = "no-batch-ramp", batch_ramp = false, budget_factor = 0.75},
      {label = "no-short-first", seq_len_schedule = false},
    }},
  },
  fixed = {model = "mini", corpus = "english", tokenizer = "wordpiece", vocab_size = 8000, objective = "mlm",
           masking = "dynamic", batch_size = 32, accum = 4, seq_len = 128, lr = 1e-3,
           config_overrides = cram_model, schedule = "one_cycle", warmup = 0.5, batch_ramp = 0.5,
           seq_len_schedule = "64:0.5", log_every = 50, snapshots = "0.0625,0.25"},
  seeds = {1},
  budget = {steps = 6000},
  evaluation = {tasks = {"mrpc", "rte", "stsb", "sst2", "cola", "blimp", "lm"}, seeds = {1, 2, 3, 4, 5},
                from_scratch_control = true},
}
