-- Loading and building models of any family: tied and untied decoders both
-- ways, JSON floats under integer keys, refusing checkpoints that do not
-- fit the model, malformed configs, bounds on sizes and on memory, sizes by
-- name, and the --model resolver.
local bert = require("bert")
local cjson = require("cjson")

local BERT = "spec/fixtures/bert_tiny"
local ROBERTA = "spec/fixtures/roberta_tiny"

local tmpdir = require("spec.support.tmpdir").dir

local function read_config(dir) return cjson.decode(io.open(dir .. "/config.json"):read("a")) end

local function write_config(dir, c)
  local f = io.open(dir .. "/config.json", "w")
  f:write(cjson.encode(c))
  f:close()
end

-- a copy of a fixture with its config edited by fn (and its weights by wfn)
local function variant(src, fn, wfn)
  local dir = tmpdir()
  local c = read_config(src)
  fn(c)
  write_config(dir, c)
  local w = assert(bert.load_safetensors(src .. "/model.safetensors"))
  if wfn then wfn(w) end
  assert(bert.save_safetensors(dir .. "/model.safetensors", w))
  return dir
end

local function max_abs_diff(a, b) return (a - b):abs():max():item() end

local ids = bert.tensor({{5, 6, 7, 8, 9}, {5, 9, 8, 0, 0}}, "int32")
local mask = ids:ne(0)

describe("tie_word_embeddings", function()
  it("false keeps a decoder of its own, written to the file and read back", function()
    local m = bert.model("BertForMaskedLM", "tiny", {vocab_size = 40, max_position_embeddings = 16, tie_word_embeddings = false})
    local sd = m:state_dict()
    assert.truthy(sd["cls.predictions.decoder.weight"])
    assert.are_not.equal(sd["cls.predictions.decoder.weight"], sd["bert.embeddings.word_embeddings.weight"])
    local dir = tmpdir()
    assert(m:save_pretrained(dir))
    assert.truthy(bert.safetensors_header(dir .. "/model.safetensors")["cls.predictions.decoder.weight"])
    assert.is_false(read_config(dir).tie_word_embeddings)
    local again, info = bert.from_pretrained(dir, {verbose = false})
    assert.same({}, info.missing)
    assert.same({}, info.unexpected)
    m:evaluate(); again:evaluate()
    local a = m:forward{input_ids = ids, attention_mask = mask}.logits
    local b = again:forward{input_ids = ids, attention_mask = mask}.logits
    assert.equal(0, max_abs_diff(a, b))
  end)

  it("false writes the decoder's bias under both its names, and the model card counts it once", function()
    local m = bert.model("BertForMaskedLM", "tiny", {vocab_size = 20000, max_position_embeddings = 16,
                                                    tie_word_embeddings = false})
    local dir = tmpdir()
    assert(m:save_pretrained(dir))
    local header = bert.safetensors_header(dir .. "/model.safetensors")
    assert.truthy(header["cls.predictions.bias"])
    assert.truthy(header["cls.predictions.decoder.bias"])
    local n = 0
    for _, np in ipairs(m:named_parameters()) do n = n + np.param:numel() end
    local card = io.open(dir .. "/README.md"):read("a")
    assert.truthy(card:find(string.format("%.2fM parameters", n / 1e6), 1, true), card)
  end)

  it("an HF file with a separate decoder and tie_word_embeddings false loads that decoder", function()
    local decoder = bert.randn({200, 128}, {seed = 7})
    local dir = variant(BERT, function(c) c.tie_word_embeddings = false end,
      function(w) w["cls.predictions.decoder.weight"] = decoder end)
    local m, info = bert.from_pretrained(dir, {verbose = false})
    assert.same({}, info.missing)
    assert.same({}, info.unexpected)
    assert.equal(0, max_abs_diff(m:state_dict()["cls.predictions.decoder.weight"], decoder))
    -- and the tied default still uses the embeddings
    local tied = bert.from_pretrained(BERT, {verbose = false})
    assert.is_nil(tied:state_dict()["cls.predictions.decoder.weight"])
  end)

  it("a tied model leaves the decoder out of the file, as HF does", function()
    local m = bert.model("RobertaForMaskedLM", "tiny", {vocab_size = 40, max_position_embeddings = 20})
    local dir = tmpdir()
    assert(m:save_pretrained(dir))
    local h = bert.safetensors_header(dir .. "/model.safetensors")
    assert.is_nil(h["lm_head.decoder.weight"])
    assert.truthy(h["lm_head.bias"])
  end)
end)

