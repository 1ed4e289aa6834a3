-- experiments/pretrain.lua end to end on a small synthetic corpus: the three
-- objectives, the summary, and exact resume after kill -9.
local cjson = require("cjson")

local tmpdir = require("spec.support.tmpdir").path
local losses = require("spec.support.losses")

-- a corpus in BERT's plain format: 60 documents of 6-12 sentences
local corpus = require("spec.support.tiny_corpus").write(tmpdir() .. ".txt", 60, 7)

local config = tmpdir() .. ".json"
do
  local f = assert(io.open(config, "w"))
  f:write(cjson.encode({vocab_size = 100, hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 2,
                        intermediate_size = 64, max_position_embeddings = 64}))
  f:close()
end

local function pretrain(out, extra)
  return os.execute(string.format(
    "lua5.4 experiments/pretrain.lua --model %s --corpus %s --tokenizer wordpiece --vocab-size 120 " ..
    "--batch-size 4 --seq-len 32 --log-every 1 --no-plot --output %s %s >/dev/null 2>%s.err",
    config, corpus, out, extra or "", out))
end

describe("experiments/pretrain.lua", function()
  for _, objective in ipairs({"nsp", "sop", "none"}) do
    it("runs with --objective " .. objective .. " and writes the summary", function()
      local out = tmpdir()
      assert.is_true(pretrain(out, "--steps 6 --eval-every 3 --objective " .. objective))
      local summary = cjson.decode(io.open(out .. "/summary.json"):read("a"))
      -- fractions, a perplexity that is exp of the held-out loss, the steps asked for
      for _, k in ipairs({"mlm_accuracy", "unigram_baseline_accuracy"}) do
        assert.is_true(summary[k] >= 0 and summary[k] <= 1, k .. " " .. tostring(summary[k]))
      end
      assert.is_true(summary.masked_tokens > 0)
      assert.is_true(math.abs(summary.perplexity - math.exp(summary.mlm_loss)) < 1e-6 * summary.perplexity)
      assert.is_true(summary.tokens_per_s > 0)
      assert.equal(6, summary.steps)
      assert.equal("pretraining", summary.kind)
      if objective ~= "none" then
        local acc = summary[objective .. "_accuracy"]
        assert.is_true(acc >= 0 and acc <= 1, objective .. " accuracy " .. tostring(acc))
      else
        assert.is_nil(summary.nsp_accuracy)
      end
      -- evaluations at steps 3 and 6 (and the final one), every record a JSON object
      local evals = {}
      for line in io.lines(out .. "/metrics.jsonl") do
        local rec = cjson.decode(line)
        if rec.eval then evals[#evals + 1] = rec.step end
      end
      assert.same({3, 6, 6}, evals)
      -- the checkpoint is a self-contained model directory
      for _, f in ipairs({"config.json", "model.safetensors", "tokenizer.json", "vocab.txt", "tokenizer_config.json",
                          "special_tokens_map.json"}) do
        assert.truthy(io.open(out .. "/checkpoint/" .. f), "checkpoint/" .. f)
      end
      local tc = cjson.decode(io.open(out .. "/checkpoint/tokenizer_config.json"):read("a"))
      assert.equal("BertTokenizer", tc.tokenizer_class)
      assert.equal("[MASK]", tc.mask_token)
      assert.truthy(io.open(out .. "/tokenizer/tokenizer.json"))
      assert.truthy(io.open(out .. "/metrics.csv"))
    end)
  end

  it("takes --objective mlm-nsp | mlm-sop | mlm and the old names nsp | sop | none alike", function()
    local lib = require("bert.pretrain")
    for new_name, old_name in pairs({["mlm-nsp"] = "nsp", ["mlm-sop"] = "sop", mlm = "none"}) do
      assert.equal(old_name, lib.settings({objective = new_name}).objective)
      assert.equal(old_name, lib.settings({objective = old_name}).objective)
    end
    assert.equal("nsp", lib.settings({}).objective)   -- BERT's by default
    -- an objective that is planned but not written is refused by name, never run as another
    for planned in pairs(require("bert.objectives").planned) do
      local ok, err = pcall(lib.settings, {objective = planned})
      assert.is_false(ok)
      assert.matches("'" .. planned .. "' is not implemented yet", err, 1, true)
    end
    local ok, err = pcall(lib.settings, {objective = "nspp"})
    assert.is_false(ok)
    assert.matches("not one of mlm-nsp, mlm-sop, mlm", err, 1, true)
    -- the new name end to end: the same run as the old one
    local a, b = tmpdir(), tmpdir()
    assert.is_true(pretrain(a, "--steps 3 --eval-every 3 --objective mlm-sop"))
    assert.is_true(pretrain(b, "--steps 3 --eval-every 3 --objective sop"))
    local sa = cjson.decode(io.open(a .. "/summary.json"):read("a"))
    local sb = cjson.decode(io.open(b .. "/summary.json"):read("a"))
    assert.equal("sop", sa.objective)
    assert.equal(sb.mlm_loss, sa.mlm_loss)
    assert.equal(sb.sop_accuracy, sa.sop_accuracy)
    os.execute("rm -rf '" .. a .. "' '" .. b .. "'")
  end)

  it("--pair-loss-weight: 0 logs the pair loss apart and refuses an objective without one", function()
    local lib = require("bert.pretrain")
    local ok, err = pcall(lib.settings, {objective = "mlm", pair_loss_weight = 0})
    assert.is_false(ok)
    assert.matches("--pair-loss-weight 0: --objective mlm has no sentence-pair loss", err, 1, true)
    local out = tmpdir()
    assert.is_true(pretrain(out, "--steps 2 --eval-every 2 --objective mlm-nsp --pair-loss-weight 0"))
    local n = 0
    for line in io.lines(out .. "/metrics.jsonl") do
      local rec = cjson.decode(line)
      if rec.loss then   -- the loss is the MLM part alone
        assert.near(rec.mlm_loss, rec.loss, 1e-4)
        n = n + 1
      end
    end
    assert.is_true(n >= 2)
    assert.equal(0, cjson.decode(io.open(out .. "/args.json"):read("a")).pair_loss_weight)
    os.execute("rm -rf '" .. out .. "'")
  end)

  it("passes --span-mask, --ngram-mask N, --phrase-mask and --mask-prob to the data", function()
    local out = tmpdir()
    assert.is_true(pretrain(out, "--steps 2 --objective mlm --span-mask --mask-prob 0.2"))
    local meta = cjson.decode(io.open(out .. "/data/train/meta.json"):read("a"))
    assert.equal("span", meta.mask_mode)
    assert.equal(0.2, meta.masked_lm_prob)
    assert.equal("span", cjson.decode(io.open(out .. "/data/eval/meta.json"):read("a")).mask_mode)
    assert.is_true(pretrain(out, "--steps 2 --objective mlm --ngram-mask 3 --whole-word-mask --overwrite"))
    meta = cjson.decode(io.open(out .. "/data/train/meta.json"):read("a"))
    assert.equal("ngram", meta.mask_mode)
    assert.equal(3, meta.max_span)
    assert.is_true(meta.whole_word_mask)
    -- phrases learned from the training documents, kept with the data; both shard sets use them
    assert.is_true(pretrain(out, "--steps 2 --objective mlm --phrase-mask --overwrite"))
    local phrases = assert(require("bert.data.chunker").load(out .. "/data/phrases.txt"))
    for _, set in ipairs({"train", "eval"}) do
      meta = cjson.decode(io.open(out .. "/data/" .. set .. "/meta.json"):read("a"))
      assert.equal("phrase", meta.mask_mode)
      assert.equal(phrases:checksum(), meta.phrases.checksum)
    end
    assert.matches("pretrain: phrases: learned %d+ phrases", io.open(out .. ".err"):read("a"))
    local lib = require("bert.pretrain")
    local ok, err = pcall(lib.settings, {span_mask = true, ngram_mask = 3})
    assert.is_false(ok)
    assert.matches("--span-mask and --ngram-mask exclude each other", err, 1, true)
    ok, err = pcall(lib.settings, {phrase_mask = true, ngram_mask = 3})
    assert.is_false(ok)
    assert.matches("--ngram-mask and --phrase-mask exclude each other", err, 1, true)
    ok, err = pcall(lib.settings, {mask_prob = 1.5})
    assert.is_false(ok)
    assert.matches("--mask-prob", err, 1, true)
    os.execute("rm -rf '" .. out .. "'")
  end)

  it("resumes after kill -9 with the same losses, step for step #slow", function()
    local steps = 300
    local straight, killed = tmpdir(), tmpdir()
    assert.is_true(pretrain(straight, "--steps " .. steps .. " --save-every 3"))
    os.execute(string.format([[
      lua5.4 experiments/pretrain.lua --model %s --corpus %s --tokenizer wordpiece --vocab-size 120 \
        --batch-size 4 --seq-len 32 --log-every 1 --no-plot --output %s --steps %d --save-every 3 \
        >/dev/null 2>&1 & pid=$!
      for i in $(seq 1 1200); do
        if grep -q '"step":8[,}]' %s/metrics.jsonl 2>/dev/null; then break; fi
        sleep 0.02
      done
      kill -9 $pid; wait $pid 2>/dev/null]], config, corpus, killed, steps, killed))
    local partial = losses(killed)
    assert.truthy(partial[8], "the run was not killed after step 8")
    assert.is_nil(partial[steps], "the run finished before it was killed")
    assert.is_true(os.execute(string.format("lua5.4 experiments/pretrain.lua --resume %s >/dev/null 2>&1", killed)))
    local a, b = losses(straight), losses(killed)
    for s = 1, steps do
      assert.truthy(a[s] and b[s], "missing step " .. s)
      assert.equal(a[s], b[s], "loss differs at step " .. s)
    end
    -- and it learns: the mean loss of the last 20 steps is well below the first 20's
    local first, last = 0, 0
    for s = 1, 20 do first, last = first + a[s] / 20, last + a[steps - 20 + s] / 20 end
    assert.is_true(last < 0.8 * first, string.format("loss %.3f -> %.3f", first, last))
  end)

  it("fits --time-budget: the steps are fixed once, the budget is kept and the schedule ends with the plan #slow", function()
    local out = tmpdir()
    local budget = 8
    assert.is_true(pretrain(out, "--time-budget " .. budget .. " --eval-every 20 --save-every 20"))
    local summary = cjson.decode(io.open(out .. "/summary.json"):read("a"))
    local planned = tonumber(io.open(out .. ".err"):read("a"):match("(%d+) steps fit the 8 s budget"))
    assert.truthy(planned, "no plan printed")
    -- the plan comes from a calibration on this loaded machine: how much of the budget it fills varies
    assert.is_true(summary.wall_seconds >= 0.4 * budget and summary.wall_seconds <= 1.1 * budget,
      "used " .. summary.wall_seconds .. " s of " .. budget)
    assert.is_true(summary.steps <= planned, summary.steps .. " steps of a plan of " .. planned)
    local last_lr, peak
    for line in io.lines(out .. "/metrics.jsonl") do
      local rec = cjson.decode(line)
      if rec.lr then last_lr, peak = rec.lr, math.max(peak or 0, rec.lr) end
    end
    if summary.steps == planned then   -- (a run the budget stopped short of its plan says so instead)
      assert.is_true(last_lr < 0.15 * peak, string.format("learning rate %.3g at the end (peak %.3g)", last_lr, peak))
    end
  end)

  it("keeps --snapshots at fractions of --steps: model directories for a learning curve", function()
    local out = tmpdir()
    assert.is_true(pretrain(out, "--steps 4 --snapshots 0.5,0.25 --objective none --threads 1"))
    for _, step in ipairs({1, 2}) do
      local d = out .. "/snapshot-" .. step
      assert.truthy(io.open(d .. "/config.json"), d)
      assert.truthy(io.open(d .. "/model.safetensors"), d)
      assert.is_nil(io.open(d .. "/optimizer.safetensors"), "a snapshot is a model, not a checkpoint")
    end
    local summary = cjson.decode(assert(io.open(out .. "/summary.json")):read("a"))
    assert.same({{fraction = 0.25, step = 1, name = "snapshot-1"}, {fraction = 0.5, step = 2, name = "snapshot-2"}},
      summary.snapshots)
    local bad = tmpdir()
    assert.is_falsy(pretrain(bad, "--time-budget 5 --snapshots 0.5"))
    assert.truthy(assert(io.open(bad .. ".err")):read("a"):find("--snapshots needs --steps", 1, true))
    assert.is_falsy(pretrain(bad, "--steps 4 --snapshots 1.5"))
    assert.truthy(assert(io.open(bad .. ".err")):read("a"):find("expected fractions in (0, 1)", 1, true))
  end)

  it("stops with a clear error on a corrupt checkpoint", function()
    local out = tmpdir()
    assert.is_true(pretrain(out, "--steps 3"))
    local f = io.open(out .. "/checkpoint/optimizer.safetensors", "wb")
    f:write("garbage")
    f:close()
    assert.is_not_true(os.execute(string.format("lua5.4 experiments/pretrain.lua --resume %s >/dev/null 2>%s.err2", out, out)))
    local err = io.open(out .. ".err2"):read("a")
    assert.truthy(err:find("optimizer.safetensors"), err)
  end)
end)
