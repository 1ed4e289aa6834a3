--- DeBERTa v2/v3 (He et al., 2020/2021; model_type "deberta-v2"):
-- disentangled attention — content-to-content plus content-to-position
-- (c2p) and position-to-content (p2c) terms over log-bucketed relative
-- positions, scaled by 1/sqrt(d * (1 + number of terms)) — no absolute
-- positions in the input when position_biased_input is false, no token
-- types (type_vocab_size 0), pad rows of the embeddings zeroed, LayerNorm
-- eps 1e-7, a relative-embedding table (encoder.rel_embeddings, layer-normed
-- when norm_rel_ebd says so) shared by every layer, and a ContextPooler
-- (dense + GELU) for classification.
--
-- Two masked-LM classes: DebertaV2ForMaskedLM is Hugging Face's (its head
-- decodes the last layer, named as config.legacy says: cls.predictions.*
-- when true or absent, lm_predictions.lm_head.* when false; files under
-- either name load into both), DebertaV2ForPreTraining is the paper's
-- enhanced mask decoder for our own pretraining (absolute positions from a
-- table of its own added to the second-to-last layer's output, the last
-- layer run twice over it with shared weights, then the same MLM head).
-- shared/reference/bert_family_spec.md §2.3.
local bert = require("bert.core")
local class = require("bert.nn.class")
local nn = require("bert.nn")
local blocks = require("bert.models.blocks")
local heads = require("bert.models.heads")

local F = {
  model_type = "deberta-v2", short_name = "deberta", short_aliases = {"deberta-v3"},
  class_prefix = "DebertaV2", prefix = "deberta",
  default_vocab = 128100,   -- the SentencePiece vocabulary of deberta-v3
  base_pooler = false,
  int_keys = {"position_buckets", "max_relative_positions"},
}

-- every size is deberta-v3's configuration at its shape (a config.json may
-- leave these keys out: it then reads Hugging Face's defaults, F.defaults)
local function size(H, L, A, I) return {hidden_size = H, num_hidden_layers = L, num_attention_heads = A,
  intermediate_size = I, relative_attention = true, max_relative_positions = -1, position_buckets = 256,
  position_biased_input = false, pos_att_type = {"p2c", "c2p"}, norm_rel_ebd = "layer_norm", share_att_key = true} end
F.sizes = {
  tiny = size(128, 2, 2, 512), mini = size(256, 4, 4, 1024), small = size(512, 4, 8, 2048),
  medium = size(512, 8, 8, 2048),
  -- the published deberta-v3 shapes
  xsmall = size(384, 12, 6, 1536), base = size(768, 12, 12, 3072), large = size(1024, 24, 16, 4096),
}

