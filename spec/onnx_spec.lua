-- ONNX export (bert.onnx, tools/export_onnx.lua): every BERT head, run in
-- ONNX Runtime (npm onnxruntime-node through node, installed by make deps)
-- on padded batches of two shapes (dynamic axes), within 1e-4 of ours.
local bert = require("bert")
local onnx = require("bert.onnx")

local no_runtime = require("spec.support.optional").missing("node", "onnxruntime-node")

describe("ONNX export", function()
  local tmp = os.tmpname()
  teardown(function() os.remove(tmp) end)

  if no_runtime then
    it("runs in ONNX Runtime", function() pending(no_runtime) end)
    return
  end

  local config = {vocab_size = 90, hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4,
                  intermediate_size = 48, max_position_embeddings = 40, num_labels = 3}
  local other_shape = {
    input_ids = {{2, 30, 31, 32, 33, 34, 35, 36, 3}, {2, 40, 41, 3, 0, 0, 0, 0, 0}, {2, 50, 3, 60, 61, 3, 0, 0, 0}},
    attention_mask = {{1, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 0, 0, 0, 0, 0}, {1, 1, 1, 1, 1, 1, 0, 0, 0}},
    token_type_ids = {{0, 0, 0, 0, 0, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 1, 1, 1, 0, 0, 0}},
  }
  for _, arch in ipairs({"BertModel", "BertForPreTraining", "BertForMaskedLM", "BertForSequenceClassification",
                         "BertForTokenClassification", "BertForQuestionAnswering"}) do
    it(arch .. " gives our outputs in ONNX Runtime within 1e-4, at two batch shapes", function()
      if not onnx.node_modules() then error("onnxruntime-node is missing: run make deps") end
      bert.manual_seed(7)
      local m = bert.model(arch, config)
      m:evaluate()
      local names = onnx.export(m, tmp)
      assert.is_true(#names >= 1)
      for _, inputs in ipairs({false, other_shape}) do
        local diffs = onnx.check(m, tmp, inputs or nil)
        local seen = 0
        for _, name in ipairs(names) do
          assert.is_number(diffs[name], name)
          assert.is_true(diffs[name] <= 1e-4, string.format("%s differs by %.3g", name, diffs[name]))
          seen = seen + 1
        end
        assert.equal(#names, seen)
      end
    end)
  end

  it("exports the tanh GELU (hidden_act gelu_new) as standard ops too", function()
    bert.manual_seed(9)
    local c = {}
    for k, v in pairs(config) do c[k] = v end
    c.hidden_act = "gelu_new"
    local m = bert.model("BertForMaskedLM", c)
    m:evaluate()
    onnx.export(m, tmp)
    assert.is_true(onnx.check(m, tmp).logits <= 1e-4)
  end)

  it("tools/export_onnx.lua exports a model directory and checks it", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(bert.mkdir(dir))
    bert.manual_seed(8)
    assert(bert.model("BertForSequenceClassification", config):save_pretrained(dir))
    local p = io.popen(string.format("lua5.4 tools/export_onnx.lua --model %s --output %s/m.onnx --check 2>&1", dir, dir))
    local out = p:read("a")
    local ok = p:close()
    assert.is_true(ok == true, out)
    assert.matches("logits%s+max |ours %- onnxruntime| = ", out)
    assert.matches("within 0.0001", out)
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("refuses what it cannot export, by name", function()
    local m = bert.model("BertModel", config)
    m.config.hidden_act = "swish"
    assert.has_error(function() onnx.export(m, tmp) end,
      "onnx.export: hidden_act swish is not supported (gelu, gelu_new)")
  end)
end)
