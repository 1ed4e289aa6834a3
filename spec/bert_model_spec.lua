-- The BERT model: parity with the plain-PyTorch peer on committed fixtures
-- (spec/fixtures/bert_tiny, written by tools/gen_parity_fixtures.py),
-- checkpoints, heads, flat parameter buffers and input errors.
local bert = require("bert")

local FIXTURE = "spec/fixtures/bert_tiny"

local function max_abs_diff(a, b) return (a - b):abs():max():item() end

local function load_io()
  local io_t = assert(bert.load_safetensors(FIXTURE .. "/io.safetensors"))
  for _, k in ipairs({"input_ids", "token_type_ids", "attention_mask", "labels", "next_sentence_label"}) do
    io_t[k] = io_t[k]:int()
  end
  return io_t
end

describe("BERT parity with the PyTorch peer", function()
  local io_t = load_io()

  it("loads the checkpoint as the class named in config.json", function()
    local model, info = bert.from_pretrained(FIXTURE, {verbose = false})
    assert.equal("BertForPreTraining", info.architecture)
    assert.same({}, info.missing)
    assert.same({}, info.unexpected)
    assert.equal(464586, model:num_parameters())
  end)

  it("matches every output on a padded batch with both token types", function()
    local model = bert.from_pretrained(FIXTURE, {verbose = false})
    model:evaluate()
    local out = bert.no_grad(function()
      return model:forward{input_ids = io_t.input_ids, token_type_ids = io_t.token_type_ids,
                           attention_mask = io_t.attention_mask}
    end)
    -- padded query rows are meaningless in both implementations; compare real tokens
    local keep = io_t.attention_mask:float():unsqueeze(3)
    assert.truthy(max_abs_diff(out.last_hidden_state * keep, io_t.last_hidden_state * keep) < 1e-4)
    assert.truthy(max_abs_diff(out.pooler_output, io_t.pooler_output) < 1e-4)
    assert.truthy(max_abs_diff(out.prediction_logits * keep, io_t.prediction_logits * keep) < 1e-4)
    assert.truthy(max_abs_diff(out.seq_relationship_logits, io_t.seq_relationship_logits) < 1e-4)
  end)

  it("matches the pretraining loss and its gradients", function()
    local model = bert.from_pretrained(FIXTURE, {verbose = false})
    model:evaluate()
    model:zero_grad()
    local out = model:forward{input_ids = io_t.input_ids, token_type_ids = io_t.token_type_ids,
                              attention_mask = io_t.attention_mask, labels = io_t.labels,
                              next_sentence_label = io_t.next_sentence_label}
    assert.near(io_t.loss:item(), out.loss:item(), 1e-4)
    out.loss:backward()
    local params = {}
    for _, np in ipairs(model:named_parameters()) do params[np.name] = np.param end
    local checked = 0
    for name, expected in pairs(io_t) do
      local pname = name:match("^grad%.(.*)$")
      if pname then
        local g = params[pname]:grad()
        local rel = (g - expected):abs():max():item() / math.max(expected:abs():max():item(), 1e-6)
        assert.truthy(rel < 1e-3, string.format("%s: relative error %.3g", pname, rel))
        checked = checked + 1
      end
    end
    assert.equal(11, checked)
  end)

  it("pair_loss_weight scales the pair loss in the total (0: MLM alone on the pair data)", function()
    local model = bert.from_pretrained(FIXTURE, {verbose = false})
    model:evaluate()
    local inputs = {input_ids = io_t.input_ids, token_type_ids = io_t.token_type_ids,
                    attention_mask = io_t.attention_mask, labels = io_t.labels,
                    next_sentence_label = io_t.next_sentence_label}
    local full = bert.no_grad(function() return model:forward(inputs) end)
    assert.near(io_t.loss:item(), full.mlm_loss:item() + full.nsp_loss:item(), 1e-4)
    assert.truthy(full.nsp_loss:item() > 1e-3)
    for _, w in ipairs({0, 0.5}) do
      model.pair_loss_weight = w
      local out = bert.no_grad(function() return model:forward(inputs) end)
      assert.near(full.mlm_loss:item() + w * full.nsp_loss:item(), out.loss:item(), 1e-5)
      assert.near(full.nsp_loss:item(), out.nsp_loss:item(), 1e-6)
    end
    -- weight 0: the pair head gets a zero gradient, the encoder only MLM's
    model.pair_loss_weight = 0
    model:zero_grad()
    model:forward(inputs).loss:backward()
    for _, np in ipairs(model:named_parameters()) do
      if np.name:match("seq_relationship") then
        local g = np.param:grad()
        assert.truthy(g == nil or g:abs():max():item() == 0, np.name)
      end
    end
  end)
end)