-- What a config.json that leaves a key out means: Hugging Face's
-- DebertaV2Config defaults and the modeling code's getattr fallbacks
-- (position_buckets -1, share_att_key false, norm_rel_ebd "none"): absolute
-- positions, no relative attention.  The sizes above set deberta-v3's values.
-- read where present (HF's DebertaV2Config): the classifier's dropout, the embedding width projected
-- to hidden_size, and legacy = false for the newer lm_predictions.lm_head MLM head
F.optional_keys = {"cls_dropout", "embedding_size", "legacy"}

F.defaults = {
  max_position_embeddings = 512, type_vocab_size = 0, hidden_act = "gelu",
  hidden_dropout_prob = 0.1, attention_probs_dropout_prob = 0.1, initializer_range = 0.02,
  layer_norm_eps = 1e-7, pad_token_id = 0, relative_attention = false, max_relative_positions = -1,
  position_buckets = -1, position_biased_input = true, pos_att_type = {},
  norm_rel_ebd = "none", share_att_key = false, pooler_dropout = 0, pooler_hidden_act = "gelu",
  tie_word_embeddings = true,
}

-- "p2c|c2p" or {"p2c", "c2p"} -> set
local function att_types(v, where)
  local set = {}
  if type(v) == "string" then for t in v:gmatch("[^|]+") do set[t:lower()] = true end
  elseif type(v) == "table" then for _, t in ipairs(v) do set[tostring(t):lower()] = true end
  elseif v ~= nil then error(string.format("%s: 'pos_att_type' must be a list or a string, got %s", where, tostring(v)), 0) end
  for t in pairs(set) do
    if t ~= "c2p" and t ~= "p2c" then
      error(string.format("%s: 'pos_att_type' entry '%s' is not supported (c2p, p2c)", where, t), 0)
    end
  end
  return set
end

function F.arch(c, where)
  local a = require("bert.models.config").bert_arch(c)
  a.classifier_dropout = c.cls_dropout or c.hidden_dropout_prob
  local types = att_types(c.pos_att_type, where)
  a.c2p, a.p2c = types.c2p == true, types.p2c == true
  a.relative = c.relative_attention == true
  if not a.relative then a.c2p, a.p2c = false, false end
  a.max_relative = (c.max_relative_positions or -1) < 1 and c.max_position_embeddings or c.max_relative_positions
  a.buckets = c.position_buckets or -1
  a.span = a.buckets > 0 and a.buckets or a.max_relative
  return a
end

function F.validate(c, a, where)
  if (c.conv_kernel_size or 0) > 0 then
    error(where .. ": conv_kernel_size > 0 (deberta-v2-xlarge's convolution layer) is not supported", 0)
  end
  if c.attention_head_size and c.attention_head_size ~= a.hidden_size // a.num_attention_heads then
    error(string.format("%s: attention_head_size %s differs from hidden_size / num_attention_heads; not supported",
      where, tostring(c.attention_head_size)), 0)
  end
  if a.relative and a.span > 65536 then
    error(string.format("%s: the relative span %d (position_buckets or max_relative_positions) exceeds 65536", where, a.span), 0)
  end
end

-- {============================================================ relative positions

local function f32(x) return (string.unpack("f", string.pack("f", x))) end

--- HF's make_log_bucket_position for one distance r = i - j, in float32 as torch does.
function F.log_bucket(r, buckets, max_position)
  local mid = buckets // 2
  local abs = math.abs(r)
  if abs <= mid then return r end
  local ratio = f32(f32(math.log(f32(abs / mid))) / f32(math.log(f32((max_position - 1) / mid))))
  local pos = math.ceil(f32(ratio * (mid - 1))) + mid
  return r < 0 and -pos or pos
end

-- clamp(span + delta(r), 0, 2 span - 1): the table row distance r = i - j reads
local function row_of(r, a)
  local delta = (a.buckets > 0 and a.max_relative > 0) and F.log_bucket(r, a.buckets, a.max_relative) or r
  local k = a.span + delta
  return k < 0 and 0 or (k > 2 * a.span - 1 and 2 * a.span - 1 or k)
end

--- rows[i][j] = clamp(span + delta(i - j), 0, 2 span - 1) as an int32 [T, T]
-- tensor: the row of the relative table that query i and key j read.
function F.relative_rows(T, a)
  local rows = {}
  for i = 0, T - 1 do
    local row = {}
    for j = 0, T - 1 do row[j + 1] = row_of(i - j, a) end
    rows[i + 1] = row
  end
  return bert.tensor(rows, "int32")
end

--- The table rows T positions read, first .. last (0-based): the rows of
-- distances 1 - T .. T - 1 (delta is monotone), 2T - 1 of them where T is
-- under the buckets.
function F.relative_span(T, a)
  return row_of(1 - T, a), row_of(T - 1, a)
end
-- }============================================================

-- {============================================================ attention

local Attention = class("DebertaV2SelfAttention", blocks.SelfAttention)
F.Attention = Attention

function Attention:__init(a)
  blocks.SelfAttention.__init(self, a, {names = {"query_proj", "key_proj", "value_proj"}})
  self.c2p, self.p2c = a.c2p, a.p2c
  self.scale_factor = 1 + (a.c2p and 1 or 0) + (a.p2c and 1 or 0)
  self.share_att_key = a.share_att_key ~= false
  if not self.share_att_key then
    local H = a.hidden_size
    if a.c2p then self:add_module("pos_key_proj", nn.Linear(H, H, {std = a.initializer_range})) end
    if a.p2c then self:add_module("pos_query_proj", nn.Linear(H, H, {std = a.initializer_range})) end
  end
end

-- the relative table R [2S, H] projected by a key or query projection, per head: [A, 2S, d]
function Attention:relative(kind, R)
  local t
  if self.share_att_key then t = self:project(kind == "key" and self.names[2] or self.names[1], R)
  else t = self.m[kind == "key" and "pos_key_proj" or "pos_query_proj"](R) end
  return t:view(R:size(1), self.heads, self.head_dim):transpose(1, 2)
end

--- S = (q·kᵀ + c2p + p2c) / sqrt(d · scale_factor), c2p(i, j) = q_i · Kr[row(i, j)],
-- p2c(i, j) = k_j · Qr[row(i, j)]; key-padding mask; softmax; dropout; · v.
-- On the CPU one fused, flash-style kernel (F.attention_rel: the relative
-- terms gathered inside each score tile, no [B, A, T, T] tensor); on other
-- devices, or with F.attention_rel switched off (Attention.fused = false),
-- the same math composed from tensor ops.
Attention.fused = true

function Attention:attend(q, k, v, mask, extra)
  if not (self.c2p or self.p2c) then
    return bert.F.attention(q, k, v, {mask = mask, dropout = self.attention_dropout, training = self.is_training,
      scale = 1 / math.sqrt(q:size(4) * self.scale_factor)})
  end
  if not Attention.fused then return self:attend_composed(q, k, v, mask, extra) end
  local device = q:device()
  local kr = self.c2p and self:relative("key", extra.rel) or nil
  local qr = self.p2c and self:relative("query", extra.rel) or nil
  if device ~= "cpu" then
    -- no device kernel yet: inference runs the CPU kernel between two copies;
    -- copies between devices are not on the autograd tape, so training cannot
    if bert.grad_enabled() then
      error(string.format("DeBERTa attention on %s runs forward only (no %s kernel yet): wrap inference in " ..
        "bert.no_grad, or train on the cpu", device, device), 0)
    end
    local function cpu(t) return t and t:contiguous():to("cpu") end
    q, k, v, kr, qr, mask = cpu(q), cpu(k), cpu(v), cpu(kr), cpu(qr), cpu(mask)
  end
  local out = bert.F.attention_rel(q, k, v, {
    rows = extra.rows, kr = kr, qr = qr, mask = mask,
    scale = 1 / math.sqrt(q:size(4) * self.scale_factor),
    dropout = self.attention_dropout, training = self.is_training})
  return device ~= "cpu" and out:to(device) or out
end

--- The same from tensor ops ([B, A, T, 2S] and [B, A, T, T] intermediates):
-- the reference the fused kernel is checked against, and the path for devices without it.
function Attention:attend_composed(q, k, v, mask, extra)
  local B, A, T, d = q:size(1), q:size(2), q:size(3), q:size(4)
  q, k = q:contiguous(), k:contiguous()
  local scores = q:matmul(k:transpose(3, 4))
  if self.c2p or self.p2c then
    local rows = extra.rows
    if self.c2p then
      local c2p = q:matmul(self:relative("key", extra.rel):transpose(2, 3))        -- [B, A, T, 2S]
      scores = scores + c2p:gather(4, rows:view(1, 1, T, T):expand(B, A, T, T):contiguous())
    end
    if self.p2c then
      local p2c = k:matmul(self:relative("query", extra.rel):transpose(2, 3))      -- [B, A, T(j), 2S]
      local by_key = p2c:gather(4, rows:t():contiguous():view(1, 1, T, T):expand(B, A, T, T):contiguous())
      scores = scores + by_key:transpose(3, 4)
    end
  end
  scores = scores * (1 / math.sqrt(d * self.scale_factor))
  if mask then
    -- a large finite negative: a fully padded row stays NaN-free
    scores = scores + ((mask:float() - 1) * 3e38):view(B, 1, 1, T)
  end
  local probs = bert.F.dropout(scores:softmax(4), self.attention_dropout, self.is_training)
  return probs:matmul(v)
end
-- }============================================================

-- {============================================================ encoder

local Encoder = class("DebertaV2Encoder", blocks.Encoder)
F.Encoder = Encoder

function Encoder:__init(a)
  -- a layer recomputes as BERT's (model:set_recompute): the relative table in
  -- extra is one of its recomputation's inputs (bert.recompute)
  blocks.Encoder.__init(self, a, function() return blocks.Layer(a, {attention = Attention(a)}) end)
  self.arch = a
  if a.relative then
    self:add_module("rel_embeddings", nn.Embedding(2 * a.span, a.hidden_size, {std = a.initializer_range}))
    local norm = a.norm_rel_ebd
    if type(norm) == "string" and norm:find("layer_norm") then
      self:add_module("LayerNorm", nn.LayerNorm(a.hidden_size, a.layer_norm_eps))
    end
  end
  self.dropout = nn.Dropout(a.hidden_dropout_prob)
  self:add_module_unnamed(self.dropout)
end

--- {rel = the relative table (normed, dropped out) narrowed to the rows
-- length T reads, rows = which of them query i and key j read}: each layer
-- projects only those rows (2T - 1 of the table's 2 span at T under the
-- buckets: half of them at T 128 with 256 buckets).
function Encoder:extra(T)
  if not self.m.rel_embeddings then return {} end
  local R = self.m.rel_embeddings.p.weight
  if self.m.LayerNorm then R = self.m.LayerNorm(R) end
  R = self.dropout(R)   -- over the whole table: the same draws whatever T
  local used = self.rows_used
  if not used or used.T ~= T then
    -- row(i, j) depends on i - j only: the table of the longest length seen
    -- serves every shorter one as its top-left corner
    local rows = self.rows_cache
    if not rows or rows:size(1) < T then
      rows = F.relative_rows(T, self.arch)
      self.rows_cache = rows
    end
    if rows:size(1) > T then rows = rows:narrow(1, 1, T):narrow(2, 1, T):contiguous() end
    local first, last = F.relative_span(T, self.arch)
    used = {T = T, first = first, n = last - first + 1, rows = rows - first}
    self.rows_used = used
  end
  return {rel = R:narrow(1, used.first + 1, used.n), rows = used.rows}
end

--- Runs every layer; keeps what the enhanced mask decoder needs
-- (the last layer's input, the relative terms, the mask) in self.last_run.
function Encoder:forward(x, mask)
  local extra = self:extra(x:size(2))
  local layers = self:layers()
  for i = 1, #layers - 1 do x = layers[i](x, mask, extra) end
  self.last_run = {penultimate = x, mask = mask, extra = extra}
  return layers[#layers](x, mask, extra)
end
-- }============================================================

function F.backbone(a)
  return blocks.Backbone(a, {
    -- no position table unless added to the input: Hugging Face's DebertaV2Embeddings has none then
    {"embeddings", blocks.Embeddings(a, {positions = a.position_biased_input and "absolute" or "none",
      width = a.embedding_size or a.hidden_size, project = true, mask_output = true}), "embeddings"},
    {"encoder", Encoder(a), "encoder"},
  }, {token_types = (a.type_vocab_size or 0) > 0, varlen = false})   -- relative positions need the [B, T] grid
end

-- The MLM head's two namings in Hugging Face's modeling_deberta_v2.py: LegacyDebertaV2OnlyMLMHead
-- (cls.predictions.*, BERT's) when config.legacy is true or absent, DebertaV2OnlyMLMHead
-- (lm_predictions.lm_head.*: no decoder, it reads the word embeddings) when false.
local LEGACY_MLM = {bias = "cls.predictions.bias", dense = "cls.predictions.transform.dense",
  norm = "cls.predictions.transform.LayerNorm", decoder = "cls.predictions.decoder.weight",
  decoder_bias = "cls.predictions.decoder.bias"}
local MLM = {bias = "lm_predictions.lm_head.bias", dense = "lm_predictions.lm_head.dense",
  norm = "lm_predictions.lm_head.LayerNorm"}

-- each weight's legacy name and its other one
local MLM_NAMES = {{LEGACY_MLM.bias, MLM.bias}}
for _, part in ipairs({"dense", "norm"}) do
  for _, w in ipairs({".weight", ".bias"}) do MLM_NAMES[#MLM_NAMES + 1] = {LEGACY_MLM[part] .. w, MLM[part] .. w} end
end

F.heads = {
  mlm = LEGACY_MLM,
  -- DeBERTa-v3's replaced-token-detection discriminator (bert.objectives.electra): ELECTRA's head and
  -- names; Hugging Face has no class for it, so its checkpoints load there as DebertaV2Model or a
  -- fine-tuning class with these two weights unused
  discriminator = {dense = "discriminator_predictions.dense", prediction = "discriminator_predictions.dense_prediction"},
  classifier = {source = "first", out = "classifier",
                pre = {path = "pooler.dense", act = function(a) return a.pooler_hidden_act end, dropout_before = true}},
  multiple_choice = {source = "first", out = "classifier",
                     pre = {path = "pooler.dense", act = function(a) return a.pooler_hidden_act end, dropout_before = true}},
}

-- {============================================================ the masked-LM classes

local MaskedLM = class("DebertaV2MaskedLM", heads.masked_lm_class)

function MaskedLM:build(h, a)
  self.legacy = a.legacy ~= false
  self.mlm = heads.build_mlm(self, self.legacy and h.mlm or MLM, a, self.base.roles.embeddings)
end

--- As any head's, with the MLM head's weights under the other naming read
-- into this one's (a file saved under the other legacy setting).
function MaskedLM:load_state_dict(sd, opts)
  local ours, theirs = 1, 2
  if not self.legacy then ours, theirs = 2, 1 end
  local renamed
  for _, names in ipairs(MLM_NAMES) do
    local from, to = names[theirs], names[ours]
    if sd[from] ~= nil and sd[to] == nil then
      if not renamed then
        renamed = {}
        for k, v in pairs(sd) do renamed[k] = v end
      end
      renamed[to], renamed[from] = sd[from], nil
    end
  end
  return heads.masked_lm_class.load_state_dict(self, renamed or sd, opts)
end

local EnhancedMaskDecoder = class("DebertaV2EnhancedMaskDecoder", MaskedLM)

-- the decoder's absolute positions: a table of its own, since the embeddings
-- have none (Hugging Face ignores the name when it loads the file as
-- DebertaV2ForMaskedLM: its _keys_to_ignore_on_load_unexpected has position_embeddings)
local EMD_POSITIONS = "enhanced_mask_decoder.position_embeddings"

function EnhancedMaskDecoder:build(h, a)
  MaskedLM.build(self, h, a)
  self.positions = blocks.place(self, EMD_POSITIONS,
    nn.Embedding(a.max_position_embeddings, a.hidden_size, {std = a.initializer_range}))
end

--- Z = positions[0..T-1] + H_{L-1}; Z <- last_layer(kv = H_{L-1}, q = Z), twice.
function EnhancedMaskDecoder:decoder_input(base)
  local enc = self.base.roles.encoder
  local run = enc.last_run
  local h = run.penultimate
  local z = h + self.positions(bert.arange(h:size(2)))
  local last = enc:layers()[enc.n]
  for _ = 1, 2 do z = last(h, run.mask, run.extra, z) end
  return z
end
-- }============================================================

F.classes = {masked_lm = MaskedLM, emd_pretraining = EnhancedMaskDecoder}

F.architectures = {
  DebertaV2Model = "base", DebertaV2ForMaskedLM = "masked_lm", DebertaV2ForPreTraining = "emd_pretraining",
  DebertaV2ForReplacedTokenDetection = "replaced_token_detection",
  DebertaV2ForSequenceClassification = "sequence_classification",
  DebertaV2ForTokenClassification = "token_classification",
  DebertaV2ForQuestionAnswering = "question_answering", DebertaV2ForMultipleChoice = "multiple_choice",
}

-- the enhanced mask decoder's table, where it lived before it had its own
-- (the embeddings', as in Microsoft's checkpoints): read into it, and unused
-- by the other classes, as Hugging Face ignores it
F.aliases = {["cls.predictions.decoder.bias"] = "cls.predictions.bias",
  ["deberta.embeddings.position_embeddings.weight"] = EMD_POSITIONS .. ".weight",
  ["embeddings.position_embeddings.weight"] = EMD_POSITIONS .. ".weight"}

return F
