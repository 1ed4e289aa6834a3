-- The packed (varlen) path against the padded one: a padded batch whose
-- real tokens are packed into [N, H] rows, attention over each sequence's
-- own rows, the heads reading what they need.  Every family that packs,
-- every head, an odd shape (hidden 20, 4 heads of 5, 13 tokens) with very
-- uneven lengths (1 and the full row): outputs at real positions, losses
-- and every weight's gradient equal the padded path's within 1e-5.
local bert = require("bert")
local packing = require("bert.models.packing")

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

local function check_same(model, inputs, label, train)
  model:training(train == true)
  model:zero_grad()
  model:set_varlen(false)
  bert.manual_seed(11)
  local padded = model:forward(inputs)
  padded.loss:backward()
  local want = grads(model)
  model:zero_grad()
  local _, packs = model:set_varlen(true)
  assert.is_true(packs, label .. ": set_varlen(true) says it will not pack")
  bert.manual_seed(11)
  local packed = model:forward(inputs)
  if train then   -- not vacuous: the masks change the loss
    local eval_loss = bert.no_grad(function() return model:evaluate():forward(inputs).loss:item() end)
    model:training()
    assert.is_true(math.abs(eval_loss - packed.loss:item()) > 1e-4, label .. ": dropout changed nothing")
  end
  assert.truthy(packed.packing, label .. ": no packing in the output")
  assert.equal(inputs.attention_mask:sum():item(), packed.packing.total)
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
      it(family .. " " .. kind .. ": training with dropout draws the padded path's masks (any rank count)", function()
        local drop = family == "distilbert" and {dropout = 0.2, attention_dropout = 0.2, qa_dropout = 0.2}
          or {hidden_dropout_prob = 0.2, attention_probs_dropout_prob = 0.2, classifier_dropout = 0.2}
        drop.num_labels = 3
        local model = build(family, kind, drop)
        check_same(model, inputs_for(model, kind), family .. " " .. kind .. " (training)", true)
      end)
    end
  end

  it("a pre-LayerNorm BERT (config pre_layer_norm): outputs, loss and gradients equal the padded path, with dropout too", function()
    for _, kind in ipairs({"masked_lm", "pretraining", "sequence_classification"}) do
      local model = build("bert", kind, {pre_layer_norm = true, num_labels = 3})
      check_same(model, inputs_for(model, kind), "pre-LN bert " .. kind)
      model = build("bert", kind, {pre_layer_norm = true, num_labels = 3, hidden_dropout_prob = 0.2,
        attention_probs_dropout_prob = 0.2})
      check_same(model, inputs_for(model, kind), "pre-LN bert " .. kind .. " (training)", true)
    end
  end)

  it("a causal (is_decoder) BERT: the LM head and a classifier reading the last real token equal the padded path", function()
    local lm = build("bert", "causal_lm", {is_decoder = true})
    local inputs = batch(0)
    local labels = inputs.input_ids:masked_fill(inputs.attention_mask:eq(0), -100)
    inputs.labels = labels
    check_same(lm, inputs, "bert causal_lm")
    check_same(lm, inputs, "bert causal_lm (training)", true)
    local cls = build("bert", "sequence_classification", {is_decoder = true, num_labels = 3})
    check_same(cls, inputs_for(cls, "sequence_classification"), "causal bert sequence_classification")
  end)

  it("bert multiple_choice: the choices packed as sequences equal the padded path", function()
    local model = build("bert", "multiple_choice")
    local flat = batch(0)
    local C = 2
    local inputs = {}
    for _, k in ipairs({"input_ids", "attention_mask", "token_type_ids"}) do
      inputs[k] = flat[k]:view(B // C, C, T)
    end
    inputs.labels = bert.tensor({1, 0}, "int32")
    model:zero_grad()
    model:set_varlen(false)
    local padded = model:forward(inputs)
    padded.loss:backward()
    local want = grads(model)
    model:zero_grad()
    model:set_varlen(true)
    local packed = model:forward(inputs)
    packed.loss:backward()
    assert.is_true(max_abs(padded.logits - packed.logits) <= 1e-5)
    assert.is_true(math.abs(padded.loss:item() - packed.loss:item()) <= 1e-5)
    for _, np in ipairs(model:named_parameters()) do
      if want[np.name] then assert.is_true(max_abs(np.param:grad() - want[np.name]) <= 1e-5, np.name) end
    end
  end)

  it("training with dropout on a batch wider than its longest sequence equals the padded path", function()
    local model = build("bert", "question_answering", {hidden_dropout_prob = 0.2, attention_probs_dropout_prob = 0.2})
    local inputs = inputs_for(model, "question_answering")
    local m = inputs.attention_mask:totable()
    for b = 1, B do m[b][T] = 0 end   -- the last column is padding everywhere: longest 12 of 13
    inputs.attention_mask = bert.tensor(m, "int32")
    inputs.end_positions = bert.tensor({0, 9, 4, 11}, "int32")
    check_same(model, inputs, "bert qa (width > longest)", true)
  end)

  it("training with hidden dropout only (the varlen kernel) equals the padded path", function()
    local model = build("bert", "token_classification", {num_labels = 3, hidden_dropout_prob = 0.2,
      attention_probs_dropout_prob = 0, classifier_dropout = 0.2})
    check_same(model, inputs_for(model, "token_classification"), "bert tagging (hidden dropout)", true)
  end)

  it("packs a batch without an attention mask (every token real)", function()
    local model = build("bert", "token_classification", {num_labels = 3})
    local inputs = batch(0, {T, T, T, T})
    inputs.attention_mask = nil
    inputs.labels = token_labels({T, T, T, T}, 3, 2)
    local padded = model:forward(inputs)
    model:set_varlen(true)
    local packed = model:forward(inputs)
    assert.equal(B * T, packed.packing.total)
    assert.is_true(max_abs(padded.logits:reshape(B * T, 3) - packed.logits) <= 1e-5)
    assert.is_true(math.abs(padded.loss:item() - packed.loss:item()) <= 1e-5)
  end)

  it("runs padded where it cannot pack: a row that starts with padding, and DeBERTa", function()
    local model = build("bert", "sequence_classification", {num_labels = 3})
    model:set_varlen(true)
    local inputs = batch(0)
    local m = inputs.attention_mask:totable()
    m[3][1] = 0
    inputs.attention_mask = bert.tensor(m, "int32")
    local out = model:forward(inputs)
    assert.is_nil(out.packing)
    assert.same({B, 3}, out.logits:shape())
    assert.is_nil(packing.new(inputs.attention_mask, B, T))
    -- a call's varlen overrides the model's setting
    assert.truthy(model:forward({input_ids = batch(0).input_ids, attention_mask = batch(0).attention_mask}).packing)
    assert.is_nil(model:forward({input_ids = batch(0).input_ids, attention_mask = batch(0).attention_mask,
      varlen = false}).packing)

    bert.manual_seed(3)
    local deberta = bert.model("DebertaV2ForSequenceClassification", "tiny", {vocab_size = V, num_labels = 3})
    deberta:evaluate()
    local want = deberta:forward(batch(0)).logits
    local _, packs = deberta:set_varlen(true)
    assert.is_false(packs)
    local got = deberta:forward(batch(0))
    assert.is_nil(got.packing)
    assert.equal(0, max_abs(got.logits - want))
  end)

  it("gives the same gradients with activation recomputation, and trains with dropout", function()
    local model = build("bert", "token_classification", {num_labels = 3})
    local inputs = inputs_for(model, "token_classification")
    model:set_varlen(true)
    model:forward(inputs).loss:backward()
    local want = grads(model)
    model:zero_grad()
    model:set_recompute(true)
    model:forward(inputs).loss:backward()
    for _, np in ipairs(model:named_parameters()) do
      if want[np.name] then assert.is_true(max_abs(np.param:grad() - want[np.name]) <= 1e-6, np.name) end
    end
    model:set_recompute(false)
    model:training()
    local out = model:forward(inputs)
    out.loss:backward()
    assert.truthy(out.loss:item() == out.loss:item())
    assert.same({31, 3}, out.logits:shape())
  end)

  it("attends within each sequence: the varlen attention equals the padded kernel run on each sequence alone", function()
    local A, d = 3, 4
    local lengths = {1, 7, 3, 8}
    local mask = {}
    for b, n in ipairs(lengths) do
      mask[b] = {}
      for j = 1, 8 do mask[b][j] = j <= n and 1 or 0 end
    end
    local p = packing.new(bert.tensor(mask, "int32"), 4, 8)
    local N = p.total
    local function leaf(seed)
      local t = bert.randn({N, A, d}, {seed = seed})
      t:requires_grad(true)
      return t
    end
    local q, k, v = leaf(1), leaf(2), leaf(3)
    local gy = bert.randn({N, A, d}, {seed = 4})
    local got = packing.attention(q, k, v, p, {})
    got:backward(gy)
    local gq, gk, gv = q:grad():clone(), k:grad():clone(), v:grad():clone()
    q:set_grad(nil); k:set_grad(nil); v:set_grad(nil)
    -- the reference: each sequence's rows through the 4-D kernel on their own
    local parts, offsets = {}, p.offsets:totable()
    for b = 1, #lengths do
      local function heads(t) return t:narrow(1, offsets[b] + 1, lengths[b]):transpose(1, 2):unsqueeze(1) end
      parts[b] = bert.F.attention(heads(q), heads(k), heads(v)):squeeze(1):transpose(1, 2)
    end
    local want = bert.cat(parts, 1)
    want:backward(gy)
    assert.is_true(max_abs(got - want) <= 1e-5)
    assert.is_true(max_abs(gq - q:grad()) <= 1e-5)
    assert.is_true(max_abs(gk - k:grad()) <= 1e-5)
    assert.is_true(max_abs(gv - v:grad()) <= 1e-5)
  end)

  it("fine-tuning evaluation reads packed outputs: tagging, classification and QA predictions equal padded", function()
    local finetune = require("bert.finetune")
    local features = {}
    for k, n in ipairs({1, 9, 4, 13, 2}) do
      local ids, first = {2}, {}
      for j = 2, n do ids[j] = 3 + (k * 13 + j * 7) % (V - 3) end
      for w = 1, n - 1 do first[w] = w + 1 end
      features[k] = {ids = ids, first = first, n_words = n - 1}
    end
    local function both(kind, fn)
      local model = build("bert", kind, {num_labels = 3})
      model:set_varlen(false)
      local a, a2 = fn(model)
      model:set_varlen(true)
      local b, b2 = fn(model)
      return a, b, a2, b2
    end
    local tags_padded, tags_packed, p_padded, p_packed = both("token_classification", function(m)
      return finetune.tagging.predict_features(m, features, {batch_size = 3})
    end)
    assert.same(tags_padded, tags_packed)
    for k = 1, #p_padded do assert.tensor_near(p_padded[k], p_packed[k], 1e-5) end
    local cls_padded, cls_packed, pr_padded, pr_packed = both("sequence_classification", function(m)
      return finetune.classify.predict_features(m, features, {batch_size = 3})
    end)
    assert.same(cls_padded, cls_packed)
    assert.tensor_near(pr_padded, pr_packed, 1e-5)
    local s_padded, s_packed, e_padded, e_packed = both("question_answering", function(m)
      return finetune.qa.logits(m, features, {batch_size = 3})
    end)
    for k, f in ipairs(features) do
      local n = #f.ids
      assert.tensor_near(table.move(s_padded[k], 1, n, 1, {}), table.move(s_packed[k], 1, n, 1, {}), 1e-5)
      assert.tensor_near(table.move(e_padded[k], 1, n, 1, {}), table.move(e_packed[k], 1, n, 1, {}), 1e-5)
      if n < #s_packed[k] then assert.equal(-1e9, s_packed[k][n + 1]) end
    end
  end)

  it("packs the real tokens in order, with their columns, first rows and cu_seqlens offsets", function()
    local mask = bert.tensor({{1, 1, 0, 0}, {1, 0, 1, 1}, {1, 1, 1, 1}}, "int32")
    local p = packing.new(mask, 3, 4)
    assert.equal(9, p.total)
    assert.same({2, 3, 4}, p.lengths)
    assert.same({0, 1, 4, 6, 7, 8, 9, 10, 11}, p.rows:totable())
    assert.same({0, 1, 0, 2, 3, 0, 1, 2, 3}, p.columns:totable())
    assert.same({0, 2, 5}, p.first:totable())
    assert.same({0, 2, 5, 9}, p.offsets:totable())
  end)
end)

