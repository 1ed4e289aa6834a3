--- Masked language modelling, alone (RoBERTa: full sentences) or with a
-- sentence-pair task: next-sentence prediction (BERT) or sentence-order
-- prediction (ALBERT).  Internal names nsp, sop, none (see init.lua).
local bert = require("bert")
local cli = require("bert.cli")

local M = {}

M.metrics = {"mlm_accuracy", "perplexity", "nsp_accuracy", "sop_accuracy"}

-- the heads read only the masked rows and the first token: batches run packed
M.varlen = true

function M.data(args) return args.objective end

function M.add_options(parser)
  parser:option("--pair-loss-weight", "mlm-nsp, mlm-sop: weight of the sentence-pair loss (BERT, ALBERT: 1; 0 " ..
    "trains MLM alone on the same pair data, the control that tells NSP's loss from its data format)", "1")
    :convert(cli.number("--pair-loss-weight", 0))
end

-- the family's head for this objective: MLM alone or MLM + the pair head
local function head_for(args, family)
  if args.objective ~= "none" then return "pretraining" end
  if family == "deberta-v2" then return "emd_pretraining" end   -- the paper's enhanced mask decoder
  return "masked_lm"
end

--- A family without the pair head (RoBERTa, DeBERTa, ELECTRA, DistilBERT)
-- cannot run mlm-nsp or mlm-sop.
function M.check(args)
  if args.objective == "none" and args.pair_loss_weight and args.pair_loss_weight ~= 1 then
    return string.format("--pair-loss-weight %g: --objective mlm has no sentence-pair loss (use mlm-nsp or mlm-sop)",
      args.pair_loss_weight)
  end
  local resolved = args.model and bert.models.resolve(args.model)
  if resolved and resolved.family and args.objective ~= "none" then
    local ok, why = pcall(bert.models.architecture_for, resolved.family, "pretraining")
    if not ok then
      return string.format("--model %s with --objective %s: %s (use --objective mlm)", args.model,
        args.objective == "nsp" and "mlm-nsp" or "mlm-sop", tostring(why))
    end
  end
  return nil
end

function M.build(ctx)
  local ok_arch, arch = pcall(bert.models.architecture_for, ctx.family, head_for(ctx.args, ctx.family))
  if not ok_arch then error(tostring(arch) .. " (use --objective mlm)", 0) end
  local ok, model = pcall(bert.model, arch, ctx.size, ctx.config_overrides)
  if not ok then error(tostring(model), 0) end
  if ctx.args.objective ~= "none" then model.pair_loss_weight = ctx.args.pair_loss_weight end
  return model, arch
end

-- the MLM logits in the model's output
local function mlm_logits(args, out) return out[args.objective == "none" and "logits" or "prediction_logits"] end

function M.step_metrics(ctx, out, batch)
  local m = {}
  local logits = mlm_logits(ctx.args, out)
  if logits and out.masked_labels then m.mlm_accuracy = bert.train.accuracy(logits, out.masked_labels) end
  -- with a pair loss, its two parts apart (the loss logged is their sum)
  if out.nsp_loss and out.mlm_loss then m.mlm_loss = out.mlm_loss:item() end
  if out.seq_relationship_logits and batch.next_sentence_label then
    m[ctx.args.objective .. "_accuracy"] = bert.train.accuracy(out.seq_relationship_logits, batch.next_sentence_label)
  end
  return m
end

function M.eval_init()
  return {right = 0, total = 0, nll = 0, unigram = 0, pair_right = 0, pairs = 0}
end

function M.eval_batch(ctx, model, batch, s)
  local out = model:forward(batch)
  local logits, targets = mlm_logits(ctx.args, out), out.masked_labels
  local n = targets:numel()
  if n > 0 then
    s.right = s.right + logits:argmax(-1):eq(targets):sum():item()
    s.nll = s.nll + bert.F.cross_entropy(logits, targets, {reduction = "sum"}):item()
    s.unigram = s.unigram + targets:eq(ctx.unigram_id()):sum():item()
    s.total = s.total + n
  end
  if out.seq_relationship_logits and batch.next_sentence_label then
    s.pair_right = s.pair_right + out.seq_relationship_logits:argmax(-1):eq(batch.next_sentence_label):sum():item()
    s.pairs = s.pairs + batch.next_sentence_label:numel()
  end
end

--- Held-out MLM metrics from the sums over every rank's batches.
function M.mlm_results(s)
  local total = math.max(s.total, 1)
  return {
    mlm_accuracy = s.right / total,
    unigram_baseline_accuracy = s.unigram / total,
    perplexity = math.exp(s.nll / total),
    mlm_loss = s.nll / total,
    masked_tokens = math.tointeger(s.total) or s.total,
  }
end

function M.eval_finish(ctx, s)
  local result = M.mlm_results(s)
  if s.pairs > 0 then result[ctx.args.objective .. "_accuracy"] = s.pair_right / s.pairs end
  return result
end

--- One line for the end of a run.
function M.describe(ctx, final)
  local pair = final[ctx.args.objective .. "_accuracy"]
  return string.format("held-out MLM accuracy %.4f (unigram baseline %.4f), perplexity %.1f%s",
    final.mlm_accuracy, final.unigram_baseline_accuracy, final.perplexity,
    pair and string.format(", %s accuracy %.4f", ctx.args.objective:upper(), pair) or "")
end

return M
