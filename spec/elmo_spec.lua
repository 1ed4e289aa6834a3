local bert = require("bert")
-- The elmo family (lua/bert/models/elmo.lua) and the elmo objective: the
-- character CNN and the highway against plain Lua, finite-difference
-- gradients of the whole model's loss, the directions' causality, the
-- original size's parameter count, save / load, the scalar mix, scoring
-- (BLiMP's and bits per byte's scorer) and a pretraining run resumed after kill -9.
local cjson = require("cjson")
local elmo = require("bert.models.elmo")
local tmpdir = require("spec.support.tmpdir").path

local TINY = {model_type = "elmo", vocab_size = 23, projection_dim = 6, cell_size = 8, num_hidden_layers = 2,
              char_embedding_dim = 3, filters = {{1, 2}, {2, 3}, {3, 2}}, n_highway = 1,
              max_characters_per_token = 6, hidden_dropout_prob = 0, classifier_dropout = 0}

local function tiny(arch, changes)
  local spec = {}
  for k, v in pairs(TINY) do spec[k] = v end
  for k, v in pairs(changes or {}) do spec[k] = v end
  local m = bert.model(arch or "ElmoLMHeadModel", spec)
  bert.manual_seed(7)
  bert.no_grad(function() m.flat_params:normal_(0, 0.5) end)   -- larger than the init: gradients worth checking
  return m
end

local IDS = bert.tensor({{3, 7, 1, 9, 4}, {12, 5, 22, 0, 0}}, "int32")
local MASK = bert.tensor({{1, 1, 1, 1, 1}, {1, 1, 1, 0, 0}}, "int32")

local function maxdiff(a, b) return (a - b):abs():max():item() end

describe("elmo: the character CNN", function()
  it("maps a token's bytes as AllenNLP does: begin, bytes (cut), end, padding", function()
    assert.same({259, 98, 99, 260, 261, 261}, elmo.characters("ab", 6))
    assert.same({259, 98, 99, 100, 101, 260}, elmo.characters("abcdefg", 6))
    assert.same({259, 257, 260, 261}, elmo.characters("[CLS]", 4))
    assert.same({259, 258, 260, 261}, elmo.characters("</s>", 4))
  end)

  it("convolves and max-pools as a plain loop over windows does", function()
    local m = tiny()
    local enc = m.base.m.token_embedder
    local chars = bert.tensor({elmo.characters("cat", 6), elmo.characters("[CLS]", 6), elmo.characters("", 6)}, "int32")
    local got = bert.no_grad(function() return enc:convolve(chars) end)
    assert.same({3, 7}, got:shape())
    local E, C = enc.p.char_embedding_weights:totable(), 3
    local col = 0
    for i, f in ipairs(TINY.filters) do
      local width, n = f[1], f[2]
      local conv = enc.m["char_conv_" .. (i - 1)]
      local w, b = conv.p.weight:totable(), conv.p.bias:totable()
      for k = 1, n do
        for row, word in ipairs(chars:totable()) do
          local best = -math.huge
          for p = 1, 6 - width + 1 do
            local s = b[k]
            for j = 1, width do
              for c = 1, C do s = s + w[k][c][j] * E[word[p + j - 1] + 1][c] end
            end
            best = math.max(best, s)
          end
          local want = math.max(best, 0)   -- relu after the pool
          assert.is_true(math.abs(got:get(row, col + k) - want) < 1e-5,
            string.format("filter %d unit %d word %d: %g vs %g", i, k, row, got:get(row, col + k), want))
        end
      end
      col = col + n
    end
    -- the encoder: [B, T, projection_dim], one row per token
    local x = bert.no_grad(function() return enc(IDS, m.base:character_table("spec")) end)
    assert.same({2, 5, 6}, x:shape())
  end)

  it("runs a highway layer as g * x + (1 - g) * relu(h)", function()
    local hw = elmo.Highway(2, 1):flatten_parameters()
    local layer = hw.m.layers.m["0"]
    bert.no_grad(function()
      layer.p.weight:copy_(bert.tensor({{1, -2}, {0.5, 1}, {0, 1}, {-1, 0}}))
      layer.p.bias:copy_(bert.tensor({0.1, -0.2, 0.3, 0}))
    end)
    local y = hw(bert.tensor({{1, 2}})):totable()[1]
    -- by hand: h = [1 - 4 + 0.1, 0.5 + 2 - 0.2] = [-2.9, 2.3], gate logits [2 + 0.3, -1]
    local function sig(v) return 1 / (1 + math.exp(-v)) end
    local g1, g2 = sig(2.3), sig(-1)
    assert.is_true(math.abs(y[1] - (g1 * 1 + (1 - g1) * 0)) < 1e-6)
    assert.is_true(math.abs(y[2] - (g2 * 2 + (1 - g2) * 2.3)) < 1e-6)
  end)
end)

