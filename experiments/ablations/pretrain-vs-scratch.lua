-- The central claim: pretraining pays most when labelled data are scarce.
-- One pretraining run (the nsp grid's objective=mlm cell: BERT-mini, English
-- corpus, 20,000 steps; next to runs/ablate/nsp it is read, not repeated),
-- then the evaluation suite with 100 to 3,000 labelled examples per task:
-- every task fine-tuned from the pretrained checkpoint and, as the suite's
-- from-scratch control, from fresh weights of the same architecture, with
-- the same fixed number of steps (200) at every set size -- so a small set
-- is not also a short run, the flaw of the first round (3 epochs of 100
-- mails were ~10 steps) -- 5 seeds, the rate chosen per cell on dev from
-- the suite's grid, and the suite's floors (majority class, bag of words)
-- beside every score.  Tasks: SST-2 and CoLA (single sentences), MRPC and RTE
-- (pairs), SQuAD (the seed's question-answering example; the suite's
-- article split) and spam (the first round's task).
--
--   lua5.4 experiments/ablate.lua experiments/ablations/pretrain-vs-scratch.lua --shard 1/2 --threads 1 &
--   lua5.4 experiments/ablate.lua experiments/ablations/pretrain-vs-scratch.lua --shard 2/2 --threads 1
--
-- ablate.lua draws the learning curve (plots/curve-finetune.max_train-METRIC.png:
-- each task's score against the set size, mean ± sd over the fine-tuning seeds);
-- eval_TASK_gain is pretrained - scratch at each size.
-- Budget: no pretraining of its own; 4 set sizes x 6 tasks x 7 runs x 2
-- (pretrained and control) fine-tunings of 200 steps: ~1 min each for the
-- GLUE tasks and spam, ~5 min for SQuAD: ~14 h of one core.
return {
  name = "pretrain-vs-scratch",
  description = "Fine-tuning from the pretrained checkpoint vs from scratch (the suite's control), " ..
    "over labelled set sizes at a fixed number of steps.",
  axes = {
    {name = "finetune.max_train", values = {100, 300, 1000, 3000}},
  },
  fixed = {model = "mini", corpus = "english", tokenizer = "wordpiece", vocab_size = 8000, objective = "mlm",
           batch_size = 32, seq_len = 128, masking = "dynamic", log_every = 50, snapshots = "0.0625,0.25"},
  seeds = {1},
  budget = {steps = 20000},
  -- the snapshots are nsp's (the run is shared); their evaluation is not this grid's question
  evaluation = {tasks = {"sst2", "cola", "mrpc", "rte", "squad", "spam"}, seeds = {1, 2, 3, 4, 5},
                from_scratch_control = true, learning_curve = false},
}
