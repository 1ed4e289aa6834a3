-- The left-to-right objectives (issue 13): --objective clm (GPT's LM in a
-- causal encoder, config is_decoder) and --objective bilm (ELMo's two causal
-- stacks, the bilm family).  The causal mask against a reference computed by
-- hand, through the model on the CPU and on Vulkan (lavapipe here); the
-- losses against hand-computed shifted cross-entropies; the backward stack's
-- reversal and its dependence on the tokens at and after t only; the
-- checkpoints' round trip; 6-step runs of both objectives and fine-tuning
-- their checkpoints.
local bert = require("bert")
local cjson = require("cjson")
local blocks = require("bert.models.blocks")
local heads = require("bert.models.heads")
local bilm = require("bert.models.bilm")
local pretrain = require("bert.pretrain")

local F = bert.F

local tmpdir = require("spec.support.tmpdir").path

local function max_diff(a, b) return (a:to("cpu") - b:to("cpu")):abs():max():item() end

-- rows t (0-based, inclusive) of a [B, T, ...] tensor's row b (1-based)
local function prefix(x, b, t) return x:to("cpu"):select(1, b):narrow(1, 1, t + 1) end
local function suffix(x, b, t, len) return x:to("cpu"):select(1, b):narrow(1, t + 1, len - t) end

local V = 40
local CONFIG = {vocab_size = V, hidden_size = 16, num_hidden_layers = 2, num_attention_heads = 2,
                intermediate_size = 32, max_position_embeddings = 32}
local function config(extra)
  local c = {}
  for k, v in pairs(CONFIG) do c[k] = v end
  for k, v in pairs(extra or {}) do c[k] = v end
  return c
end

-- two rows: 9 real tokens, and 6 real + 3 pads
local LENGTHS = {9, 6}
local function batch(seed)
  local g = seed
  local function rnd() g = (g * 1103515245 + 12345) % 2147483648 return 5 + g % (V - 5) end
  local ids, mask = {}, {}
  for b, len in ipairs(LENGTHS) do
    ids[b], mask[b] = {}, {}
    for t = 1, 9 do
      ids[b][t] = t <= len and rnd() or 0
      mask[b][t] = t <= len and 1 or 0
    end
  end
  return ids, mask
end

-- a copy of ids with the real tokens at 0-based positions where keep(t) is false redrawn
local function redraw(ids, keep, seed)
  local out, g = {}, seed
  for b, row in ipairs(ids) do
    out[b] = {}
    for t, v in ipairs(row) do
      local real = t <= LENGTHS[b]
      if real and not keep(t - 1) then g = (g * 69069 + 1) % 4294967296; v = 5 + (v - 5 + 1 + g % (V - 6)) % (V - 5) end   -- never the same token
      out[b][t] = v
    end
  end
  return out
end

local function inputs(ids, mask, with_labels)
  local i = {input_ids = bert.tensor(ids, "int32"), attention_mask = bert.tensor(mask, "int32")}
  if with_labels then i.labels = i.input_ids:masked_fill(i.attention_mask:eq(0), -100) end
  return i
end

-- mean over the targets of -log softmax(logits[b][t])[target]; logits a nested table
local function mean_nll(pairs_list)
  local sum = 0
  for _, p in ipairs(pairs_list) do
    local row, target = p[1], p[2]
    local m = -math.huge
    for _, z in ipairs(row) do m = math.max(m, z) end
    local s = 0
    for _, z in ipairs(row) do s = s + math.exp(z - m) end
    sum = sum + (m + math.log(s) - row[target + 1])
  end
  return sum / #pairs_list
end

-- the Vulkan device, or nil and why not
local function vulkan()
  local info = bert.backend_info().vulkan
  if not (info and info.available) then return nil, require("spec.support.optional").no_vulkan() end
  return true
end

-- whether F.attention honours causal = true on a device (query 0 of two
-- equal-scored keys must read value 0 alone), or false and why not
local function causal_op(device)
  local z = bert.zeros({1, 1, 2, 1})
  local v = bert.tensor({1, 2}):view(1, 1, 2, 1)
  if device ~= "cpu" then z, v = z:to(device), v:to(device) end
  local ok, out = pcall(F.attention, z, z, v, {causal = true})
  if not ok then return false, tostring(out) end
  if out:to("cpu"):totable()[1][1][1][1] ~= 1 then return false, "F.attention ignores causal = true" end
  return true
end

