-- ONNX export (bert.onnx, tools/export_onnx.lua): every family (BERT,
-- RoBERTa, ALBERT, ELECTRA, DistilBERT, DeBERTa-v2) and every head it has
-- an ONNX form for, run in ONNX Runtime (npm onnxruntime-node through node,
-- installed by make deps) on padded batches of two odd shapes (dynamic
-- axes; [batch x choices x seq] for multiple choice), within 1e-4 of ours;
-- what has no ONNX form is refused in one line.
local bert = require("bert")
local onnx = require("bert.onnx")
local registry = require("bert.models.registry")

local no_runtime = require("spec.support.optional").missing("node", "onnxruntime-node")

-- small configs of odd sizes (head width 12, an embedding width apart from
-- the hidden size where the family has one, ALBERT's sharing in groups,
-- DeBERTa's log buckets reached at 9 tokens)
local bert_like = {vocab_size = 97, hidden_size = 36, num_hidden_layers = 2, num_attention_heads = 3,
                   intermediate_size = 52, max_position_embeddings = 40}
local function with(base, extra)
  local c = {}
  for k, v in pairs(base) do c[k] = v end
  for k, v in pairs(extra or {}) do c[k] = v end
  return c
end
local families = {
  {"bert", bert_like},
  {"roberta", with(bert_like, {pad_token_id = 1})},
  {"albert", with(bert_like, {embedding_size = 20, num_hidden_layers = 4, num_hidden_groups = 2, inner_group_num = 2})},
  {"electra", with(bert_like, {embedding_size = 20})},
  {"distilbert", {vocab_size = 97, dim = 36, n_layers = 2, n_heads = 3, hidden_dim = 52, max_position_embeddings = 40}},
  {"deberta-v2", with(bert_like, {relative_attention = true, position_buckets = 8, position_biased_input = false,
                                  pos_att_type = {"p2c", "c2p"}, share_att_key = true, norm_rel_ebd = "layer_norm"})},
}
-- further DeBERTa settings: c2p alone with its own position projection, absolute
-- positions in the input, an embedding width projected to the hidden size;
-- and no relative attention at all
local deberta_variants = {
  {"c2p, share_att_key false, position_biased_input, embedding_size 20", with(bert_like, {
    relative_attention = true, position_buckets = 8, pos_att_type = {"c2p"}, share_att_key = false,
    position_biased_input = true, embedding_size = 20, norm_rel_ebd = "none"})},
  {"p2c over unbucketed distances (max_relative_positions 6)", with(bert_like, {
    relative_attention = true, position_buckets = -1, max_relative_positions = 6, pos_att_type = "p2c",
    position_biased_input = false, share_att_key = true, norm_rel_ebd = "layer_norm"})},
  {"relative_attention false", with(bert_like, {relative_attention = false})},
}

-- the padded batches: [2 x 6] and [3 x 9] for the model's settings a
-- (bert_arch's keys): ids below its vocabulary, padding by its
-- pad_token_id, token types of both kinds where it has two
local function batches(a)
  local V, pad, t = a.vocab_size, a.pad_token_id or 0, (a.type_vocab_size or 0) > 1 and 1 or 0
  local function ids(rows)
    for _, row in ipairs(rows) do
      for i, v in ipairs(row) do row[i] = v < 0 and pad or v % V end
    end
    return rows
  end
  return {
    {input_ids = ids({{2, 5, 7, 9, 3, 11}, {2, 8, 3, -1, -1, -1}}),
     attention_mask = {{1, 1, 1, 1, 1, 1}, {1, 1, 1, 0, 0, 0}},
     token_type_ids = {{0, 0, 0, t, t, t}, {0, 0, 0, 0, 0, 0}}},
    {input_ids = ids({{2, 30, 31, 32, 33, 34, 35, 36, 3}, {2, 40, 41, 3, -1, -1, -1, -1, -1}, {2, 50, 3, 60, 61, 3, -1, -1, -1}}),
     attention_mask = {{1, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 0, 0, 0, 0, 0}, {1, 1, 1, 1, 1, 1, 0, 0, 0}},
     token_type_ids = {{0, 0, 0, 0, 0, t, t, t, t}, {0, 0, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, t, t, t, 0, 0, 0}}},
  }
end

-- the same rows as choices: [2 x 2 x 6] and [3 x 2 x 9]
local function choice_batches(a)
  local out = {}
  for _, b in ipairs(batches(a)) do
    local c = {}
    for k, rows in pairs(b) do
      c[k] = {}
      for i = 1, #rows do c[k][i] = {rows[i], rows[i % #rows + 1]} end
    end
    out[#out + 1] = c
  end
  return out
end

-- exports arch with config c and checks every output at both shapes
local function agrees(arch, c, tmp)
  if not onnx.node_modules() then error("onnx.node_modules() found no onnxruntime-node") end
  bert.manual_seed(7)
  local m = bert.model(arch, c)
  m:evaluate()
  local names = onnx.export(m, tmp)
  assert.is_true(#names >= 1)
  local kind = m.family.architectures[arch]
  local diffs = onnx.check(m, tmp, (kind == "multiple_choice" and choice_batches or batches)(m.arch))
  for _, name in ipairs(names) do
    assert.is_number(diffs[name], name)
    assert.is_true(diffs[name] <= 1e-4, string.format("%s: %s differs by %.3g", arch, name, diffs[name]))
  end
  return names
end

describe("ONNX export", function()
  local tmp = os.tmpname()
  teardown(function() os.remove(tmp) end)

  -- the refusal needs no ONNX Runtime
  it("refuses a family without an ONNX form (bilm), by name", function()
    local arch = registry.architecture_for("bilm", "base")
    local ok, err = pcall(onnx.export, bert.model(arch, "tiny"), tmp)
    assert.is_false(ok)
    assert.matches("^onnx%.export: " .. arch .. " %(family bilm, head base%) is not supported: no ONNX form for its ", err)
    assert.falsy(err:find("\n"), err)
  end)

  if no_runtime then
    it("runs in ONNX Runtime", function()
      pending(no_runtime)
    end)
    return
  end

  for _, fc in ipairs(families) do
    local family = registry.family(fc[1])
    local archs = {}
    for arch in pairs(family.architectures) do archs[#archs + 1] = arch end
    table.sort(archs)
    for _, arch in ipairs(archs) do
      it(arch .. " gives our outputs in ONNX Runtime within 1e-4, at two padded batch shapes", function()
        -- a left-to-right LM needs a causal encoder
        agrees(arch, with(fc[2], {num_labels = 3, is_decoder = family.architectures[arch] == "causal_lm" or nil}), tmp)
      end)
    end
    it(registry.architecture_for(family, "sequence_classification") .. " with num_labels = 1 (regression) too", function()
      local names = agrees(registry.architecture_for(family, "sequence_classification"), with(fc[2], {num_labels = 1}), tmp)
      assert.same({"logits"}, names)
    end)
  end

  for _, v in ipairs(deberta_variants) do
    for _, arch in ipairs({"DebertaV2Model", "DebertaV2ForSequenceClassification"}) do
      it(arch .. " with " .. v[1] .. " agrees too", function() agrees(arch, v[2], tmp) end)
    end
  end

  -- Hugging Face's tiny checkpoints of each family (spec/fixtures, loaded as
  -- from the Hub): their own settings and trained-looking weights
  for _, name in ipairs({"bert", "roberta", "albert", "electra", "distilbert", "deberta"}) do
    it("the " .. name .. "_tiny fixture (a Hugging Face checkpoint) agrees too", function()
      local m = bert.from_pretrained("spec/fixtures/" .. name .. "_tiny", {verbose = false})
      m:evaluate()
      local names = onnx.export(m, tmp)
      local diffs = onnx.check(m, tmp, batches(m.arch))
      for _, out in ipairs(names) do
        assert.is_true(diffs[out] <= 1e-4, string.format("%s: %s differs by %.3g", m.architecture, out, diffs[out]))
      end
    end)
  end

  it("declares token_type_ids only where the model reads them", function()
    local function inputs_of(arch, c)
      bert.manual_seed(3)
      onnx.export(bert.model(arch, c), tmp)
      local bytes = assert(io.open(tmp, "rb")):read("a")
      return bytes:find("token_type_ids", 1, true) ~= nil
    end
    assert.is_true(inputs_of("BertModel", bert_like))
    assert.is_false(inputs_of("DistilBertModel", families[5][2]))
    assert.is_false(inputs_of("DebertaV2Model", families[6][2]))
  end)

  it("a causal encoder (is_decoder) reads the last real token for its pooler and classifier", function()
    agrees("BertModel", with(bert_like, {is_decoder = true}), tmp)
    agrees("RobertaForSequenceClassification", with(families[2][2], {is_decoder = true, num_labels = 2}), tmp)
  end)

  it("exports the tanh GELU (hidden_act gelu_new) and relu as standard ops too", function()
    for _, act in ipairs({"gelu_new", "relu"}) do agrees("BertForMaskedLM", with(bert_like, {hidden_act = act}), tmp) end
  end)

  it("docs/onnx.md's Node block runs an exported classifier with the tokenizer of its model directory", function()
    local optional = require("spec.support.optional")
    local no_tok = optional.missing("tokenizers")
    if no_tok then pending(no_tok) return end
    local tok_modules = optional.node_modules("tokenizers")
    local code = assert(io.open("docs/onnx.md")):read("a"):match("\n```js\n(.-)\n```\n")
    assert.is_not_nil(code, "docs/onnx.md has no ```js block")
    local dir = os.tmpname()
    os.remove(dir)
    local tok = bert.tokenizer.load("spec/fixtures/finetune/vocab.txt")
    bert.manual_seed(11)
    local m = bert.model("BertForSequenceClassification", with(bert_like, {vocab_size = tok:vocab_size(), num_labels = 2}))
    m:evaluate()
    assert(require("bert.model_dir").save(dir, m, tok))
    onnx.export(m, dir .. "/model.onnx")
    local script = assert(io.open(dir .. "/run.js", "w"))
    script:write(code)
    script:close()
    local p = io.popen(string.format("NODE_PATH=%s:%s node %s/run.js %s %s/model.onnx 2>&1", onnx.node_modules(), tok_modules,
      dir, dir, dir))
    local out = p:read("a")
    local ok = p:close()
    os.execute("rm -rf '" .. dir .. "'")
    assert.is_true(ok == true, out)
    -- the same texts through the Lua tokenizer and model, padded as the block pads
    local rows, texts, longest = {}, {}, 0
    for line in out:gmatch("[^\n]+") do rows[#rows + 1] = require("cjson").decode(line) end
    assert.equal(2, #rows, out)
    local encs = {}
    for i, r in ipairs(rows) do
      texts[i] = r.text
      encs[i] = tok:encode(r.text)
      longest = math.max(longest, #encs[i].ids)
    end
    local ids, mask, types = {}, {}, {}
    for i, e in ipairs(encs) do
      ids[i], mask[i], types[i] = {}, {}, {}
      for j = 1, longest do
        ids[i][j], mask[i][j], types[i][j] = e.ids[j] or 0, e.ids[j] and 1 or 0, e.type_ids[j] or 0
      end
    end
    local logits = bert.no_grad(function()
      return m:forward({input_ids = ids, attention_mask = mask, token_type_ids = types}).logits:totable()
    end)
    for i, r in ipairs(rows) do
      for c = 1, 2 do
        assert.is_true(math.abs(r.logits[c] - logits[i][c]) <= 1e-4, string.format("%s: %g vs %g", texts[i], r.logits[c], logits[i][c]))
      end
    end
  end)

  it("tools/export_onnx.lua exports a model directory of any family and checks it", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(bert.mkdir(dir))
    bert.manual_seed(8)
    assert(bert.model("DebertaV2ForSequenceClassification", with(families[6][2], {num_labels = 2}))
      :save_pretrained(dir))
    local p = io.popen(string.format("lua5.4 tools/export_onnx.lua --model %s --output %s/m.onnx --check 2>&1", dir, dir))
    local out = p:read("a")
    local ok = p:close()
    os.execute("rm -rf '" .. dir .. "'")
    assert.is_true(ok == true, out)
    assert.matches("logits%s+max |ours %- onnxruntime| = ", out)
    assert.matches("within 0.0001", out)
  end)

  it("tools/export_onnx.lua ends an unsupported model with the one-line refusal", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(bert.mkdir(dir))
    assert(bert.model("BiLMModel", "tiny"):save_pretrained(dir))
    local p = io.popen(string.format("lua5.4 tools/export_onnx.lua --model %s --output %s/m.onnx 2>&1", dir, dir))
    local out = p:read("a")
    local ok = p:close()
    os.execute("rm -rf '" .. dir .. "'")
    assert.is_not_true(ok, out)
    assert.matches("onnx%.export: BiLMModel %(family bilm, head base%) is not supported: no ONNX form for its ", out)
    assert.falsy(out:find("traceback", 1, true), out)
  end)
end)
