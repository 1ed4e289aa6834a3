--- Task heads written once over any family's backbone: masked LM,
-- pretraining (MLM + a sentence-pair head: BERT's NSP, ALBERT's SOP),
-- sequence classification, token classification, question answering,
-- multiple choice, and ELECTRA's replaced-token detection.  A family's
-- differences are data (family.heads): where each piece lives in the
-- checkpoint ("cls.predictions.transform.dense", "lm_head.dense"...), the
-- activation, and whether the classifier reads the pooler or the first
-- token through a dense layer of its own.
local bert = require("bert.core")
local class = require("bert.nn.class")
local nn = require("bert.nn")
local blocks = require("bert.models.blocks")
local varlen = require("bert.models.packing")
local fs = require("bert.fs")

local Module, Linear, LayerNorm, Dropout = nn.Module, nn.Linear, nn.LayerNorm, nn.Dropout
local F = bert.F
local check_ids = blocks.check_ids

local M = {}

-- The module that holds the parameter at a dotted path ("cls.predictions.bias"),
-- made when absent, and the parameter's key in it.
local function owner_of(root, path)
  local owner_path, key = path:match("^(.*)%.([^%.]+)$")
  if not owner_path then return root, path end
  return blocks.find(root, owner_path) or blocks.place(root, owner_path, blocks.Container()), key
end

-- Registers a fresh parameter at a dotted path.
local function place_param(root, path, shape, init)
  local owner, key = owner_of(root, path)
  owner:add_parameter(key, shape, init)
  return owner, key
end

