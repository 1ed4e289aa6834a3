-- Every family against a plain-PyTorch reference written from the spec
-- (tools/parity_refs.py, fixtures by tools/gen_parity_fixtures.py --family F):
-- an odd shape (hidden 20, 4 heads of 5, 11 tokens), a padded batch, every
-- head class the weights carry, the training loss and every gradient; then
-- save_pretrained -> from_pretrained round trips.
local bert = require("bert")

local function max_abs_diff(a, b) return (a - b):abs():max():item() end

local function load_io(dir)
  local io_t = assert(bert.load_safetensors(dir .. "/io.safetensors"))
  for _, k in ipairs({"input_ids", "token_type_ids", "attention_mask", "labels", "sentence_order_label"}) do
    if io_t[k] then io_t[k] = io_t[k]:int() end
  end
  return io_t
end

-- fixture, main class, {our output field -> io key}, per-token fields, other classes to check
local cases = {
  {dir = "spec/fixtures/roberta_tiny", arch = "RobertaForMaskedLM", outputs = {logits = "logits"},
   others = {
     {"RobertaForSequenceClassification", {logits = "seqcls_logits"}},
     {"RobertaForQuestionAnswering", {start_logits = "qa_start_logits", end_logits = "qa_end_logits"}},
   }},
  {dir = "spec/fixtures/albert_tiny", arch = "AlbertForPreTraining",
   outputs = {prediction_logits = "prediction_logits", sop_logits = "sop_logits", pooler_output = "pooler_output"},
   others = {{"AlbertForSequenceClassification", {logits = "seqcls_logits"}}}},
  {dir = "spec/fixtures/electra_tiny", arch = "ElectraForPreTraining", outputs = {logits = "logits"},
   others = {
     {"ElectraForMaskedLM", {logits = "generator_logits"}},
     {"ElectraForSequenceClassification", {logits = "seqcls_logits"}},
   }},
  {dir = "spec/fixtures/distilbert_tiny", arch = "DistilBertForMaskedLM", outputs = {logits = "logits"},
   others = {{"DistilBertForSequenceClassification", {logits = "seqcls_logits"}}}},
  {dir = "spec/fixtures/deberta_tiny", arch = "DebertaV2ForMaskedLM", outputs = {logits = "logits"},
   others = {{"DebertaV2ForSequenceClassification", {logits = "seqcls_logits"}}}},
}

local function inputs_of(io_t)
  return {input_ids = io_t.input_ids, token_type_ids = io_t.token_type_ids, attention_mask = io_t.attention_mask}
end

-- compares out[field] with io_t[key] on real tokens (per-token outputs) or whole
local function compare(out, io_t, fields, label)
  local keep = io_t.attention_mask:float()
  for field, key in pairs(fields) do
    local got, want = out[field], io_t[key]
    assert.truthy(got, label .. ": no output " .. field)
    local d
    if got:dim() >= 2 and got:size(2) == keep:size(2) and got:size(1) == keep:size(1) then
      local k = got:dim() == 3 and keep:unsqueeze(3) or keep
      d = max_abs_diff(got * k, want * k)
    else
      d = max_abs_diff(got, want)
    end
    assert.truthy(d < 1e-4, string.format("%s %s: max abs error %.3g", label, field, d))
  end
end