describe("elmo: the biLM", function()
  it("has finite-difference gradients of the loss for parameters of every part", function()
    local m = tiny()
    local batch = {input_ids = IDS, attention_mask = MASK, labels = IDS}
    m:zero_grad()
    m:forward(batch).loss:backward()
    local function loss() return bert.no_grad(function() return m:forward(batch).loss:item() end) end
    local sd = m:state_dict()
    local eps = 5e-3
    for _, name in ipairs({"elmo.token_embedder.char_embedding_weights", "elmo.token_embedder.char_conv_1.weight",
                           "elmo.token_embedder.highways.layers.0.weight", "elmo.token_embedder.projection.bias",
                           "elmo.lstm.forward_layer_0.input_linearity.weight",
                           "elmo.lstm.backward_layer_1.state_linearity.weight",
                           "elmo.lstm.forward_layer_1.state_projection.weight", "softmax.weight"}) do
      local p, g = sd[name]:view(-1), sd[name]:grad():view(-1)
      -- the three elements with the largest gradients
      local order = {}
      local gt = g:totable()
      for i = 1, #gt do order[i] = i end
      table.sort(order, function(a, b) return math.abs(gt[a]) > math.abs(gt[b]) end)
      local function central(i, h)
        local v = p:get(i)
        bert.no_grad(function() p:set(v + h, i) end)
        local up = loss()
        bert.no_grad(function() p:set(v - h, i) end)
        local down = loss()
        bert.no_grad(function() p:set(v, i) end)
        return (up - down) / (2 * h)
      end
      local checked = 0
      for k = 1, #order do
        local i = order[k]
        local fd = central(i, eps)
        -- a max-pool or relu kink within eps is no gradient: two step sizes disagree there
        if math.abs(fd - central(i, eps / 2)) < 1e-3 + 1e-2 * math.abs(fd) then
          assert.is_true(math.abs(fd - gt[i]) < 3e-3 + 3e-2 * math.abs(gt[i]),
            string.format("%s[%d]: analytic %g, finite difference %g", name, i, gt[i], fd))
          checked = checked + 1
        end
        if checked == 3 or k == 8 then break end
      end
      assert.is_true(checked >= 2, name .. ": too few smooth elements")
    end
  end)

  it("keeps the directions apart: forward at t never sees tokens after t, backward never before", function()
    local m = tiny():evaluate()
    local ids = bert.tensor({{3, 7, 1, 9, 4, 11, 2}}, "int32")
    local base = bert.no_grad(function() return m.base:forward{input_ids = ids} end)
    for k = 1, 7 do
      local changed = ids:clone()
      changed:set(ids:get(1, k) == 15 and 16 or 15, 1, k)
      local other = bert.no_grad(function() return m.base:forward{input_ids = changed} end)
      for t = 1, 7 do
        local df = maxdiff(base.forward_hidden:select(2, t), other.forward_hidden:select(2, t))
        local db = maxdiff(base.backward_hidden:select(2, t), other.backward_hidden:select(2, t))
        if t < k then assert.equal(0, df, "forward at " .. t .. " saw token " .. k) else
          assert.is_true(df > 0, "forward at " .. t .. " did not see token " .. k) end
        if t > k then assert.equal(0, db, "backward at " .. t .. " saw token " .. k) else
          assert.is_true(db > 0, "backward at " .. t .. " did not see token " .. k) end
      end
    end
    -- a padded row scores as the same row alone
    local out = bert.no_grad(function() return m.base:forward{input_ids = IDS, attention_mask = MASK} end)
    local alone = bert.no_grad(function() return m.base:forward{input_ids = IDS:narrow(1, 2, 1):narrow(2, 1, 3)} end)
    assert.is_true(maxdiff(out.backward_hidden:narrow(1, 2, 1):narrow(2, 1, 3), alone.backward_hidden) < 1e-6)
    assert.is_true(maxdiff(out.forward_hidden:narrow(1, 2, 1):narrow(2, 1, 3), alone.forward_hidden) < 1e-6)
  end)

  it("trains each direction on its own targets: next token forward, previous token backward, no padding", function()
    local m = tiny()
    local out = m:forward{input_ids = IDS, attention_mask = MASK, labels = IDS}
    assert.same({7, 1, 9, 4, 5, 22}, out.targets:totable())
    assert.same({3, 7, 1, 9, 12, 5}, out.backward_targets:totable())
    assert.same({0, 1, 2, 3, 5, 6}, out.target_positions:totable())
    assert.same({1, 2, 3, 4, 6, 7}, out.backward_target_positions:totable())
    assert.is_true(math.abs(out.loss:item() - (out.forward_loss:item() + out.backward_loss:item())) < 1e-5)
  end)

  it("has the paper's 93.6M parameters at the original size (without the softmax)", function()
    local base = bert.model("ElmoModel", "original", {vocab_size = 100})
    assert.equal(93600864, base:num_parameters())
    local lm = bert.model("ElmoLMHeadModel", "original", {vocab_size = 100})
    assert.equal(93600864 + 100 * 513, lm:num_parameters())
  end)

  it("refuses a config it cannot build, naming the key and the value", function()
    assert.error_matches(function() tiny(nil, {is_decoder = true}) end, "an elmo model is two LMs")
    assert.error_matches(function() tiny(nil, {filters = {{7, 2}}}) end,
      "filters[1] must be [width in 1..6, count in 1..65536], got [7, 2]", 1, true)
    assert.error_matches(function() tiny(nil, {max_characters_per_token = 1e6}) end,
      "'max_characters_per_token' must be an integer in [3, 1024] (begin, a byte, end), got 1000000", 1, true)
    assert.error_matches(function() tiny(nil, {projection_dim = 8}) end,
      "'projection_dim' 8 must be smaller than 'cell_size' 8", 1, true)
    assert.error_matches(function() tiny(nil, {token_encoder = "bytes"}) end,
      "'token_encoder' must be \"characters\" or \"words\", got bytes", 1, true)
  end)

  it("ties the softmax to word embeddings with token_encoder = words", function()
    local m = tiny(nil, {token_encoder = "words"})
    assert.is_nil(m:state_dict()["softmax.weight"])
    assert.truthy(m:state_dict()["elmo.token_embedder.word_embeddings.weight"])
    local out = m:forward{input_ids = IDS, attention_mask = MASK, labels = IDS}
    assert.is_true(out.loss:item() > 0)
  end)

  it("saves and loads with its documented names, the vocabulary's characters included", function()
    local dir = tmpdir()
    local tok = bert.tokenizer.load("spec/fixtures/finetune/vocab.txt")
    local m = tiny(nil, {vocab_size = tok:vocab_size()}):evaluate()
    m.base:set_vocabulary(tok)
    assert(m:save_pretrained(dir))
    assert(require("bert.model_dir").save_tokenizer(dir, tok))
    local config = cjson.decode(io.open(dir .. "/config.json"):read("a"))
    assert.equal("elmo", config.model_type)
    assert.same({"ElmoLMHeadModel"}, config.architectures)
    assert.is_true(config.character_vocabulary)
    assert.equal(require("bert.models.elmo").vocabulary_fingerprint(tok:vocab_size(), tok),
                 config.character_vocabulary_fingerprint)
    local names = bert.load_safetensors(dir .. "/model.safetensors")
    for _, n in ipairs({"elmo.token_embedder.char_conv_0.weight", "elmo.lstm.backward_layer_1.state_projection.weight",
                        "softmax.bias"}) do
      assert.truthy(names[n], n)
    end
    local loaded = bert.from_pretrained(dir, {strict = true}):evaluate()
    local inputs = {input_ids = IDS, attention_mask = MASK}
    local a = bert.no_grad(function() return m:forward(inputs) end)
    local b = bert.no_grad(function() return loaded:forward(inputs) end)
    assert.equal(0, maxdiff(a.logits, b.logits))
    assert.equal(0, maxdiff(a.backward_logits, b.backward_logits))
    assert.truthy(io.open(dir .. "/README.md"), "the model card")
    -- another vocabulary beside it (two entries swapped: same size, other spellings) is refused
    local vocab = {}
    for line in io.lines(dir .. "/vocab.txt") do vocab[#vocab + 1] = line end
    vocab[#vocab - 1], vocab[#vocab] = vocab[#vocab], vocab[#vocab - 1]
    local f = assert(io.open(dir .. "/vocab.txt", "w"))
    f:write(table.concat(vocab, "\n"), "\n")
    f:close()
    os.remove(dir .. "/tokenizer.json")
    local swapped = bert.from_pretrained(dir)
    assert.error_matches(function() swapped:forward(inputs) end, "trained on a vocabulary with fingerprint fnv1a32:%x+")
    local other = bert.tokenizer.load(dir .. "/vocab.txt")
    assert.error_matches(function() loaded.base:set_vocabulary(other) end,
      "set_vocabulary: the character encoder of the model in .* was trained on a vocabulary")
    -- fine-tuning with that tokenizer (--tokenizer) is refused; from scratch it is taken
    local finetune = require("bert.finetune")
    assert.error_matches(function()
      finetune.load_model(dir, {kind = "classification", labels = {"a", "b"}, tokenizer = other})
    end, "%-%-tokenizer: the character encoder of the model in .* was trained on a vocabulary with fingerprint")
    local fresh = finetune.load_model(dir, {kind = "classification", labels = {"a", "b"}, tokenizer = other,
                                            from_scratch = true})
    assert.equal(require("bert.models.elmo").vocabulary_fingerprint(other:vocab_size(), other),
                 fresh.base.config.character_vocabulary_fingerprint)
    -- without its tokenizer the characters cannot be read: said, not guessed
    os.remove(dir .. "/vocab.txt")
    os.remove(dir .. "/tokenizer.json")
    local orphan = bert.from_pretrained(dir)
    assert.error_matches(function() orphan:forward(inputs) end, "none was found beside")
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("is scored by the LM scorer as the sum of its two directions (BLiMP, bits per byte)", function()
    local lm = require("bert.evaluate.lm")
    local tok = bert.tokenizer.load("spec/fixtures/finetune/vocab.txt")
    local m = tiny(nil, {vocab_size = tok:vocab_size()})
    m.base:set_vocabulary(tok)
    assert.equal("bilm", lm.kind_of(m))
    local score = lm.scorer(m, tok)
    local s, stats = score({"the cat sat on the mat .", "a dog"})
    for i = 1, 2 do
      assert.is_true(s[i] < 0)
      assert.is_true(math.abs(s[i] - (stats.forward[i] + stats.backward[i])) < 1e-4)
    end
    -- every token of each sentence once per direction, the specials never
    local n = (#tok:encode("the cat sat on the mat .").ids - 2) + (#tok:encode("a dog").ids - 2)
    assert.equal(2 * n, stats.scored_tokens)
    -- each direction's score is that LM's cross-entropy over the sentence's own tokens
    local ids = tok:encode("a dog").ids
    local labels = {}
    for t, id in ipairs(ids) do labels[t] = (t == 1 or t == #ids) and -100 or id end
    local out = bert.no_grad(function()
      return m:forward{input_ids = bert.tensor({ids}, "int32"), labels = bert.tensor({labels}, "int32")}
    end)
    local k = #ids - 2
    assert.is_true(math.abs(out.forward_loss:item() * k + stats.forward[2]) < 1e-4)
    assert.is_true(math.abs(out.backward_loss:item() * k + stats.backward[2]) < 1e-4)
  end)
end)

describe("elmo: fine-tuning through the scalar mix", function()
  it("normalises the layer weights, trains the mix and the head, freezes the biLM", function()
    local m = tiny("ElmoForSequenceClassification")
    local mix = m.m.scalar_mix
    assert.equal(3, mix.n)   -- the token encoder and two LSTM layers
    bert.no_grad(function() mix.p.scalar_parameters:copy_(bert.tensor({0.3, -1, 2})) end)
    assert.is_true(math.abs(mix:weights():sum():item() - 1) < 1e-6)
    m:zero_grad()
    local out = m:forward{input_ids = IDS, attention_mask = MASK, labels = bert.tensor({0, 1}, "int32")}
    out.loss:backward()
    assert.is_true(mix.p.scalar_parameters:grad():abs():sum():item() > 0)
    assert.is_true(mix.p.gamma:grad():abs():sum():item() > 0)
    assert.is_true(m.m.classifier.p.weight:grad():abs():sum():item() > 0)
    for _, np in ipairs(m:named_parameters()) do
      if np.name:find("^elmo%.") then assert.equal(0, np.param:grad():abs():sum():item(), np.name) end
    end
    local names = {}
    for _, np in ipairs(m:trainable_parameters()) do names[#names + 1] = np.name end
    table.sort(names)
    assert.same({"classifier.bias", "classifier.weight", "scalar_mix.gamma", "scalar_mix.scalar_parameters"}, names)
    -- the mix is the weighted sum of the layers, times gamma
    local base = bert.no_grad(function() return m.base:forward{input_ids = IDS} end)
    local w = mix:weights():totable()
    local want = (base.layers[1] * w[1] + base.layers[2] * w[2] + base.layers[3] * w[3]) * mix.p.gamma:item()
    assert.is_true(maxdiff(base.last_hidden_state, want) < 1e-5)
    -- tagging and QA heads read it too
    for _, arch in ipairs({"ElmoForTokenClassification", "ElmoForQuestionAnswering"}) do
      local h = tiny(arch)
      local o = h:forward{input_ids = IDS, attention_mask = MASK}
      assert.truthy(o.logits or o.start_logits)
    end
  end)
end)

describe("experiments/pretrain.lua --objective elmo", function()
  it("runs, evaluates held-out, resumes after kill -9 with the same losses, scores and fine-tunes frozen", function()
    local corpus = require("spec.support.tiny_corpus").write(tmpdir() .. ".txt", 40, 7)
    local config = tmpdir() .. ".json"
    local f = assert(io.open(config, "w"))
    local c = {}
    for k, v in pairs(TINY) do c[k] = v end
    c.projection_dim, c.cell_size = 16, 32
    f:write(cjson.encode(c))
    f:close()
    local function cmd(out, steps)
      return string.format("lua5.4 experiments/pretrain.lua --model %s --objective elmo --corpus %s --tokenizer " ..
        "wordpiece --vocab-size 120 --batch-size 4 --seq-len 32 --log-every 1 --no-plot --save-every 3 " ..
        "--eval-every 6 --output %s --steps %d", config, corpus, out, steps)
    end
    local steps = 24
    local straight, killed = tmpdir(), tmpdir()
    require("spec.support.kill_resume")(function(out) return cmd(out, steps) end, straight, killed, steps, 8)
    local summary = cjson.decode(io.open(straight .. "/summary.json"):read("a"))
    assert.is_true(summary.elmo_accuracy >= 0 and summary.elmo_accuracy <= 1)
    assert.is_true(summary.elmo_perplexity > 1)
    -- the checkpoint scores (bits per byte) and fine-tunes from its directory
    local lm = require("bert.evaluate.lm")
    local model, tok, info = lm.load(straight)
    assert.equal("bilm", info.kind)
    local r = lm.bits_per_byte(model, tok, corpus, {max_sentences = 20})
    assert.is_true(r.bits_per_byte > 0 and r.forward_bits_per_byte > 0 and r.backward_bits_per_byte > 0)
    local clf = require("bert.finetune").load_model(straight, {kind = "classification", labels = {"a", "b"}})
    assert.equal("ElmoForSequenceClassification", clf.class_name)
    -- fine-tuning trains the mix and the classifier only: the biLM's weights come out as they went in
    local task = tmpdir() .. ".jsonl"
    local tf = assert(io.open(task, "w"))
    for i = 1, 40 do tf:write(cjson.encode({text = i % 2 == 0 and "the cat sat" or "a dog ran", label = i % 2}), "\n") end
    tf:close()
    local ft = tmpdir()
    require("bert.finetune.experiment").run("classification", {task = task, model = straight, steps = 3,
      batch_size = 4, weight_decay = 0.1, output = ft, quiet = true, no_plot = true, threads = 1})
    local before = bert.load_safetensors(straight .. "/checkpoint/model.safetensors")
    local after = bert.load_safetensors(ft .. "/best/model.safetensors")
    local n = 0
    for name, t in pairs(before) do
      if name:find("^elmo%.") then
        assert.equal(0, maxdiff(t, after[name]), name)
        n = n + 1
      end
    end
    assert.is_true(n > 10)
    assert.truthy(after["scalar_mix.scalar_parameters"])
    os.execute(string.format("rm -rf '%s' '%s'", task, ft))
    os.execute(string.format("rm -rf '%s' '%s' '%s' '%s'", straight, killed, corpus, config))
  end)
end)