-- the device's Vulkan and causal-kernel checks: nil, or why the case is pending
local function unavailable(device)
  if device == "vulkan" then
    local ok, why = vulkan()
    if not ok then return why end
  end
  local ok, why = causal_op(device)
  if not ok then return "no causal attention kernel on " .. device .. " yet: " .. why end
  return nil
end

-- attention by hand from tables: query i reads keys j <= i that the mask keeps
local function reference_attention(q, k, v, mask)
  local qt, kt, vt, mt = q:totable(), k:totable(), v:totable(), mask:totable()
  local out = {}
  local d = #qt[1][1][1]
  for b = 1, #qt do
    out[b] = {}
    for a = 1, #qt[b] do
      out[b][a] = {}
      for i = 1, #qt[b][a] do
        local scores, m = {}, -math.huge
        for j = 1, i do
          if mt[b][j] ~= 0 then
            local s = 0
            for x = 1, d do s = s + qt[b][a][i][x] * kt[b][a][j][x] end
            scores[j] = s / math.sqrt(d)
            m = math.max(m, scores[j])
          end
        end
        local z, row = 0, {}
        for j in pairs(scores) do z = z + math.exp(scores[j] - m) end
        for x = 1, d do row[x] = 0 end
        for j, s in pairs(scores) do
          local p = math.exp(s - m) / z
          for x = 1, d do row[x] = row[x] + p * vt[b][a][j][x] end
        end
        out[b][a][i] = row
      end
    end
  end
  return out
end

local devices = {"cpu", "vulkan"}

