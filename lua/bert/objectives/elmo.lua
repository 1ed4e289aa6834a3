--- ELMo's objective (Peters et al., 2018) with ELMo itself (the elmo
-- family, lua/bert/models/elmo.lua: character CNN, two LSTM stacks): the
-- forward and the backward LM trained jointly, independent directions
-- sharing the token encoder and the softmax; loss = the sum of the two
-- directions' mean next- and previous-token cross-entropies.  Data: the
-- packed full-sentence shards, read unmasked (as clm and bilm).
--
-- --model elmo-small (or elmo-original, or an elmo config.json).  The token
-- encoder reads the run's tokenizer's vocabulary (the checkpoint finds it in
-- the run's tokenizer/ beside it).  Held-out metrics as bilm's, named elmo_*;
-- the saved ElmoLMHeadModel fine-tunes through a scalar mix over its layers.
local bert = require("bert")
local clm = require("bert.objectives.clm")
local bilm = require("bert.objectives.bilm")

local M = {}

M.metrics = {"elmo_accuracy", "elmo_perplexity", "elmo_forward_perplexity", "elmo_backward_perplexity"}

M.masks = false   -- every real token is a target: no masking flag applies

function M.data() return "none" end

-- bilm's metric names as elmo's
local function renamed(t)
  local out = {}
  for k, v in pairs(t) do out[(k:gsub("^bilm_", "elmo_"))] = v end
  return out
end

local function config_type(path)
  local cfg = path and require("bert.models.config").read_json(path)
  return cfg and cfg.model_type
end

function M.check(args)
  if args.device == "vulkan" then return "--objective elmo: the LSTM has no Vulkan kernel yet (use --device cpu)" end
  local resolved = args.model and bert.models.resolve(args.model)
  local family = resolved and resolved.family or config_type(args.model)
  if family ~= "elmo" then
    return string.format("--model %s with --objective elmo: give elmo-SIZE (sizes: small, original) or an elmo " ..
      "config.json", tostring(args.model))
  end
  return nil
end

function M.build(ctx)
  local overrides = {}
  for k, v in pairs(ctx.config_overrides or {}) do overrides[k] = v end
  local ok, model = pcall(bert.model, "ElmoLMHeadModel", ctx.size, overrides)
  if not ok then error(tostring(model), 0) end
  if ctx.tokenizer then model.base:set_vocabulary(ctx.tokenizer) end
  local lm_forward = model.forward   -- unmask shard batches on the way in (see clm)
  model.forward = function(self, batch) return lm_forward(self, clm.lm_inputs(batch)) end
  return model, "ElmoLMHeadModel"
end

function M.step_metrics(ctx, out) return renamed(bilm.step_metrics(ctx, out)) end

M.eval_init, M.eval_batch = bilm.eval_init, bilm.eval_batch

--- Held-out next-token (forward) and previous-token (backward) accuracy
-- and perplexity, both directions pooled and each alone.
function M.eval_finish(ctx, s) return renamed(bilm.eval_finish(ctx, s)) end

function M.describe(_, final)
  return string.format("held-out accuracy %.4f, perplexity %.1f (left-to-right %.1f, right-to-left %.1f)",
    final.elmo_accuracy, final.elmo_perplexity, final.elmo_forward_perplexity, final.elmo_backward_perplexity)
end

return M
