--- ELMo (Peters et al., 2018): a character CNN token encoder, two
-- independent 2-layer LSTM language models with projection (one left to
-- right, one right to left; residual connections between layers), and one
-- softmax over the vocabulary shared by the two directions.  For fine-tuning
-- the biLM is frozen and a task's scalar mix (softmax-normalised weights
-- over the token encoder and each LSTM layer, times a scale gamma) feeds
-- the library's heads.  Not a Hugging Face model type.
--
-- The token encoder reads each vocabulary entry's bytes (AllenNLP's
-- ELMoCharacterMapper ids: byte + 1, begin / end of word 259 / 260, padding
-- 261, [CLS] / <s> and [SEP] / </s> as the begin / end of sentence
-- characters 257 / 258), embeds them, runs filters of several widths (a
-- window gather and one GEMM per width), max-pools over positions, applies
-- relu, highway layers and a linear projection to the LSTM width.  The
-- characters come from the tokenizer's vocabulary (Backbone:set_vocabulary;
-- a checkpoint saved that way says character_vocabulary: true, records the
-- vocabulary's fingerprint and finds its tokenizer beside it, as fine-tuning
-- does, refusing one whose vocabulary differs); without one a token's
-- characters are its id's decimal digits.  token_encoder = "words" uses a
-- word embedding table instead (the softmax then tied to it unless
-- tie_word_embeddings is false).
--
-- Checkpoint names, AllenNLP's under our prefixes (_elmo_lstm._token_embedder.X
-- is elmo.token_embedder.X, _elmo_lstm._elmo_lstm.Y is elmo.lstm.Y):
--   elmo.token_embedder.char_embedding_weights      [262, char_embedding_dim]
--   elmo.token_embedder.char_conv_i.weight / .bias   [filters, char_dim, width] (Conv1d's layout)
--   elmo.token_embedder.highways.layers.k.weight / .bias   [2F, F] (nonlinear half, then gate half)
--   elmo.token_embedder.projection.weight / .bias    [projection_dim, F]
--   elmo.token_embedder.word_embeddings.weight       [vocab, projection_dim] (token_encoder "words")
--   elmo.lstm.{forward,backward}_layer_l.input_linearity.weight   [4*cell, projection_dim]
--   elmo.lstm.{forward,backward}_layer_l.state_linearity.weight / .bias   [4*cell, projection_dim] / [4*cell]
--   elmo.lstm.{forward,backward}_layer_l.state_projection.weight  [projection_dim, cell]
--   softmax.weight / softmax.bias   [vocab, projection_dim] / [vocab] (ElmoLMHeadModel; AllenNLP's
--                                   _softmax_loss.softmax_w is the transpose)
--   scalar_mix.scalar_parameters [layers + 1], scalar_mix.gamma [1], and the head's classifier /
--   qa_outputs (the fine-tuning classes)
-- Gates are in PyTorch's (and AllenNLP's) order i, f, g, o.
--
-- Sizes: tiny (for tests: 64 filters, 64 projection, 256 cells), small (a
-- tiny budget: 256 filters, 1 highway, 128 projection, 512 cells) and original (Peters et al.: 2048 filters of widths 1-7, 2
-- highways, 512 projection, 4096 cells, clips 3; 93.6M parameters without
-- the softmax, which depends on the vocabulary).
local bert = require("bert.core")
local class = require("bert.nn.class")
local nn = require("bert.nn")
local blocks = require("bert.models.blocks")
local heads = require("bert.models.heads")

local Linear = nn.Linear

local F = {
  model_type = "elmo", short_name = "elmo", class_prefix = "Elmo", prefix = "elmo",
  default_vocab = 30522, base_pooler = false,
  not_huggingface = true,   -- AllenNLP's model: Hugging Face transformers has no ELMo class
}

-- AllenNLP's character ids, shifted by one so that 0 is a padded token's
F.BOS_CHAR, F.EOS_CHAR, F.BOW_CHAR, F.EOW_CHAR, F.PAD_CHAR = 257, 258, 259, 260, 261
F.N_CHARACTERS = 262

