-- --objective electra (bert.objectives.electra): replaced-token labels,
-- sampling, shared and gradient-disentangled (GDES) embeddings, the loss
-- against a hand computation, save/load of the discriminator and the
-- generator, exact resume after kill -9, and a tiny run end to end.
local bert = require("bert")
local cjson = require("cjson")
local electra = require("bert.objectives.electra")

local tmpdir = require("spec.support.tmpdir").path

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

-- a tiny pair of the family ("electra" or "deberta-v2"), vocabulary 40
local function tiny_pair(family, opts)
  opts = opts or {}
  local ctx = {
    args = {seed = 1, model = family .. "-tiny", embedding_sharing = opts.sharing, disc_weight = opts.disc_weight},
    family = family, tokenizer = opts.tokenizer,
    size = family == "electra"
      and {vocab_size = 40, embedding_size = 16, hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4,
           intermediate_size = 64, max_position_embeddings = 32}
      or {vocab_size = 40, hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 2, intermediate_size = 64,
          max_position_embeddings = 32, position_buckets = 8},
  }
  bert.manual_seed(1)   -- the same initial weights every time
  local pair = electra.build(ctx)
  pair:evaluate()   -- no dropout: forward passes are repeatable under one seed
  return pair
end

-- a batch of 2 x 8 with four masked positions (ids >= 5, as real tokens)
local function tiny_batch()
  local ids = bert.tensor({{1, 7, 4, 9, 12, 4, 2, 0}, {1, 4, 30, 8, 4, 17, 22, 2}}, "int32")
  local labels = bert.full({2, 8}, -100):int()
  labels:set(11, 1, 3); labels:set(13, 1, 6); labels:set(25, 2, 2); labels:set(19, 2, 5)
  local mask = bert.tensor({{1, 1, 1, 1, 1, 1, 1, 0}, {1, 1, 1, 1, 1, 1, 1, 1}}, "int32")
  return {input_ids = ids, labels = labels, attention_mask = mask, token_type_ids = bert.zeros({2, 8}, "int32")}
end

local function grad_of(t) return t:grad():clone() end