describe("config keys", function()
  it("takes JSON floats under integer keys (num_labels 3.0) in every family", function()
    for _, arch in ipairs({"BertForSequenceClassification", "RobertaForSequenceClassification",
                           "AlbertForSequenceClassification", "ElectraForSequenceClassification",
                           "DistilBertForSequenceClassification", "DebertaV2ForSequenceClassification"}) do
      local m = bert.model(arch, "tiny", {vocab_size = 40.0, max_position_embeddings = 24.0, num_labels = 3.0})
      assert.equal(3, m:forward{input_ids = ids, attention_mask = mask}.logits:size(2))
      assert.equal("integer", math.type(m.config.num_labels))
    end
    local dir = variant(BERT, function(c) c.num_labels = 3; c.architectures = {"BertForSequenceClassification"} end)
    local m = bert.from_pretrained(dir, {verbose = false})
    assert.equal(3, m:forward{input_ids = ids}.logits:size(2))
  end)

  it("names the key and the value of a malformed config", function()
    local function fails(overrides, pattern, arch)
      assert.error_matches(function() bert.model(arch or "BertModel", "tiny", overrides) end, pattern)
    end
    fails({num_labels = 2.5}, "'num_labels' must be an integer, got 2.5", "BertForSequenceClassification")
    fails({hidden_size = -4}, "'hidden_size' = %-4 is outside the supported range")
    fails({num_attention_heads = 0}, "'num_attention_heads' must be a positive integer, got 0")
    fails({hidden_size = 30, num_attention_heads = 4}, "hidden_size 30 is not a multiple of num_attention_heads 4")
    fails({hidden_act = "swish2"}, "unsupported hidden_act 'swish2'")
    fails({hidden_dropout_prob = 1.5}, "'hidden_dropout_prob' must be in %[0, 1%), got 1.5")
    fails({num_hidden_groups = 9}, "num_hidden_groups 9 exceeds num_hidden_layers 2", "AlbertModel")
    fails({pos_att_type = {"c2c"}}, "'pos_att_type' entry 'c2c' is not supported", "DebertaV2Model")
    fails({n_heads = 3}, "hidden_size 128 is not a multiple of num_attention_heads 3", "DistilBertModel")
    fails({model_type = "gpt2"}, "unknown model_type 'gpt2'")
    fails({model_type = "roberta"}, "BertModel is a bert architecture but the config's model_type is 'roberta'")
  end)

  it("an embedding_size that does not match the weights is an error naming the weight and shapes", function()
    local dir = variant("spec/fixtures/albert_tiny", function(c) c.embedding_size = 16 end)
    assert.error_matches(function() bert.from_pretrained(dir, {verbose = false}) end,
      "albert.embeddings.word_embeddings.weight' has shape %[53 x 12%] in the checkpoint but %[53 x 16%] in the model " ..
      "%(config.json: vocab_size 53, hidden_size 20, embedding_size 16,")
  end)
end)

describe("bounds", function()
  it("refuses a config.json with a size past its bound before building anything", function()
    local dir = variant(BERT, function(c) c.num_hidden_layers = 1e9 end)
    local t0 = bert.wall_time()
    assert.error_matches(function() bert.from_pretrained(dir, {verbose = false}) end,
      "'num_hidden_layers' = 1000000000 is outside the supported range %[0, 1024%]")
    assert.truthy(bert.wall_time() - t0 < 1)
    for key, value in pairs({hidden_size = 1e6, num_attention_heads = 1e5, vocab_size = 1e9,
                             max_position_embeddings = 1e8, intermediate_size = 1e8}) do
      assert.error_matches(function() bert.model("BertModel", "tiny", {[key] = value}) end,
        "'" .. key .. "' = %d+ is outside the supported range")
    end
  end)

  it("refuses max_position_embeddings = 2^62 (a size product that wraps) naming the key", function()
    assert.error_matches(function() bert.model("BertModel", "tiny", {max_position_embeddings = 2 ^ 62}) end,
      "'max_position_embeddings' = 4611686018427387904 is outside the supported range")
    -- and below the configs, a parameter whose element count overflows is refused by name
    assert.error_matches(function()
      bert.nn.Module.deferred(function() return bert.nn.Embedding(1 << 62, 128) end)
    end, "'weight' of shape %[4611686018427387904 x 128%] has more elements than an integer holds")
  end)

  it("checks the parameter bytes against memory before allocating", function()
    assert.error_matches(function()
      bert.model("BertModel", "tiny", {num_hidden_layers = 1024, hidden_size = 65536, num_attention_heads = 64,
        intermediate_size = 65536})
    end, "BertModel: %d+ parameters need [%d.]+ GiB for weights and gradients, more than the [%d.]+ GiB of memory available")
  end)
end)

