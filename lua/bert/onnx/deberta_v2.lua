--- The ONNX lowering of DeBERTa-v2's own classes (bert.models.deberta_v2):
-- the disentangled attention from standard ops, as its composed form
-- (Attention:attend_composed) computes it.  The relative rows row(i, j)
-- depend on i - j only, so the graph holds them as one constant per
-- distance (log buckets included) and gathers the [T, T] grid from
-- Range(T); c2p and p2c are GatherElements on the [B, A, T, 2S] products
-- of queries (keys) with the projected relative table.
local deberta = require("bert.models.deberta_v2")
local lower = require("bert.onnx.lower")
local onnx_blocks = require("bert.onnx.blocks")
local onnx_heads = require("bert.onnx.heads")

local modules = lower.modules

-- row k of the relative table for distances -(P-1)..P-1, P the longest
-- sequence: k = clamp(span + delta(r), 0, 2 span - 1) as F.relative_rows
local function rows_by_distance(a)
  local P, rows = a.max_position_embeddings, {}
  for r = -(P - 1), P - 1 do
    local delta = (a.buckets > 0 and a.max_relative > 0) and deberta.log_bucket(r, a.buckets, a.max_relative) or r
    local k = a.span + delta
    rows[#rows + 1] = k < 0 and 0 or (k > 2 * a.span - 1 and 2 * a.span - 1 or k)
  end
  return rows
end

--- -> the last layer's output, {penultimate (its input), extra: rel (the
-- relative table [2S, H]), rows and rows_t ([T, T] int64 and its transpose)}.
modules[deberta.Encoder] = function(ex, enc, x)
  local g, a = ex.g, enc.arch
  local extra = {}
  if enc.m.rel_embeddings then
    local R = g:param(enc.m.rel_embeddings.p.weight)
    if enc.m.LayerNorm then R = ex:layer_norm(enc.m.LayerNorm, R) end
    local positions = ex:positions()
    local i, j = g:op("Unsqueeze", {positions, g:int64s({1})}), g:op("Unsqueeze", {positions, g:int64s({0})})
    local distance = g:op("Add", {g:op("Sub", {i, j}), g:int64(a.max_position_embeddings - 1)})   -- >= 0
    local rows = g:op("Gather", {g:int64s(rows_by_distance(a)), distance})
    extra = {rel = R, rows = rows, rows_t = g:op("Transpose", {rows})}
  end
  local layers = enc:layers()
  for i = 1, #layers - 1 do x = ex:lower(layers[i], x, extra) end
  return ex:lower(layers[#layers], x, extra), {penultimate = x, extra = extra}
end

-- the relative table projected by the key or query projection, per head and
-- transposed for the product with queries (keys): [A, d, 2S]
local function relative(ex, att, kind, R)
  local t
  if att.share_att_key then
    local name = att.names[kind == "key" and 2 or 1]
    t = ex:affine(att.p[name .. ".weight"], att.p[name .. ".bias"], R)
  else
    t = ex:linear(att.m[kind == "key" and "pos_key_proj" or "pos_query_proj"], R)
  end
  local g = ex.g
  return g:op("Transpose", {g:op("Reshape", {t, g:int64s({0, att.heads, att.head_dim})})}, {perm = {1, 2, 0}})
end

--- S = (q·kᵀ + c2p + p2c) / sqrt(d · scale_factor), c2p(i, j) = q_i · Kr[row(i, j)],
-- p2c(i, j) = k_j · Qr[row(i, j)]; key mask; softmax; · v.
modules[deberta.Attention] = function(ex, att, x, extra, query_states)
  local g = ex.g
  local q, k, v = onnx_blocks.qkv(ex, att, x, query_states)
  local scores = g:op("MatMul", {q, onnx_blocks.transpose_last(ex, k)})          -- [B, A, T, T]
  if att.c2p or att.p2c then
    local grid = g:op("Shape", {scores})
    if att.c2p then
      local c2p = g:op("MatMul", {q, relative(ex, att, "key", extra.rel)})   -- [B, A, T, 2S]
      scores = g:op("Add", {scores, g:op("GatherElements", {c2p, g:op("Expand", {extra.rows, grid})}, {axis = 3})})
    end
    if att.p2c then
      local p2c = g:op("MatMul", {k, relative(ex, att, "query", extra.rel)})  -- [B, A, T(j), 2S]
      local by_key = g:op("GatherElements", {p2c, g:op("Expand", {extra.rows_t, grid})}, {axis = 3})
      scores = g:op("Add", {scores, onnx_blocks.transpose_last(ex, by_key)})
    end
  end
  scores = g:op("Mul", {scores, g:float(1 / math.sqrt(att.head_dim * att.scale_factor))})
  return onnx_blocks.context(ex, att, scores, v)
end

--- The enhanced mask decoder (DebertaV2ForPreTraining): absolute positions
-- added to the penultimate layer's output, the last layer run twice over
-- it as the queries, then the MLM head.
lower.models[deberta.classes.emd_pretraining] = function(ex, model)
  local g = ex.g
  local base = ex:lower(model.base)
  local enc, run = model.base.roles.encoder, base.encoder
  local table_ = model.positions   -- the decoder's own [max_positions, hidden] table
  local h = run.penultimate
  local z = g:op("Add", {h, g:op("Slice", {g:param(table_.p.weight), g:int64s({0}), ex:seq_len(), g:int64s({0})})})
  local last = enc:layers()[enc.n]
  for _ = 1, 2 do z = ex:lower(last, h, run.extra, z) end
  g:output("logits", onnx_heads.mlm_logits(ex, model.mlm, z), {"batch", "sequence", model.arch.vocab_size})
end

return {}