describe("bert.objectives.electra", function()
  it("labels a token replaced exactly where the sample differs from the original", function()
    -- originals at the masked positions: 11 (row 1 col 3), 13 (1, 6), 25 (2, 2), 19 (2, 5)
    local b = tiny_batch()
    local positions = bert.tensor({2, 5, 9, 12}, "int32")        -- flat 0-based
    local samples = bert.tensor({11, 6, 25, 3}, "int32")         -- right, wrong, right, wrong
    local corrupted, labels, original = electra.corrupt(b.input_ids, b.labels, positions, samples)
    assert.same({{1, 7, 11, 9, 12, 13, 2, 0}, {1, 25, 30, 8, 19, 17, 22, 2}}, original:totable())
    assert.same({{1, 7, 11, 9, 12, 6, 2, 0}, {1, 25, 30, 8, 3, 17, 22, 2}}, corrupted:totable())
    assert.same({{0, 0, 0, 0, 0, 1, 0, 0}, {0, 0, 0, 0, 1, 0, 0, 0}}, labels:totable())
    -- no masked position: the original sequence, nothing replaced
    local none = bert.full({2, 8}, -100):int()
    local c2, l2 = electra.corrupt(b.input_ids, none, bert.zeros({0}, "int32"), bert.zeros({0}, "int32"))
    assert.same(b.input_ids:totable(), c2:totable())
    assert.equal(0, l2:sum():item())
  end)

  it("samples from the softmax (Gumbel-max), deterministically under the seed", function()
    local p = {0.6, 0.3, 0.1}
    local rows = 6000
    local logits = bert.tensor({{math.log(p[1]), math.log(p[2]), math.log(p[3])}}):expand({rows, 3}):contiguous()
    bert.manual_seed(5)
    local a = electra.sample(logits)
    bert.manual_seed(5)
    local b = electra.sample(logits)
    assert.same(a:totable(), b:totable())
    local counts = {0, 0, 0}
    for _, v in ipairs(a:totable()) do counts[v + 1] = counts[v + 1] + 1 end
    for i = 1, 3 do
      local sd = math.sqrt(rows * p[i] * (1 - p[i]))
      assert.is_true(math.abs(counts[i] - rows * p[i]) < 5 * sd, string.format("class %d: %d of %d", i, counts[i], rows))
    end
  end)

  it("masks the generator's input as ELECTRA: [MASK] at 85% of the masked positions, else the original", function()
    local rows = 1000
    local ids = bert.full({rows, 12}, 7):int()          -- BERT's 80/10/10 would have put 7s and random ids here
    local labels = bert.full({rows, 12}, -100):int()
    for i = 1, rows do labels:set(20 + i % 5, i, 2); labels:set(30, i, 9) end
    bert.manual_seed(2)
    local out = electra.electra_mask(ids, labels, 3)
    bert.manual_seed(2)
    assert.same(out:totable(), electra.electra_mask(ids, labels, 3):totable())
    local masks, kept = 0, 0
    for i, row in ipairs(out:totable()) do
      for j, v in ipairs(row) do
        if j == 2 or j == 9 then
          local original = j == 2 and 20 + i % 5 or 30
          assert.is_true(v == 3 or v == original, "a masked position holds " .. v)
          if v == 3 then masks = masks + 1 else kept = kept + 1 end
        else
          assert.equal(7, v)   -- an unmasked position is untouched
        end
      end
    end
    local n, sd = 2 * rows, math.sqrt(2 * rows * 0.85 * 0.15)
    assert.is_true(math.abs(masks - 0.85 * n) < 5 * sd, masks .. " of " .. n .. " masked")
  end)

  it("shares the embedding tensors, and both losses train them", function()
    local pair = tiny_pair("electra")
    local gen_emb = pair.m.generator.base.roles.embeddings
    local disc_emb = pair.m.discriminator.base.roles.embeddings
    for _, name in ipairs({"word_embeddings", "position_embeddings", "token_type_embeddings", "LayerNorm"}) do
      assert.is_true(rawequal(gen_emb.m[name].p.weight, disc_emb.m[name].p.weight), name)
    end
    -- the generator is narrower (hidden 8 of 32) but reads the same 16-wide tables
    assert.equal(8, pair.m.generator.config.hidden_size)
    assert.equal(16, pair.m.generator.config.embedding_size)
    -- one flat buffer: the shared table is counted once
    local n = 0
    for _, np in ipairs(pair:named_parameters()) do n = n + np.param:numel() end
    assert.equal(pair.flat_params:numel(), n)
    assert.equal(pair.m.discriminator:num_parameters() + pair.m.generator:num_parameters()
      - 40 * 16 - 32 * 16 - 2 * 16 - 2 * 16, pair:num_parameters())
    -- the gradient of each loss alone reaches the table; the total's is their λ-weighted sum
    local W = disc_emb.m.word_embeddings.p.weight
    local function grad(which)
      pair:zero_grad()
      bert.manual_seed(9)
      local out = pair:forward(tiny_batch())
      out[which]:backward()
      return grad_of(W)
    end
    local g_gen, g_disc, g_all = grad("generator_loss"), grad("discriminator_loss"), grad("loss")
    assert.is_true(g_gen:abs():sum():item() > 0)
    assert.is_true(g_disc:abs():sum():item() > 0)
    assert.tensor_near(g_gen + g_disc * 50, g_all, 1e-4)
  end)

  it("GDES: the discriminator reads stopgrad(E_G) + E_Δ; the generator's table learns from MLM only", function()
    local pair = tiny_pair("deberta-v2")
    assert.equal("gdes", pair.sharing)
    local gen_w = pair.m.generator.base.roles.embeddings.m.word_embeddings.p.weight
    local delta = pair.m.discriminator.base.roles.embeddings.m.word_embeddings.p.weight
    assert.is_false(rawequal(gen_w, delta))
    assert.equal(0, delta:abs():sum():item())   -- E_Δ starts at zero
    -- DeBERTa-v3's generator: the discriminator's width, half its depth
    assert.equal(32, pair.m.generator.config.hidden_size)
    assert.equal(1, pair.m.generator.config.num_hidden_layers)
    local function grads(which)
      pair:zero_grad()
      bert.manual_seed(9)
      local out = pair:forward(tiny_batch())
      out[which]:backward()
      return grad_of(gen_w), grad_of(delta)
    end
    local gen_from_disc, delta_from_disc = grads("discriminator_loss")
    assert.equal(0, gen_from_disc:abs():sum():item())
    assert.is_true(delta_from_disc:abs():sum():item() > 0)
    local gen_from_gen, delta_from_gen = grads("generator_loss")
    assert.is_true(gen_from_gen:abs():sum():item() > 0)
    assert.equal(0, delta_from_gen:abs():sum():item())
    -- the gradient reaching E_Δ is the discriminator loss's derivative: central differences on rows the batch reads
    local _, analytic = grads("discriminator_loss")
    local function disc_loss()
      bert.manual_seed(9)
      return pair:forward(tiny_batch()).discriminator_loss:item()
    end
    -- (token id + 1, column): ids 12, 9, 30 (not 7: read once replaced and once not, its two
    -- terms nearly cancel, ~1e-5, below what central differences resolve)
    for _, at in ipairs({{13, 1}, {10, 5}, {31, 32}}) do
      local row, col = at[1], at[2]
      local old = delta:get(row, col)
      local h = 1e-2
      bert.no_grad(function() delta:set(old + h, row, col) end)
      local up = disc_loss()
      bert.no_grad(function() delta:set(old - h, row, col) end)
      local down = disc_loss()
      bert.no_grad(function() delta:set(old, row, col) end)
      local numeric = (up - down) / (2 * h)
      local a = analytic:get(row, col)
      assert.is_true(math.abs(a) > 1e-5, "no gradient at " .. row .. ", " .. col)
      assert.is_true(math.abs(numeric - a) <= 0.05 * math.abs(a) + 1e-4,
        string.format("E_Δ[%d, %d]: numeric %.6g, analytic %.6g", row, col, numeric, a))
    end
    -- --embedding-sharing shared on the same family: one table again
    local shared = tiny_pair("deberta-v2", {sharing = "shared"})
    assert.is_true(rawequal(shared.m.generator.base.roles.embeddings.m.word_embeddings.p.weight,
      shared.m.discriminator.base.roles.embeddings.m.word_embeddings.p.weight))
  end)

  it("loss = MLM(generator) + λ·RTD(discriminator), against a hand computation", function()
    for _, lambda in ipairs({50, 7}) do
      local pair = tiny_pair("electra", {disc_weight = lambda})
      bert.manual_seed(3)
      local out = pair:forward(tiny_batch())
      -- the generator's cross-entropy over the masked positions
      local logp = out.logits:log_softmax(-1):totable()
      local targets = out.masked_labels:totable()
      local mlm = 0
      for i, t in ipairs(targets) do mlm = mlm - logp[i][t + 1] end
      mlm = mlm / #targets
      -- the discriminator's sigmoid cross-entropy over the real (unpadded) tokens
      local z, y = out.rtd_logits:totable(), out.rtd_labels:totable()
      local rtd, n = 0, 0
      for b = 1, #y do
        for t = 1, #y[b] do
          if y[b][t] ~= -100 then
            local s = 1 / (1 + math.exp(-z[b][t]))
            rtd = rtd - (y[b][t] == 1 and math.log(s) or math.log(1 - s))
            n = n + 1
          end
        end
      end
      assert.equal(15, n)   -- the padded position is not a token
      rtd = rtd / n
      assert.near(mlm, out.generator_loss:item(), 1e-4)
      assert.near(rtd, out.discriminator_loss:item(), 1e-5)
      assert.near(mlm + lambda * rtd, out.loss:item(), 1e-3)
      -- the labels are the corrupt() labels of the samples the generator drew
      local _, labels = electra.corrupt(tiny_batch().input_ids, tiny_batch().labels, out.masked_positions, out.samples)
      local want = labels:masked_fill(tiny_batch().attention_mask:eq(0), -100)
      assert.same(want:totable(), out.rtd_labels:totable())
    end
  end)

  for _, family in ipairs({"electra", "deberta-v2"}) do
    it("saves the discriminator as a model directory and the generator beside it (" .. family .. ")", function()
      local pair = tiny_pair(family)
      pair:training()
      -- a few optimizer steps, so that (under GDES) E_Δ is no longer zero
      local opt = bert.optim.AdamW(pair, {lr = 1e-2})
      for _ = 1, 3 do
        pair:zero_grad()
        pair:forward(tiny_batch()).loss:backward()
        opt:step()
      end
      pair:evaluate()
      local dir = tmpdir()
      assert.is_true(pair:save_pretrained(dir))
      local cfg = cjson.decode(io.open(dir .. "/config.json"):read("a"))
      local gcfg = cjson.decode(io.open(dir .. "/generator/config.json"):read("a"))
      local want_disc = family == "electra" and "ElectraForPreTraining" or "DebertaV2ForReplacedTokenDetection"
      local want_gen = family == "electra" and "ElectraForMaskedLM" or "DebertaV2ForMaskedLM"
      assert.same({want_disc}, cfg.architectures)
      assert.same({want_gen}, gcfg.architectures)
      assert.equal(cfg.embedding_size or cfg.hidden_size, gcfg.embedding_size)
      -- each loads on its own and computes what it computed inside the pair
      local disc = bert.from_pretrained(dir, {verbose = false, strict = true})
      local gen = bert.from_pretrained(dir .. "/generator", {verbose = false, strict = true})
      disc:evaluate(); gen:evaluate()
      bert.manual_seed(4)
      local out = pair:forward(tiny_batch())
      local b = tiny_batch()
      local d2 = disc:forward({input_ids = out.corrupted_ids, attention_mask = b.attention_mask, token_type_ids = b.token_type_ids})
      assert.tensor_near(out.rtd_logits, d2.logits, 1e-5)
      local g2 = gen:forward(b)
      assert.tensor_near(out.logits, g2.logits, 1e-5)
      if family == "deberta-v2" then
        -- what the directory holds is E_G + E_Δ, and E_Δ has moved from zero
        local delta = pair.m.discriminator.base.roles.embeddings.m.word_embeddings.p.weight
        local gen_w = pair.m.generator.base.roles.embeddings.m.word_embeddings.p.weight
        assert.is_true(delta:abs():sum():item() > 0)
        local saved = bert.load_safetensors(dir .. "/model.safetensors")["deberta.embeddings.word_embeddings.weight"]
        assert.tensor_near(gen_w + delta, saved, 1e-6)
      end
      -- the Trainer's resume: the pair's weights back from the directory, exactly
      local again = tiny_pair(family)
      again:load_state_dict(bert.load_safetensors(dir .. "/model.safetensors"), {checkpoint_dir = dir})
      assert.same(pair.flat_params:totable(), again.flat_params:totable())
      os.execute("rm -rf '" .. dir .. "'")
    end)
  end

  it("runs on Vulkan as on the CPU: losses, samples and gradients", function()
    local info = bert.backend_info().vulkan
    if not (info and info.available) then
      pending(require("spec.support.optional").no_vulkan())
      return
    end
    local cpu_pair, vk_pair = tiny_pair("electra"), tiny_pair("electra")
    vk_pair:to("vulkan")
    local function run(pair)
      pair:zero_grad()
      bert.manual_seed(9)
      local out = pair:forward(tiny_batch())   -- batches stay on the CPU, as the loader's
      out.loss:backward()
      return out, pair.flat_grad:to("cpu")
    end
    local a, ga = run(cpu_pair)
    local b, gb = run(vk_pair)
    assert.same(a.samples:totable(), b.samples:to("cpu"):totable())
    assert.same(a.rtd_labels:totable(), b.rtd_labels:to("cpu"):totable())
    assert.near(a.generator_loss:item(), b.generator_loss:to("cpu"):item(), 1e-4)
    assert.near(a.discriminator_loss:item(), b.discriminator_loss:to("cpu"):item(), 1e-5)
    assert.tensor_near(ga, gb, 1e-3)
  end)

  it("refuses a family without a discriminator, naming the ones with one", function()
    local lib = require("bert.pretrain")
    local ok, err = pcall(lib.settings, {objective = "electra", model = "tiny"})
    assert.is_false(ok)
    assert.matches("the bert family has no replaced-token-detection discriminator", err, 1, true)
    assert.matches("electra-tiny", err, 1, true)
    ok, err = pcall(lib.settings, {objective = "electra", generator_size = 1.5})
    assert.is_false(ok)
    assert.matches("--generator-size", err, 1, true)
    assert.equal("electra", lib.settings({objective = "electra", model = "electra-tiny"}).objective)
    assert.equal("electra", lib.settings({objective = "electra", model = "deberta-v3-tiny"}).objective)
  end)
end)

