--- The blocks every family of the BERT story is built from: embeddings
-- (absolute, RoBERTa or no positions; token types or none; an embedding
-- width different from the hidden size), self-attention with a hook for a
-- score bias, the feed-forward, the post-LN layer, encoders (one layer per
-- depth, or ALBERT's shared groups) and the backbone that ties them
-- together.  Modules are named so that named_parameters() yields Hugging
-- Face's checkpoint keys; a family passes its own names where they differ.
-- Math: shared/reference/bert_family_spec.md §1-2.
--
-- `a` below is the family's config in BERT's key names (vocab_size,
-- hidden_size, num_attention_heads, intermediate_size, hidden_act,
-- hidden_dropout_prob, attention_probs_dropout_prob, max_position_embeddings,
-- type_vocab_size, initializer_range, layer_norm_eps, pad_token_id).
local bert = require("bert.core")
local class = require("bert.nn.class")
local nn = require("bert.nn")
local varlen = require("bert.models.packing")   -- a batch run without its padding

local Module, Linear, LayerNorm, Embedding, Dropout = nn.Module, nn.Linear, nn.LayerNorm, nn.Embedding, nn.Dropout
local F = bert.F

local M = {}

-- the packing's names from before it had a module of its own, for callers
-- outside the model layer
M.Packing, M.packing, M.varlen_attention, M.dropout = varlen.Packing, varlen.new, varlen.attention, varlen.dropout

-- {============================================================ helpers

-- HF's ACT2FN names -> functions; gelu_new/gelu_fast are the tanh form.
local activations = {
  gelu = function(x) return x:gelu() end,
  gelu_new = function(x) return x:gelu("tanh") end,
  gelu_fast = function(x) return x:gelu("tanh") end,
  relu = function(x) return x:relu() end,
  tanh = function(x) return x:tanh() end,
}
M.activation_names = {}
for k in pairs(activations) do M.activation_names[k] = true end

function M.activation(name)
  local f = activations[name]
  if not f then error("unsupported activation '" .. tostring(name) .. "'", 2) end
  return f
end

-- the bias + GELU forms that fuse into one pass after a bias-less GEMM
local fused_gelu = {gelu = "none", gelu_new = "tanh", gelu_fast = "tanh"}

--- act(linear(x)) with the bias and a GELU fused when the activation is one.
function M.linear_act(linear, act_name, x)
  local mode = fused_gelu[act_name]
  if mode and linear.p.bias then return F.bias_gelu(F.linear(x, linear.p.weight), linear.p.bias, mode) end
  return M.activation(act_name)(linear(x))
end

-- A module that only groups children (HF's attention / output wrappers).
local Container = class("Container", Module)
M.Container = Container
function Container:__init(children)
  Module.__init(self)
  for _, kv in ipairs(children or {}) do self:add_module(kv[1], kv[2]) end
end

--- Places module at a dotted path under root ("cls.predictions"), making
-- containers along the way; returns it.
function M.place(root, path, module)
  local parent, last = root, nil
  for part in path:gmatch("[^%.]+") do
    if last then
      if not parent.m[last] then parent:add_module(last, Container()) end
      parent = parent.m[last]
    end
    last = part
  end
  parent:add_module(last, module)
  return module
end

--- The module at a dotted path under root, or nil.
function M.find(root, path)
  local m = root
  for part in path:gmatch("[^%.]+") do
    m = m and m.m[part]
  end
  return m
end

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
M.check_ids = check_ids
-- }============================================================

-- {============================================================ embeddings

--- RoBERTa's position ids: padding_idx + 1 + the count of non-pad tokens up
-- to and including this one; pads get padding_idx.  The running count is
-- a product with an upper-triangular matrix of ones, so it runs on the
-- device that holds the ids.
function M.roberta_positions(ids, pad)
  local T = ids:size(2)
  local real = ids:ne(pad)
  local upper = bert.arange(T):view(T, 1):le(bert.arange(T):view(1, T)):float()
  if ids:device() ~= "cpu" then upper = upper:to(ids:device()) end
  local count = real:float():matmul(upper)
  return (count * real:float() + pad):int()
end

local Embeddings = class("Embeddings", Module)
M.Embeddings = Embeddings

--- Embeddings(a, opts): opts.positions "absolute" (0..T-1, BERT),
-- "roberta" (M.roberta_positions) or "none" (no table: DeBERTa); opts.token_types (default
-- a.type_vocab_size > 0); opts.width (default hidden_size: ALBERT and
-- ELECTRA's embedding_size); opts.project: a bias-less width -> hidden
-- projection named embed_proj before the LayerNorm (DeBERTa);
-- opts.mask_output: zero the rows of padding (DeBERTa).
function Embeddings:__init(a, opts)
  Module.__init(self)
  opts = opts or {}
  local std, E = a.initializer_range, opts.width or a.hidden_size
  self.positions = opts.positions or "absolute"
  self.pad = a.pad_token_id
  self.mask_output = opts.mask_output
  self:add_module("word_embeddings", Embedding(a.vocab_size, E, {std = std, padding_idx = a.pad_token_id}))
  if self.positions ~= "none" then
    self:add_module("position_embeddings", Embedding(a.max_position_embeddings, E,
      {std = std, padding_idx = self.positions == "roberta" and a.pad_token_id or nil}))
  end
  local types = opts.token_types
  if types == nil then types = (a.type_vocab_size or 0) > 0 end
  if types then self:add_module("token_type_embeddings", Embedding(a.type_vocab_size, E, {std = std})) end
  local out = E
  if opts.project and E ~= a.hidden_size then
    self:add_module("embed_proj", Linear(E, a.hidden_size, {bias = false, std = std}))
    out = a.hidden_size
  end
  self:add_module("LayerNorm", LayerNorm(out, a.layer_norm_eps))
  self.dropout = Dropout(a.hidden_dropout_prob)
  self:add_module_unnamed(self.dropout)
end

function Embeddings:forward(ids, token_type_ids, mask)
  if varlen.is(mask) then return self:forward_packed(ids, token_type_ids, mask) end
  local m = self.m
  local x = m.word_embeddings(ids)
  if m.token_type_embeddings then
    x = x + m.token_type_embeddings(token_type_ids or bert.zeros(ids:shape(), "int32"))
  end
  if self.positions == "absolute" then
    x = x + m.position_embeddings(bert.arange(ids:size(2)))   -- 0..T-1 whatever the padding, as HF
  elseif self.positions == "roberta" then
    x = x + m.position_embeddings(M.roberta_positions(ids, self.pad))
  end
  if m.embed_proj then x = m.embed_proj(x) end
  x = m.LayerNorm(x)
  if self.mask_output and mask then x = x * mask:float():unsqueeze(3) end
  return self.dropout(x)
end

--- The embeddings of the packed rows only [N, H]: each token with its own
-- position (its column in the padded row, as the padded path) and type.
function Embeddings:forward_packed(ids, token_type_ids, packing)
  local m = self.m
  local x = m.word_embeddings(packing:pack(ids))
  if m.token_type_embeddings then
    x = x + m.token_type_embeddings(token_type_ids and packing:pack(token_type_ids) or bert.zeros({packing.total}, "int32"))
  end
  if self.positions == "absolute" then
    x = x + m.position_embeddings(packing.columns)
  elseif self.positions == "roberta" then
    x = x + m.position_embeddings(packing:pack(M.roberta_positions(ids, self.pad)))
  end
  if m.embed_proj then x = m.embed_proj(x) end
  return packing:dropout(m.LayerNorm(x), self.dropout.prob, self.dropout.is_training)
end
-- }============================================================

-- {============================================================ attention

local SelfAttention = class("SelfAttention", Module)
M.SelfAttention = SelfAttention

--- SelfAttention(a[, {names = {"query", "key", "value"}}]): the Q, K, V
-- projections, registered next to each other (the three weights, then the
-- three biases) so that once the model's parameters are flattened one
-- [3H x H] view covers them and the projection is a single GEMM.
--
-- The score-bias hook: a subclass (DeBERTa) overrides attend(q, k, v,
-- mask, extra), where q, k, v are [B, A, T, d] views and extra is what the
-- layer passed down (relative embeddings...).  The default is fused,
-- flash-style attention with a key-padding mask.
function SelfAttention:__init(a, opts)
  Module.__init(self)
  opts = opts or {}
  local H, std = a.hidden_size, a.initializer_range
  self.heads, self.head_dim = a.num_attention_heads, H // a.num_attention_heads
  self.attention_dropout = a.attention_probs_dropout_prob
  self.causal = a.is_decoder == true   -- HF's config key: query i sees keys j <= i (a left-to-right LM)
  self.names = opts.names or {"query", "key", "value"}
  for _, n in ipairs(self.names) do self:add_parameter(n .. ".weight", {H, H}, {normal = std}) end
  for _, n in ipairs(self.names) do self:add_parameter(n .. ".bias", {H}, "zeros") end
end

function SelfAttention:on_flatten(flat, gflat, offsets)
  local nq, nk, nv = self.names[1], self.names[2], self.names[3]
  local qw, qb = offsets[self.p[nq .. ".weight"]], offsets[self.p[nq .. ".bias"]]
  local H = self.p[nq .. ".weight"]:size(1)
  if qw and qb and offsets[self.p[nk .. ".weight"]] == qw + H * H and offsets[self.p[nv .. ".weight"]] == qw + 2 * H * H
     and offsets[self.p[nk .. ".bias"]] == qb + H and offsets[self.p[nv .. ".bias"]] == qb + 2 * H then
    local function fused(off, n, shape)
      local v = flat:narrow(1, off + 1, n):view(shape):requires_grad(true)
      v:set_grad(gflat:narrow(1, off + 1, n):view(shape))
      return v
    end
    self.qkv_weight = fused(qw, 3 * H * H, {3 * H, H})
    self.qkv_bias = fused(qb, 3 * H, {3 * H})
  end
end

--- One projection by its name ("query"...) of x [B, T, H].
function SelfAttention:project(name, x)
  return F.linear(x, self.p[name .. ".weight"], self.p[name .. ".bias"])
end

--- x [B, T, H] -> q, k, v as [B, A, T, d] views.  query_states, when
-- given, supplies the queries (DeBERTa's enhanced mask decoder).
function SelfAttention:qkv(x, query_states)
  local B, T, H = x:size(1), x:size(2), x:size(3)
  local A, d = self.heads, self.head_dim
  local q, k, v
  if self.qkv_weight and not query_states then
    local qkv = F.linear(x, self.qkv_weight, self.qkv_bias)   -- [B, T, 3H]
    q, k, v = qkv:narrow(3, 1, H), qkv:narrow(3, H + 1, H), qkv:narrow(3, 2 * H + 1, H)
  else
    q = self:project(self.names[1], query_states or x)
    k = self:project(self.names[2], x)
    v = self:project(self.names[3], x)
  end
  local function heads(t) return t:view(B, T, A, d):transpose(2, 3) end   -- [B, A, T, d], a view
  return heads(q), heads(k), heads(v)
end

function SelfAttention:attend(q, k, v, mask)
  return F.attention(q, k, v, {mask = mask, causal = self.causal, dropout = self.attention_dropout,
                               training = self.is_training})
end

-- Whether the plain attention runs straight from the fused projection
-- (F.attention_qkv: its backward writes the projection's gradient in one
-- buffer; with three narrowed views a zeroed buffer and three adds).
function SelfAttention:fused_qkv(query_states)
  return self.qkv_weight ~= nil and not query_states and self.qkv == SelfAttention.qkv
    and self.attend == SelfAttention.attend
end

--- x [B, T, H], mask [B, T] (1 keep, 0 pad) -> context [B, T, H];
-- or packed: x [N, H] and mask a packing (bert.models.packing) -> context [N, H].
function SelfAttention:forward(x, mask, extra, query_states)
  if varlen.is(mask) then return self:forward_packed(x, mask) end
  local B, T, H = x:size(1), x:size(2), x:size(3)
  if self:fused_qkv(query_states) then
    local ctx = F.attention_qkv(F.linear(x, self.qkv_weight, self.qkv_bias), self.heads,
      {mask = mask, causal = self.causal, dropout = self.attention_dropout, training = self.is_training})
    return ctx:transpose(2, 3):reshape(B, T, H)
  end
  local q, k, v = self:qkv(x, query_states)
  local ctx = self:attend(q, k, v, mask, extra)
  return ctx:transpose(2, 3):reshape(B, T, H)
end

function SelfAttention:forward_packed(x, packing)
  local N, H = x:size(1), x:size(2)
  local A, d = self.heads, self.head_dim
  local q, k, v
  local opts = {causal = self.causal, dropout = self.attention_dropout, training = self.is_training}
  if self.qkv_weight then
    local qkv = F.linear(x, self.qkv_weight, self.qkv_bias)   -- [N, 3H]
    if self:fused_qkv() and varlen.kernel_applies(packing, opts, x:device()) then
      opts.cu_seqlens = packing.offsets
      return F.attention_qkv(qkv, A, opts):reshape(N, H)
    end
    q, k, v = qkv:narrow(2, 1, H), qkv:narrow(2, H + 1, H), qkv:narrow(2, 2 * H + 1, H)
  else
    q, k, v = self:project(self.names[1], x), self:project(self.names[2], x), self:project(self.names[3], x)
  end
  local function heads(t) return t:view(N, A, d) end
  return varlen.attention(heads(q), heads(k), heads(v), packing, opts):reshape(N, H)
end
-- }============================================================

-- {============================================================ layers

-- dense -> dropout -> LayerNorm(. + residual): HF's BertSelfOutput and BertOutput;
-- with opts.norm = false dense -> dropout -> . + residual, a pre-LN layer's
-- residual branch (its LayerNorm comes before the sublayer)
local AddNorm = class("AddNorm", Module)
M.AddNorm = AddNorm

function AddNorm:__init(in_size, a, opts)
  Module.__init(self)
  self:add_module("dense", Linear(in_size, a.hidden_size, {std = a.initializer_range}))
  if not (opts and opts.norm == false) then self:add_module("LayerNorm", LayerNorm(a.hidden_size, a.layer_norm_eps)) end
  self.dropout = Dropout(a.hidden_dropout_prob)
  self:add_module_unnamed(self.dropout)
end

--- mask: the layer's (a packing when packed: dropout keyed as padded)
function AddNorm:forward(h, residual, mask)
  local out = varlen.dropout(self.dropout, self.m.dense(h), mask)
  if self.m.LayerNorm then return self.m.LayerNorm(out, residual) end
  return out + residual
end

local Layer = class("Layer", Module)
M.Layer = Layer
Layer.recompute_unit = true   -- model:set_recompute(true) recomputes it in backward (bert.recompute)

--- The encoder layer with BERT's names (attention.self, attention.output,
-- intermediate.dense, output); opts.attention: the self-attention module
-- (default SelfAttention(a)).  Post-LN, unless a.pre_layer_norm: then the
-- LayerNorms move in front of the sublayers, under the names of Hugging
-- Face's roberta-prelayernorm (attention.LayerNorm, intermediate.LayerNorm),
-- and the outputs add the residual without a norm.
function Layer:__init(a, opts)
  Module.__init(self)
  opts = opts or {}
  local H, std, eps = a.hidden_size, a.initializer_range, a.layer_norm_eps
  self.pre_layer_norm = a.pre_layer_norm == true
  local pre = self.pre_layer_norm
  self:add_module("attention", Container({
    {"self", opts.attention or SelfAttention(a)},
    {"output", AddNorm(H, a, {norm = not pre})},
  }))
  if pre then self.m.attention:add_module("LayerNorm", LayerNorm(H, eps)) end
  self:add_module("intermediate", Container())
  if pre then self.m.intermediate:add_module("LayerNorm", LayerNorm(H, eps)) end
  self.m.intermediate:add_module("dense", Linear(H, a.intermediate_size, {std = std}))
  self:add_module("output", AddNorm(a.intermediate_size, a, {norm = not pre}))
  M.activation(a.hidden_act)
  self.act = a.hidden_act
end

--- Post-LN: x1 = LN(x + drop(attn(x))), out = LN(x1 + drop(ffn(x1))).
-- Pre-LN: x1 = x + drop(attn(LN(x))), out = x1 + drop(ffn(LN(x1))).
-- query_states (DeBERTa's decoder, post-LN only) replaces x as the queries and the residual.
function Layer:forward(x, mask, extra, query_states)
  local attention, intermediate = self.m.attention, self.m.intermediate
  if self.pre_layer_norm then
    local x1 = attention.m.output(attention.m.self(attention.m.LayerNorm(x), mask, extra), x, mask)
    local inner = M.linear_act(intermediate.m.dense, self.act, intermediate.m.LayerNorm(x1))
    return self.m.output(inner, x1, mask)
  end
  local ctx = attention.m.self(x, mask, extra, query_states)
  local x1 = attention.m.output(ctx, query_states or x, mask)
  local inner = M.linear_act(intermediate.m.dense, self.act, x1)
  return self.m.output(inner, x1, mask)
end

local MappedLayer = class("MappedLayer", Module)
M.MappedLayer = MappedLayer
MappedLayer.recompute_unit = true

--- The post-LN layer under a family's own names, with its own dropout
-- (ALBERT's, DistilBERT's): a subclass sets
--   names: {piece, checkpoint path} pairs in the checkpoint's order, the
--     pieces attention (SelfAttention), attention_out, attention_norm,
--     ffn_in, ffn_out, output_norm; paths below the layer ("attention.dense");
--   qkv: the projections' names (default SelfAttention's);
--   dropout_after: {attention = bool, ffn = bool}, where hidden dropout applies.
-- x1 = attention_norm(x + drop?(attention_out(MHA(x)))),
-- y = output_norm(x1 + drop?(ffn_out(act(ffn_in(x1))))).
function MappedLayer:__init(a)
  Module.__init(self)
  local H, I, std, eps = a.hidden_size, a.intermediate_size, a.initializer_range, a.layer_norm_eps
  local make = {
    attention = function() return SelfAttention(a, {names = self.qkv}) end,
    attention_out = function() return Linear(H, H, {std = std}) end,
    attention_norm = function() return LayerNorm(H, eps) end,
    ffn_in = function() return Linear(H, I, {std = std}) end,
    ffn_out = function() return Linear(I, H, {std = std}) end,
    output_norm = function() return LayerNorm(H, eps) end,
  }
  self.piece = {}
  for _, np in ipairs(self.names) do self.piece[np[1]] = M.place(self, np[2], make[np[1]]()) end
  self.act = a.hidden_act
  self.dropout = Dropout(a.hidden_dropout_prob)
  self:add_module_unnamed(self.dropout)
end

function MappedLayer:forward(x, mask)
  local piece, after = self.piece, self.dropout_after
  local ctx = piece.attention_out(piece.attention(x, mask))
  if after.attention then ctx = varlen.dropout(self.dropout, ctx, mask) end
  local x1 = piece.attention_norm(ctx, x)
  local f = piece.ffn_out(M.linear_act(piece.ffn_in, self.act, x1))
  if after.ffn then f = varlen.dropout(self.dropout, f, mask) end
  return piece.output_norm(f, x1)
end

local Encoder = class("Encoder", Module)
M.Encoder = Encoder

--- Encoder(a, make_layer[, {name = "layer"}]): one layer per depth,
-- num_hidden_layers of them, named name.0, name.1, ...
function Encoder:__init(a, make_layer, opts)
  Module.__init(self)
  opts = opts or {}
  self.layer_name = opts.name or "layer"
  local layers = Container()
  for i = 0, a.num_hidden_layers - 1 do layers:add_module(tostring(i), make_layer(i)) end
  self:add_module(self.layer_name, layers)
  self.n = a.num_hidden_layers
end

function Encoder:layers()
  local out, layers = {}, self.m[self.layer_name]
  for i = 0, self.n - 1 do out[i + 1] = layers.m[tostring(i)] end
  return out
end

--- states, when given, receives each layer's output in turn (distillation
-- reads them: Backbone's output_hidden_states).
function Encoder:forward(x, mask, extra, states)
  local layers = self.m[self.layer_name]
  for i = 0, self.n - 1 do
    x = layers.m[tostring(i)](x, mask, extra)
    if states then states[#states + 1] = x end
  end
  return x
end

local SharedEncoder = class("SharedEncoder", Module)
M.SharedEncoder = SharedEncoder

--- ALBERT's sharing: num_groups groups of inner layers each; depth i runs
-- every layer of group floor(i / (depth / num_groups)) in turn, so one set
-- of weights serves many depths and its gradients accumulate over them.
-- opts: depth, num_groups, inner, make_layer(), names {groups, layers},
-- project {name, Linear}: a projection applied first (ALBERT's E -> H).
function SharedEncoder:__init(opts)
  Module.__init(self)
  self.depth, self.num_groups, self.inner = opts.depth, opts.num_groups, opts.inner
  self.names = opts.names
  if opts.project then
    self.project = opts.project[2]
    self:add_module(opts.project[1], opts.project[2])
  end
  local groups = Container()
  for g = 0, opts.num_groups - 1 do
    local layers = Container()
    for j = 0, opts.inner - 1 do layers:add_module(tostring(j), opts.make_layer()) end
    groups:add_module(tostring(g), Container({{opts.names[2], layers}}))
  end
  self:add_module(opts.names[1], groups)
end

function SharedEncoder:forward(x, mask, extra, states)
  if self.project then
    x = self.project(x)
    if states then states[#states] = x end   -- HF's first hidden state is the projected one
  end
  local groups = self.m[self.names[1]]
  for i = 0, self.depth - 1 do
    -- HF: group int(i / (depth / num_groups))
    local layers = groups.m[tostring(i * self.num_groups // self.depth)].m[self.names[2]]
    for j = 0, self.inner - 1 do x = layers.m[tostring(j)](x, mask, extra) end
    if states then states[#states + 1] = x end
  end
  return x
end
-- }============================================================

-- {============================================================ backbone

--- x [B, T, H] -> [B, H]: each row's last real token (mask [B, T], 1 keep,
-- 0 pad; without a mask the last position).  A left-to-right model has read
-- the whole sequence only there, so it is what its classifier reads (GPT's
-- choice; the first token would have seen nothing but itself).
function M.last_token(x, mask)
  local B, T, H = x:size(1), x:size(2), x:size(3)
  local rows
  if mask then
    rows = mask:ne(0):int():sum(2) - 1 + bert.arange(B) * T   -- flat index of each row's last real token
    rows = bert.where(rows:lt(bert.arange(B) * T), bert.arange(B) * T, rows)   -- an all-pad row: its first
  else
    rows = bert.arange(B) * T + (T - 1)
  end
  if x:device() ~= "cpu" and rows:device() == "cpu" then rows = rows:to(x:device()) end
  return x:reshape(B * T, H):index_select(1, rows)
end

local Backbone = class("Backbone", Module)
M.Backbone = Backbone

--- Backbone(a, parts): the base model of a family.  parts is a list of
-- {name, module, role} in checkpoint order, role one of "embeddings",
-- "project" (a Linear between embeddings and encoder: ELECTRA),
-- "encoder", "final_norm" (a LayerNorm after the encoder: pre-LN layers),
-- "pooler" (a Linear or a container with dense; tanh applied).
-- opts.token_types: whether token_type_ids are read; opts.varlen = false:
-- the family cannot run packed (DeBERTa's relative attention needs the
-- padded [B, T] grid), so set_varlen leaves it padded; opts.max_length:
-- the longest sequence it takes (default max_position_embeddings; RoBERTa's
-- is less its padding_idx + 1 offset).
function Backbone:__init(a, parts, opts)
  Module.__init(self)
  opts = opts or {}
  self.arch = a
  self.roles = {}
  self.token_types = opts.token_types
  self.varlen_supported = opts.varlen ~= false
  self.max_length = opts.max_length or a.max_position_embeddings
  self.varlen = false
  for _, part in ipairs(parts) do
    if part[2] then
      self:add_module(part[1], part[2])
      self.roles[part[3]] = part[2]
    end
  end
end

function Backbone:has_pooler() return self.roles.pooler ~= nil end

--- backbone:set_varlen(flag) -> backbone, whether it will pack: with
-- flag, forward packs the real tokens of a padded batch (bert.models.packing) and
-- never computes the padding; a call's inputs.varlen overrides it.
function Backbone:set_varlen(flag)
  self.varlen = flag ~= false
  return self, self.varlen and self.varlen_supported
end

--- forward{input_ids, token_type_ids?, attention_mask?, varlen?} ->
-- {last_hidden_state [B, T, H], pooler_output [B, H] (when there is a pooler)}, ids, mask.
-- Packed (set_varlen, or inputs.varlen = true; the family supports it and
-- every row starts with a real token): last_hidden_state is [N, H], the
-- real tokens' rows, and out.packing (bert.models.packing) says where they came from.
-- output_hidden_states: out.hidden_states lists the encoder's input, then
-- each layer's output, as HF lists them (packed rows when packed).
function Backbone:forward(inputs)
  local name = (self.class_name or getmetatable(self).__name) .. ":forward"
  if type(inputs) ~= "table" or inputs.input_ids == nil then
    error(name .. ": expects a table with input_ids", 3)
  end
  local a = self.arch
  local ids = check_ids(name, inputs.input_ids, "input_ids")
  local T = ids:size(2)
  if T > self.max_length then
    if self.max_length == a.max_position_embeddings then
      error(string.format("%s: sequence length %d exceeds max_position_embeddings %d", name, T, self.max_length), 3)
    end
    error(string.format("%s: sequence length %d exceeds the %d positions left by max_position_embeddings %d " ..
      "after padding_idx %d", name, T, self.max_length, a.max_position_embeddings, a.pad_token_id), 3)
  end
  local tt
  if self.token_types then
    tt = inputs.token_type_ids and check_ids(name, inputs.token_type_ids, "token_type_ids", ids)
  end
  local mask = inputs.attention_mask and check_ids(name, inputs.attention_mask, "attention_mask", ids)
  local packing
  local want = inputs.varlen
  if want == nil then want = self.varlen end
  if want and self.varlen_supported then packing = varlen.new(mask, ids:size(1), T) end
  local r = self.roles
  local x = r.embeddings(ids, tt, packing or mask)
  if r.project then x = r.project(x) end
  local states = inputs.output_hidden_states and {x} or nil
  x = r.encoder(x, packing or mask, nil, states)
  if r.final_norm then x = r.final_norm(x) end   -- hidden_states keep the encoder's outputs, as HF
  local out = {last_hidden_state = x, packing = packing, hidden_states = states}
  -- the token a sequence-level head reads: the first ([CLS]), or the last
  -- real one in a causal model (config is_decoder, see M.last_token)
  local summary_token
  if packing then
    summary_token = a.is_decoder and packing:last_rows(x) or packing:first_rows(x)
  else
    summary_token = a.is_decoder and M.last_token(x, mask) or x:select(2, 1)
  end
  if a.is_decoder then out.sequence_summary = summary_token end
  if r.pooler then
    local dense = r.pooler.m.dense or r.pooler
    out.pooler_output = dense(summary_token):tanh()
  end
  return out, ids, mask
end
-- }============================================================

return M
