-- Cramming's schedules in pretraining: the one-cycle learning rate
-- (optim.schedule and --schedule), batch growth by accumulation
-- (Trainer accum_at, --batch-ramp), shorter sequences first
-- (pretraining.rechunk, --seq-len-schedule), the time clock
-- (--schedule-clock time), the refusals, and exact resume.
local bert = require("bert")
local cjson = require("cjson")
local tmpdir = require("spec.support.tmpdir").path
local kill_resume = require("spec.support.kill_resume")
local lib = require("bert.pretrain")
local pre = require("bert.data.pretraining")

local corpus = require("spec.support.tiny_corpus").write(tmpdir() .. ".txt", 60, 7)
local config = tmpdir() .. ".json"
do
  local f = assert(io.open(config, "w"))
  f:write(cjson.encode({vocab_size = 100, hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 2,
                        intermediate_size = 64, max_position_embeddings = 64, pre_layer_norm = true,
                        hidden_dropout_prob = 0, attention_probs_dropout_prob = 0}))
  f:close()
end

local BASE = "lua5.4 experiments/pretrain.lua --model %s --corpus %s --tokenizer wordpiece --vocab-size 120 " ..
  "--batch-size 4 --seq-len 32 --log-every 1 --no-plot --objective mlm --output %s %s"

local function pretrain(out, extra)
  return os.execute(string.format(BASE .. " >/dev/null 2>%s.err", config, corpus, out, extra or "", out))
end

local function records(dir)
  local out = {}
  for line in io.lines(dir .. "/metrics.jsonl") do
    local rec = cjson.decode(line)
    if rec.loss then out[rec.step] = rec end
  end
  return out
end

local function read_json(path) return cjson.decode(assert(io.open(path)):read("a")) end

local CRAM = "--schedule one_cycle --warmup 0.5 --batch-ramp 0.5 --accum 3 --seq-len-schedule 8:0.25,16:0.5"

describe("optim.schedule one_cycle", function()
  it("rises linearly from min_lr to the peak at warmup, then falls linearly back to min_lr at total", function()
    local f = bert.optim.schedule{kind = "one_cycle", warmup = 4, total = 12, lr = 1.0, min_lr = 0.2}
    assert.near(0.2, f(0), 1e-12)
    assert.near(0.6, f(2), 1e-12)
    assert.near(1.0, f(4), 1e-12)
    assert.near(0.6, f(8), 1e-12)
    assert.near(0.2, f(12), 1e-12)
    assert.near(0.2, f(20), 1e-12)
    local g = bert.optim.schedule{kind = "one_cycle", warmup = 5, total = 10, lr = 2.0}
    assert.near(0, g(0), 1e-12)
    assert.near(2.0, g(5), 1e-12)
    assert.near(1.0, g(7.5), 1e-12)
    local ok, err = pcall(bert.optim.schedule, {kind = "one_cycle", warmup = 5, lr = 1})
    assert.is_false(ok)
    assert.matches("option 'total' is required for kind \"one_cycle\"", err, 1, true)
  end)
end)

describe("Trainer accum_at (batch growth by accumulation)", function()
  it("draws accum_at(step) micro-batches per step, counts them and logs the step's accum", function()
    bert.manual_seed(1)
    local model = bert.nn.Linear(3, 1)
    local opt = bert.optim.SGD(model, {lr = 0.01})
    local drawn = 0
    local trainer = bert.train.Trainer{
      model = model, optimizer = opt, steps = 4, progress = false,
      accum_at = function(step) return step + 1 end,
      forward = function(m, b) return {loss = (m(b.x) * m(b.x)):mean()} end,
      next_batch = function() drawn = drawn + 1 return {x = bert.ones({2, 3})} end,
    }
    local summary = trainer:run()
    assert.equal(1 + 2 + 3 + 4, drawn)
    assert.equal(10, trainer.micro_batches)
    assert.equal(4, summary.last.accum)
    trainer.accum_at = function() return 0 end
    trainer.steps = 5
    local ok, err = pcall(trainer.run, trainer)
    assert.is_false(ok)
    assert.matches("accum_at(4) must return an integer >= 1, got 0", err, 1, true)
  end)
end)

