-- The names our checkpoints carry against the ones Hugging Face's modeling
-- code declares (issue 30, items 13-15).  transformers is not installed
-- here, so the expected key sets are written from its source:
--   models/bert/modeling_bert.py      BertLMPredictionHead: decoder = Linear(H, V), bias, decoder.bias = bias
--   models/roberta/modeling_roberta.py RobertaLMHead: the same under lm_head.
--   models/albert/modeling_albert.py   AlbertMLMHead: the same under predictions.
--   models/deberta_v2/modeling_deberta_v2.py
--     DebertaV2ForMaskedLM: config.legacy (default true) -> cls = LegacyDebertaV2OnlyMLMHead
--       (cls.predictions.transform.{dense,LayerNorm}, decoder, bias), else lm_predictions =
--       DebertaV2OnlyMLMHead (lm_predictions.lm_head.{dense,LayerNorm,bias}; no decoder: it
--       multiplies by the word embeddings);
--     DebertaV2Embeddings: position_embeddings = None when position_biased_input is false;
--     DebertaV2PreTrainedModel._keys_to_ignore_on_load_unexpected = ["position_embeddings"].
-- With tie_word_embeddings false recent transformers unties decoder.bias from
-- bias and initialises a missing one at random, so files must carry both.
local bert = require("bert")
local cjson = require("cjson")
local tmpdir = require("spec.support.tmpdir").dir

local DEBERTA = "spec/fixtures/deberta_tiny"

local ids = bert.tensor({{5, 6, 7, 8, 9}, {5, 9, 8, 0, 0}}, "int32")
local mask = ids:ne(0)

local function max_abs_diff(a, b) return (a - b):abs():max():item() end

local function header_names(dir)
  local names = {}
  for k in pairs(bert.safetensors_header(dir .. "/model.safetensors")) do
    if not k:find("^__") then names[k] = true end
  end
  return names
end

