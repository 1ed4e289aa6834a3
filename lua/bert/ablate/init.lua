--- bert.ablate: a grid of pretraining runs, each fine-tuned on the same
-- downstream tasks with the same settings, over several seeds; the engine
-- behind experiments/ablate.lua.
--
--   local ablate = require("bert.ablate")
--   local grid = ablate.load("experiments/ablations/nsp.lua", {budget_scale = 0.05})
--   ablate.run(grid, "runs/ablate/nsp")        -- resumable: finished cells are skipped
--   ablate.summarize("runs/ablate/nsp")        -- results.json, results.md, plots/
--
-- An ablation file returns a table:
--   name, description     -- for the table's heading
--   axes = {{name = "objective", values = {"mlm-nsp", "mlm", "mlm-sop"}}, ...}
--       -- a name is a pretraining setting (bert.pretrain.settings: model,
--       -- tokenizer, objective, masking, whole_word_mask, ...), or
--       -- "finetune.X" for a fine-tuning setting (from_scratch, max_train,
--       -- ...).  A value is that setting's value, or a table {label = "...",
--       -- setting = value, ...} that sets several at once.
--   fixed = {model = "tiny", corpus = "brown", ...}   -- every pretraining run
--   seeds = {1, 2, 3}
--   budget = {steps = 2000} or {tokens = 4e6}  -- per pretraining run (tokens:
--       -- steps = tokens / (batch_size * accum * seq_len)), so cells get equal compute
--   downstream = {{task = "spam", max_train = 1000, epochs = 3}, ...}
--       -- bert.finetune.experiment settings; kind from the task for spam,
--       -- brown-genre (classification), brown-pos (tagging), synthetic-qa (qa)
--   finetune = {...}      -- settings shared by every downstream task
--   evaluation = {suite = "glue", steps = 300, seeds = {1, 2, 3}, ...}
--       -- bert.evaluate.run settings: the evaluation suite on every cell's
--       -- checkpoint (cells/ID/evaluate/), each task's headline score (mean
--       -- over the fine-tuning seeds) a metric `eval_TASK`, with eval_glue
--       -- (the GLUE average); with from_scratch_control = true also
--       -- eval_TASK_scratch (the same architecture from random weights) and
--       -- eval_TASK_gain (pretrained - scratch); `downstream` may then be left out
--   comparisons = {{"objective=mlm-pairs", "objective=mlm"}, ...}
--       -- pairs of cell labels {ROW, AGAINST} compared in results.md beside
--       -- each row against the baseline row (the first axis' first value)
--   planned = {{axis = "objective", values = {"clm"}, missing = "why"}, ...}
--       -- values the ablation is meant to have that cannot run yet: listed
--       -- at the start and in results.md, never run (a value that cannot run
--       -- put in `axes` stops the grid with an error naming it)
--   teacher = {model = "mini", objective = "mlm", budget = {steps = 1500}}
--       -- for --objective distill cells: a teacher pretrained once per seed
--       -- (the fixed settings, then these; its own budget, scaled like the
--       -- cells') into GRID/teacher-SEED, whose checkpoint is every
--       -- distill cell's --teacher unless the cell names one
--
-- Layout of a grid directory:
--   grid.json                   the resolved grid (a rerun must match it, or add
--                               cells or evaluation tasks after the saved ones)
--   pretrain/ID/                one pretraining run, shared by the cells that
--                               differ only in fine-tuning settings
--   teacher-SEED/               the teacher of that seed's distill cells
--   cells/ID/done.json          a finished cell's metrics (the done-marker)
--   cells/ID/TASK/              its fine-tuning runs
--   cells/ID/evaluate/          its evaluation suite (with `evaluation`)
--   results.json, results.md, plots/*.png (bars per metric; curve-AXIS-METRIC.png
local common = require("bert.ablate.common")
local grid = require("bert.ablate.grid")
local run = require("bert.ablate.run")
local report = require("bert.ablate.report")

return {
  pretrain_metrics = common.pretrain_metrics,   -- kept from a pretraining summary
  finetune_metrics = common.finetune_metrics,   -- kept from a fine-tuning summary
  canonical = common.canonical,
  mean_sd = common.mean_sd,
  load = grid.load,
  run = run.run,
  summarize = report.summarize,
  learning_curves = report.learning_curves,
  comparisons = report.comparisons,
  archive = require("bert.ablate.archive"),   -- save/restore a grid's results (no checkpoints)
  status = require("bert.ablate.status").status,   -- where a running grid stands
}