describe("pretraining.rechunk (shorter sequences first)", function()
  it("cuts rows into pieces in order, keeps every token and label, and leaves out all-padding pieces", function()
    local batch = {
      input_ids = bert.tensor({{2, 5, 6, 7, 8, 3}, {2, 9, 3, 0, 0, 0}}, "int32"),
      token_type_ids = bert.zeros({2, 6}, "int32"),
      attention_mask = bert.tensor({{1, 1, 1, 1, 1, 1}, {1, 1, 1, 0, 0, 0}}, "int32"),
      labels = bert.tensor({{-100, 5, -100, -100, 8, -100}, {-100, 9, -100, -100, -100, -100}}, "int32"),
    }
    local out = pre.rechunk(batch, 2)
    assert.same({{2, 5}, {6, 7}, {8, 3}, {2, 9}, {3, 0}}, out.input_ids:totable())
    assert.same({{1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 0}}, out.attention_mask:totable())
    assert.same({{-100, 5}, {-100, -100}, {8, -100}, {-100, 9}, {-100, -100}}, out.labels:totable())
    assert.same({5, 2}, out.token_type_ids:shape())
    assert.equal(batch, pre.rechunk(batch, 6))
    local ok, err = pcall(pre.rechunk, batch, 4)
    assert.is_false(ok)
    assert.matches("rechunk: argument #2 must be an integer that divides the batch's 6 tokens, got 4", err, 1, true)
    batch.next_sentence_label = bert.tensor({0, 1}, "int32")
    ok, err = pcall(pre.rechunk, batch, 3)
    assert.is_false(ok)
    assert.matches("'next_sentence_label' [2] is not per token", err, 1, true)
  end)

  it("parses --seq-len-schedule into rising stages ending at --seq-len", function()
    assert.same({{len = 64, until_fraction = 0.5}, {len = 128, until_fraction = 1}}, lib.seq_len_stages("64:0.5", 128))
    assert.same({{len = 32, until_fraction = 0.25}, {len = 64, until_fraction = 0.5}, {len = 128, until_fraction = 1}},
      lib.seq_len_stages("32:0.25,64:0.5,128", 128))
    for text, why in pairs({["64:0.5,32:0.7"] = "rising lengths", ["64:1.5"] = "fractions rising in (0, 1)",
                            ["64:0.5,96:0.4"] = "fractions rising", ["abc"] = "LEN:FRACTION", [""] = "at least one"}) do
      local stages, err = lib.seq_len_stages(text, 128)
      assert.is_nil(stages, text)
      assert.matches(why, err, 1, true)
    end
    local _, err = lib.seq_len_stages("48:0.5", 128)
    assert.matches("48 does not divide --seq-len 128", err, 1, true)
    _, err = lib.seq_len_stages("64:0.5,256", 128)
    assert.matches("the last length 256 is not --seq-len 128", err, 1, true)
  end)
end)

describe("pretrain --config-overrides", function()
  it("reads KEY=VALUE items as booleans, numbers and strings, and refuses malformed ones", function()
    assert.same({pre_layer_norm = true, hidden_dropout_prob = 0, layer_norm_eps = 1e-5, hidden_act = "gelu_new"},
      lib.config_overrides("pre_layer_norm=true, hidden_dropout_prob=0,layer_norm_eps=1e-5,hidden_act=gelu_new"))
    assert.equal("integer", math.type(lib.config_overrides("num_hidden_layers=3").num_hidden_layers))
    for text, why in pairs({["x"] = "KEY=VALUE", ["a="] = "KEY=VALUE", ["vocab_size=9"] = "the tokenizer's", ["num_labels=3"] = "the task's"}) do
      local keys, err = lib.config_overrides(text)
      assert.is_nil(keys, text)
      assert.matches(why, err, 1, true)
    end
  end)
end)

