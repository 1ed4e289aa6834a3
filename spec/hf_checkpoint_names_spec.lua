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
      -- one parameter under two names: counted and trained once
      assert.equal(bert.model(arch, "tiny", small{tie_word_embeddings = false}):num_parameters(), m:num_parameters())
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
