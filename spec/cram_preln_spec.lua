-- Pre-LayerNorm BERT (config pre_layer_norm = true, Cramming's layout):
-- the forward against a composition of plain tensor ops, gradients by
-- finite differences, config.json and safetensors round trips, the final
-- LayerNorm's name, post-LN unchanged, and the refusals (other families,
-- ONNX export, a non-boolean value).
local bert = require("bert")
local G = require("spec.support.gradcheck")
local tmp = require("spec.support.tmpdir")

local V, H, A, I, L = 50, 12, 3, 20, 2
local CFG = {vocab_size = V, hidden_size = H, num_attention_heads = A, intermediate_size = I,
             num_hidden_layers = L, max_position_embeddings = 16, hidden_dropout_prob = 0,
             attention_probs_dropout_prob = 0, initializer_range = 0.3}   -- residual branches that show

local function config(extra)
  local c = {}
  for k, v in pairs(CFG) do c[k] = v end
  for k, v in pairs(extra or {}) do c[k] = v end
  return c
end

local function build(arch, extra, seed)
  bert.manual_seed(seed or 3)
  local model = bert.model(arch, "tiny", config(extra))
  model:evaluate()
  return model
end

local INPUTS = {
  input_ids = bert.tensor({{2, 7, 9, 11, 3, 0}, {2, 5, 3, 0, 0, 0}}, "int32"),
  attention_mask = bert.tensor({{1, 1, 1, 1, 1, 0}, {1, 1, 1, 0, 0, 0}}, "int32"),
  token_type_ids = bert.tensor({{0, 0, 0, 1, 1, 0}, {0, 0, 0, 0, 0, 0}}, "int32"),
}

local function max_abs(t) return t:abs():max():item() end

-- LayerNorm over the last dim from its definition (biased variance)
local function layer_norm(x, ln)
  local mu = x:mean(-1, true)
  local centred = x - mu
  local var = (centred * centred):mean(-1, true)
  return centred / (var + ln.eps):sqrt() * ln.p.weight + ln.p.bias
end

local function linear(x, lin) return x:matmul(lin.p.weight:transpose(1, 2)) + lin.p.bias end

-- softmax(q k^T / sqrt(d) + key mask) v, heads split by hand
local function attention(x, att, mask)
  local B, T = x:size(1), x:size(2)
  local d = H // A
  local function heads(name)
    local t = x:matmul(att.p[name .. ".weight"]:transpose(1, 2)) + att.p[name .. ".bias"]
    return t:reshape(B, T, A, d):transpose(2, 3)
  end
  local q, k, v = heads("query"), heads("key"), heads("value")
  local scores = q:matmul(k:transpose(3, 4)) / math.sqrt(d)
  local bias = (1 - mask:float()) * -1e9
  local probs = (scores + bias:view(B, 1, 1, T)):softmax(-1)
  return probs:matmul(v):transpose(2, 3):reshape(B, T, H)
end

-- x1 = x + attn(LN(x)), out = x1 + ffn(LN(x1)); then the final LN
local function reference(model, inputs)
  local base = model.m.bert or model
  local x = base.m.embeddings(inputs.input_ids, inputs.token_type_ids, inputs.attention_mask)
  for i = 0, L - 1 do
    local layer = base.m.encoder.m.layer.m[tostring(i)].m
    local att = layer.attention.m
    local x1 = x + linear(attention(layer_norm(x, att.LayerNorm), att.self, inputs.attention_mask), att.output.m.dense)
    local inner = linear(layer_norm(x1, layer.intermediate.m.LayerNorm), layer.intermediate.m.dense):gelu()
    x = x1 + linear(inner, layer.output.m.dense)
  end
  return layer_norm(x, base.m.LayerNorm)
end