describe("checkpoints", function()
  local tmp = os.tmpname()
  os.remove(tmp)

  it("save_pretrained writes what from_pretrained (and HF) reads", function()
    local model = bert.from_pretrained(FIXTURE, {verbose = false})
    assert(model:save_pretrained(tmp))
    local header = bert.safetensors_header(tmp .. "/model.safetensors")
    assert.is_nil(header["cls.predictions.decoder.weight"])   -- tied, left out as HF does
    assert.truthy(header["bert.encoder.layer.1.output.LayerNorm.weight"])
    local cfg = require("cjson").decode(io.open(tmp .. "/config.json"):read("a"))
    assert.equal("bert", cfg.model_type)
    assert.same({"BertForPreTraining"}, cfg.architectures)
    local again = bert.from_pretrained(tmp, {verbose = false})
    assert.equal(0, max_abs_diff(model.flat_params, again.flat_params))
  end)

  it("accepts files without the bert. prefix and with gamma/beta names", function()
    local w = assert(bert.load_safetensors(FIXTURE .. "/model.safetensors"))
    local renamed = {}
    for k, v in pairs(w) do
      if k:find("^bert%.") then
        renamed[k:sub(6):gsub("LayerNorm%.weight$", "LayerNorm.gamma"):gsub("LayerNorm%.bias$", "LayerNorm.beta")] = v
      end
    end
    renamed["embeddings.position_ids"] = bert.arange(64)   -- a buffer old checkpoints carry
    local dir = tmp .. "-base"
    bert.mkdir(dir)
    assert(bert.save_safetensors(dir .. "/model.safetensors", renamed))
    local cfg = io.open(FIXTURE .. "/config.json"):read("a"):gsub("BertForPreTraining", "BertModel")
    local f = io.open(dir .. "/config.json", "w"); f:write(cfg); f:close()
    local model, info = bert.from_pretrained(dir, {verbose = false})
    assert.equal("BertModel", info.architecture)
    assert.same({}, info.missing)
    assert.same({}, info.unexpected)
    local full = bert.from_pretrained(FIXTURE, {verbose = false})
    local a = model:state_dict()["encoder.layer.0.attention.output.LayerNorm.weight"]
    local b = full:state_dict()["bert.encoder.layer.0.attention.output.LayerNorm.weight"]
    assert.equal(0, max_abs_diff(a, b))
    -- a classification head on the same weights: only the new classifier is missing
    local cls, cinfo = bert.from_pretrained(FIXTURE, {architecture = "BertForSequenceClassification", verbose = false})
    assert.same({"classifier.bias", "classifier.weight"}, cinfo.missing)
    assert.equal(2, cls:forward{input_ids = {{1, 2, 3}}}.logits:size(2))
  end)

  it("reports shape disagreements and missing files clearly", function()
    local dir = tmp .. "-bad"
    bert.mkdir(dir)
    local cfg = io.open(FIXTURE .. "/config.json"):read("a"):gsub('"hidden_size": 128', '"hidden_size": 64')
    local f = io.open(dir .. "/config.json", "w"); f:write(cfg); f:close()
    os.execute("cp " .. FIXTURE .. "/model.safetensors " .. dir .. "/")
    assert.error_matches(function() bert.from_pretrained(dir, {verbose = false}) end,
      "has shape %[200 x 128%] in the checkpoint but %[200 x 64%] in the model")
    assert.error_matches(function() bert.from_pretrained("/nonexistent") end, "is not a directory")
    local empty = tmp .. "-empty"
    bert.mkdir(empty)
    assert.error_matches(function() bert.from_pretrained(empty) end, "nor a readable config.json")
    f = io.open(empty .. "/config.json", "w"); f:write('{"hidden_size": 64}'); f:close()
    assert.error_matches(function() bert.from_pretrained(empty) end, "missing required key 'vocab_size'")
  end)
end)