describe("experiments/pretrain.lua --objective electra", function()
  -- a small corpus in BERT's plain format
  local corpus = require("spec.support.tiny_corpus").write(tmpdir() .. ".txt", 60, 11)
  local deberta_config = tmpdir() .. ".json"
  write(deberta_config, cjson.encode({model_type = "deberta-v2", vocab_size = 100, hidden_size = 32,
    num_hidden_layers = 2, num_attention_heads = 2, intermediate_size = 64, max_position_embeddings = 64,
    position_buckets = 16}))

  local function command(model, out, extra)
    return string.format("OMP_WAIT_POLICY=passive lua5.4 experiments/pretrain.lua --model %s --objective electra " ..
      "--corpus %s --tokenizer wordpiece --vocab-size 120 --batch-size 4 --seq-len 32 --threads 1 --log-every 1 " ..
      "--no-plot --output %s %s", model, corpus, out, extra or "")
  end

  it("pretrains electra-tiny for 6 steps and writes the RTD and generator metrics", function()
    local out = tmpdir()
    assert.is_true(os.execute(command("electra-tiny", out, "--steps 6 --eval-every 3") .. " >/dev/null 2>" .. out .. ".err"))
    local summary = cjson.decode(io.open(out .. "/summary.json"):read("a"))
    for _, k in ipairs(electra.metrics) do
      assert.is_number(summary[k], k)
      if k ~= "perplexity" then assert.is_true(summary[k] >= 0 and summary[k] <= 1, k .. " " .. summary[k]) end
    end
    assert.equal("generator", summary.mlm_accuracy_of)
    assert.is_true(summary.replaced_fraction > 0 and summary.rtd_tokens > summary.masked_tokens)
    assert.is_true(math.abs(summary.perplexity - math.exp(summary.mlm_loss)) < 1e-6 * summary.perplexity)
    assert.equal(6, summary.steps)
    assert.equal("electra", summary.objective)
    -- training records carry both losses
    local rec
    for line in io.lines(out .. "/metrics.jsonl") do rec = rec or (cjson.decode(line).generator_loss and cjson.decode(line)) end
    assert.is_number(rec.discriminator_loss)
    assert.is_number(rec.rtd_accuracy)
    -- the checkpoint: the discriminator with its tokenizer, the generator beside it
    for _, f in ipairs({"config.json", "model.safetensors", "vocab.txt", "generator/config.json",
                        "generator/model.safetensors", "generator/tokenizer.json"}) do
      assert.truthy(io.open(out .. "/checkpoint/" .. f), "checkpoint/" .. f)
    end
    -- fine-tuning reads the discriminator as an ELECTRA classifier
    local clf, info = bert.from_pretrained(out .. "/checkpoint",
      {architecture = "ElectraForSequenceClassification", verbose = false})
    assert.equal("ElectraForSequenceClassification", clf.architecture)
    assert.same({}, info.unexpected)
    for _, name in ipairs(info.missing) do assert.matches("^classifier%.", name) end
    os.execute("rm -rf '" .. out .. "' '" .. out .. ".err'")
  end)

  for _, model in ipairs({"electra-tiny", deberta_config}) do
    it("resumes after kill -9 with the same losses, step for step (" .. (model:match("json$") and "GDES" or model) .. ") #slow", function()
      local steps = 60
      local straight, killed = tmpdir(), tmpdir()
      local flags = "--steps " .. steps .. " --save-every 3 --eval-every 5 --max-eval 8"
      require("spec.support.kill_resume")(function(out) return command(model, out, flags) end, straight, killed,
        steps, 8)
      os.execute("rm -rf '" .. straight .. "' '" .. killed .. "'")
    end)
  end
end)