describe("pre-LayerNorm BERT (config pre_layer_norm)", function()
  it("computes the pre-LN composition of plain ops, padded and packed", function()
    local model = build("BertModel", {pre_layer_norm = true})
    local want = bert.no_grad(function() return reference(model, INPUTS) end)
    local keep = INPUTS.attention_mask:float():unsqueeze(3)
    local padded = bert.no_grad(function() return model:forward(INPUTS).last_hidden_state end)
    assert.is_true(max_abs((padded - want) * keep) < 1e-5)
    model:set_varlen(true)
    local packed = bert.no_grad(function() return model:forward(INPUTS) end)
    local d = max_abs(packed.packing:pack(want) - packed.last_hidden_state)
    assert.is_true(d < 1e-5, "packed differs by " .. d)
    -- not the post-LN model under another name
    local post = build("BertModel", {})
    local other = bert.no_grad(function() return post:forward(INPUTS).last_hidden_state end)
    assert.is_true(max_abs((other - want) * keep) > 1e-2)
  end)

  it("has the gradients of finite differences (LayerNorms, a projection, the embeddings)", function()
    local model = build("BertForMaskedLM", {pre_layer_norm = true})
    local inputs = {}
    for k, v in pairs(INPUTS) do inputs[k] = v end
    inputs.labels = bert.tensor({{-100, 7, -100, 11, -100, -100}, {-100, -100, 3, -100, -100, -100}}, "int32")
    local p = {}
    for _, np in ipairs(model:named_parameters()) do p[np.name] = np.param end
    local checked = {"bert.LayerNorm.weight", "bert.encoder.layer.0.attention.LayerNorm.weight",
      "bert.encoder.layer.1.intermediate.LayerNorm.bias", "bert.encoder.layer.0.output.dense.weight",
      "bert.embeddings.word_embeddings.weight"}
    local params = {}
    for i, name in ipairs(checked) do params[i] = assert(p[name], name) end
    G.gradcheck(function() return model:forward(inputs).loss end, params, {eps = 1e-2, atol = 3e-3, rtol = 3e-2})
  end)

  it("saves pre_layer_norm in config.json and the final LayerNorm as bert.LayerNorm, and loads both back", function()
    local dir = tmp.dir()
    local model = build("BertForMaskedLM", {pre_layer_norm = true})
    assert(require("bert.model_dir").save(dir, model))
    local text = assert(require("bert.fs").read_file(dir .. "/config.json"))
    assert.truthy(text:find('"pre_layer_norm":true', 1, true))
    local names = {}
    for name in pairs(assert(bert.load_safetensors(dir .. "/model.safetensors"))) do names[name] = true end
    assert.truthy(names["bert.LayerNorm.weight"])
    assert.truthy(names["bert.encoder.layer.1.attention.LayerNorm.bias"])
    assert.truthy(names["bert.encoder.layer.1.intermediate.LayerNorm.weight"])
    assert.is_nil(names["bert.encoder.layer.1.attention.output.LayerNorm.weight"])
    assert.is_nil(names["bert.encoder.layer.1.output.LayerNorm.weight"])
    local loaded = bert.from_pretrained(dir)
    loaded:evaluate()
    assert.is_true(loaded.config.pre_layer_norm)
    local a = bert.no_grad(function() return model:forward(INPUTS).prediction_logits or model:forward(INPUTS).logits end)
    local b = bert.no_grad(function() return loaded:forward(INPUTS).prediction_logits or loaded:forward(INPUTS).logits end)
    assert.equal(0, max_abs(a - b))
  end)

  it("leaves post-LN as it was: the same parameters, names and outputs with pre_layer_norm false or absent", function()
    local plain, off = build("BertForMaskedLM", {}), build("BertForMaskedLM", {pre_layer_norm = false})
    local a, b = plain:named_parameters(), off:named_parameters()
    assert.equal(#a, #b)
    for i = 1, #a do
      assert.equal(a[i].name, b[i].name)
      assert.equal(0, max_abs(a[i].param - b[i].param))
    end
    for _, np in ipairs(a) do assert.is_nil(np.name:find("intermediate.LayerNorm", 1, true)) end
  end)

  it("is refused by the families that do not implement it, and for a value that is not a boolean", function()
    for _, arch in ipairs({"RobertaForMaskedLM", "ElectraForPreTraining", "AlbertForMaskedLM", "DistilBertForMaskedLM"}) do
      local ok, err = pcall(bert.model, arch, "tiny", {pre_layer_norm = true})
      assert.is_false(ok, arch)
      assert.truthy(tostring(err):find("'pre_layer_norm' is supported by the bert family only", 1, true), tostring(err))
    end
    local ok, err = pcall(bert.model, "BertModel", "tiny", {pre_layer_norm = "yes"})
    assert.is_false(ok)
    assert.truthy(tostring(err):find("'pre_layer_norm' must be true or false, got yes", 1, true), tostring(err))
  end)

  it("is refused by the ONNX export rather than written as a post-LN graph", function()
    local model = build("BertModel", {pre_layer_norm = true})
    local path = os.tmpname()
    local ok, err = pcall(require("bert.onnx").export, model, path)
    os.remove(path)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("pre-LayerNorm layers (config pre_layer_norm)", 1, true), tostring(err))
  end)
end)
