-- ELECTRA's learning rate at this batch size, before the objective grid
-- concludes anything about replaced-token detection.  The earlier objective
-- grid's discriminator never learned (RTD recall 0.0006) at 1e-3 with batch
-- 32; ELECTRA-Small used 5e-4 at batch 128 (Clark et al. 2020, table 6).
-- Four peak rates around it, electra-mini on the objective grid's data, at
-- 1/16 of its budget (1,250 steps, the length of its first snapshot): the
-- rate whose held-out RTD loss and GLUE scores are best is the one the
-- objective grid should use (it ships 5e-4; change it there if this grid
-- disagrees, and say so in docs/results.md).
--
--   lua5.4 experiments/ablate.lua experiments/ablations/electra-lr.lua --shard 1/2 --threads 1 &
--   lua5.4 experiments/ablate.lua experiments/ablations/electra-lr.lua --shard 2/2 --threads 1
--
-- Budget: 4 cells x 1,250 steps x 32 x 128 (~20 min of one core each) and
-- RTE and SST-2 with 5 fine-tuning seeds each (~15 min): ~2.5 h of one core.
return {
  name = "electra-lr",
  description = "ELECTRA (electra-mini) peak learning rate at batch 32: RTD and GLUE after 1,250 steps.",
  axes = {
    {name = "lr", values = {2.5e-4, 5e-4, 1e-3, 2e-3}},
  },
  fixed = {model = "electra-mini", objective = "electra", corpus = "english", tokenizer = "wordpiece",
           vocab_size = 8000, batch_size = 32, seq_len = 128, masking = "dynamic", log_every = 50},
  seeds = {1},
  budget = {steps = 1250},
  evaluation = {tasks = {"rte", "sst2"}, seeds = {1, 2, 3, 4, 5}},
}