local info = bert.backend_info().vulkan
describe("the packed path on vulkan (lavapipe here)", function()
  if not info.available then
    pending(require("spec.support.optional").no_vulkan())
    return
  end
  for _, family in ipairs({"bert", "distilbert"}) do
    for _, kind in ipairs({"sequence_classification", "token_classification", "question_answering", "masked_lm"}) do
      it(family .. " " .. kind .. ": packed on the device equals padded on the cpu", function()
        local model = build(family, kind, {num_labels = 3})
        local inputs = inputs_for(model, kind)
        local padded = model:forward(inputs)
        padded.loss:backward()
        local want = grads(model)
        model:zero_grad()
        model:to("vulkan")
        model:set_varlen(true)
        local packed = model:forward(inputs)
        assert.truthy(packed.packing)
        packed.loss:backward()
        assert.is_true(math.abs(padded.loss:item() - packed.loss:to("cpu"):item()) <= 1e-5)
        for _, key in ipairs({"logits", "start_logits", "end_logits"}) do
          if padded[key] then
            local a, b = comparable(padded[key], packed[key]:to("cpu"), packed.packing, inputs.attention_mask)
            assert.is_true(max_abs(a - b) <= 1e-5, key)
          end
        end
        for _, np in ipairs(model:named_parameters()) do
          if want[np.name] then
            local d = max_abs(np.param:grad():to("cpu") - want[np.name])
            assert.is_true(d <= 1e-5 * (1 + max_abs(want[np.name])), np.name .. " " .. d)
          end
        end
      end)
    end
  end
end)