F.sizes = {
  tiny = {projection_dim = 64, cell_size = 256, num_hidden_layers = 2, char_embedding_dim = 8,
          filters = {{1, 16}, {2, 16}, {3, 32}}, n_highway = 1, max_characters_per_token = 16},
  small = {projection_dim = 128, cell_size = 512, num_hidden_layers = 2, char_embedding_dim = 16,
           filters = {{1, 32}, {2, 32}, {3, 64}, {4, 128}}, n_highway = 1, max_characters_per_token = 20},
  original = {projection_dim = 512, cell_size = 4096, num_hidden_layers = 2, char_embedding_dim = 16,
              filters = {{1, 32}, {2, 32}, {3, 64}, {4, 128}, {5, 256}, {6, 512}, {7, 1024}}, n_highway = 2,
              max_characters_per_token = 50, cell_clip = 3, proj_clip = 3},
}

F.defaults = {
  token_encoder = "characters", use_skip_connections = true, hidden_dropout_prob = 0.1,
  classifier_dropout = 0.1, initializer_range = 0.02, max_position_embeddings = 512, pad_token_id = 0,
  freeze_elmo = true,
}

F.int_keys = {"projection_dim", "cell_size", "char_embedding_dim", "n_highway", "max_characters_per_token"}

--- The architecture view: ELMo's keys plus BERT's that the shared code reads
-- (hidden_size: the width of one layer's representation, both directions).
function F.arch(c, where)
  local a = {}
  for k, v in pairs(c) do a[k] = v end
  a.filters = {}
  for i, f in ipairs(type(c.filters) == "table" and c.filters or {}) do
    a.filters[i] = {math.tointeger(f[1]) or f[1], math.tointeger(f[2]) or f[2]}
  end
  a.hidden_size = c.projection_dim and 2 * c.projection_dim
  a.intermediate_size, a.num_attention_heads = c.cell_size, 1
  a.hidden_act, a.layer_norm_eps, a.attention_probs_dropout_prob = "relu", 1e-12, 0
  -- config.hidden_size (what default learning rates are sized by) reads the LSTM width
  a.key_names = {hidden_size = "projection_dim", intermediate_size = "cell_size"}
  a.config_dir = type(where) == "string" and where:match("^(.*)/config%.json$") or nil
  return a
end

--- Forward FLOPs of B x T tokens for bert.models.flops (2 per multiply-add,
-- GEMMs only): the character CNN, highways and projection on every token
-- (the model encodes each distinct id of a batch once, so this is an upper
-- bound), each direction's LSTM layers (input, recurrent and projection
-- GEMMs) and the softmax over the vocabulary at every position, once per
-- direction.
function F.flops(model, B, T)
  local a = model.arch
  local P, C, L = a.projection_dim, a.cell_size, a.num_hidden_layers
  local encoder = 0
  if a.token_encoder ~= "words" then
    local W, D, nf = a.max_characters_per_token, a.char_embedding_dim, 0
    for _, f in ipairs(a.filters) do
      encoder = encoder + 2 * (W - f[1] + 1) * f[1] * D * f[2]
      nf = nf + f[2]
    end
    encoder = encoder + a.n_highway * 2 * nf * 2 * nf + 2 * nf * P
  end
  local lstm = 2 * L * (2 * 4 * C * P + 2 * 4 * C * P + 2 * C * P)
  local softmax = 2 * 2 * P * a.vocab_size
  return B * T * (encoder + lstm + softmax)
end

--- The model card's size line: the character CNN, the LSTMs and the projection.
function F.describe_size(c)
  local function n(v) return tostring(math.tointeger(v) or v) end
  local filters = 0
  for _, f in ipairs(type(c.filters) == "table" and c.filters or {}) do filters = filters + (tonumber(f[2]) or 0) end
  local encoder = c.token_encoder == "words" and "word embeddings" or
    string.format("character CNN of %s filters, %s highway layer%s", n(filters), n(c.n_highway),
      c.n_highway == 1 and "" or "s")
  return string.format("%s; 2 directions x %s LSTM layers of %s cells projected to %s", encoder,
    n(c.num_hidden_layers), n(c.cell_size), n(c.projection_dim))
end

