--- The ONNX lowering of bert.models.blocks (embeddings, self-attention,
-- the post-LN layers, encoders, the backbone), which every family is built
-- from: BERT, RoBERTa, ALBERT, ELECTRA and DistilBERT entirely, DeBERTa
-- but for its attention and encoder (bert.onnx.deberta_v2).
local blocks = require("bert.models.blocks")
local graph = require("bert.onnx.graph")
local lower = require("bert.onnx.lower")

local M = {}
local modules = lower.modules

-- {============================================================ embeddings

--- token_types: whether the backbone reads token_type_ids (else row 0, as
-- the forward's zeros).
modules[blocks.Embeddings] = function(ex, emb, token_types)
  local g, m = ex.g, emb.m
  local ids = ex:input("input_ids")
  local x = g:op("Gather", {g:param(m.word_embeddings.p.weight), ids})
  if m.token_type_embeddings then
    local types = token_types and ex:input("token_type_ids") or g:int64(0)
    x = g:op("Add", {x, g:op("Gather", {g:param(m.token_type_embeddings.p.weight), types})})
  end
  if emb.positions == "absolute" then        -- rows 0..T-1
    local rows = g:op("Slice", {g:param(m.position_embeddings.p.weight), g:int64s({0}), ex:seq_len(), g:int64s({0})})
    x = g:op("Add", {x, rows})
  elseif emb.positions == "roberta" then     -- pad + running count of real tokens; pad at padding
    local real = g:op("Cast", {g:op("Not", {g:op("Equal", {ids, g:int64(emb.pad)})})}, {to = graph.INT64})
    local positions = g:op("Add", {g:op("Mul", {g:op("CumSum", {real, g:int64(1)}), real}), g:int64(emb.pad)})
    x = g:op("Add", {x, g:op("Gather", {g:param(m.position_embeddings.p.weight), positions})})
  elseif emb.positions ~= "none" then
    ex:unsupported("positions " .. tostring(emb.positions))
  end
  if m.embed_proj then x = ex:linear(m.embed_proj, x) end
  x = ex:layer_norm(m.LayerNorm, x)
  if emb.mask_output then x = g:op("Mul", {x, g:op("Unsqueeze", {ex:mask(), g:int64s({2})})}) end
  return x
end
-- }============================================================

-- {============================================================ attention

--- x [B, T, H] -> q, k, v [B, A, T, d] (query_states, when given, for the queries).
function M.qkv(ex, att, x, query_states)
  local g = ex.g
  local split = g:int64s({0, 0, att.heads, att.head_dim})
  local function heads(name, from)
    local t = ex:affine(att.p[name .. ".weight"], att.p[name .. ".bias"], from)
    return g:op("Transpose", {g:op("Reshape", {t, split})}, {perm = {0, 2, 1, 3}})
  end
  return heads(att.names[1], query_states or x), heads(att.names[2], x), heads(att.names[3], x)
end

--- softmax(scores + key mask) · v [B, A, T, d] -> context [B, T, H].
function M.context(ex, att, scores, v)
  local g = ex.g
  local probs = g:op("Softmax", {g:op("Add", {scores, ex:mask_bias()})}, {axis = -1})
  local ctx = g:op("Transpose", {g:op("MatMul", {probs, v})}, {perm = {0, 2, 1, 3}})
  return g:op("Reshape", {ctx, g:int64s({0, 0, att.heads * att.head_dim})})
end

function M.transpose_last(ex, t) return ex.g:op("Transpose", {t}, {perm = {0, 1, 3, 2}}) end

modules[blocks.SelfAttention] = function(ex, att, x, _, query_states)
  local g = ex.g
  local q, k, v = M.qkv(ex, att, x, query_states)
  local scores = g:op("Mul", {g:op("MatMul", {q, M.transpose_last(ex, k)}), g:float(1 / math.sqrt(att.head_dim))})
  if att.causal then scores = g:op("Add", {scores, ex:causal_bias()}) end   -- query i sees keys j <= i
  return M.context(ex, att, scores, v)
end
-- }============================================================

-- {============================================================ layers and encoders

modules[blocks.Layer] = function(ex, layer, x, extra, query_states)
  if layer.pre_layer_norm then   -- never exported as the post-LN graph it is not
    ex:unsupported("pre-LayerNorm layers (config pre_layer_norm): only post-LN layers are lowered")
  end
  local attention = layer.m.attention
  local ctx = ex:lower(attention.m.self, x, extra, query_states)
  local out = attention.m.output.m
  local x1 = ex:layer_norm(out.LayerNorm, ex:linear(out.dense, ctx), query_states or x)
  local inner = ex:linear_act(layer.m.intermediate.m.dense, layer.act, x1)
  return ex:layer_norm(layer.m.output.m.LayerNorm, ex:linear(layer.m.output.m.dense, inner), x1)
end

modules[blocks.MappedLayer] = function(ex, layer, x)
  local piece = layer.piece
  local x1 = ex:layer_norm(piece.attention_norm, ex:linear(piece.attention_out, ex:lower(piece.attention, x)), x)
  local f = ex:linear(piece.ffn_out, ex:linear_act(piece.ffn_in, layer.act, x1))
  return ex:layer_norm(piece.output_norm, f, x1)
end

modules[blocks.Encoder] = function(ex, enc, x)
  for _, layer in ipairs(enc:layers()) do x = ex:lower(layer, x) end
  return x
end

modules[blocks.SharedEncoder] = function(ex, enc, x)
  if enc.project then x = ex:linear(enc.project, x) end
  local groups = enc.m[enc.names[1]]
  for i = 0, enc.depth - 1 do
    local layers = groups.m[tostring(i * enc.num_groups // enc.depth)].m[enc.names[2]]
    for j = 0, enc.inner - 1 do x = ex:lower(layers.m[tostring(j)], x) end
  end
  return x
end
-- }============================================================

--- The backbone -> {last_hidden_state, summary (the token a sequence-level
-- head reads: the first, or a causal model's last real one), pooler_output
-- (with a pooler), encoder (what the encoder's lowering returned besides
-- its output)}.
modules[blocks.Backbone] = function(ex, base)
  local r = base.roles
  local x = ex:lower(r.embeddings, base.token_types)
  if r.project then x = ex:linear(r.project, x) end
  local encoder_run
  x, encoder_run = ex:lower(r.encoder, x)
  local out = {last_hidden_state = x, encoder = encoder_run}
  out.summary = base.arch.is_decoder and ex:last_token(x) or ex:first_token(x)
  if r.pooler then
    out.pooler_output = ex.g:op("Tanh", {ex:linear(r.pooler.m.dense or r.pooler, out.summary)})
  end
  return out
end

-- the bare model (bert.model("BertModel", ...)): its outputs
lower.models[blocks.Backbone] = function(ex, base)
  local out = ex:lower(base)
  local H = base.arch.hidden_size
  ex.g:output("last_hidden_state", out.last_hidden_state, {"batch", "sequence", H})
  if out.pooler_output then ex.g:output("pooler_output", out.pooler_output, {"batch", H}) end
end

return M