describe("models", function()
  local ids = bert.tensor({{1, 5, 7, 2, 0}, {1, 9, 2, 0, 0}}, "int32")
  local mask = ids:ne(0)

  it("builds by size name with parameters in one flat buffer", function()
    local m = bert.model("BertForPreTraining", "tiny", {vocab_size = 100, max_position_embeddings = 32})
    assert.equal(m:num_parameters(), m.flat_params:numel())
    assert.equal(m.flat_params:numel(), m.flat_grad:numel())
    local out = m:forward{input_ids = ids, attention_mask = mask}
    assert.same({2, 5, 100}, out.prediction_logits:shape())
    assert.same({2, 2}, out.seq_relationship_logits:shape())
    -- the tied decoder is the word embedding matrix itself
    local names = {}
    for _, np in ipairs(m:named_parameters()) do names[np.name] = true end
    assert.is_nil(names["cls.predictions.decoder.weight"])
    assert.equal(128 * 100 + 32 * 128 + 2 * 128 + 2 * 128 + 2 * (4 * (128 * 128 + 128) + 2 * 2 * 128 + 128 * 512 + 512 + 512 * 128 + 128)
      + 128 * 128 + 128 + 128 * 128 + 128 + 2 * 128 + 100 + 2 * 128 + 2, m:num_parameters())
  end)

  it("counts BERT-base parameters as the paper does #slow", function()
    local m = bert.model("BertModel", "base")
    assert.equal(109482240, m:num_parameters())
  end)

  it("runs the MLM head only on masked positions", function()
    local m = bert.model("BertForMaskedLM", "tiny", {vocab_size = 50, max_position_embeddings = 16})
    local labels = bert.full({2, 5}, -100, "int32")
    labels:set(7, 1, 3)
    labels:set(9, 2, 2)
    local out = m:forward{input_ids = ids, attention_mask = mask, labels = labels}
    assert.same({2, 50}, out.logits:shape())
    assert.same({2, 6}, out.masked_positions:totable())
    out.loss:backward()
    assert.truthy(m.flat_grad:abs():sum():item() > 0)
  end)

  it("has sequence, token and span heads with losses", function()
    local opts = {vocab_size = 50, max_position_embeddings = 16, num_labels = 3}
    local sc = bert.model("BertForSequenceClassification", "tiny", opts)
    local o = sc:forward{input_ids = ids, attention_mask = mask, labels = {2, 0}}
    assert.same({2, 3}, o.logits:shape())
    o.loss:backward()
    local tc = bert.model("BertForTokenClassification", "tiny", opts)
    local tl = bert.tensor({{-100, 1, 2, 0, -100}, {-100, 2, 1, -100, -100}}, "int32")
    o = tc:forward{input_ids = ids, attention_mask = mask, labels = tl}
    assert.same({2, 5, 3}, o.logits:shape())
    o.loss:backward()
    local qa = bert.model("BertForQuestionAnswering", "tiny", opts)
    o = qa:forward{input_ids = ids, attention_mask = mask, start_positions = {1, 2}, end_positions = {2, 9}}
    assert.same({2, 5}, o.start_logits:shape())
    assert.same({2, 5}, o.end_logits:shape())
    o.loss:backward()
    assert.truthy(o.loss:item() > 0)
  end)

  it("is reproducible from a seed with dropout, and deterministic in eval mode", function()
    local function run(seed)
      bert.manual_seed(seed)
      local m = bert.model("BertForPreTraining", "tiny", {vocab_size = 50, max_position_embeddings = 16})
      return m:forward{input_ids = ids, attention_mask = mask}.seq_relationship_logits:totable()
    end
    assert.same(run(3), run(3))
    assert.are_not.same(run(3), run(4))
  end)

  it("rejects bad inputs clearly", function()
    local m = bert.model("BertModel", "tiny", {vocab_size = 50, max_position_embeddings = 8})
    assert.error_matches(function() m:forward{input_ids = bert.tensor({{1, 2}})} end, "input_ids must be int32, got float32")
    assert.error_matches(function() m:forward{input_ids = bert.zeros({2, 2, 2}, "int32")} end,
      "input_ids must be %[batch x seq%], got %[2 x 2 x 2%]")
    assert.error_matches(function() m:forward{input_ids = bert.tensor({{1, 60}}, "int32")} end, "60")
    assert.error_matches(function() m:forward{input_ids = bert.ones({1, 9}, "int32")} end,
      "sequence length 9 exceeds max_position_embeddings 8")
    assert.error_matches(function()
      m:forward{input_ids = bert.ones({1, 4}, "int32"), attention_mask = bert.ones({1, 3}, "int32")}
    end, "attention_mask %[1 x 3%] does not match input_ids %[1 x 4%]")
    assert.error_matches(function() m:forward{} end, "expects a table with input_ids")
    assert.error_matches(function() bert.model("BertModel", "huge") end, "'huge' is neither a size name")
    assert.error_matches(function() bert.model("BertModel", {hidden_size = 30, num_attention_heads = 4,
      vocab_size = 10, num_hidden_layers = 1, intermediate_size = 8}) end,
      "hidden_size 30 is not a multiple of num_attention_heads 4")
    assert.error_matches(function() bert.model("GPT2", "tiny") end, "unknown architecture 'GPT2'")
  end)

  it("refuses override keys no config has, and reads Hugging Face's aliases as the family's keys", function()
    -- a misspelt key built the default (hidden size 256 here) and wrote the typo to config.json
    assert.error_matches(function() bert.model("BertModel", "mini", {hiden_size = 64}) end,
      "BertModel: unknown config key 'hiden_size' for the bert family %(its keys: attention_probs_dropout_prob,")
    assert.error_matches(function() bert.model("BertModel", "mini", 64) end,
      "BertModel: overrides must be a table of config keys, got number")
    -- DistilBERT's dropout is hidden_dropout_prob in HF's names: the alias used to be stored beside it, read by nothing
    local m = bert.model("DistilBertModel", "tiny", {hidden_dropout_prob = 0.3})
    assert.are.equal(0.3, rawget(m.config, "dropout"))
    assert.is_nil(rawget(m.config, "hidden_dropout_prob"))
    assert.error_matches(function() bert.model("DistilBertModel", "tiny", {hidden_dropout_prob = 0.3, dropout = 0.2}) end,
      "config keys 'hidden_dropout_prob' and 'dropout' are one key of the distilbert family")
    -- the library's own record keys pass
    assert.are.same({task = "x"}, bert.model("BertModel", "tiny", {finetune = {task = "x"}}).config.finetune)
  end)
end)