describe("experiments/pretrain.lua with Cramming's schedules", function()
  it("ramps the micro-batches, lengthens the sequences and runs the one-cycle learning rate over --steps", function()
    local out = tmpdir()
    assert.is_true(pretrain(out, "--steps 12 " .. CRAM))
    local r = records(out)
    local accum, len, lr = {}, {}, {}
    for s = 1, 12 do accum[s], len[s], lr[s] = r[s].accum, r[s].seq_len, r[s].lr end
    -- progress p = (step - 1) / 12 at the start of each step
    assert.same({1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3, 3}, accum)
    assert.same({8, 8, 8, 16, 16, 16, 32, 32, 32, 32, 32, 32}, len)
    assert.near(0, lr[1], 1e-12)
    assert.near(1e-3, lr[7], 1e-9)   -- the peak at half the run
    assert.near(1e-3 / 6, lr[12], 1e-9)
    local summary = read_json(out .. "/summary.json")
    assert.equal(1 + 1 + 1 + 2 + 2 + 2 + 6 * 3, summary.micro_batches)
    assert.equal("one_cycle", summary.settings.schedule)
    assert.equal(0.5, summary.settings.batch_ramp)
  end)

  it("refuses the settings the schedules cannot follow, naming the flags", function()
    local cases = {
      {"--steps 4 --batch-ramp 0.5", "--batch-ramp grows the micro-batches per step from 1 to --accum: give --accum 2"},
      {"--time-budget 5 --batch-ramp 0.5 --accum 2", "--batch-ramp with --time-budget needs --schedule-clock time"},
      {"--time-budget 5 --seq-len-schedule 16:0.5", "--seq-len-schedule with --time-budget needs --schedule-clock time"},
      {"--steps 4 --schedule-clock time", "--schedule-clock time needs --time-budget"},
      {"--time-budget 5 --schedule-clock time --warmup 100", "--warmup 100 is a number of steps"},
      {"--steps 4 --seq-len-schedule 12:0.5", "12 does not divide --seq-len 32"},
      {"--steps 4 --seq-len-schedule 16:0.5 --objective mlm-nsp", "--objective mlm-nsp's sentence pairs"},
      {"--steps 4 --batch-ramp 1.5 --accum 2", "option --batch-ramp: expected a fraction in (0, 1]"},
      {"--steps 4 --seq-len-schedule 16:2", "option --seq-len-schedule: expected LEN:FRACTION"},
    }
    for _, case in ipairs(cases) do
      local out = tmpdir()
      assert.is_not_true(pretrain(out, case[1]), case[1])
      local err = io.open(out .. ".err"):read("a")
      assert.truthy(err:find(case[2], 1, true), case[1] .. ": " .. err)
    end
  end)

  it("follows the budget's clock with --schedule-clock time and carries it over a resume", function()
    local out = tmpdir()
    assert.is_true(pretrain(out, "--time-budget 3 --schedule-clock time --save-every 50 " .. CRAM))
    local r, last = records(out), 0
    for s in pairs(r) do last = math.max(last, s) end
    assert.is_true(last > 12, "only " .. last .. " steps")
    assert.equal(1, r[1].accum)
    assert.equal(8, r[1].seq_len)
    assert.equal(3, r[last].accum)
    assert.equal(32, r[last].seq_len)
    assert.is_true(r[last].lr < 0.15e-3, "lr " .. r[last].lr .. " at the end of the budget")
    local state = read_json(out .. "/checkpoint/trainer.json")
    assert.is_true(state.user.elapsed_seconds >= 2.5, "elapsed " .. tostring(state.user.elapsed_seconds))
    -- a resume of the spent budget trains no further
    assert.is_true(os.execute(string.format("lua5.4 experiments/pretrain.lua --resume %s >/dev/null 2>%s.err2", out, out)))
    assert.truthy(io.open(out .. ".err2"):read("a"):find("s of the 3 s budget spent before this resume", 1, true))
    assert.equal(last, read_json(out .. "/summary.json").steps)
  end)

  it("resumes after kill -9 with the same losses, micro-batches and lengths, step for step #slow", function()
    local steps, straight, killed = 150, tmpdir(), tmpdir()
    kill_resume(function(dir) return string.format(BASE, config, corpus, dir, "--steps 150 --save-every 3 " .. CRAM) end,
      straight, killed, steps, 40)
    local a, b = records(straight), records(killed)
    for s = 1, steps do
      assert.equal(a[s].accum, b[s].accum, "accum differs at step " .. s)
      assert.equal(a[s].seq_len, b[s].seq_len, "seq_len differs at step " .. s)
    end
    assert.equal(read_json(straight .. "/summary.json").micro_batches, read_json(killed .. "/summary.json").micro_batches)
  end)
end)
