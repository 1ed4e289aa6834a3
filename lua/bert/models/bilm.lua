--- BiLM: ELMo's shallow bidirectionality (Peters et al., 2018) with
-- Transformer stacks instead of LSTMs.  Two causal encoders side by side,
-- one reading left to right, one right to left (each sequence reversed
-- within its real length, padding left at the end), sharing the token
-- representation (BERT's embeddings: word, position, token type) and the
-- softmax (the LM head cls.predictions.*, decoder tied to the word
-- embeddings), as ELMo shares its character CNN and softmax.  The
-- representation at position t is [forward top layer at t ; backward top
-- layer at t] (width 2H); sequence-level heads read [forward at the last
-- real token ; backward at the first], the two positions that have seen
-- the whole input.  Not a Hugging Face model type: the names follow BERT's.
--
-- Checkpoint names: bilm.embeddings.*, bilm.forward_encoder.layer.i.*,
-- bilm.backward_encoder.layer.i.*, cls.predictions.* (BiLMLMHeadModel),
-- classifier / qa_outputs (the fine-tuning heads, on 2H).
--
-- Sizes: each direction has half the layers of the BERT of the same name
-- (at least one), so that the two stacks together have BERT's encoder
-- parameters and compute per token (the objective ablation compares at
-- equal compute).
local bert = require("bert.core")
local class = require("bert.nn.class")
local nn = require("bert.nn")
local blocks = require("bert.models.blocks")
local heads = require("bert.models.heads")
local bert_family = require("bert.models.bert")

local F = {
  model_type = "bilm", short_name = "bilm", class_prefix = "BiLM", prefix = "bilm",
  default_vocab = 30522, base_pooler = false,
  not_huggingface = true,   -- our two-stack model: no Hugging Face class reads it
}

F.sizes = {}
for name, s in pairs(require("bert.models.config").sizes) do
  F.sizes[name] = {hidden_size = s.hidden_size, num_hidden_layers = math.max(1, s.num_hidden_layers // 2),
                   num_attention_heads = s.num_attention_heads, intermediate_size = s.intermediate_size}
end

F.defaults = require("bert.models.config").extend(bert_family.defaults, {
  is_decoder = true,   -- both stacks are causal; config.json says so
})

function F.validate(c, a, where)
  bert_family.validate(c, a, where)
  if c.is_decoder ~= true then
    error(where .. ": a bilm model's stacks are causal: is_decoder must be true, got " .. tostring(c.is_decoder), 0)
  end
end

F.arch = bert_family.arch
F.optional_keys = {"classifier_dropout"}

--- The reversal of each row within its real length, as flat indices into
-- B*T: row b of length L reads positions L-1, ..., 0, then its padding
-- where it is (mask [B, T], 1 keep, 0 pad; nil: every position is real).
-- It is its own inverse.
function F.reversal(B, T, mask)
  local t = bert.arange(T):view(1, T)
  local rev
  if mask then
    local L = mask:ne(0):int():sum(2):view(B, 1)
    rev = bert.where(t:lt(L), L - 1 - t, t:expand(B, T))
  else
    rev = (T - 1 - t):expand(B, T)
  end
  return (rev + bert.arange(B):view(B, 1) * T):reshape(B * T)
end

-- rows of x [B, T, ...] permuted by flat indices into B*T
local function permute_rows(x, flat)
  local shape = x:shape()
  local B, T = shape[1], shape[2]
  local inner = x:numel() // (B * T)
  if x:device() ~= "cpu" and flat:device() == "cpu" then flat = flat:to(x:device()) end
  return x:reshape(B * T, inner):index_select(1, flat):view(table.unpack(shape))
end
F.permute_rows = permute_rows

-- [a ; b] along the last dimension (on any device: cat is a strided copy there)
local function concat_last(a, b) return bert.cat({a, b}, a:dim()) end
F.concat_last = concat_last

-- {============================================================ the backbone

local Backbone = class("BiLMBackbone", nn.Module)
F.Backbone = Backbone

function Backbone:__init(a)
  nn.Module.__init(self)
  self.arch = a
  local embeddings = blocks.Embeddings(a)
  self:add_module("embeddings", embeddings)
  self:add_module("forward_encoder", blocks.Encoder(a, function() return blocks.Layer(a) end))
  self:add_module("backward_encoder", blocks.Encoder(a, function() return blocks.Layer(a) end))
  self.roles = {embeddings = embeddings}   -- what the heads look up (the tied decoder)
  self.max_length = a.max_position_embeddings
end

function Backbone:has_pooler() return false end
-- no packed (varlen) path: the reversal works on the padded [B, T] grid
function Backbone:set_varlen() return self, false end

--- forward{input_ids, token_type_ids?, attention_mask?} ->
-- {last_hidden_state [B, T, 2H] = [forward ; backward], forward_hidden,
-- backward_hidden (both [B, T, H], original order), backward_reversed (the
-- backward stack's output in its own, reversed order), reversal (flat
-- indices, F.reversal), sequence_summary [B, 2H]}, ids, mask
function Backbone:forward(inputs)
  local name = (self.class_name or "BiLMModel") .. ":forward"
  if type(inputs) ~= "table" or inputs.input_ids == nil then error(name .. ": expects a table with input_ids", 3) end
  local ids = blocks.check_ids(name, inputs.input_ids, "input_ids")
  local B, T = ids:size(1), ids:size(2)
  if T > self.max_length then
    error(string.format("%s: sequence length %d exceeds max_position_embeddings %d", name, T, self.max_length), 3)
  end
  local tt = inputs.token_type_ids and blocks.check_ids(name, inputs.token_type_ids, "token_type_ids", ids)
  local mask = inputs.attention_mask and blocks.check_ids(name, inputs.attention_mask, "attention_mask", ids)
  local m = self.m
  local fwd = m.forward_encoder(m.embeddings(ids, tt, mask), mask)
  -- the right-to-left stack reads the reversed sequence from its own
  -- position 0, through the same embedding tables; padding stays at the end,
  -- so the mask is unchanged
  local rev = F.reversal(B, T, mask and mask:device() ~= "cpu" and mask:to("cpu") or mask)
  local rids = permute_rows(ids, rev)
  local rtt = tt and permute_rows(tt, rev)
  local bwd_reversed = m.backward_encoder(m.embeddings(rids, rtt, mask), mask)
  local bwd = permute_rows(bwd_reversed, rev)
  return {
    last_hidden_state = concat_last(fwd, bwd),
    forward_hidden = fwd, backward_hidden = bwd, backward_reversed = bwd_reversed, reversal = rev,
    sequence_summary = concat_last(blocks.last_token(fwd, mask), bwd:select(2, 1)),
  }, ids, mask
end

function F.backbone(a) return Backbone(a) end
-- }============================================================

-- {============================================================ heads

--- The two LMs through the one shared head: forward{input_ids,
-- attention_mask?, labels?}.  labels [B, T] are the tokens (-100 on
-- padding): the forward stack predicts token t + 1 at t, the backward one
-- token t - 1 at t; loss = the mean of the two directions' mean
-- cross-entropies.  Outputs logits/targets (forward) and
-- backward_logits/backward_targets on the rows that have a target, or
-- without labels logits and backward_logits [B, T, V] at every position
-- (the backward ones in original order).
local LM = class("BiLMLM", heads.Head)

function LM:build(h, a) self.mlm = heads.build_mlm(self, h.mlm, a, self.base.roles.embeddings) end

function LM:forward(inputs)
  local base, ids = self.base:forward(inputs)
  local out = {last_hidden_state = base.last_hidden_state}
  if inputs.labels then
    local labels = blocks.check_ids(self.class_name .. ":forward", inputs.labels, "labels", ids)
    local targets = heads.next_token_targets(labels)
    local rtargets = heads.next_token_targets(permute_rows(labels, base.reversal))
    out.logits, out.target_positions, out.targets, out.forward_loss = heads.decode(self.mlm, base.forward_hidden, targets)
    out.backward_logits, out.backward_target_positions, out.backward_targets, out.backward_loss =
      heads.decode(self.mlm, base.backward_reversed, rtargets)
    out.loss = (out.forward_loss + out.backward_loss) * 0.5
  else
    out.logits = heads.mlm_logits(self.mlm, base.forward_hidden)
    out.backward_logits = heads.mlm_logits(self.mlm, base.backward_hidden)
  end
  return out
end

-- a fine-tuning head over the 2H-wide representation
local function wide(kind)
  local parent = heads.kinds[kind]
  local C = class("BiLM_" .. kind, parent)
  function C:build(h, a)
    local w = {}
    for k, v in pairs(a) do w[k] = v end
    w.hidden_size = 2 * a.hidden_size
    return parent.build(self, h, w)
  end
  return C
end

F.classes = {
  causal_lm = LM,
  sequence_classification = wide("sequence_classification"),
  token_classification = wide("token_classification"),
  question_answering = wide("question_answering"),
  multiple_choice = wide("multiple_choice"),
}

F.heads = {
  mlm = {bias = "cls.predictions.bias", dense = "cls.predictions.transform.dense",
         norm = "cls.predictions.transform.LayerNorm", decoder = "cls.predictions.decoder.weight",
         decoder_bias = "cls.predictions.decoder.bias"},
  classifier = {source = "summary", out = "classifier"},
  multiple_choice = {source = "summary", out = "classifier"},
}

F.architectures = {
  BiLMModel = "base", BiLMLMHeadModel = "causal_lm",
  BiLMForSequenceClassification = "sequence_classification",
  BiLMForTokenClassification = "token_classification",
  BiLMForQuestionAnswering = "question_answering", BiLMForMultipleChoice = "multiple_choice",
}

F.aliases = {["cls.predictions.decoder.bias"] = "cls.predictions.bias"}
-- }============================================================

return F
