-- bert.pipeline: fill-mask and feature-extraction against the model's own
-- outputs computed by hand, batched vs one at a time, and a saved
-- directory that is self-contained (the fine-tuned tasks: finetune_spec).
local bert = require("bert")
local cjson = require("cjson")

local VOCAB = "spec/fixtures/finetune/vocab.txt"

local tmpdir = require("spec.support.tmpdir").dir

describe("bert.pipeline", function()
  local dir, tok, model
  setup(function()
    bert.manual_seed(5)
    tok = assert(bert.tokenizer.load(VOCAB))
    model = bert.model("BertForMaskedLM", {vocab_size = tok:vocab_size(), hidden_size = 32, num_hidden_layers = 2,
      num_attention_heads = 2, intermediate_size = 64, max_position_embeddings = 64})
    dir = tmpdir()
    assert(require("bert.model_dir").save(dir, model, tok))
    model:evaluate()
  end)
  teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

  it("saves a self-contained directory, as Hugging Face lays one out", function()
    for _, f in ipairs({"config.json", "model.safetensors", "tokenizer.json", "vocab.txt", "tokenizer_config.json",
                        "special_tokens_map.json"}) do
      assert.truthy(io.open(dir .. "/" .. f), f)
    end
    local map = cjson.decode(io.open(dir .. "/special_tokens_map.json"):read("a"))
    assert.same({cls_token = "[CLS]", sep_token = "[SEP]", pad_token = "[PAD]", mask_token = "[MASK]",
                 unk_token = "[UNK]"}, map)
    local tc = cjson.decode(io.open(dir .. "/tokenizer_config.json"):read("a"))
    assert.equal("BertTokenizer", tc.tokenizer_class)
    assert.equal(64, tc.model_max_length)
    assert.is_true(tc.do_lower_case)
  end)

  it("fill-mask: the top-k tokens and probabilities at the mask, as computed by hand", function()
    local fill = bert.pipeline("fill-mask", dir)
    local text = "the food was [MASK] ."
    local r = fill(text, {top_k = 4})
    assert.equal(4, #r)
    -- by hand: the logits at the mask position, softmax, the four largest
    local enc = tok:encode(text)
    local pos
    for i, id in ipairs(enc.ids) do if id == tok:token_to_id("[MASK]") then pos = i end end
    local logits = bert.no_grad(function()
      return model:forward{input_ids = bert.tensor({enc.ids}, "int32")}.logits
    end)
    local probs = logits:select(1, 1):select(1, pos):softmax(-1):totable()
    local order = {}
    for i = 1, #probs do order[i] = i end
    table.sort(order, function(a, b) return probs[a] > probs[b] end)
    for j = 1, 4 do
      assert.equal(order[j] - 1, r[j].token)
      assert.is_true(math.abs(probs[order[j]] - r[j].score) < 1e-5)
      assert.equal(tok:id_to_token(order[j] - 1), r[j].token_str)
    end
    assert.is_true(r[1].score >= r[2].score and r[2].score >= r[3].score)
    assert.equal("string", type(r[1].sequence))
  end)

  it("fill-mask: batched inputs and several masks give the single-input results", function()
    local fill = bert.pipeline("fill-mask", dir, {batch_size = 2})
    local texts = {"the food was [MASK] .", "[MASK] think so and [MASK] .", "we [MASK] ."}
    local all = fill(texts, {top_k = 3})
    assert.equal(3, #all)
    assert.equal(2, #all[2])          -- two masks: one list each
    assert.equal(3, #all[2][1])
    for i, t in ipairs(texts) do
      local one = fill(t, {top_k = 3})
      local got = #all[i] == 2 and all[i] or all[i]
      if i == 2 then
        for m = 1, 2 do for j = 1, 3 do
          assert.equal(one[m][j].token, got[m][j].token)
          assert.is_true(math.abs(one[m][j].score - got[m][j].score) < 1e-5)
        end end
      else
        for j = 1, 3 do
          assert.equal(one[j].token, got[j].token)
          assert.is_true(math.abs(one[j].score - got[j].score) < 1e-5)
        end
      end
    end
    assert.has_error(function() fill("no mask here") end)
  end)

  it("feature-extraction: mean and CLS pooling, normalised, the same batched or alone", function()
    local fe = bert.pipeline("feature-extraction", dir)
    local texts = {"the food was good .", "we think so ."}
    local mean = fe:embed(texts, {pooling = "mean"})
    assert.same({2, 32}, mean:shape())
    for i, t in ipairs(texts) do
      -- alone: the mean of every real token's vector (batches are padded)
      local f = fe(t)
      local n = f.attention_mask:sum():item()
      local h = f.hidden:select(1, 1):narrow(1, 1, n)
      local want = h:mean(1)
      assert.tensor_near(want, mean:select(1, i), 1e-4)
      assert.tensor_near(h:select(1, 1), fe:embed(texts, {pooling = "cls"}):select(1, i), 1e-4)
    end
    local unit = fe:embed(texts, {pooling = "mean", normalize = true})
    for _, n in ipairs((unit * unit):sum(2):totable()) do assert.is_true(math.abs(n - 1) < 1e-5) end
    assert.has_error(function() fe:embed(texts, {pooling = "max"}) end)
  end)

  it("takes a model object with its tokenizer, and saves them as a model directory", function()
    local fill = bert.pipeline("fill-mask", model, {tokenizer = tok})
    local from_dir = bert.pipeline("fill-mask", dir)("we [MASK] .", {top_k = 2})
    local from_obj = fill("we [MASK] .", {top_k = 2})
    assert.equal(from_dir[1].token, from_obj[1].token)
    assert.is_true(math.abs(from_dir[1].score - from_obj[1].score) < 1e-6)
    assert.has_error(function() bert.pipeline("fill-mask", model) end, "pipeline: a model object needs opts.tokenizer")
    local out = tmpdir()
    assert(fill:save_pretrained(out))
    assert.truthy(io.open(out .. "/tokenizer_config.json"))
    assert.equal(from_obj[1].token, bert.pipeline("fill-mask", out)("we [MASK] .", {top_k = 2})[1].token)
    os.execute("rm -rf '" .. out .. "'")
  end)

  it("refuses unknown tasks and a fill-mask without an MLM head", function()
    assert.has_error(function() bert.pipeline("summarization", dir) end)
    local enc = tmpdir()
    local m = bert.model("BertModel", {vocab_size = tok:vocab_size(), hidden_size = 32, num_hidden_layers = 1,
      num_attention_heads = 2, intermediate_size = 64, max_position_embeddings = 64})
    assert(require("bert.model_dir").save(enc, m, tok))
    assert.has_error(function() bert.pipeline("fill-mask", enc) end)
    os.execute("rm -rf '" .. enc .. "'")
  end)

  it("reads any family: its base model for features, its MLM head for fill-mask, not ELECTRA's discriminator", function()
    local small = {vocab_size = tok:vocab_size(), hidden_size = 32, embedding_size = 32, num_hidden_layers = 1,
      num_attention_heads = 2, intermediate_size = 64, max_position_embeddings = 64}
    for arch, base in pairs({AlbertForPreTraining = "AlbertModel", ElectraForPreTraining = "ElectraModel"}) do
      local d = tmpdir()
      assert(require("bert.model_dir").save(d, bert.model(arch, small), tok))
      local fe = bert.pipeline("feature-extraction", d)
      assert.equal(base, fe.model.class_name)
      assert.equal(32, fe("the food was good").hidden:size(3))
      if arch == "ElectraForPreTraining" then
        assert.has_error(function() bert.pipeline("fill-mask", d) end, "pipeline: fill-mask needs a model with its " ..
          "masked-language-model head (a masked-LM or MLM-pretraining class); " .. d .. " holds ElectraForPreTraining")
      else
        assert.equal(2, #bert.pipeline("fill-mask", d)("the food was [MASK] .", {top_k = 2}))
      end
      os.execute("rm -rf '" .. d .. "'")
    end
  end)
end)
