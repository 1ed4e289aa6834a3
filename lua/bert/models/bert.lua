--- BERT (Devlin et al., 2018) exactly as Hugging Face lays it out: the
-- module tree mirrors HF's, so parameter names match checkpoints
-- ("bert.encoder.layer.0.attention.self.query.weight").  Math per
-- shared/reference/bert_family_spec.md §1: post-LN layers, exact-erf GELU,
-- LayerNorm eps 1e-12, additive key-padding mask.
local bert = require("bert.core")
local class = require("bert.nn.class")
local nn = require("bert.nn")
local configs = require("bert.models.config")

local Module, Linear, LayerNorm, Embedding, Dropout = nn.Module, nn.Linear, nn.LayerNorm, nn.Embedding, nn.Dropout
local F = bert.F

local M = {}

local function activation(name)
  if name == "gelu" then return function(x) return x:gelu() end end
  if name == "gelu_new" or name == "gelu_fast" then return function(x) return x:gelu("tanh") end end
  if name == "relu" then return function(x) return x:relu() end end
  if name == "tanh" then return function(x) return x:tanh() end end
  error("unsupported activation '" .. tostring(name) .. "'")
end

-- A module that only groups children (HF's attention / output wrappers).
local Container = class("Container", Module)
function Container:__init(children)
  Module.__init(self)
  for _, kv in ipairs(children or {}) do self:add_module(kv[1], kv[2]) end
end

-- {============================================================ embeddings

local BertEmbeddings = class("BertEmbeddings", Module)
M.BertEmbeddings = BertEmbeddings

function BertEmbeddings:__init(c)
  Module.__init(self)
  self.config = c
  local std = c.initializer_range
  self:add_module("word_embeddings", Embedding(c.vocab_size, c.hidden_size, {std = std, padding_idx = c.pad_token_id}))
  self:add_module("position_embeddings", Embedding(c.max_position_embeddings, c.hidden_size, {std = std}))
  self:add_module("token_type_embeddings", Embedding(c.type_vocab_size, c.hidden_size, {std = std}))
  self:add_module("LayerNorm", LayerNorm(c.hidden_size, c.layer_norm_eps))
  self.dropout = Dropout(c.hidden_dropout_prob)
  self:add_module_unnamed(self.dropout)
end

function BertEmbeddings:forward(input_ids, token_type_ids)
  local T = input_ids:size(2)
  local positions = bert.arange(T)   -- 0..T-1 whatever the padding, as HF
  local words = self.m.word_embeddings(input_ids)
  local types = self.m.token_type_embeddings(token_type_ids)
  local x = (words + types) + self.m.position_embeddings(positions)
  return self.dropout(self.m.LayerNorm(x))
end
-- }============================================================

-- {============================================================ attention

local SelfAttention = class("SelfAttention", Module)
M.SelfAttention = SelfAttention

--- Q, K, V projections.  Their weights are registered next to each other
-- (query, key, value, then the biases) so that, once the model's
-- parameters are flattened, one [3H x H] view covers all three and the
-- projection is a single GEMM.
function SelfAttention:__init(c)
  Module.__init(self)
  local H, std = c.hidden_size, c.initializer_range
  self.heads, self.head_dim = c.num_attention_heads, H // c.num_attention_heads
  self.attention_dropout = c.attention_probs_dropout_prob
  for _, n in ipairs({"query", "key", "value"}) do
    self:add_parameter(n .. ".weight", {H, H}, {normal = std})
  end
  for _, n in ipairs({"query", "key", "value"}) do self:add_parameter(n .. ".bias", {H}, "zeros") end
end

function SelfAttention:on_flatten(flat, gflat, offsets)
  local qw, qb = offsets[self.p["query.weight"]], offsets[self.p["query.bias"]]
  local H = self.p["query.weight"]:size(1)
  if qw and qb and offsets[self.p["key.weight"]] == qw + H * H and offsets[self.p["value.weight"]] == qw + 2 * H * H
     and offsets[self.p["key.bias"]] == qb + H and offsets[self.p["value.bias"]] == qb + 2 * H then
    local function fused(off, n, shape)
      local v = flat:narrow(1, off + 1, n):view(shape):requires_grad(true)
      v:set_grad(gflat:narrow(1, off + 1, n):view(shape))
      return v
    end
    self.qkv_weight = fused(qw, 3 * H * H, {3 * H, H})
    self.qkv_bias = fused(qb, 3 * H, {3 * H})
  end
end

--- x [B, T, H], mask [B, T] (1 keep, 0 pad) -> context [B, T, H]
function SelfAttention:forward(x, mask)
  local B, T, H = x:size(1), x:size(2), x:size(3)
  local A, d = self.heads, self.head_dim
  local q, k, v
  if self.qkv_weight then
    local qkv = F.linear(x, self.qkv_weight, self.qkv_bias)   -- [B, T, 3H]
    q, k, v = qkv:narrow(3, 1, H), qkv:narrow(3, H + 1, H), qkv:narrow(3, 2 * H + 1, H)
  else
    q = F.linear(x, self.p["query.weight"], self.p["query.bias"])
    k = F.linear(x, self.p["key.weight"], self.p["key.bias"])
    v = F.linear(x, self.p["value.weight"], self.p["value.bias"])
  end
  local function heads(t) return t:view(B, T, A, d):transpose(2, 3) end   -- [B, A, T, d], a view
  local ctx = F.attention(heads(q), heads(k), heads(v), {
    mask = mask, dropout = self.attention_dropout, training = self.is_training,
  })
  return ctx:transpose(2, 3):reshape(B, T, H)
end

-- dense -> dropout -> LayerNorm(. + residual): HF's BertSelfOutput and BertOutput
local AddNorm = class("AddNorm", Module)

function AddNorm:__init(in_size, c)
  Module.__init(self)
  self:add_module("dense", Linear(in_size, c.hidden_size, {std = c.initializer_range}))
  self:add_module("LayerNorm", LayerNorm(c.hidden_size, c.layer_norm_eps))
  self.dropout = Dropout(c.hidden_dropout_prob)
  self:add_module_unnamed(self.dropout)
end

function AddNorm:forward(h, residual)
  return self.m.LayerNorm(self.dropout(self.m.dense(h)), residual)
end
-- }============================================================

-- {============================================================ encoder

local EncoderLayer = class("EncoderLayer", Module)
M.EncoderLayer = EncoderLayer

function EncoderLayer:__init(c)
  Module.__init(self)
  self:add_module("attention", Container({
    {"self", SelfAttention(c)},
    {"output", AddNorm(c.hidden_size, c)},
  }))
  self:add_module("intermediate", Container({
    {"dense", Linear(c.hidden_size, c.intermediate_size, {std = c.initializer_range})},
  }))
  self:add_module("output", AddNorm(c.intermediate_size, c))
  self.act = activation(c.hidden_act)
  -- GELU variants fuse with the intermediate bias into one pass
  if c.hidden_act == "gelu" then self.fused_gelu = "none"
  elseif c.hidden_act == "gelu_new" or c.hidden_act == "gelu_fast" then self.fused_gelu = "tanh" end
end

--- Post-LN: x1 = LN(x + drop(attn(x))), out = LN(x1 + drop(ffn(x1)))
function EncoderLayer:forward(x, mask)
  local attention = self.m.attention
  local ctx = attention.m.self(x, mask)
  local x1 = attention.m.output(ctx, x)
  local dense = self.m.intermediate.m.dense
  local inner
  if self.fused_gelu then
    inner = F.bias_gelu(F.linear(x1, dense.p.weight), dense.p.bias, self.fused_gelu)
  else
    inner = self.act(dense(x1))
  end
  return self.m.output(inner, x1)
end

local Encoder = class("Encoder", Module)
M.Encoder = Encoder

function Encoder:__init(c)
  Module.__init(self)
  local layers = Container()
  for i = 0, c.num_hidden_layers - 1 do layers:add_module(tostring(i), EncoderLayer(c)) end
  self:add_module("layer", layers)
  self.n = c.num_hidden_layers
end

function Encoder:forward(x, mask)
  for i = 0, self.n - 1 do x = self.m.layer.m[tostring(i)](x, mask) end
  return x
end
-- }============================================================

-- {============================================================ BertModel

local function check_ids(name, t, what, like)
  if type(t) == "table" then t = bert.tensor(t, "int32") end
  if type(t) ~= "userdata" then
    error(string.format("%s: %s must be an int32 tensor [batch x seq], got %s", name, what, type(t)), 4)
  end
  if t:dtype() ~= "int32" then
    error(string.format("%s: %s must be int32, got %s", name, what, t:dtype()), 4)
  end
  if t:dim() == 1 then t = t:view(1, -1) end
  if t:dim() ~= 2 then
    error(string.format("%s: %s must be [batch x seq], got [%s]", name, what, table.concat(t:shape(), " x ")), 4)
  end
  if like and (t:size(1) ~= like:size(1) or t:size(2) ~= like:size(2)) then
    error(string.format("%s: %s [%s] does not match input_ids [%s]", name, what,
      table.concat(t:shape(), " x "), table.concat(like:shape(), " x ")), 4)
  end
  return t
end

local BertModel = class("BertModel", Module)
M.BertModel = BertModel

function BertModel:__init(c, opts)
  Module.__init(self)
  self.config = c
  self:add_module("embeddings", BertEmbeddings(c))
  self:add_module("encoder", Encoder(c))
  if not (opts and opts.add_pooling_layer == false) then
    self:add_module("pooler", Container({{"dense", Linear(c.hidden_size, c.hidden_size, {std = c.initializer_range})}}))
  end
end

--- forward{input_ids, token_type_ids?, attention_mask?} ->
-- {last_hidden_state [B, T, H], pooler_output [B, H] (when there is a pooler)}
function BertModel:forward(inputs)
  local name = getmetatable(self).__name .. ":forward"
  if type(inputs) ~= "table" or inputs.input_ids == nil then
    error(name .. ": expects a table with input_ids", 3)
  end
  local c = self.config
  local ids = check_ids(name, inputs.input_ids, "input_ids")
  local T = ids:size(2)
  if T > c.max_position_embeddings then
    error(string.format("%s: sequence length %d exceeds max_position_embeddings %d", name, T,
      c.max_position_embeddings), 3)
  end
  local tt = inputs.token_type_ids and check_ids(name, inputs.token_type_ids, "token_type_ids", ids)
             or bert.zeros(ids:shape(), "int32")
  local mask = inputs.attention_mask and check_ids(name, inputs.attention_mask, "attention_mask", ids)
  local x = self.m.embeddings(ids, tt)
  x = self.m.encoder(x, mask)
  local out = {last_hidden_state = x}
  if self.m.pooler then
    out.pooler_output = self.m.pooler.m.dense(x:select(2, 1)):tanh()
  end
  return out, ids
end
-- }============================================================

-- {============================================================ heads

-- cls.predictions: transform (dense, act, LayerNorm), then the decoder tied
-- to the word embeddings plus its own bias.
local LMHead = class("LMHead", Module)

function LMHead:__init(c, word_embeddings)
  Module.__init(self)
  self:add_module("transform", Container({
    {"dense", Linear(c.hidden_size, c.hidden_size, {std = c.initializer_range})},
    {"LayerNorm", LayerNorm(c.hidden_size, c.layer_norm_eps)},
  }))
  self:add_parameter("bias", {c.vocab_size}, "zeros")
  self.decoder_weight = word_embeddings   -- tied, not a parameter of its own
  self.act = activation(c.hidden_act)
end

function LMHead:forward(h)
  local t = self.m.transform
  local x = t.m.LayerNorm(self.act(t.m.dense(h)))
  return F.linear(x, self.decoder_weight.p.weight, self.p.bias)
end

--- Runs the MLM head on the masked positions only (labels ~= -100), as
-- Google's code does; returns logits [M, V], the flat positions and their labels.
local function masked_lm(head, hidden, labels)
  local B, T, H = hidden:size(1), hidden:size(2), hidden:size(3)
  local flat_labels = labels:reshape(B * T)
  local positions = flat_labels:ne(-100):nonzero()
  local rows = hidden:reshape(B * T, H):index_select(1, positions)
  return head(rows), positions, flat_labels:index_select(1, positions)
end

local BertForPreTraining = class("BertForPreTraining", Module)
M.BertForPreTraining = BertForPreTraining

function BertForPreTraining:__init(c)
  Module.__init(self)
  self.config = c
  self:add_module("bert", BertModel(c))
  self:add_module("cls", Container({
    {"predictions", LMHead(c, self.m.bert.m.embeddings.m.word_embeddings)},
    {"seq_relationship", Linear(c.hidden_size, 2, {std = c.initializer_range})},
  }))
end

--- forward{input_ids, token_type_ids, attention_mask, labels?, next_sentence_label?}
-- Without labels: prediction_logits [B, T, V] for every position.  With
-- labels ([B, T], -100 where not masked): the MLM head runs on the masked
-- positions only, prediction_logits is [M, V] with masked_positions [M]
-- (flat indices into B*T), and loss = MLM cross-entropy + NSP cross-entropy.
function BertForPreTraining:forward(inputs)
  local base, ids = self.m.bert:forward(inputs)
  local h = base.last_hidden_state
  local out = {last_hidden_state = h, pooler_output = base.pooler_output}
  out.seq_relationship_logits = self.m.cls.m.seq_relationship(base.pooler_output)
  if inputs.labels then
    local labels = check_ids("BertForPreTraining:forward", inputs.labels, "labels", ids)
    local logits, positions, targets = masked_lm(self.m.cls.m.predictions, h, labels)
    out.prediction_logits, out.masked_positions, out.masked_labels = logits, positions, targets
    out.mlm_loss = F.cross_entropy(logits, targets)
    out.loss = out.mlm_loss
    if inputs.next_sentence_label then
      local nsl = inputs.next_sentence_label
      if type(nsl) == "table" then nsl = bert.tensor(nsl, "int32") end
      out.nsp_loss = F.cross_entropy(out.seq_relationship_logits, nsl)
      out.loss = out.mlm_loss + out.nsp_loss
    end
  else
    out.prediction_logits = self.m.cls.m.predictions(h)
  end
  return out
end

local BertForMaskedLM = class("BertForMaskedLM", Module)
M.BertForMaskedLM = BertForMaskedLM

function BertForMaskedLM:__init(c)
  Module.__init(self)
  self.config = c
  self:add_module("bert", BertModel(c, {add_pooling_layer = false}))
  self:add_module("cls", Container({{"predictions", LMHead(c, self.m.bert.m.embeddings.m.word_embeddings)}}))
end

function BertForMaskedLM:forward(inputs)
  local base, ids = self.m.bert:forward(inputs)
  local h = base.last_hidden_state
  local out = {last_hidden_state = h}
  if inputs.labels then
    local labels = check_ids("BertForMaskedLM:forward", inputs.labels, "labels", ids)
    local logits, positions, targets = masked_lm(self.m.cls.m.predictions, h, labels)
    out.logits, out.masked_positions, out.masked_labels = logits, positions, targets
    out.loss = F.cross_entropy(logits, targets)
  else
    out.logits = self.m.cls.m.predictions(h)
  end
  return out
end

local BertForSequenceClassification = class("BertForSequenceClassification", Module)
M.BertForSequenceClassification = BertForSequenceClassification

function BertForSequenceClassification:__init(c)
  Module.__init(self)
  self.config = c
  self.num_labels = c.num_labels
  self:add_module("bert", BertModel(c))
  self.dropout = Dropout(c.classifier_dropout or c.hidden_dropout_prob)
  self:add_module_unnamed(self.dropout)
  self:add_module("classifier", Linear(c.hidden_size, c.num_labels, {std = c.initializer_range}))
end

--- labels: int32 [B] class ids (or float32 [B] targets when num_labels == 1: regression, MSE)
function BertForSequenceClassification:forward(inputs)
  local base = self.m.bert:forward(inputs)
  local logits = self.m.classifier(self.dropout(base.pooler_output))
  local out = {logits = logits, last_hidden_state = base.last_hidden_state, pooler_output = base.pooler_output}
  if inputs.labels then
    local labels = inputs.labels
    if type(labels) == "table" then labels = bert.tensor(labels, self.num_labels == 1 and "float32" or "int32") end
    if self.num_labels == 1 then
      local d = logits:view(-1) - labels:float()
      out.loss = (d * d):mean()
    else
      out.loss = F.cross_entropy(logits, labels)
    end
  end
  return out
end

local BertForTokenClassification = class("BertForTokenClassification", Module)
M.BertForTokenClassification = BertForTokenClassification

function BertForTokenClassification:__init(c)
  Module.__init(self)
  self.config = c
  self.num_labels = c.num_labels
  self:add_module("bert", BertModel(c, {add_pooling_layer = false}))
  self.dropout = Dropout(c.classifier_dropout or c.hidden_dropout_prob)
  self:add_module_unnamed(self.dropout)
  self:add_module("classifier", Linear(c.hidden_size, c.num_labels, {std = c.initializer_range}))
end

--- labels: int32 [B, T], -100 on positions to ignore (padding, non-first sub-tokens)
function BertForTokenClassification:forward(inputs)
  local base, ids = self.m.bert:forward(inputs)
  local logits = self.m.classifier(self.dropout(base.last_hidden_state))   -- [B, T, C]
  local out = {logits = logits, last_hidden_state = base.last_hidden_state}
  if inputs.labels then
    local labels = check_ids("BertForTokenClassification:forward", inputs.labels, "labels", ids)
    local B, T = ids:size(1), ids:size(2)
    out.loss = F.cross_entropy(logits:reshape(B * T, self.num_labels), labels:reshape(B * T))
  end
  return out
end

local BertForQuestionAnswering = class("BertForQuestionAnswering", Module)
M.BertForQuestionAnswering = BertForQuestionAnswering

function BertForQuestionAnswering:__init(c)
  Module.__init(self)
  self.config = c
  self:add_module("bert", BertModel(c, {add_pooling_layer = false}))
  self:add_module("qa_outputs", Linear(c.hidden_size, 2, {std = c.initializer_range}))
end

--- start_positions / end_positions: int32 [B] token indices (0-based);
-- positions outside the sequence are ignored, as in HF (clamped to T).
function BertForQuestionAnswering:forward(inputs)
  local base, ids = self.m.bert:forward(inputs)
  local logits = self.m.qa_outputs(base.last_hidden_state)    -- [B, T, 2]
  local out = {
    start_logits = logits:select(3, 1):contiguous(),
    end_logits = logits:select(3, 2):contiguous(),
    last_hidden_state = base.last_hidden_state,
  }
  if inputs.start_positions and inputs.end_positions then
    local T = ids:size(2)
    local function clamp(p)
      if type(p) == "table" then p = bert.tensor(p, "int32") end
      -- out-of-range positions become T, then are ignored
      local bad = p:lt(0) + p:gt(T)
      return p:masked_fill(bad:gt(0), -100):masked_fill(p:eq(T), -100)
    end
    local s = F.cross_entropy(out.start_logits, clamp(inputs.start_positions))
    local e = F.cross_entropy(out.end_logits, clamp(inputs.end_positions))
    out.loss = (s + e) / 2
  end
  return out
end
-- }============================================================

M.architectures = {
  BertModel = BertModel, BertForPreTraining = BertForPreTraining, BertForMaskedLM = BertForMaskedLM,
  BertForSequenceClassification = BertForSequenceClassification,
  BertForTokenClassification = BertForTokenClassification,
  BertForQuestionAnswering = BertForQuestionAnswering,
}

-- The tied decoder: HF checkpoints may omit it or spell it out.
M.tied = {
  ["cls.predictions.decoder.weight"] = "bert.embeddings.word_embeddings.weight",
  ["cls.predictions.decoder.bias"] = "cls.predictions.bias",
}

--- Builds a model: bert.models.bert.new("BertForPreTraining", "tiny" | table | "config.json"[, overrides])
-- with its parameters in one flat buffer and gradients in another.
function M.new(arch, spec, overrides)
  local cls = M.architectures[arch]
  if cls == nil then
    local names = {}
    for k in pairs(M.architectures) do names[#names + 1] = k end
    table.sort(names)
    error(string.format("unknown architecture '%s' (known: %s)", tostring(arch), table.concat(names, ", ")), 2)
  end
  local c = configs.make(spec, overrides)
  local model = Module.deferred(function() return cls(c) end)
  model.architecture = arch
  return model:flatten_parameters()
end

return M