describe("the causal attention op", function()
  for _, device in ipairs(devices) do
    it("F.attention{causal = true} matches masked attention by hand on " .. device, function()
      local why = unavailable(device)
      if why then return pending(why) end
      bert.manual_seed(3)
      local q, k, v = bert.randn({2, 2, 7, 4}), bert.randn({2, 2, 7, 4}), bert.randn({2, 2, 7, 4})
      local mask = bert.tensor({{1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 0, 0, 0}}, "int32")
      local want = reference_attention(q, k, v, mask)
      local on = function(t) return device == "cpu" and t or t:to(device) end
      local got = F.attention(on(q), on(k), on(v), {causal = true, mask = on(mask)}):to("cpu")
      -- rows of real queries (a pad query's row is whatever the kernel makes of it)
      assert.tensor_near(bert.tensor(want):narrow(3, 1, 4), got:narrow(3, 1, 4), 1e-5)
      assert.tensor_near(bert.tensor(want):select(1, 1), got:select(1, 1), 1e-5)
    end)
  end
end)

describe("--objective clm: the causal encoder", function()
  local function lm(extra)
    bert.manual_seed(11)
    local m = bert.model("BertLMHeadModel", config(extra or {is_decoder = true}))
    m:evaluate()
    return m
  end

  it("refuses a left-to-right head on an encoder that is not causal", function()
    local ok, err = pcall(bert.model, "BertLMHeadModel", config())
    assert.is_false(ok)
    assert.matches("BertLMHeadModel: a left-to-right LM needs a causal encoder: set is_decoder = true", err, 1, true)
  end)

  for _, device in ipairs(devices) do
    it("outputs at t do not depend on the tokens right of t (" .. device .. ")", function()
      local why = unavailable(device)
      if why then return pending(why) end
      local m = lm()
      local cpu_logits
      if device ~= "cpu" then
        local ids, mask = batch(1)
        cpu_logits = m:forward(inputs(ids, mask)).logits
        m:to(device)
      end
      local ids, mask = batch(1)
      local base = m:forward(inputs(ids, mask)).logits   -- [B, T, V]
      if cpu_logits then assert.is_true(max_diff(cpu_logits, base) < 1e-4, "vulkan vs cpu " .. max_diff(cpu_logits, base)) end
      for _, t in ipairs({0, 2, 4}) do
        local other = m:forward(inputs(redraw(ids, function(s) return s <= t end, 7 + t), mask)).logits
        for b, len in ipairs(LENGTHS) do
          assert.is_true(max_diff(prefix(base, b, t), prefix(other, b, t)) < 1e-5,
            string.format("row %d, positions 0..%d changed", b, t))
          -- the test can fail: the positions after t did see the change
          assert.is_true(max_diff(suffix(base, b, t + 1, len), suffix(other, b, t + 1, len)) > 1e-4)
        end
      end
    end)
  end

  it("the loss is the mean next-token cross-entropy over the non-pad positions", function()
    local m = lm()
    local ids, mask = batch(2)
    local logits = m:forward(inputs(ids, mask)).logits:totable()
    local out = m:forward(inputs(ids, mask, true))
    local targets = {}
    for b, len in ipairs(LENGTHS) do
      for t = 1, len - 1 do targets[#targets + 1] = {logits[b][t], ids[b][t + 1]} end
    end
    assert.equal(#targets, out.targets:numel())   -- 8 + 5: no target after the last real token, none on pads
    assert.is_true(math.abs(out.loss:item() - mean_nll(targets)) < 1e-5, out.loss:item() .. " vs " .. mean_nll(targets))
    assert.same({ids[1][2], ids[1][3]}, {out.targets:totable()[1], out.targets:totable()[2]})
  end)

  it("next_token_targets shifts the labels one to the left", function()
    local t = heads.next_token_targets(bert.tensor({{2, 7, 8, 3, -100}, {2, 9, 3, -100, -100}}, "int32"))
    assert.same({{7, 8, 3, -100, -100}, {9, 3, -100, -100, -100}}, t:totable())
  end)

  it("a causal classifier reads the last real token (blocks.last_token)", function()
    local x = bert.arange(2 * 4 * 3):float():view(2, 4, 3)
    local mask = bert.tensor({{1, 1, 1, 0}, {0, 0, 0, 0}}, "int32")
    -- row 1: position 2; an all-pad row falls back to its first position
    assert.same({{6, 7, 8}, {12, 13, 14}}, blocks.last_token(x, mask):totable())
    assert.same({{9, 10, 11}, {21, 22, 23}}, blocks.last_token(x):totable())
    bert.manual_seed(5)
    local m = bert.model("BertForSequenceClassification", config({is_decoder = true}))
    m:evaluate()
    local ids, am = batch(3)
    local out = m:forward(inputs(ids, am))
    local h = out.last_hidden_state
    local last = bert.cat({h:select(1, 1):narrow(1, 9, 1), h:select(1, 2):narrow(1, 6, 1)}, 1)
    local pooled = F.linear(last, m.m.bert.m.pooler.m.dense.p.weight, m.m.bert.m.pooler.m.dense.p.bias):tanh()
    assert.tensor_near(pooled, out.pooler_output, 1e-6)
    -- more padding after the sequence changes nothing
    local longer, longer_mask = {}, {}
    for b = 1, 2 do
      longer[b], longer_mask[b] = {table.unpack(ids[b])}, {table.unpack(am[b])}
      for _ = 1, 3 do longer[b][#longer[b] + 1] = 0; longer_mask[b][#longer_mask[b] + 1] = 0 end
    end
    assert.tensor_near(out.logits, m:forward(inputs(longer, longer_mask)).logits, 1e-5)
  end)
end)

describe("--objective bilm: two causal stacks", function()
  local function lm()
    bert.manual_seed(13)
    local m = bert.model("BiLMLMHeadModel", config({num_hidden_layers = 1}))
    m:evaluate()
    return m
  end

  it("reverses each row within its real length, padding left at the end", function()
    local mask = bert.tensor({{1, 1, 1, 0, 0}, {1, 1, 1, 1, 1}, {0, 0, 0, 0, 0}}, "int32")
    local rev = bilm.reversal(3, 5, mask)
    assert.same({2, 1, 0, 3, 4, 9, 8, 7, 6, 5, 10, 11, 12, 13, 14}, rev:totable())
    assert.same({4, 3, 2, 1, 0, 9, 8, 7, 6, 5}, bilm.reversal(2, 5):totable())
    -- its own inverse
    local ids = bert.tensor({{5, 6, 7, 0, 0}, {1, 2, 3, 4, 8}, {0, 0, 0, 0, 0}}, "int32")
    local once = bilm.permute_rows(ids, rev)
    assert.same({{7, 6, 5, 0, 0}, {8, 4, 3, 2, 1}, {0, 0, 0, 0, 0}}, once:totable())
    assert.same(ids:totable(), bilm.permute_rows(once, rev):totable())
  end)

  it("writes is_decoder into its config and refuses a non-causal one", function()
    local m = lm()
    assert.is_true(m.config.is_decoder)
    local ok, err = pcall(bert.model, "BiLMLMHeadModel", config({is_decoder = false}))
    assert.is_false(ok)
    assert.matches("is_decoder must be true", err, 1, true)
  end)

  it("has the parameters of the BERT with twice its depth (equal compute)", function()
    local b = bert.model("BertForMaskedLM", "tiny", {vocab_size = 100})
    local l = bert.model("BiLMLMHeadModel", "tiny", {vocab_size = 100})
    assert.equal(1, l.config.num_hidden_layers)
    assert.equal(b:num_parameters(), l:num_parameters())
  end)

  for _, device in ipairs(devices) do
    it("forward at t sees tokens <= t, backward at t tokens >= t; [forward ; backward] is 2H wide (" .. device .. ")", function()
      local why = unavailable(device)
      if why then return pending(why) end
      local m = lm()
      local ids, mask = batch(4)
      local cpu_out = device ~= "cpu" and m.m.bilm:forward(inputs(ids, mask)) or nil
      if device ~= "cpu" then m:to(device) end
      local base = m.m.bilm:forward(inputs(ids, mask))
      local H = CONFIG.hidden_size
      assert.same({2, 9, 2 * H}, base.last_hidden_state:shape())
      assert.same({2, 2 * H}, base.sequence_summary:shape())
      if cpu_out then
        assert.is_true(max_diff(cpu_out.last_hidden_state, base.last_hidden_state) < 1e-4)
      end
      local cat = base.last_hidden_state:to("cpu")
      assert.tensor_near(base.forward_hidden:to("cpu"), cat:narrow(3, 1, H):contiguous(), 1e-6)
      assert.tensor_near(base.backward_hidden:to("cpu"), cat:narrow(3, H + 1, H):contiguous(), 1e-6)
      -- the summary: forward at the last real token, backward at the first
      local fwd, bwd = base.forward_hidden:to("cpu"), base.backward_hidden:to("cpu")
      local summary = base.sequence_summary:to("cpu")
      for b, len in ipairs(LENGTHS) do
        assert.tensor_near(fwd:select(1, b):select(1, len), summary:select(1, b):narrow(1, 1, H):contiguous(), 1e-6)
        assert.tensor_near(bwd:select(1, b):select(1, 1), summary:select(1, b):narrow(1, H + 1, H):contiguous(), 1e-6)
      end
      for _, t in ipairs({1, 3, 4}) do   -- each row has real tokens on both sides
        -- tokens right of t redrawn: the forward stack at <= t keeps its output
        local right = m.m.bilm:forward(inputs(redraw(ids, function(s) return s <= t end, 3 + t), mask))
        -- tokens left of t redrawn: the backward stack at >= t keeps its output
        local left = m.m.bilm:forward(inputs(redraw(ids, function(s) return s >= t end, 5 + t), mask))
        for b, len in ipairs(LENGTHS) do
          assert.is_true(max_diff(prefix(fwd, b, t), prefix(right.forward_hidden, b, t)) < 1e-5)
          assert.is_true(max_diff(suffix(bwd, b, t, len), suffix(left.backward_hidden, b, t, len)) < 1e-5,
            string.format("row %d: backward outputs at %d.. changed with the tokens before", b, t))
          -- and each does see its own side
          assert.is_true(max_diff(prefix(bwd, b, t), prefix(right.backward_hidden, b, t)) > 1e-4)
          assert.is_true(max_diff(suffix(fwd, b, t, len), suffix(left.forward_hidden, b, t, len)) > 1e-4)
        end
      end
    end)
  end

  it("the loss is the mean of the next-token and previous-token cross-entropies", function()
    local m = lm()
    local ids, mask = batch(6)
    local full = m:forward(inputs(ids, mask))
    local fl, bl = full.logits:totable(), full.backward_logits:totable()   -- both in original order
    local out = m:forward(inputs(ids, mask, true))
    local fwd, bwd = {}, {}
    for b, len in ipairs(LENGTHS) do
      for t = 1, len - 1 do fwd[#fwd + 1] = {fl[b][t], ids[b][t + 1]} end
      for t = 2, len do bwd[#bwd + 1] = {bl[b][t], ids[b][t - 1]} end
    end
    assert.is_true(math.abs(out.forward_loss:item() - mean_nll(fwd)) < 1e-5)
    assert.is_true(math.abs(out.backward_loss:item() - mean_nll(bwd)) < 1e-5)
    assert.is_true(math.abs(out.loss:item() - (mean_nll(fwd) + mean_nll(bwd)) / 2) < 1e-5)
    -- the shared softmax: one decoder, the word embeddings
    local names = {}
    for _, np in ipairs(m:named_parameters()) do names[np.name] = true end
    assert.is_nil(names["cls.predictions.decoder.weight"])
    assert.truthy(names["bilm.forward_encoder.layer.0.attention.self.query.weight"])
    assert.truthy(names["bilm.backward_encoder.layer.0.attention.self.query.weight"])
    out.loss:backward()
    for _, np in ipairs(m:named_parameters()) do
      if np.name:find("encoder") then
        assert.is_true(np.param:grad():abs():sum():item() > 0, np.name .. " got no gradient")
      end
    end
  end)

  it("round-trips config.json + safetensors, and fine-tuning heads read 2H", function()
    local m = lm()
    local dir = tmpdir()
    assert(m:save_pretrained(dir))
    local c = cjson.decode(io.open(dir .. "/config.json"):read("a"))
    assert.equal("bilm", c.model_type)
    assert.is_true(c.is_decoder)
    assert.same({"BiLMLMHeadModel"}, c.architectures)
    local back = bert.from_pretrained(dir, {verbose = false})
    local ids, mask = batch(8)
    back:evaluate()
    assert.tensor_near(m:forward(inputs(ids, mask)).logits, back:forward(inputs(ids, mask)).logits, 1e-6)
    for _, arch in ipairs({"BertForSequenceClassification", "BertForTokenClassification", "BertForQuestionAnswering"}) do
      local head, info = bert.from_pretrained(dir, {architecture = arch, verbose = false})
      assert.equal("bilm", info.model_type)
      assert.same({}, info.unexpected)
      head:evaluate()
      local out = head:forward(inputs(ids, mask))
      assert.tensor_near(m.m.bilm:forward(inputs(ids, mask)).last_hidden_state, out.last_hidden_state, 1e-6)
    end
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)

-- {============================================================ end to end

-- a corpus in BERT's plain format: 40 documents of 6-12 sentences
local corpus = require("spec.support.tiny_corpus").write(tmpdir() .. ".txt", 40, 7)

local config_path = tmpdir() .. ".json"
do
  local f = assert(io.open(config_path, "w"))
  f:write(cjson.encode({vocab_size = 100, hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 2,
                        intermediate_size = 64, max_position_embeddings = 64}))
  f:close()
end

local function run_pretrain(out, objective)
  return os.execute(string.format(
    "OMP_NUM_THREADS=1 lua5.4 experiments/pretrain.lua --model %s --corpus %s --tokenizer wordpiece --vocab-size 120 " ..
    "--batch-size 4 --seq-len 32 --log-every 1 --no-plot --threads 1 --output %s --steps 6 --eval-every 3 " ..
    "--objective %s >/dev/null 2>%s.err", config_path, corpus, out, objective, out))
end

describe("experiments/pretrain.lua --objective clm | bilm", function()
  local runs = {}
  teardown(function()
    for _, dir in pairs(runs) do os.execute("rm -rf '" .. dir .. "' '" .. dir .. ".err'") end
  end)

  local expect = {
    clm = {metrics = {"clm_accuracy"}, perplexity = "clm_perplexity", loss = "clm_loss", arch = "BertLMHeadModel",
           model_type = "bert"},
    bilm = {metrics = {"bilm_accuracy", "bilm_forward_accuracy", "bilm_backward_accuracy"},
            perplexity = "bilm_perplexity", loss = "bilm_loss", arch = "BiLMLMHeadModel", model_type = "bilm"},
  }
  for _, objective in ipairs({"clm", "bilm"}) do
    it("runs 6 steps of --objective " .. objective .. " and writes the summary and a causal checkpoint", function()
      local out = tmpdir()
      runs[objective] = out
      assert.is_true(run_pretrain(out, objective), io.open(out .. ".err"):read("a"))
      local s = cjson.decode(io.open(out .. "/summary.json"):read("a"))
      local e = expect[objective]
      for _, k in ipairs(e.metrics) do assert.is_true(s[k] >= 0 and s[k] <= 1, k .. " " .. tostring(s[k])) end
      assert.is_true(math.abs(s[e.perplexity] - math.exp(s[e.loss])) < 1e-6 * s[e.perplexity])
      assert.is_nil(s.mlm_accuracy)
      assert.equal(6, s.steps)
      assert.equal(objective, s.objective)
      assert.is_true(s.predicted_tokens > 0)
      local c = cjson.decode(io.open(out .. "/checkpoint/config.json"):read("a"))
      assert.same({e.arch}, c.architectures)
      assert.equal(e.model_type, c.model_type)
      assert.is_true(c.is_decoder)
      for _, k in ipairs(require("bert.objectives").get(objective).metrics) do
        assert.is_number(s[k], k)
      end
    end)
  end

  it("fine-tunes the checkpoints for 2 steps: classification (both) and tagging (bilm)", function()
    local experiment = require("bert.finetune.experiment")
    local FIX = "spec/fixtures/finetune/"
    for _, job in ipairs({{"clm", "classification", FIX .. "classify"}, {"bilm", "classification", FIX .. "classify"},
                          {"bilm", "tagging", FIX .. "ner_iob2.conll," .. FIX .. "ner_iob2.conll"}}) do
      local run = runs[job[1]]
      if not run then return pending("needs the pretraining runs above") end
      local out = tmpdir()
      local summary = experiment.run(job[2], {task = job[3], model = run .. "/checkpoint", output = out, seq_len = 32,
        batch_size = 2, steps = 2, seed = 1, no_plot = true, quiet = true, log_every = 1, threads = 1})
      assert.equal(2, summary.steps or summary.step, job[1] .. " " .. job[2])
      local c = cjson.decode(io.open(out .. "/best/config.json"):read("a"))
      assert.is_true(c.is_decoder)   -- the fine-tuned encoder is the same causal one
      assert.equal(job[1] == "bilm" and "bilm" or "bert", c.model_type)
      os.execute("rm -rf '" .. out .. "'")
    end
  end)

  it("refuses families without the objective's model, naming them", function()
    local ok, err = pcall(pretrain.settings, {objective = "clm", model = "albert-tiny"})
    assert.is_false(ok)
    assert.matches("--model albert-tiny with --objective clm: the albert family has no causal_lm head", err, 1, true)
    ok, err = pcall(pretrain.settings, {objective = "clm", model = "bilm-tiny"})
    assert.is_false(ok)
    assert.matches("a bilm model is two LMs; use --objective bilm", err, 1, true)
    ok, err = pcall(pretrain.settings, {objective = "clm", model = "elmo-tiny"})   -- before any data is read
    assert.is_false(ok)
    assert.matches("an elmo model is two LMs; use --objective elmo", err, 1, true)
    ok, err = pcall(pretrain.settings, {objective = "bilm", model = "roberta-tiny"})
    assert.is_false(ok)
    assert.matches("--model roberta-tiny with --objective bilm", err, 1, true)
    -- a device whose attention kernel cannot run causal is refused before anything runs
    if vulkan() and not causal_op("vulkan") then
      for _, objective in ipairs({"clm", "bilm"}) do
        ok, err = pcall(pretrain.settings, {objective = objective, device = "vulkan"})
        assert.is_false(ok)
        assert.matches("--objective " .. objective .. " on --device vulkan: the causal attention kernel is not there yet",
          err, 1, true)
      end
    end
    assert.equal("clm", pretrain.settings({objective = "clm", model = "roberta-tiny"}).objective)
    assert.equal("bilm", pretrain.settings({objective = "bilm", model = "tiny"}).objective)
  end)

  it("refuses masking flags (no token is masked) and other objectives' settings, naming them", function()
    for _, objective in ipairs({"clm", "bilm"}) do
      for _, flag in ipairs({"span_mask", "ngram_mask", "phrase_mask", "whole_word_mask"}) do
        local ok, err = pcall(pretrain.settings, {objective = objective, [flag] = flag == "ngram_mask" and 3 or true})
        assert.is_false(ok, flag)
        assert.matches("--" .. flag:gsub("_", "-") .. " with --objective " .. objective ..
          ": every real token is a target, no token is masked", err, 1, true)
      end
    end
    local ok, err = pcall(pretrain.settings, {objective = "clm", generator_size = 0.25})
    assert.is_false(ok)
    assert.matches("--generator-size is a setting of --objective electra; this run's objective is clm", err, 1, true)
    ok, err = pcall(pretrain.settings, {objective = "mlm", teacher = "runs/x/checkpoint"})
    assert.is_false(ok)
    assert.matches("--teacher is a setting of --objective distill; this run's objective is mlm (drop --teacher)",
      err, 1, true)
    ok, err = pcall(pretrain.settings, {objective = "mlm-nsp", tinybert = true})
    assert.is_false(ok)
    assert.matches("--tinybert is a setting of --objective distill; this run's objective is mlm-nsp", err, 1, true)
    -- masked objectives take them
    assert.truthy(pretrain.settings({objective = "mlm", span_mask = true}).span_mask)
    assert.equal(0.25, pretrain.settings({objective = "electra", model = "electra-tiny", generator_size = 0.25}).generator_size)
  end)
end)
-- }============================================================