function F.validate(c, a, where)
  local function fail(fmt, ...) error(string.format("%s: " .. fmt, where, ...), 0) end
  if a.is_decoder then   -- what --objective clm asks of a family's causal_lm class
    fail("an elmo model is two LMs, one per direction, not one left-to-right decoder: is_decoder cannot be set " ..
      "(pretrain it with --objective elmo)")
  end
  if a.token_encoder ~= "characters" and a.token_encoder ~= "words" then
    fail("'token_encoder' must be \"characters\" or \"words\", got %s", tostring(a.token_encoder))
  end
  for _, k in ipairs({"projection_dim", "cell_size"}) do
    if math.type(a[k]) ~= "integer" or a[k] <= 0 then fail("'%s' must be a positive integer, got %s", k, tostring(a[k])) end
  end
  if a.projection_dim >= a.cell_size then
    fail("'projection_dim' %d must be smaller than 'cell_size' %d", a.projection_dim, a.cell_size)
  end
  for _, k in ipairs({"cell_clip", "proj_clip"}) do
    if a[k] ~= nil and (type(a[k]) ~= "number" or a[k] <= 0) then
      fail("'%s' must be a positive number, got %s", k, tostring(a[k]))
    end
  end
  if a.token_encoder == "words" then return end
  -- bounds far above the paper's (50 characters, 2 highways, 1024 filters of a width) stop a
  -- typo before the window tables are built
  local W = a.max_characters_per_token
  if math.type(W) ~= "integer" or W < 3 or W > 1024 then
    fail("'max_characters_per_token' must be an integer in [3, 1024] (begin, a byte, end), got %s", tostring(W))
  end
  for _, k in ipairs({"char_embedding_dim", "n_highway"}) do
    local lo, hi = k == "n_highway" and 0 or 1, k == "n_highway" and 64 or 65536
    if math.type(a[k]) ~= "integer" or a[k] < lo or a[k] > hi then
      fail("'%s' must be an integer in [%d, %d], got %s", k, lo, hi, tostring(a[k]))
    end
  end
  if #a.filters == 0 then fail("'filters' must be a list of [width, count] pairs, got %s", tostring(c.filters)) end
  for i, f in ipairs(a.filters) do
    if math.type(f[1]) ~= "integer" or math.type(f[2]) ~= "integer" or f[1] < 1 or f[1] > W or f[2] < 1
        or f[2] > 65536 then
      fail("filters[%d] must be [width in 1..%d, count in 1..65536], got [%s, %s]", i, W, tostring(f[1]),
        tostring(f[2]))
    end
  end
end