-- the names under a prefix, sorted
local function under(names, prefix)
  local out = {}
  for k in pairs(names) do if k:sub(1, #prefix) == prefix then out[#out + 1] = k end end
  table.sort(out)
  return out
end

local function read_config(dir) return cjson.decode(assert(io.open(dir .. "/config.json")):read("a")) end

-- a copy of a saved model directory with its weights edited by fn and its config by cfn
local function edited(src, fn, cfn)
  local dir = tmpdir()
  local c = read_config(src)
  if cfn then cfn(c) end
  local f = assert(io.open(dir .. "/config.json", "w"))
  f:write(cjson.encode(c))
  f:close()
  local w = assert(bert.load_safetensors(src .. "/model.safetensors"))
  fn(w)
  assert(bert.save_safetensors(dir .. "/model.safetensors", w))
  return dir
end

-- runs fn with io.stderr captured; returns fn's results and the text written
local function capture_stderr(fn)
  local parts, real = {}, io.stderr
  io.stderr = {write = function(self, ...) for _, s in ipairs({...}) do parts[#parts + 1] = tostring(s) end return self end}
  local ok, a, b = pcall(fn)
  io.stderr = real
  assert(ok, a)
  return a, b, table.concat(parts)
end

local function logits(m)
  m:evaluate()
  local out = bert.no_grad(function() return m:forward{input_ids = ids, attention_mask = mask} end)
  return out.logits or out.prediction_logits
end

local SMALL = {vocab_size = 40, max_position_embeddings = 16}
local function small(extra)
  local o = {}
  for k, v in pairs(SMALL) do o[k] = v end
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

describe("untied MLM decoders (tie_word_embeddings false)", function()
  local heads = {
    {"BertForMaskedLM", "cls.predictions."}, {"BertForPreTraining", "cls.predictions."},
    {"RobertaForMaskedLM", "lm_head."}, {"AlbertForMaskedLM", "predictions."},
    {"DebertaV2ForMaskedLM", "cls.predictions."},
  }
  for _, case in ipairs(heads) do
    local arch, head = case[1], case[2]
    it(arch .. " writes decoder.weight, decoder.bias and bias (the same values) and reads them back strictly", function()
      local m = bert.model(arch, "tiny", small{tie_word_embeddings = false})
      bert.no_grad(function() m:state_dict()[head .. "bias"]:copy_(bert.randn({40}, {seed = 3})) end)
      local dir = tmpdir()
      assert(m:save_pretrained(dir))
      local names = header_names(dir)
      for _, k in ipairs({"bias", "decoder.weight", "decoder.bias"}) do
        assert.truthy(names[head .. k], arch .. ": no " .. head .. k)
      end
      local w = assert(bert.load_safetensors(dir .. "/model.safetensors"))
      assert.equal(0, max_abs_diff(w[head .. "bias"], w[head .. "decoder.bias"]))
      local again, info = bert.from_pretrained(dir, {verbose = false, strict = true})
      assert.same({}, info.missing)
      assert.same({}, info.unexpected)
      assert.equal(0, max_abs_diff(logits(m), logits(again)))
      -- one parameter under two names: counted (and trained) once, the decoder's weight the only addition
      local tied = bert.model(arch, "tiny", small())
      assert.equal(tied:num_parameters() + m:state_dict()[head .. "decoder.weight"]:numel(), m:num_parameters())
      assert.equal(#tied:named_parameters() + 1, #m:named_parameters())
    end)
  end

  it("prefers decoder.bias when the two disagree, and names the file and the difference", function()
    local m = bert.model("BertForMaskedLM", "tiny", small{tie_word_embeddings = false})
    local src = tmpdir()
    assert(m:save_pretrained(src))
    local decoder_bias = bert.randn({40}, {seed = 11})
    local dir = edited(src, function(w)
      w["cls.predictions.bias"] = bert.zeros({40})
      w["cls.predictions.decoder.bias"] = decoder_bias
    end)
    local again, info, err = capture_stderr(function() return bert.from_pretrained(dir, {verbose = false}) end)
    assert.same({}, info.missing)
    local sd = again:state_dict()
    assert.equal(0, max_abs_diff(sd["cls.predictions.decoder.bias"], decoder_bias))
    assert.equal(0, max_abs_diff(sd["cls.predictions.bias"], decoder_bias))
    assert.truthy(err:find(dir .. "/model.safetensors", 1, true), err)
    assert.truthy(err:find(string.format("by up to %.6g", decoder_bias:abs():max():item()), 1, true), err)
    assert.truthy(err:find("cls.predictions.decoder.bias", 1, true), err)
  end)

  it("fills both names from a file with one of them, silently", function()
    local m = bert.model("RobertaForMaskedLM", "tiny", small{tie_word_embeddings = false})
    local src = tmpdir()
    assert(m:save_pretrained(src))
    local want = m:state_dict()["lm_head.bias"]
    for _, drop in ipairs({"lm_head.bias", "lm_head.decoder.bias"}) do
      local dir = edited(src, function(w) w[drop] = nil end)
      local again, info, err = capture_stderr(function() return bert.from_pretrained(dir, {verbose = false}) end)
      assert.same({}, info.missing)
      assert.equal("", err)
      assert.equal(0, max_abs_diff(again:state_dict()["lm_head.bias"], want))
      assert.equal(0, max_abs_diff(again:state_dict()["lm_head.decoder.bias"], want))
    end
  end)

  it("a tied model still writes bias alone, as Hugging Face", function()
    local m = bert.model("BertForMaskedLM", "tiny", small())
    local dir = tmpdir()
    assert(m:save_pretrained(dir))
    assert.same({"cls.predictions.bias", "cls.predictions.transform.LayerNorm.bias",
      "cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.dense.bias",
      "cls.predictions.transform.dense.weight"}, under(header_names(dir), "cls."))
  end)
end)

describe("DeBERTa's MLM head names follow config.legacy", function()
  local LM_HEAD = {"lm_predictions.lm_head.LayerNorm.bias", "lm_predictions.lm_head.LayerNorm.weight",
    "lm_predictions.lm_head.bias", "lm_predictions.lm_head.dense.bias", "lm_predictions.lm_head.dense.weight"}
  local CLS = {"cls.predictions.bias", "cls.predictions.transform.LayerNorm.bias",
    "cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.dense.bias",
    "cls.predictions.transform.dense.weight"}

  it("legacy false: writes lm_predictions.lm_head.*, keeps legacy false, reads it back strictly", function()
    local m = bert.model("DebertaV2ForMaskedLM", "tiny", small{legacy = false})
    local dir = tmpdir()
    assert(m:save_pretrained(dir))
    local names = header_names(dir)
    assert.same(LM_HEAD, under(names, "lm_predictions."))
    assert.same({}, under(names, "cls."))
    assert.is_false(read_config(dir).legacy)
    local again, info = bert.from_pretrained(dir, {verbose = false, strict = true})
    assert.same({}, info.missing)
    assert.equal(0, max_abs_diff(logits(m), logits(again)))
  end)

  it("legacy true or absent: writes cls.predictions.*", function()
    for _, legacy in ipairs({true, "absent"}) do
      local m = bert.model("DebertaV2ForMaskedLM", "tiny", small{legacy = legacy == true or nil})
      local dir = tmpdir()
      assert(m:save_pretrained(dir))
      local names = header_names(dir)
      assert.same(CLS, under(names, "cls."))
      assert.same({}, under(names, "lm_predictions."))
    end
  end)

  it("a legacy-false file written under cls.predictions.* loads, and saves under the names its config declares", function()
    local m = bert.model("DebertaV2ForMaskedLM", "tiny", small{legacy = false})
    local src = tmpdir()
    assert(m:save_pretrained(src))
    local dir = edited(src, function(w)
      for i, name in ipairs(LM_HEAD) do w[name] = nil end
      local sd = m:state_dict()
      w["cls.predictions.bias"] = sd["lm_predictions.lm_head.bias"]
      for _, part in ipairs({"dense.weight", "dense.bias", "LayerNorm.weight", "LayerNorm.bias"}) do
        w["cls.predictions.transform." .. part] = sd["lm_predictions.lm_head." .. part]
      end
    end)
    local again, info = bert.from_pretrained(dir, {verbose = false, strict = true})
    assert.same({}, info.missing)
    assert.equal(0, max_abs_diff(logits(m), logits(again)))
    local out = tmpdir()
    assert(again:save_pretrained(out))
    assert.same(LM_HEAD, under(header_names(out), "lm_predictions."))
    assert.same({}, under(header_names(out), "cls."))
  end)

  it("a legacy file loads into a legacy-false model and the other way round", function()
    local legacy = bert.from_pretrained(DEBERTA, {verbose = false})
    local dir = edited(DEBERTA, function() end, function(c) c.legacy = false end)
    local again, info = bert.from_pretrained(dir, {verbose = false})
    assert.same({}, info.missing)
    assert.same({}, info.unexpected)
    assert.equal(0, max_abs_diff(logits(legacy), logits(again)))
    local saved = tmpdir()
    assert(again:save_pretrained(saved))
    local back = edited(saved, function() end, function(c) c.legacy = nil end)
    local round, rinfo = bert.from_pretrained(back, {verbose = false})
    assert.same({}, rinfo.missing)
    assert.equal(0, max_abs_diff(logits(legacy), logits(round)))
  end)

  it("legacy false reads the word embeddings whatever tie_word_embeddings says, as DebertaV2LMPredictionHead", function()
    local m = bert.model("DebertaV2ForMaskedLM", "tiny", small{legacy = false, tie_word_embeddings = false})
    local names = {}
    for k in pairs(m:state_dict()) do names[k] = true end
    assert.same(LM_HEAD, under(names, "lm_predictions."))
    assert.same({}, under(names, "cls."))
  end)
end)

describe("DeBERTa's position table", function()
  local TABLE = "deberta.embeddings.position_embeddings.weight"

  it("an HF-saved v3 checkpoint (no position table) loads with strict = true", function()
    local dir = edited(DEBERTA, function(w) w[TABLE] = nil end)
    for _, arch in ipairs({"DebertaV2ForMaskedLM", "DebertaV2ForSequenceClassification"}) do
      local _, info = bert.from_pretrained(dir, {architecture = arch, verbose = false, strict = true})
      assert.same({}, info.missing)
    end
  end)

  it("a file that still carries the unused table (Microsoft's, our older ones) loads strictly, the table unused", function()
    local _, info = bert.from_pretrained(DEBERTA, {verbose = false, strict = true})
    assert.same({}, info.unexpected)
  end)

  it("is not created, nor written, when position_biased_input is false", function()
    for _, arch in ipairs({"DebertaV2Model", "DebertaV2ForMaskedLM", "DebertaV2ForSequenceClassification"}) do
      local m = bert.model(arch, "tiny", small())
      for k in pairs(m:state_dict()) do assert.is_nil(k:find("position_embeddings"), arch .. ": " .. k) end
      local dir = tmpdir()
      assert(m:save_pretrained(dir))
      for k in pairs(header_names(dir)) do assert.is_nil(k:find("position_embeddings"), arch .. ": " .. k) end
    end
    local biased = bert.model("DebertaV2ForMaskedLM", "tiny", small{position_biased_input = true})
    assert.truthy(biased:state_dict()[TABLE])
  end)

  it("the enhanced mask decoder keeps its table under its own name, at any embedding width", function()
    local m = bert.model("DebertaV2ForPreTraining", "tiny", small{embedding_size = 64})
    local sd = m:state_dict()
    assert.is_nil(sd[TABLE])
    local own = sd["enhanced_mask_decoder.position_embeddings.weight"]
    assert.same({16, 128}, own:shape())
    local labels = bert.tensor({{-100, 7, -100, -100, -100}, {-100, -100, 3, -100, -100}}, "int32")
    local out = m:forward{input_ids = ids, attention_mask = mask, labels = labels}
    out.loss:backward()
    assert.truthy(own:grad():abs():sum():item() > 0)
    -- its file loads as Hugging Face's DebertaV2ForMaskedLM with the table unused
    local dir = tmpdir()
    assert(m:save_pretrained(dir))
    local _, info = bert.from_pretrained(dir, {architecture = "DebertaV2ForMaskedLM", verbose = false, strict = true})
    assert.same({"enhanced_mask_decoder.position_embeddings.weight"}, info.unused)
  end)

  it("an older pretraining file (the table in the embeddings) reads it into the decoder's", function()
    local m = bert.model("DebertaV2ForPreTraining", "tiny", small())
    local src = tmpdir()
    assert(m:save_pretrained(src))
    local old = m:state_dict()["enhanced_mask_decoder.position_embeddings.weight"]
    local dir = edited(src, function(w)
      w[TABLE], w["enhanced_mask_decoder.position_embeddings.weight"] = old, nil
    end)
    local again, info = bert.from_pretrained(dir, {verbose = false, strict = true})
    assert.same({}, info.missing)
    assert.equal(0, max_abs_diff(again:state_dict()["enhanced_mask_decoder.position_embeddings.weight"], old))
  end)
end)

describe("DeBERTa-v2 config.json keys left out", function()
  -- DebertaV2Config's defaults and the modeling code's getattr fallbacks
  -- (relative_attention False, position_biased_input True, pos_att_type None -> [],
  -- position_buckets -1, share_att_key False, norm_rel_ebd "none"): a file that leaves
  -- them out describes an absolute-position model; the size presets stay deberta-v3's
  it("reads Hugging Face's defaults from a file, deberta-v3's for a size name", function()
    local d = tmpdir()
    local f = assert(io.open(d .. "/config.json", "w"))
    f:write(cjson.encode({model_type = "deberta-v2", vocab_size = 50, hidden_size = 32, num_hidden_layers = 1,
      num_attention_heads = 2, intermediate_size = 64, max_position_embeddings = 16}))
    f:close()
    local m = bert.model("DebertaV2Model", d .. "/config.json")
    local c = m.config
    assert.is_false(c.relative_attention)
    assert.is_true(c.position_biased_input)
    assert.equals(-1, c.position_buckets)
    assert.is_false(c.share_att_key)
    assert.equals("none", c.norm_rel_ebd)
    local names = {}
    for _, np in ipairs(m:named_parameters()) do names[np.name] = true end
    assert.truthy(names["embeddings.position_embeddings.weight"])
    for n in pairs(names) do assert.is_nil(n:find("rel_embeddings", 1, true), n) end
    local v3 = bert.model("DebertaV2Model", "tiny").config
    assert.is_true(v3.relative_attention)
    assert.is_false(v3.position_biased_input)
    assert.equals(256, v3.position_buckets)
    assert.is_true(v3.share_att_key)
    assert.equals("layer_norm", v3.norm_rel_ebd)
  end)
end)