describe("strict loading", function()
  it("refuses a checkpoint whose weights mostly do not match (RoBERTa weights under a BERT config)", function()
    local dir = variant(ROBERTA, function(c)
      c.model_type = "bert"; c.architectures = {"BertModel"}; c.pad_token_id = 1
    end)
    assert.error_matches(function() bert.from_pretrained(dir, {verbose = false}) end,
      "only %d+ of the BertModel model's %d+ weights are in the checkpoint")
    -- strict = false loads it anyway and reports what did not match
    local m, info = bert.from_pretrained(dir, {verbose = false, strict = false})
    assert.equal("BertModel", info.architecture)
    assert.truthy(#info.missing > 10)
    assert.truthy(#info.unexpected > 10)
    assert.truthy(m)
  end)

  it("refuses an unknown model_type", function()
    local dir = variant(BERT, function(c) c.model_type = "gpt2" end)
    assert.error_matches(function() bert.from_pretrained(dir, {verbose = false}) end, "unknown model_type 'gpt2'")
  end)

  it("names an option it does not know (verbos = false would print anyway)", function()
    assert.error_matches(function() bert.from_pretrained(BERT, {verbos = false}) end,
      "from_pretrained: unknown option 'verbos' %(the options: architecture, config, strict, verbose%)")
  end)

  it("strict = true refuses any missing key", function()
    assert.error_matches(function()
      bert.from_pretrained(BERT, {architecture = "BertForSequenceClassification", verbose = false, strict = true})
    end, "missing keys: classifier.bias, classifier.weight")
  end)

  it("maps another family's class name to this family's head (the head follows the checkpoint)", function()
    local m, info = bert.from_pretrained(ROBERTA, {architecture = "BertForSequenceClassification", verbose = false})
    assert.equal("RobertaForSequenceClassification", info.architecture)
    assert.same({}, info.missing)
    assert.truthy(m)
  end)

  it("reads DeBERTa's newer lm_predictions.lm_head names", function()
    local dir = variant("spec/fixtures/deberta_tiny", function() end, function(w)
      for _, k in ipairs({"dense.weight", "dense.bias", "LayerNorm.weight", "LayerNorm.bias"}) do
        w["lm_predictions.lm_head." .. k] = w["cls.predictions.transform." .. k]
        w["cls.predictions.transform." .. k] = nil
      end
      w["lm_predictions.lm_head.bias"], w["cls.predictions.bias"] = w["cls.predictions.bias"], nil
    end)
    local _, info = bert.from_pretrained(dir, {verbose = false})
    assert.same({}, info.missing)
    assert.same({}, info.unexpected)
  end)

  it("reports DeBERTa's own position table missing (position_biased_input), though its name is an alias", function()
    local dir = tmpdir()
    local m = bert.model("DebertaV2ForMaskedLM", "tiny", {position_biased_input = true})
    assert(m:save_pretrained(dir))
    local w = bert.load_safetensors(dir .. "/model.safetensors")
    assert.truthy(w["deberta.embeddings.position_embeddings.weight"])
    w["deberta.embeddings.position_embeddings.weight"] = nil
    bert.save_safetensors(dir .. "/model.safetensors", w)
    local _, info = bert.from_pretrained(dir, {verbose = false})
    assert.same({"deberta.embeddings.position_embeddings.weight"}, info.missing)
    assert.error_matches(function() bert.from_pretrained(dir, {strict = true}) end,
      "missing keys: deberta.embeddings.position_embeddings.weight")
  end)
end)

describe("sizes and names", function()
  it("builds a family by size name: RoBERTa-tiny with its vocabulary and positions", function()
    local m = bert.model("RobertaForMaskedLM", "tiny")
    assert.equal(50265, m.config.vocab_size)
    assert.equal(514, m.config.max_position_embeddings)
  end)

  it("builds the base sizes with the published parameter counts #slow", function()
    -- ALBERT-base as published: 11,683,584 parameters with the pooler
    assert.equal(11683584, bert.model("AlbertModel", "base"):num_parameters())
    -- roberta-base with its pooler: 124,645,632
    assert.equal(124645632, bert.model("RobertaModel", "base"):num_parameters())
  end)

  it("resolves --model FAMILY-SIZE and directories", function()
    assert.same({family = "albert", size = "tiny"}, bert.models.resolve("albert-tiny"))
    assert.same({family = "deberta-v2", size = "base"}, bert.models.resolve("deberta-v3-base"))
    assert.same({family = "bert", size = "mini"}, bert.models.resolve("mini"))
    assert.same({dir = BERT}, bert.models.resolve(BERT))
    local r, err = bert.models.resolve("albert-huge")
    assert.is_nil(r)
    assert.matches("the albert family has no size 'huge'", err)
    r, err = bert.models.resolve("nonsense")
    assert.is_nil(r)
    assert.matches("neither FAMILY%-SIZE", err)
    assert.equal("AlbertForTokenClassification", bert.models.architecture_for("albert", "token_classification"))
  end)

  it("shares ALBERT's layer across depth: one set of weights, gradients from every application", function()
    local m = bert.model("AlbertForMaskedLM", "tiny", {vocab_size = 30, max_position_embeddings = 8, num_hidden_layers = 6})
    local shallow = bert.model("AlbertForMaskedLM", "tiny", {vocab_size = 30, max_position_embeddings = 8, num_hidden_layers = 1})
    assert.equal(shallow:num_parameters(), m:num_parameters())
    local labels = bert.tensor({{-100, 7, -100, -100, -100}, {-100, -100, 3, -100, -100}}, "int32")
    local out = m:forward{input_ids = ids:masked_fill(ids:gt(29), 4), attention_mask = mask, labels = labels}
    out.loss:backward()
    local g = m:state_dict()["albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight"]:grad()
    assert.truthy(g:abs():sum():item() > 0)
  end)

  it("runs DeBERTa's enhanced mask decoder for pretraining", function()
    local m = bert.model("DebertaV2ForPreTraining", "tiny", {vocab_size = 30, max_position_embeddings = 8})
    local hf = bert.model("DebertaV2ForMaskedLM", "tiny", {vocab_size = 30, max_position_embeddings = 8})
    -- the same weights decoded differently, plus the decoder's absolute positions [8 x 128]
    assert.equal(hf:num_parameters() + 8 * 128, m:num_parameters())
    local labels = bert.tensor({{-100, 7, -100, -100, -100}, {-100, -100, 3, -100, -100}}, "int32")
    local out = m:forward{input_ids = ids:masked_fill(ids:gt(29), 4), attention_mask = mask, labels = labels}
    assert.same({2, 30}, out.logits:shape())
    out.loss:backward()
    local g = m:state_dict()["enhanced_mask_decoder.position_embeddings.weight"]:grad()
    assert.truthy(g:abs():sum():item() > 0)   -- absolute positions enter only through the decoder
  end)
end)

describe("adding a family", function()
  it("takes one file of differences plus one registry call (docs/families.md)", function()
    local registry = require("bert.models.registry")
    registry.register(require("spec.support.mybert_family"))
    local ok, err = pcall(function()
      local m = bert.model("MyBertForMaskedLM", "tiny", {vocab_size = 40, max_position_embeddings = 16})
      local labels = bert.tensor({{-100, 7, -100, -100, -100}, {-100, -100, 3, -100, -100}}, "int32")
      local out = m:forward{input_ids = ids, attention_mask = mask, labels = labels}
      out.loss:backward()
      assert.truthy(m:state_dict()["mybert.encoder.layer.1.attention.self.query.weight"])
      local dir = tmpdir()
      assert(m:save_pretrained(dir))
      local again, info = bert.from_pretrained(dir, {verbose = false})
      assert.equal("MyBertForMaskedLM", info.architecture)
      assert.same({}, info.missing)
      local c = bert.model("MyBertForSequenceClassification", "tiny", {vocab_size = 40, max_position_embeddings = 16})
      assert.same({2, 2}, c:forward{input_ids = ids}.logits:shape())
      assert.same({family = "mybert", size = "mini"}, bert.models.resolve("mybert-mini"))
      return again
    end)
    registry.unregister("mybert")
    assert(ok, err)
    assert.is_nil(registry.short_names.mybert)
  end)

  it("refuses a family without its fields or with another family's class names", function()
    local registry = require("bert.models.registry")
    local mybert = require("spec.support.mybert_family")
    local incomplete = {}
    for k, v in pairs(mybert) do incomplete[k] = v end
    incomplete.heads = nil
    assert.has_error(function() registry.register(incomplete) end, "register: the family 'mybert' has no 'heads'")
    local thief = {}
    for k, v in pairs(mybert) do thief[k] = v end
    thief.architectures = {BertModel = "base"}
    assert.has_error(function() registry.register(thief) end,
      "register: mybert's architecture BertModel is already the bert family's")
    assert.is_nil(registry.families.mybert)
  end)

  it("reads a bare size and a config without model_type as the default family's", function()
    local registry = require("bert.models.registry")
    assert.equal("bert", registry.default_model_type)
    assert.same({family = "bert", size = "tiny"}, bert.models.resolve("tiny"))
    assert.equal("bert", registry.family_of({}).model_type)
    assert.equal("roberta", registry.family_of({model_type = "roberta"}).model_type)
  end)
end)