-- {============================================================ characters

--- The W character ids of one vocabulary entry (a string; AllenNLP's mapping:
-- begin of word, the bytes (cut to W - 2), end of word, padding).
function F.characters(token, W)
  local ids = {F.BOW_CHAR}
  if token == "[CLS]" or token == "<s>" then
    ids[2] = F.BOS_CHAR
  elseif token == "[SEP]" or token == "</s>" then
    ids[2] = F.EOS_CHAR
  else
    for i = 1, math.min(#token, W - 2) do ids[i + 1] = token:byte(i) + 1 end
  end
  ids[#ids + 1] = F.EOW_CHAR
  for i = #ids + 1, W do ids[i] = F.PAD_CHAR end
  return ids
end

--- "fnv1a32:xxxxxxxx": a hash of the V entries of tok's vocabulary (each
-- entry's bytes and a newline, FNV-1a), so that a checkpoint can tell the
-- vocabulary its character encoder was trained on from another one.
function F.vocabulary_fingerprint(V, tok)
  local h = 2166136261
  for id = 0, V - 1 do
    local s = (tok:id_to_token(id) or "") .. "\n"
    for i = 1, #s do h = ((h ~ s:byte(i)) * 16777619) & 0xffffffff end
  end
  return string.format("fnv1a32:%08x", h)
end

--- int32 [V, W]: the characters of every id; tok (with id_to_token) or nil
-- (each id's decimal digits).
function F.character_table(V, W, tok)
  local rows = {}
  for id = 0, V - 1 do
    local s = tok and tok:id_to_token(id) or tostring(id)
    rows[id + 1] = F.characters(s or "", W)
  end
  return bert.tensor(rows, "int32")
end
-- }============================================================

-- {============================================================ the token encoder

local Highway = class("ElmoHighway", nn.Module)

function Highway:__init(dim, n)
  nn.Module.__init(self)
  self.dim = dim
  local layers = self:add_module("layers", blocks.Container())
  for k = 0, n - 1 do layers:add_module(tostring(k), Linear(dim, 2 * dim, {std = 1 / math.sqrt(dim)})) end
  self.n = n
end

--- x [N, F] -> g * x + (1 - g) * relu(nonlinear), per layer (AllenNLP's Highway:
-- the first half of the projection is the nonlinear part, the second the gate).
function Highway:forward(x)
  local D = self.dim
  for k = 0, self.n - 1 do
    local p = self.m.layers.m[tostring(k)](x)
    local gate = p:narrow(p:dim(), D + 1, D):sigmoid()
    x = gate * x + (1 - gate) * p:narrow(p:dim(), 1, D):relu()
  end
  return x
end
F.Highway = Highway

local TokenEncoder = class("ElmoTokenEncoder", nn.Module)

function TokenEncoder:__init(a)
  nn.Module.__init(self)
  self.words = a.token_encoder == "words"
  if self.words then
    self:add_module("word_embeddings", nn.Embedding(a.vocab_size, a.projection_dim, {std = a.initializer_range}))
    return
  end
  local C, W = a.char_embedding_dim, a.max_characters_per_token
  self.W, self.filters = W, a.filters
  self:add_parameter("char_embedding_weights", {F.N_CHARACTERS, C}, {normal = 1})
  local total = 0
  self.windows = {}
  for i, f in ipairs(a.filters) do
    local width, n = f[1], f[2]
    local conv = self:add_module("char_conv_" .. (i - 1), nn.Module())
    conv:add_parameter("weight", {n, C, width}, {normal = 1 / math.sqrt(C * width)})
    conv:add_parameter("bias", {n}, "zeros")
    -- window p's characters p .. p + width - 1, every window in a row
    local idx = {}
    for p = 0, W - width do for j = 0, width - 1 do idx[#idx + 1] = p + j end end
    self.windows[i] = bert.tensor(idx, "int32")
    total = total + n
  end
  self.n_filters = total
  self:add_module("highways", Highway(total, a.n_highway))
  self:add_module("projection", Linear(total, a.projection_dim, {std = 1 / math.sqrt(total)}))
end

--- chars int32 [N, W] -> [N, filters]: embed, each filter width as a GEMM
-- over the gathered windows, max over positions, relu.
function TokenEncoder:convolve(chars)
  local N, W = chars:size(1), self.W
  local emb = bert.F.embedding(chars, self.p.char_embedding_weights)   -- [N, W, C]
  local C = emb:size(3)
  local pooled = {}
  for i, f in ipairs(self.filters) do
    local width, n = f[1], f[2]
    local conv = self.m["char_conv_" .. (i - 1)]
    -- Conv1d's [n, C, width] as [n, width * C], the windows' layout
    local w = conv.p.weight:transpose(2, 3):contiguous():view(n, width * C)
    local windows = emb:index_select(2, self.windows[i]):view(N, W - width + 1, width * C)
    pooled[i] = bert.F.linear(windows, w, conv.p.bias):max(2)
  end
  return (#pooled == 1 and pooled[1] or bert.cat(pooled, 2)):relu()
end

--- chars int32 [N, W] -> [N, projection_dim]: the filters, highways, projection.
function TokenEncoder:encode_characters(chars)
  return self.m.projection(self.m.highways(self:convolve(chars)))
end

--- ids int32 [B, T], table int32 [V, W] -> [B, T, projection_dim]: each
-- distinct id of the batch is encoded once.
function TokenEncoder:forward(ids, table)
  local B, T = ids:size(1), ids:size(2)
  if self.words then return self.m.word_embeddings(ids) end
  local flat, slot, distinct, inverse = ids:reshape(B * T):totable(), {}, {}, {}
  for i, id in ipairs(flat) do
    local s = slot[id]
    if not s then
      distinct[#distinct + 1] = id
      s = #distinct - 1
      slot[id] = s
    end
    inverse[i] = s
  end
  local enc = self:encode_characters(table:index_select(1, bert.tensor(distinct, "int32")))
  return enc:index_select(1, bert.tensor(inverse, "int32")):view(B, T, enc:size(2))
end
F.TokenEncoder = TokenEncoder
-- }============================================================

-- {============================================================ the biLM

-- One LSTM layer of one direction, with AllenNLP's LstmCellWithProjection names.
local Cell = class("ElmoLstmLayer", nn.Module)

function Cell:__init(input, cell, proj, a)
  nn.Module.__init(self)
  self:add_module("input_linearity", Linear(input, 4 * cell, {bias = false, std = 1 / math.sqrt(input)}))
  self:add_module("state_linearity", Linear(proj, 4 * cell, {std = 1 / math.sqrt(proj)}))
  self:add_module("state_projection", Linear(cell, proj, {bias = false, std = 1 / math.sqrt(cell)}))
  self.cell_clip, self.proj_clip = a.cell_clip, a.proj_clip
end

function Cell:forward(x, lengths, reverse)
  local sl = self.m.state_linearity
  return (bert.F.lstm(x, nil, nil, self.m.input_linearity.p.weight, sl.p.weight, sl.p.bias,
    {w_hr = self.m.state_projection.p.weight, lengths = lengths, reverse = reverse, clip = self.cell_clip,
     proj_clip = self.proj_clip}))
end

local Backbone = class("ElmoBackbone", nn.Module)
F.Backbone = Backbone

function Backbone:__init(a, c)
  nn.Module.__init(self)
  self.arch, self.config = a, c
  self:add_module("token_embedder", TokenEncoder(a))
  local lstm = self:add_module("lstm", blocks.Container())
  for l = 0, a.num_hidden_layers - 1 do
    for _, dir in ipairs({"forward", "backward"}) do
      lstm:add_module(dir .. "_layer_" .. l, Cell(a.projection_dim, a.cell_size, a.projection_dim, a))
    end
  end
  self.max_length = a.max_position_embeddings
  self.dropout = a.hidden_dropout_prob
end

function Backbone:has_pooler() return false end
function Backbone:set_varlen() return self, false end

--- set_vocabulary(tok): the token encoder reads each id's characters in
-- tok's vocabulary (and config.json says so: character_vocabulary).
-- A model whose config already records another vocabulary (one loaded from
-- a checkpoint) refuses tok: its character encoder learned that vocabulary's
-- spellings, and reading other ones would be a silent wrong answer.
function Backbone:set_vocabulary(tok, name)
  local a = self.arch
  if a.token_encoder == "words" then return self end
  local fingerprint = F.vocabulary_fingerprint(a.vocab_size, tok)
  local recorded = self.config.character_vocabulary_fingerprint
  if recorded and recorded ~= fingerprint then
    error(string.format("%s: the character encoder of the model%s was trained on a vocabulary with fingerprint " ..
      "%s; the tokenizer given has %s (%d entries read): use the tokenizer the model was trained with",
      name or "ElmoModel:set_vocabulary", a.config_dir and (" in " .. a.config_dir) or "", recorded, fingerprint,
      a.vocab_size), 0)
  end
  self.table = F.character_table(a.vocab_size, a.max_characters_per_token, tok)
  self.config.character_vocabulary = true
  self.config.character_vocabulary_fingerprint = fingerprint
  return self
end

-- the [V, W] character table: the vocabulary's (the tokenizer beside the
-- checkpoint when config.json asks for it) or the ids' digits
function Backbone:character_table(name)
  if self.table then return self.table end
  local a = self.arch
  if self.config.character_vocabulary then
    local ok, tok = pcall(require("bert.finetune").find_tokenizer, a.config_dir)
    if not ok then
      error(string.format("%s: the character encoder reads the vocabulary of the tokenizer it was trained with, " ..
        "and none was found beside %s (%s): call model.base:set_vocabulary(tokenizer)", name,
        tostring(a.config_dir), tostring(tok)), 0)
    end
    return self:set_vocabulary(tok, name).table
  end
  self.table = F.character_table(a.vocab_size, a.max_characters_per_token)
  return self.table
end

--- The two LMs' layers: {[token encoder ; itself], [forward_1 ; backward_1], ...}
-- (each [B, T, 2P]), the top forward and backward outputs [B, T, P], lengths.
function Backbone:layers(ids, mask, name)
  local B, T = ids:size(1), ids:size(2)
  local lengths = mask and mask:ne(0):int():sum(2):view(B):int() or nil
  local table = not self.m.token_embedder.words and self:character_table(name) or nil
  local x0 = self.m.token_embedder(ids, table)
  local drop = self.is_training and not self.frozen
  local layers, top = {bert.cat({x0, x0}, 3)}, {}
  local input = bert.F.dropout(x0, self.dropout, drop)
  local h = {forward = input, backward = input}
  for l = 0, self.arch.num_hidden_layers - 1 do
    for _, dir in ipairs({"forward", "backward"}) do
      local out = self.m.lstm.m[dir .. "_layer_" .. l](h[dir], lengths, dir == "backward")
      if l > 0 and self.arch.use_skip_connections then out = out + h[dir] end
      h[dir] = out
    end
    layers[#layers + 1] = bert.cat({h.forward, h.backward}, 3)
  end
  top.forward, top.backward = h.forward, h.backward
  return layers, top, lengths
end

--- forward{input_ids, attention_mask?} -> {last_hidden_state [B, T, 2P] (the
-- scalar mix when a fine-tuning head set one, else the top layer), layers,
-- forward_hidden, backward_hidden [B, T, P], sequence_summary [B, 2P] (the
-- mean over real tokens)}, ids, mask.  Padding must be at the end of a row.
function Backbone:forward(inputs)
  local name = (self.class_name or "ElmoModel") .. ":forward"
  if type(inputs) ~= "table" or inputs.input_ids == nil then error(name .. ": expects a table with input_ids", 3) end
  local ids = blocks.check_ids(name, inputs.input_ids, "input_ids")
  local mask = inputs.attention_mask and blocks.check_ids(name, inputs.attention_mask, "attention_mask", ids)
  local layers, top
  if self.frozen then
    layers, top = bert.no_grad(function() return self:layers(ids, mask, name) end)
  else
    layers, top = self:layers(ids, mask, name)
  end
  local h = self.mix and self.mix(layers) or layers[#layers]
  local summary
  if mask then
    local m = mask:float():view(ids:size(1), ids:size(2), 1)
    summary = (h * m):sum(2) / m:sum(2):maximum(1)
  else
    summary = h:mean(2)
  end
  return {last_hidden_state = h, layers = layers, forward_hidden = top.forward, backward_hidden = top.backward,
          sequence_summary = summary}, ids, mask
end

function F.backbone(a, c) return Backbone(a, c) end
-- }============================================================

-- {============================================================ the scalar mix

--- ScalarMix(n): gamma * sum_k softmax(s)_k * layer_k (Peters et al., eq. 1).
local ScalarMix = class("ElmoScalarMix", nn.Module)
F.ScalarMix = ScalarMix

function ScalarMix:__init(n)
  nn.Module.__init(self)
  self.n = n
  self:add_parameter("scalar_parameters", {n}, "zeros")
  self:add_parameter("gamma", {1}, "ones")
end

function ScalarMix:weights() return self.p.scalar_parameters:softmax(1) end

function ScalarMix:forward(layers)
  if #layers ~= self.n then
    error(string.format("ElmoScalarMix: expects %d layers, got %d", self.n, #layers), 2)
  end
  local w = self:weights()
  local sum = layers[1] * w:narrow(1, 1, 1)
  for k = 2, self.n do sum = sum + layers[k] * w:narrow(1, k, 1) end
  return sum * self.p.gamma
end
-- }============================================================

-- {============================================================ heads

-- rows of h [B, T, P] with a target (targets [B, T], -100 none) through the
-- softmax: logits [M, V], flat positions [M], targets [M], mean cross-entropy
local function decode(weight, bias, h, targets)
  local B, T, P = h:size(1), h:size(2), h:size(3)
  local flat = targets:reshape(B * T)
  local positions = flat:ne(-100):nonzero()
  local rows = h:reshape(B * T, P):index_select(1, positions)
  local logits = bert.F.linear(rows, weight, bias)
  local picked = flat:index_select(1, positions)
  local loss = positions:numel() > 0 and bert.F.cross_entropy(logits, picked) or h:sum() * 0
  return logits, positions, picked, loss
end

--- The backward LM's targets: token t - 1 at position t (the first has none,
-- nor has padding: mask [B, T], 0 pad, when given).
function F.previous_token_targets(labels, mask)
  local B, T = labels:size(1), labels:size(2)
  local first = bert.full({B, 1}, -100, "int32")
  if T == 1 then return first end
  local targets = bert.cat({first, labels:narrow(2, 1, T - 1)}, 2):contiguous()
  return mask and targets:masked_fill(mask:eq(0), -100) or targets
end

--- The two LMs through the one softmax: forward{input_ids, attention_mask?,
-- labels?}.  labels [B, T] are the tokens (-100 ignored, padding too): the
-- forward LM predicts token t + 1 at t, the backward one token t - 1;
-- loss = forward_loss + backward_loss (each a mean cross-entropy).  Outputs
-- logits / target_positions / targets (forward) and backward_* on the rows
-- that have a target, or without labels logits and backward_logits [B, T, V].
local LM = class("ElmoLM", heads.Head)

function LM:build(_, a)
  self.tied = a.token_encoder == "words" and a.tie_word_embeddings ~= false
  local softmax = self:add_module("softmax", nn.Module())
  if not self.tied then softmax:add_parameter("weight", {a.vocab_size, a.projection_dim}, {normal = a.initializer_range}) end
  softmax:add_parameter("bias", {a.vocab_size}, "zeros")
  self.dropout_p = a.hidden_dropout_prob
end

function LM:softmax_weight()
  if self.tied then return self.base.m.token_embedder.m.word_embeddings.p.weight end
  return self.m.softmax.p.weight
end

-- the top outputs of both directions (dropout while training, as AllenNLP's LanguageModel)
function LM:tops(inputs)
  local base, ids, mask = self.base:forward(inputs)
  local drop = function(h) return bert.F.dropout(h, self.dropout_p, self.is_training) end
  return base, drop(base.forward_hidden), drop(base.backward_hidden), ids, mask
end

--- Both directions' scored rows for labels (forward, next token) and
-- blabels (backward, previous token), [B, T] each, -100 unscored:
-- logits, positions, targets of the forward LM, then of the backward one.
function LM:directions(inputs, labels, blabels)
  local _, fh, bh, _, mask = self:tops(inputs)
  local W, b = self:softmax_weight(), self.m.softmax.p.bias
  local lf, pf, tf = decode(W, b, fh, heads.next_token_targets(labels))
  local lb, pb, tb = decode(W, b, bh, F.previous_token_targets(blabels, mask))
  return lf, pf, tf, lb, pb, tb
end

function LM:forward(inputs)
  local base, fh, bh, ids, mask = self:tops(inputs)
  local out = {last_hidden_state = base.last_hidden_state}
  local W, b = self:softmax_weight(), self.m.softmax.p.bias
  if inputs.labels then
    local labels = blocks.check_ids(self.class_name .. ":forward", inputs.labels, "labels", ids)
    if mask then labels = labels:masked_fill(mask:eq(0), -100) end
    out.logits, out.target_positions, out.targets, out.forward_loss =
      decode(W, b, fh, heads.next_token_targets(labels))
    out.backward_logits, out.backward_target_positions, out.backward_targets, out.backward_loss =
      decode(W, b, bh, F.previous_token_targets(labels, mask))
    out.loss = out.forward_loss + out.backward_loss
  else
    out.logits, out.backward_logits = bert.F.linear(fh, W, b), bert.F.linear(bh, W, b)
  end
  return out
end

-- a fine-tuning head over the scalar mix of a (by default frozen) biLM
local function mixed(kind)
  local parent = heads.kinds[kind]
  local C = class("Elmo_" .. kind, parent)
  function C:build(h, a)
    self.mix = self:add_module("scalar_mix", ScalarMix(a.num_hidden_layers + 1))
    self.base.mix, self.base.frozen = self.mix, a.freeze_elmo ~= false
    return parent.build(self, h, a)
  end
  --- What the optimizer trains: the mix and the head (the biLM too unless frozen).
  function C:trainable_parameters()
    local out, prefix = {}, F.prefix .. "."
    for _, np in ipairs(self:named_parameters()) do
      if not (self.base.frozen and np.name:sub(1, #prefix) == prefix) then out[#out + 1] = np end
    end
    return out
  end
  return C
end

F.classes = {
  causal_lm = LM,
  sequence_classification = mixed("sequence_classification"),
  token_classification = mixed("token_classification"),
  question_answering = mixed("question_answering"),
  multiple_choice = mixed("multiple_choice"),
}

F.heads = {
  classifier = {source = "summary", out = "classifier"},
  multiple_choice = {source = "summary", out = "classifier"},
}

F.architectures = {
  ElmoModel = "base", ElmoLMHeadModel = "causal_lm",
  ElmoForSequenceClassification = "sequence_classification",
  ElmoForTokenClassification = "token_classification",
  ElmoForQuestionAnswering = "question_answering", ElmoForMultipleChoice = "multiple_choice",
}
-- }============================================================

return F