for _, case in ipairs(cases) do
  describe(case.arch .. " parity with the PyTorch reference", function()
    local io_t = load_io(case.dir)

    it("loads the class named in config.json with nothing missing or unexpected", function()
      local model, info = bert.from_pretrained(case.dir, {verbose = false})
      assert.equal(case.arch, info.architecture)
      assert.same({}, info.missing)
      assert.same({}, info.unexpected)
      -- every weight of the file is the main class's or another head's
      local n = 0
      for _ in pairs(assert(bert.load_safetensors(case.dir .. "/model.safetensors"))) do n = n + 1 end
      local used = 0
      for _ in pairs(model:state_dict()) do used = used + 1 end
      assert.truthy(#info.unused > 0 and #info.unused < n)
    end)

    it("matches the outputs on a padded batch", function()
      local model = bert.from_pretrained(case.dir, {verbose = false})
      model:evaluate()
      local out = bert.no_grad(function() return model:forward(inputs_of(io_t)) end)
      compare(out, io_t, {last_hidden_state = "last_hidden_state"}, case.arch)
      compare(out, io_t, case.outputs, case.arch)
    end)

    it("matches the training loss and the gradient of every weight", function()
      local model = bert.from_pretrained(case.dir, {verbose = false})
      model:evaluate()
      model:zero_grad()
      local inputs = inputs_of(io_t)
      inputs.labels, inputs.sentence_order_label = io_t.labels, io_t.sentence_order_label
      local out = model:forward(inputs)
      assert.near(io_t.loss:item(), out.loss:item(), 1e-4)
      out.loss:backward()
      local params = {}
      for name, p in pairs(model:state_dict()) do params[name] = p end
      local checked = 0
      for name, expected in pairs(io_t) do
        local pname = name:match("^grad%.(.*)$")
        if pname then
          local p = params[pname]
          assert.truthy(p, "no parameter " .. pname)
          local scale = math.max(expected:abs():max():item(), 1e-3)
          local rel = max_abs_diff(p:grad(), expected) / scale
          assert.truthy(rel < 1e-3, string.format("%s: relative error %.3g", pname, rel))
          checked = checked + 1
        end
      end
      assert.truthy(checked > 20)
    end)

    it("has each other head class over the same weights", function()
      for _, other in ipairs(case.others) do
        local model, info = bert.from_pretrained(case.dir, {architecture = other[1], verbose = false})
        assert.same({}, info.missing)
        model:evaluate()
        local out = bert.no_grad(function() return model:forward(inputs_of(io_t)) end)
        compare(out, io_t, other[2], other[1])
      end
    end)

    it("round-trips save_pretrained -> from_pretrained exactly", function()
      local model = bert.from_pretrained(case.dir, {verbose = false})
      local dir = os.tmpname()
      os.remove(dir)
      assert(model:save_pretrained(dir))
      local again, info = bert.from_pretrained(dir, {verbose = false})
      assert.same({}, info.missing)
      assert.same({}, info.unexpected)
      assert.equal(case.arch, info.architecture)
      assert.equal(0, max_abs_diff(model.flat_params, again.flat_params))
      model:evaluate(); again:evaluate()
      local a = bert.no_grad(function() return model:forward(inputs_of(io_t)) end)
      local b = bert.no_grad(function() return again:forward(inputs_of(io_t)) end)
      assert.equal(0, max_abs_diff(a.last_hidden_state, b.last_hidden_state))
      os.execute("rm -rf '" .. dir .. "'")
    end)
  end)
end

describe("every family on vulkan (lavapipe here) against the cpu", function()
  local info = bert.backend_info().vulkan
  if not (info and info.available) then
    pending(require("spec.support.optional").no_vulkan())
    return
  end

  it("gives the reference outputs for each fixture's main class", function()
    for _, case in ipairs(cases) do
      local io_t = load_io(case.dir)
      local model = bert.from_pretrained(case.dir, {verbose = false})
      model:evaluate()
      model:to("vulkan")
      local inputs = {}
      for k, v in pairs(inputs_of(io_t)) do inputs[k] = v:to("vulkan") end
      local out = bert.no_grad(function() return model:forward(inputs) end)
      local host = {}
      for k, v in pairs(out) do if type(v) == "userdata" then host[k] = v:to("cpu") end end
      compare(host, io_t, {last_hidden_state = "last_hidden_state"}, case.arch .. " on vulkan")
      compare(host, io_t, case.outputs, case.arch .. " on vulkan")
    end
  end)

  it("trains ALBERT (shared layers, factorized embeddings) and RoBERTa to the cpu's gradients", function()
    for _, case in ipairs({cases[1], cases[2]}) do
      local io_t = load_io(case.dir)
      local function step(device)
        local model = bert.from_pretrained(case.dir, {verbose = false})
        model:evaluate()
        local inputs = inputs_of(io_t)
        inputs.labels, inputs.sentence_order_label = io_t.labels, io_t.sentence_order_label
        if device == "vulkan" then
          model:to("vulkan")
          for _, k in ipairs({"input_ids", "token_type_ids", "attention_mask"}) do inputs[k] = inputs[k]:to("vulkan") end
        end
        model:zero_grad()
        local out = model:forward(inputs)
        out.loss:backward()
        return out.loss:item(), model.flat_grad:to("cpu")
      end
      local l1, g1 = step("cpu")
      local l2, g2 = step("vulkan")
      assert.near(l1, l2, 1e-4)
      local rel = max_abs_diff(g1, g2) / g1:abs():max():item()
      assert.truthy(rel < 1e-3, case.arch .. ": relative gradient error " .. rel)
    end
  end)

  it("runs DeBERTa's inference on vulkan and refuses training there with a clear error", function()
    local model = bert.from_pretrained("spec/fixtures/deberta_tiny", {verbose = false})
    model:to("vulkan")
    local ids = bert.tensor({{5, 6, 7}}, "int32"):to("vulkan")
    assert.truthy(bert.no_grad(function() return model:forward{input_ids = ids} end).logits)
    assert.error_matches(function() model:forward{input_ids = ids} end,
      "DeBERTa attention on vulkan runs forward only")
  end)
end)
