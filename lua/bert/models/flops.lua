--- bert.models.flops: the floating-point operations of a model's steps,
-- counted as the GEMMs do (2 per multiply-add): the encoder's projections
-- and feed-forward, attention's two products, DeBERTa's relative terms, the
-- MLM head on the rows it decodes and the pair head; a training step is 3x
-- the forward (the backward is twice the forward).  Elementwise work,
-- softmax and layer norms are left out (a few percent at these sizes).
-- tools/bench.lua reports GFLOP/s with it; ablation grids state each cell's
-- pretraining compute with it.
--
--   flops.forward(model, B, T, {mlm_rows = n, pair_head = bool})
--   flops.pretraining(run_dir)   -> {token_slots, flops, steps, micro_batches}: a pretraining run's compute
--                                   (its model only: an ELECTRA generator or a distillation
--                                   teacher is not counted), or nil, message
local M = {}

function M.forward(model, B, T, opts)
  opts = opts or {}
  -- a family that is not a Transformer encoder counts its own (ELMo's LSTMs)
  if model.family and model.family.flops then return model.family.flops(model, B, T, opts) end
  local c = model.arch or model.config   -- the config in BERT's key names
  local V, H, L, I = c.vocab_size, c.hidden_size, c.num_hidden_layers, c.intermediate_size
  local E = c.embedding_size or H
  local inner = model.config.inner_group_num or 1   -- ALBERT runs each shared group's layers at every depth
  local tokens = B * T
  local layer = 2 * tokens * (4 * H * H + 2 * H * I) + 2 * 2 * B * T * T * H
  if c.span and (c.c2p or c.p2c) then   -- the relative table's projections and the c2p / p2c products
    local terms = (c.c2p and 1 or 0) + (c.p2c and 1 or 0)
    layer = layer + terms * (2 * 2 * c.span * H * H + 2 * B * T * 2 * c.span * H)
  end
  local enc = L * inner * layer + (E ~= H and 2 * tokens * E * H or 0)
  local head = 2 * (opts.mlm_rows or tokens) * (H * E + E * V)
  return enc + head + (opts.pair_head and 2 * B * H * H or 0)
end

function M.pretraining(run_dir)
  local fs = require("bert.fs")
  local args = fs.read_json(run_dir .. "/args.json")
  if not args then return nil, run_dir .. "/args.json: not found" end
  local summary = fs.read_json(run_dir .. "/summary.json") or {}
  local steps = summary.steps or args.steps
  if not steps then return nil, run_dir .. ": no step count (unfinished, with a time budget)" end
  local registry = require("bert.models.registry")
  local config_path = run_dir .. "/checkpoint/config.json"
  local raw = fs.read_json(config_path)
  if not raw then return nil, config_path .. ": not found" end
  local arch = raw.architectures and raw.architectures[1]
  local ok, model = pcall(registry.build, arch, config_path)
  if not ok then return nil, tostring(model) end
  -- micro-batches, not steps x --accum: a batch ramp (--batch-ramp) takes
  -- fewer; the run counts them (summary.json).  A short-first length
  -- schedule keeps every token but shortens attention: counted at the full
  -- length, an overstatement of the attention term only.
  local micro = summary.micro_batches or steps * (args.accum or 1)
  local B, T = args.batch_size or 32, args.seq_len or 128
  local objective = args.objective or "mlm-nsp"
  local causal = objective == "clm" or objective == "bilm"
  local per_micro = 3 * M.forward(model, B, T, {
    mlm_rows = causal and B * T or math.floor(B * T * (args.mask_prob or 0.15) + 0.5),
    pair_head = objective == "nsp" or objective == "sop" or objective == "mlm-nsp" or objective == "mlm-sop"})
  return {token_slots = micro * B * T, flops = micro * per_micro, steps = steps, micro_batches = micro}
end

return M
