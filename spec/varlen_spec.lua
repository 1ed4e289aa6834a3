-- The packed (varlen) path against the padded one: a padded batch whose
-- real tokens are packed into [N, H] rows, attention over each sequence's
-- own rows, the heads reading what they need.  Every family that packs,
-- every head, an odd shape (hidden 20, 4 heads of 5, 13 tokens) with very
-- uneven lengths (1 and the full row): outputs at real positions, losses
-- and every weight's gradient equal the padded path's within 1e-5.
local bert = require("bert")
local blocks = require("bert.models.blocks")

local B, T = 4, 13
local LENGTHS = {1, 12, 5, 13}
local V = 97

-- a deterministic batch: ids 3..V-1 at real tokens, pad_id after; types
-- 0 then 1 in the second half of each sequence
local function batch(pad_id, lengths)
  lengths = lengths or LENGTHS
  local ids, mask, types = {}, {}, {}
  local r = 12345
  for b = 1, #lengths do
    ids[b], mask[b], types[b] = {}, {}, {}
    for j = 1, T do
      r = (r * 1103515245 + 12345) % 2147483648
      local real = j <= lengths[b]
      ids[b][j] = real and 3 + (r >> 8) % (V - 3) or pad_id
      mask[b][j] = real and 1 or 0
      types[b][j] = (real and j > (lengths[b] + 1) // 2) and 1 or 0
    end
  end
  return {input_ids = bert.tensor(ids, "int32"), attention_mask = bert.tensor(mask, "int32"),
    token_type_ids = bert.tensor(types, "int32")}
end

-- per-token labels: a class (or 0/1, or -100) at some real positions, and
-- a label at padding that must be ignored (as -100) by both paths
local function token_labels(lengths, n_classes, every)
  local rows = {}
  for b = 1, B do
    rows[b] = {}
    for j = 1, T do
      if j > lengths[b] then rows[b][j] = (j % 2 == 0) and 1 or -100
      elseif j == 1 or (j % every) == 0 then rows[b][j] = (b * 7 + j * 3) % n_classes
      else rows[b][j] = -100 end
    end
  end
  return bert.tensor(rows, "int32")
end

-- the odd shape, in each family's own config keys
local SHAPE = {
  bert = {hidden_size = 20, num_attention_heads = 4, intermediate_size = 36, num_hidden_layers = 2},
  roberta = {hidden_size = 20, num_attention_heads = 4, intermediate_size = 36, num_hidden_layers = 2,
             max_position_embeddings = T + 2},
  albert = {embedding_size = 12, hidden_size = 20, num_attention_heads = 4, intermediate_size = 36,
            num_hidden_layers = 3},
  electra = {embedding_size = 12, hidden_size = 20, num_attention_heads = 4, intermediate_size = 36,
             num_hidden_layers = 2},
  distilbert = {dim = 20, n_heads = 4, hidden_dim = 36, n_layers = 2},
}

local function build(family, kind, extra)
  local cfg = {vocab_size = V}
  for k, v in pairs(SHAPE[family]) do cfg[k] = v end
  for k, v in pairs(extra or {}) do cfg[k] = v end
  local arch = bert.models.architecture_for(family, kind)
  bert.manual_seed(7)
  local model = bert.model(arch, "tiny", cfg)
  model:evaluate()   -- no dropout: the two paths draw different masks
  return model
end

local function inputs_for(model, kind)
  local lengths = LENGTHS
  local inputs = batch(model.config.pad_token_id or 0, lengths)
  if (model.config.type_vocab_size or 0) < 2 then inputs.token_type_ids = nil end
  if kind == "sequence_classification" then
    inputs.labels = bert.tensor({0, 2, 1, 2}, "int32")
  elseif kind == "token_classification" then
    inputs.labels = token_labels(lengths, 3, 2)
  elseif kind == "question_answering" then
    inputs.start_positions = bert.tensor({0, 4, 2, 11}, "int32")
    inputs.end_positions = bert.tensor({0, 9, 4, 12}, "int32")
  elseif kind == "masked_lm" or kind == "pretraining" then
    inputs.labels = token_labels(lengths, V, 3)
    if kind == "pretraining" then
      inputs.next_sentence_label = bert.tensor({0, 1, 1, 0}, "int32")
      inputs.sentence_order_label = inputs.next_sentence_label
    end
  elseif kind == "replaced_token_detection" then
    inputs.labels = token_labels(lengths, 2, 1)
  end
  return inputs
end

local function grads(model)
  local out = {}
  for _, np in ipairs(model:named_parameters()) do
    local g = np.param:grad()
    out[np.name] = g and g:clone() or false
  end
  return out
end

local function max_abs(t) return t:abs():max():item() end

-- the padded output at real positions and the packed one, comparable
local function comparable(padded, packed, packing, mask)
  if packing and packed:dim() >= 1 and packed:size(1) == packing.total and padded:dim() == packed:dim() + 1 then
    return packing:pack(padded), packed   -- per-token rows
  end
  assert.same(padded:shape(), packed:shape())
  if padded:dim() >= 2 and padded:size(1) == B and padded:size(2) == T then
    local keep = mask:float()
    if padded:dim() == 3 then keep = keep:unsqueeze(3) end
    return padded * keep, packed * keep
  end
  return padded, packed
end

local function check_same(model, inputs, label)
  model:zero_grad()
  model:set_varlen(false)
  local padded = model:forward(inputs)
  padded.loss:backward()
  local want = grads(model)
  model:zero_grad()
  local _, packs = model:set_varlen(true)
  assert.is_true(packs, label .. ": set_varlen(true) says it will not pack")
  local packed = model:forward(inputs)
  assert.truthy(packed.packing, label .. ": no packing in the output")
  assert.equal(31, packed.packing.total)
  packed.loss:backward()
  local n = 0
  for _, key in ipairs({"logits", "start_logits", "end_logits", "prediction_logits", "seq_relationship_logits",
                        "pooler_output", "last_hidden_state", "loss"}) do
    if padded[key] ~= nil then
      assert.truthy(packed[key], label .. ": packed output lacks " .. key)
      local a, b = comparable(padded[key], packed[key], packed.packing, inputs.attention_mask)
      local d = max_abs(a - b)
      assert.is_true(d <= 1e-5, string.format("%s: %s differs by %.3g", label, key, d))
      n = n + 1
    end
  end
  assert.is_true(n >= 2)
  local checked = 0
  for _, np in ipairs(model:named_parameters()) do
    local g, w = np.param:grad(), want[np.name]
    if w then
      assert.truthy(g, label .. ": no packed gradient for " .. np.name)
      local d = max_abs(g - w)
      assert.is_true(d <= 1e-5 * (1 + max_abs(w)), string.format("%s: gradient of %s differs by %.3g", label, np.name, d))
      checked = checked + 1
    end
  end
  -- every weight that gets a gradient in the padded path (the word
  -- embeddings included) gets the same one packed
  assert.is_true(checked >= 10, label .. ": only " .. checked .. " gradients")
end

local KINDS = {
  bert = {"sequence_classification", "token_classification", "question_answering", "masked_lm", "pretraining"},
  roberta = {"sequence_classification", "token_classification", "question_answering", "masked_lm"},
  albert = {"sequence_classification", "token_classification", "question_answering", "masked_lm", "pretraining"},
  electra = {"sequence_classification", "token_classification", "question_answering", "masked_lm",
             "replaced_token_detection"},
  distilbert = {"sequence_classification", "token_classification", "question_answering", "masked_lm"},
}

describe("the packed (varlen) path", function()
  for _, family in ipairs({"bert", "roberta", "albert", "electra", "distilbert"}) do
    for _, kind in ipairs(KINDS[family]) do
      it(family .. " " .. kind .. ": outputs, loss and every gradient equal the padded path", function()
        local model = build(family, kind, {num_labels = 3})
        check_same(model, inputs_for(model, kind), family .. " " .. kind)
      end)
    end
  end

  it("packs the real tokens in order, with their columns, first rows and cu_seqlens offsets", function()
    local mask = bert.tensor({{1, 1, 0, 0}, {1, 0, 1, 1}, {1, 1, 1, 1}}, "int32")
    local p = blocks.packing(mask, 3, 4)
    assert.equal(9, p.total)
    assert.same({2, 3, 4}, p.lengths)
    assert.same({0, 1, 4, 6, 7, 8, 9, 10, 11}, p.rows:totable())
    assert.same({0, 1, 0, 2, 3, 0, 1, 2, 3}, p.columns:totable())
    assert.same({0, 2, 5}, p.first:totable())
    assert.same({0, 2, 5, 9}, p.offsets:totable())
  end)
end)