-- Registers an existing parameter at a second dotted path: one tensor, two
-- names (state_dict lists both; named_parameters, and so the optimizer, the first).
local function share_param(root, path, param)
  local owner, key = owner_of(root, path)
  owner.p_order[#owner.p_order + 1] = key
  owner.p[key] = param
end

-- {============================================================ the MLM head

--- The masked-LM head: dense (hidden -> embedding width), activation,
-- LayerNorm, then the decoder (tied to the word embeddings unless
-- tie_word_embeddings is false) plus its own bias.  spec: dense, norm,
-- bias, decoder (checkpoint paths; without decoder the head always reads
-- the word embeddings, as DeBERTa's lm_predictions head), decoder_bias (the
-- untied decoder's name for the bias: Hugging Face's decoder.bias, the head's
-- bias under a second name), act (default hidden_act).
local function build_mlm(model, spec, a, embeddings)
  local W = embeddings.m.word_embeddings.dim
  local head = {act = spec.act or a.hidden_act, bias_path = spec.bias}
  head.bias_owner, head.bias_key = place_param(model, spec.bias, {a.vocab_size}, "zeros")
  head.dense = blocks.place(model, spec.dense, Linear(a.hidden_size, W, {std = a.initializer_range}))
  head.norm = blocks.place(model, spec.norm, LayerNorm(W, a.layer_norm_eps))
  if a.tie_word_embeddings == false and spec.decoder then
    head.decoder_owner, head.decoder_key = place_param(model, spec.decoder, {a.vocab_size, W}, {normal = a.initializer_range})
    if spec.decoder_bias then
      -- recent transformers unties decoder.bias from bias along with the decoder:
      -- a file without it gets a random one, so the pair is kept (and written) as one
      share_param(model, spec.decoder_bias, head.bias_owner.p[head.bias_key])
      head.decoder_bias_path = spec.decoder_bias
    end
  else
    head.decoder_owner, head.decoder_key = embeddings.m.word_embeddings, "weight"
  end
  blocks.activation(head.act)
  return head
end

M.build_mlm = build_mlm

local function mlm_logits(head, h)
  local x = head.norm(blocks.linear_act(head.dense, head.act, h))
  return F.linear(x, head.decoder_owner.p[head.decoder_key], head.bias_owner.p[head.bias_key])
end
M.mlm_logits = mlm_logits

--- Runs the MLM head on the masked positions only (labels ~= -100), as
-- Google's code does; returns logits [M, V], the flat positions (into
-- B*T) and their labels.  hidden: [B, T, H], or packed rows [N, H] with
-- their packing (labels at padding must be -100).
local function masked_lm(head, hidden, labels, packing)
  local B, T = labels:size(1), labels:size(2)
  local flat_labels = labels:reshape(B * T)
  local positions = flat_labels:ne(-100):nonzero()
  local rows
  if packing then
    rows = hidden:index_select(1, packing:row_index():index_select(1, positions))
  else
    rows = hidden:reshape(B * T, hidden:size(3)):index_select(1, positions)
  end
  return mlm_logits(head, rows), positions, flat_labels:index_select(1, positions)
end
M.masked_lm = masked_lm

-- Labels at padding are ignored (-100), in the padded path as in the packed one.
local function ignore_padding(labels, mask)
  if not mask then return labels end
  local device = labels:device()
  if device == "cpu" then return labels:masked_fill(mask:to("cpu"):eq(0), -100) end
  -- int32 masked_fill runs on the host: a [B, T] round trip
  return labels:to("cpu"):masked_fill(mask:to("cpu"):eq(0), -100):to(device)
end

--- The MLM head over hidden states h (as masked_lm's): without labels its
-- logits at every position; with labels [B, T] (-100 and padding ignored:
-- mask, when given) the masked rows' logits [M, V], their flat positions
-- [M], their labels [M] and the mean cross-entropy.
local function decode(head, h, labels, mask, packing)
  if not labels then return mlm_logits(head, h) end
  local logits, positions, targets = masked_lm(head, h, ignore_padding(labels, mask), packing)
  return logits, positions, targets, F.cross_entropy(logits, targets)
end
M.decode = decode

-- a label list given as a Lua table -> a tensor (int32 class ids unless dtype says)
local function as_tensor(labels, dtype)
  if type(labels) == "table" then return bert.tensor(labels, dtype or "int32") end
  return labels
end

--- The value of start / end logits at padding (QA): far below any real
-- logit, so a softmax gives padding no weight, yet finite (sums stay finite).
M.PAD_LOGIT = -1e9
-- }============================================================

-- {============================================================ the heads

local Head = class("Head", Module)
M.Head = Head

--- Head(family, arch, c, a): the family's backbone under its prefix
-- ("bert", "roberta", ...); subclasses add their pieces in :build.
function Head:__init(family, arch, c, a)
  Module.__init(self)
  self.config, self.arch, self.family = c, a, family
  self.class_name = arch
  local base = family.backbone(a, c, {pooler = self:wants_pooler(family)})
  base.class_name = family.class_prefix .. "Model"
  self:add_module(family.prefix, base)
  self.base = base
  self:build(family.heads, a)
end

function Head:wants_pooler() return false end

--- model:set_varlen(flag) -> model, whether it will pack: with flag the
-- backbone runs a padded batch's real tokens only (blocks.Backbone:set_varlen);
-- per-token outputs then come as packed rows (see each forward) with
-- out.packing.  DeBERTa stays padded (the second value is false).
function Head:set_varlen(flag)
  local _, packs = self.base:set_varlen(flag)
  return self, packs
end

function Head:dropout_module(p)
  local d = Dropout(p)
  self:add_module_unnamed(d)
  return d
end

-- The file a state dict comes from, for messages: the Trainer's checkpoint
-- (opts.checkpoint_dir) or the directory of the config.json the model was built from.
local function weights_file(self, opts)
  local dir = opts and opts.checkpoint_dir
  if not dir and self.arch.config_file then dir = self.arch.config_file:match("^(.*)/[^/]*$") or "." end
  if not dir then return "load_state_dict" end
  local single = dir .. "/model.safetensors"
  return (fs.exists(single) or not fs.exists(single .. ".index.json")) and single or single .. ".index.json"
end

--- As any module's, with an untied decoder's two names for its bias made one:
-- a file with either fills both; with both, decoder.bias is read (what
-- transformers reads once tie_word_embeddings false unties the pair) and
-- the file is named when the head's bias says otherwise.
function Head:load_state_dict(sd, opts)
  local mlm = self.mlm
  if not (mlm and mlm.decoder_bias_path) then return Module.load_state_dict(self, sd, opts) end
  local bias, decoder_bias = sd[mlm.bias_path], sd[mlm.decoder_bias_path]
  if bias == nil and decoder_bias == nil then return Module.load_state_dict(self, sd, opts) end
  if bias and decoder_bias and table.concat(bias:shape(), "x") == table.concat(decoder_bias:shape(), "x") then
    local diff = bert.no_grad(function() return (bias:float() - decoder_bias:float()):abs():max():item() end)
    if diff > 0 then
      io.stderr:write(string.format("warning: %s: %s differs from %s by up to %.6g; reading %s, as Hugging Face " ..
        "does when tie_word_embeddings is false\n", weights_file(self, opts), mlm.decoder_bias_path, mlm.bias_path,
        diff, mlm.decoder_bias_path))
    end
  end
  local both = {}
  for k, v in pairs(sd) do both[k] = v end
  both[mlm.bias_path] = decoder_bias or bias
  both[mlm.decoder_bias_path] = decoder_bias or bias
  return Module.load_state_dict(self, both, opts)
end

--- The second names a saved file carries for a weight (checkpoint.save_pretrained
-- writes them, counted once): an untied decoder's bias under both its names
-- (Hugging Face's files carry the pair; its newer loaders need both).
function Head:saved_copies()
  local mlm = self.mlm
  if not (mlm and mlm.decoder_bias_path) then return {} end
  return {[mlm.decoder_bias_path] = mlm.bias_owner.p[mlm.bias_key]}
end

-- the first token's or the pooler's vector, through the family's own dense
-- layer when it has one (RoBERTa's classifier.dense, DistilBERT's pre_classifier);
-- a backbone that reads another token (a causal model: its last real one)
-- gives it as sequence_summary
local function summary(self, spec, base_out)
  local x = base_out.pooler_output
  if spec.source ~= "pooled" then
    local h, packing = base_out.last_hidden_state, base_out.packing
    x = base_out.sequence_summary or (packing and packing:first_rows(h)) or h:select(2, 1)
  end
  if self.pre then
    if spec.pre.dropout_before then x = self.dropout(x) end
    local act = spec.pre.act
    if type(act) == "function" then act = act(self.arch) end
    x = blocks.linear_act(self.pre, act, x)
  end
  return self.out(self.dropout(x))
end

local function build_summary(self, spec, a, n_out)
  self.summary_spec = spec
  if spec.pre then self.pre = blocks.place(self, spec.pre.path, Linear(a.hidden_size, a.hidden_size, {std = a.initializer_range})) end
  self.out = blocks.place(self, spec.out, Linear(a.hidden_size, n_out, {std = a.initializer_range}))
  self.dropout = self:dropout_module(a.classifier_dropout)
end

local function wants_pooled(family, key)
  local spec = family.heads[key]
  return spec ~= nil and spec.source == "pooled"
end

--- masked LM: {logits} (every position), or with labels the masked rows only
local MaskedLM = class("MaskedLM", Head)
M.masked_lm_class = MaskedLM

function MaskedLM:build(h, a) self.mlm = build_mlm(self, h.mlm, a, self.base.roles.embeddings) end

--- Packed (set_varlen): logits without labels are [N, V], one row per real token.
function MaskedLM:forward(inputs)
  local base, ids, mask = self.base:forward(inputs)
  local h = self:decoder_input(base, inputs)
  local out = {last_hidden_state = base.last_hidden_state, packing = base.packing}
  local labels = inputs.labels and check_ids(self.class_name .. ":forward", inputs.labels, "labels", ids)
  out.logits, out.masked_positions, out.masked_labels, out.loss = decode(self.mlm, h, labels, mask, base.packing)
  return out
end

-- the hidden states the MLM head decodes (DeBERTa's enhanced decoder overrides)
function MaskedLM:decoder_input(base) return base.last_hidden_state end

--- pretraining: MLM + a sentence-pair head on the pooled output (BERT's
-- NSP as seq_relationship_logits, ALBERT's SOP as sop_logits)
local PreTraining = class("PreTraining", Head)
M.pretraining_class = PreTraining

function PreTraining:wants_pooler() return true end

function PreTraining:build(h, a)
  self.mlm = build_mlm(self, h.mlm, a, self.base.roles.embeddings)
  self.pair = blocks.place(self, h.pair.path, Linear(a.hidden_size, 2, {std = a.initializer_range}))
  self.pair_output = h.pair.output
  if h.pair.dropout then self.dropout = self:dropout_module(a.classifier_dropout) end
end

--- forward{input_ids, token_type_ids, attention_mask, labels?, next_sentence_label? | sentence_order_label?}
-- Without labels: prediction_logits [B, T, V] for every position.  With
-- labels ([B, T], -100 where not masked): the MLM head runs on the masked
-- positions only, prediction_logits is [M, V] with masked_positions [M]
-- (flat indices into B*T), and loss = MLM cross-entropy + pair cross-entropy
-- (times self.pair_loss_weight when set).
-- Packed (set_varlen): prediction_logits without labels are [N, V].
function PreTraining:forward(inputs)
  local base, ids, mask = self.base:forward(inputs)
  local h = base.last_hidden_state
  local out = {last_hidden_state = h, pooler_output = base.pooler_output, packing = base.packing}
  local pooled = base.pooler_output
  if self.dropout then pooled = self.dropout(pooled) end
  out[self.pair_output] = self.pair(pooled)
  -- the pair head's logits under one name for every family (ALBERT's SOP too)
  out.seq_relationship_logits = out[self.pair_output]
  local labels = inputs.labels and check_ids(self.class_name .. ":forward", inputs.labels, "labels", ids)
  out.prediction_logits, out.masked_positions, out.masked_labels, out.mlm_loss =
    decode(self.mlm, h, labels, mask, base.packing)
  out.loss = out.mlm_loss
  local pair_label = inputs.next_sentence_label or inputs.sentence_order_label
  if labels and pair_label then
    out.nsp_loss = F.cross_entropy(out[self.pair_output], as_tensor(pair_label))
    -- pair_loss_weight (default 1, as BERT): 0 trains MLM alone on the
    -- pair-format data, the control that separates NSP's loss from its data
    local w = self.pair_loss_weight or 1
    out.loss = out.mlm_loss + (w == 1 and out.nsp_loss or out.nsp_loss * w)
  end
  return out
end

local SequenceClassification = class("SequenceClassification", Head)
M.sequence_classification_class = SequenceClassification

function SequenceClassification:wants_pooler(family) return wants_pooled(family, "classifier") end

function SequenceClassification:build(h, a)
  self.num_labels = a.num_labels
  build_summary(self, h.classifier, a, a.num_labels)
end

--- labels: int32 [B] class ids (or float32 [B] targets when num_labels == 1: regression, MSE)
function SequenceClassification:forward(inputs)
  local base = self.base:forward(inputs)
  local logits = summary(self, self.summary_spec, base)
  local out = {logits = logits, last_hidden_state = base.last_hidden_state, pooler_output = base.pooler_output,
    packing = base.packing}
  if inputs.labels then
    local labels = as_tensor(inputs.labels, self.num_labels == 1 and "float32" or "int32")
    if self.num_labels == 1 then
      local d = logits:view(-1) - labels:float()
      out.loss = (d * d):mean()
    else
      out.loss = F.cross_entropy(logits, labels)
    end
  end
  return out
end

local TokenClassification = class("TokenClassification", Head)
M.token_classification_class = TokenClassification

function TokenClassification:build(h, a)
  self.num_labels = a.num_labels
  -- DistilBERT drops with its general dropout here, the others with the classifier's
  self.dropout = self:dropout_module(h.token_dropout and a[h.token_dropout] or a.classifier_dropout)
  self.classifier = blocks.place(self, "classifier", Linear(a.hidden_size, a.num_labels, {std = a.initializer_range}))
end

--- labels: int32 [B, T], -100 on positions to ignore (non-first sub-tokens;
-- padding is ignored whatever its label).  logits [B, T, C], or packed
-- (set_varlen) [N, C] for the real tokens with out.packing
-- (out.packing:unpack(logits) gives [B, T, C]).
function TokenClassification:forward(inputs)
  local base, ids, mask = self.base:forward(inputs)
  local packing = base.packing
  local logits = self.classifier(varlen.dropout(self.dropout, base.last_hidden_state, packing))   -- [B, T, C] or [N, C]
  local out = {logits = logits, last_hidden_state = base.last_hidden_state, packing = packing}
  if inputs.labels then
    local labels = ignore_padding(check_ids(self.class_name .. ":forward", inputs.labels, "labels", ids), mask)
    local B, T = ids:size(1), ids:size(2)
    if packing then
      out.loss = F.cross_entropy(logits, packing:pack(labels))
    else
      out.loss = F.cross_entropy(logits:reshape(B * T, self.num_labels), labels:reshape(B * T))
    end
  end
  return out
end

local QuestionAnswering = class("QuestionAnswering", Head)
M.question_answering_class = QuestionAnswering

function QuestionAnswering:build(h, a)
  if h.qa_dropout then self.dropout = self:dropout_module(a.qa_dropout) end
  self.qa = blocks.place(self, "qa_outputs", Linear(a.hidden_size, 2, {std = a.initializer_range}))
end

--- start_positions / end_positions: int32 [B] token indices (0-based);
-- positions outside the sequence are ignored, as in HF (clamped to T).
-- start_logits / end_logits [B, T], M.PAD_LOGIT at padding (packed or not,
-- so padding never takes part in the loss nor wins an answer).
function QuestionAnswering:forward(inputs)
  local base, ids, mask = self.base:forward(inputs)
  local h, packing = base.last_hidden_state, base.packing
  if self.dropout then h = varlen.dropout(self.dropout, h, packing) end
  local logits = self.qa(h)    -- [B, T, 2], or packed [N, 2]
  local starts, ends
  if packing then
    starts = packing:unpack(logits:select(2, 1):contiguous(), M.PAD_LOGIT)
    ends = packing:unpack(logits:select(2, 2):contiguous(), M.PAD_LOGIT)
  else
    starts, ends = logits:select(3, 1):contiguous(), logits:select(3, 2):contiguous()
    if mask then
      local pad = mask:eq(0)
      if starts:device() ~= "cpu" then pad = pad:to(starts:device()) end
      starts, ends = starts:masked_fill(pad, M.PAD_LOGIT), ends:masked_fill(pad, M.PAD_LOGIT)
    end
  end
  local out = {start_logits = starts, end_logits = ends, last_hidden_state = base.last_hidden_state, packing = packing}
  if inputs.start_positions and inputs.end_positions then
    local T = ids:size(2)
    local function clamp(p)
      p = as_tensor(p)
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

--- multiple choice: inputs [B, C, T]; each choice scored by one output
-- unit over the family's sequence summary; logits [B, C]
local MultipleChoice = class("MultipleChoice", Head)
M.multiple_choice_class = MultipleChoice

function MultipleChoice:wants_pooler(family) return wants_pooled(family, "multiple_choice") end

function MultipleChoice:build(h, a) build_summary(self, h.multiple_choice, a, 1) end

function MultipleChoice:forward(inputs)
  local name = self.class_name .. ":forward"
  if type(inputs) ~= "table" or inputs.input_ids == nil then error(name .. ": expects a table with input_ids", 2) end
  local flat = {}
  local B, C
  for _, k in ipairs({"input_ids", "token_type_ids", "attention_mask"}) do
    local t = inputs[k]
    if type(t) == "table" then t = bert.tensor(t, "int32") end
    if t ~= nil then
      if t:dim() ~= 3 then
        error(string.format("%s: %s must be [batch x choices x seq], got [%s]", name, k, table.concat(t:shape(), " x ")), 2)
      end
      B, C = t:size(1), t:size(2)
      flat[k] = t:reshape(B * C, t:size(3))
    end
  end
  flat.varlen = inputs.varlen
  local base = self.base:forward(flat)
  local logits = summary(self, self.summary_spec, base):view(B, C)
  local out = {logits = logits}
  if inputs.labels then
    out.loss = F.cross_entropy(logits, as_tensor(inputs.labels))
  end
  return out
end

--- ELECTRA's discriminator: a per-token "replaced?" logit; labels [B, T]
-- 0/1, the loss a sigmoid cross-entropy over real tokens.
local ReplacedTokenDetection = class("ReplacedTokenDetection", Head)
M.replaced_token_detection_class = ReplacedTokenDetection

function ReplacedTokenDetection:build(h, a)
  local spec = h.discriminator
  self.act = a.hidden_act
  self.dense = blocks.place(self, spec.dense, Linear(a.hidden_size, a.hidden_size, {std = a.initializer_range}))
  self.prediction = blocks.place(self, spec.prediction, Linear(a.hidden_size, 1, {std = a.initializer_range}))
end

--- Packed (set_varlen): logits stay [B, T] (0 at padding), computed on the real tokens only.
function ReplacedTokenDetection:forward(inputs)
  local base, ids, mask = self.base:forward(inputs)
  local h, packing = base.last_hidden_state, base.packing
  local B, T = ids:size(1), ids:size(2)
  local scores = self.prediction(blocks.linear_act(self.dense, self.act, h))   -- [B, T, 1] or [N, 1]
  local logits = packing and packing:unpack(scores:view(-1)) or scores:view(B, T)
  local out = {logits = logits, last_hidden_state = h, packing = packing}
  if inputs.labels then
    local labels = ignore_padding(check_ids(self.class_name .. ":forward", inputs.labels, "labels", ids), mask)
    local rows, targets = scores, packing and packing:pack(labels)
    if not packing then rows, targets = scores:reshape(B * T, 1), labels:reshape(B * T) end
    -- sigmoid cross-entropy as a two-way softmax over (0, logit); the pair is a
    -- broadcast product rather than a cat, so that it runs on every device
    local columns = bert.tensor({{0, 1}})
    if rows:device() ~= "cpu" then columns = columns:to(rows:device()) end
    out.loss = F.cross_entropy(rows * columns, targets)
  end
  return out
end

--- The next-token targets of a left-to-right LM: labels [B, T] (the tokens
-- themselves, -100 on padding, as HF's *LMHeadModel takes them) shifted one
-- to the left, so that position t is scored on token t + 1; the last
-- position has no target (-100).
function M.next_token_targets(labels)
  local B, T = labels:size(1), labels:size(2)
  local last = bert.full({B, 1}, -100, "int32")
  if T == 1 then return last end
  return bert.cat({labels:narrow(2, 2, T - 1), last}, 2):contiguous()
end

--- A left-to-right LM (BertLMHeadModel): the backbone must be causal
-- (config is_decoder = true); the MLM head's layers (cls.predictions.*,
-- the decoder tied to the word embeddings) predict the next token.
local CausalLM = class("CausalLM", Head)
M.causal_lm_class = CausalLM

function CausalLM:build(h, a)
  if not a.is_decoder then
    error(self.class_name .. ": a left-to-right LM needs a causal encoder: set is_decoder = true in its config", 0)
  end
  self.mlm = build_mlm(self, h.mlm, a, self.base.roles.embeddings)
end

--- forward{input_ids, attention_mask?, labels?}: without labels logits
-- [B, T, V] at every position; with labels ([B, T] tokens, -100 ignored) the
-- head runs on the positions that have a next-token target only: logits
-- [M, V], target_positions [M] (flat into B*T), targets [M], loss their
-- mean cross-entropy.
-- Packed (set_varlen): logits without labels are [N, V]; positions at
-- padding have no target either way.
function CausalLM:forward(inputs)
  local base, ids, mask = self.base:forward(inputs)
  local h = base.last_hidden_state
  local out = {last_hidden_state = h, packing = base.packing}
  local labels = inputs.labels and check_ids(self.class_name .. ":forward", inputs.labels, "labels", ids)
  if labels then labels = M.next_token_targets(labels) end
  out.logits, out.target_positions, out.targets, out.loss = decode(self.mlm, h, labels, mask, base.packing)
  return out
end

M.kinds = {
  causal_lm = CausalLM,
  masked_lm = MaskedLM, pretraining = PreTraining, sequence_classification = SequenceClassification,
  token_classification = TokenClassification, question_answering = QuestionAnswering,
  multiple_choice = MultipleChoice, replaced_token_detection = ReplacedTokenDetection,
}
-- }============================================================

return M
