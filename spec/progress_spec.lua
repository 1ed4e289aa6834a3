-- Progress lines: the total a step line prints is fixed before the first
-- line and never changes, a time budget included (its calibration is not
-- shown as steps), on a terminal (a bar rewritten in place) and in a log.
local bert = require("bert")
local cjson = require("cjson")
local tmpdir = require("spec.support.tmpdir").path

-- What fn writes to stderr, as text.
local function stderr_of(fn)
  local parts, real = {}, io.stderr
  io.stderr = {write = function(self, ...) for _, s in ipairs({...}) do parts[#parts + 1] = tostring(s) end return self end,
               flush = function() end}
  local ok, err = pcall(fn)
  io.stderr = real
  assert(ok, err)
  return table.concat(parts)
end

-- The step and total of every step line, in order (a bar's "N/T", a log's "step N/T").
local function step_totals(text)
  local out = {}
  for line in text:gmatch("[^\r\n]+") do
    local step, total = line:match("^%S*%s*%d+%% %[[#.]*%] (%d+)/(%d+) |")
    if not step then step, total = line:match("step (%d+)/(%d+)") end
    if step then out[#out + 1] = {tonumber(step), tonumber(total)} end
  end
  return out
end

local function tiny_trainer(opts)
  bert.manual_seed(5)
  local model = bert.model("BertForMaskedLM", {vocab_size = 40, hidden_size = 16, num_hidden_layers = 1,
    num_attention_heads = 2, intermediate_size = 32, max_position_embeddings = 16})
  local index = 0
  local settings = {model = model, optimizer = bert.optim.AdamW(model, {lr = 1e-3}), log_every = 1,
    next_batch = function()
      index = index + 1
      local ids = bert.randint(1, 40, {2, 8}, {seed = 100 + index})
      return {input_ids = ids, attention_mask = bert.ones({2, 8}, "int32"), labels = ids}
    end}
  for k, v in pairs(opts) do settings[k] = v end
  local trainer = bert.train.Trainer(settings)
  trainer.tty = opts.tty or false
  return trainer
end

local function assert_fixed_total(lines, total)
  assert.is_true(#lines > 0, "no step lines")
  for _, l in ipairs(lines) do
    assert.equal(total, l[2], string.format("step %d printed total %d, the first line %d", l[1], l[2], total))
  end
end

describe("progress lines", function()
  it("print the steps' total, unchanged, in a log and on a terminal", function()
    for _, tty in ipairs({false, true}) do
      local trainer = tiny_trainer{steps = 6, tty = tty}
      local lines = step_totals(stderr_of(function() trainer:run() end))
      assert.equal(6, #lines)
      assert_fixed_total(lines, 6)
      assert.same({6, 6}, lines[6])
    end
  end)

  it("resolve a time budget once, after a calibration that prints no step", function()
    local trainer = tiny_trainer{time_budget = 1.5, steps = nil}
    local total
    local calibration = stderr_of(function() total = trainer:fit_to_budget{calibration = 3} end)
    assert.equal("", calibration)
    local calibrated = trainer.step   -- the warm-up step and at least three timed ones
    assert.is_true(calibrated >= 4, "calibrated on " .. calibrated)
    assert.is_true(total > calibrated, "planned " .. total)
    local lines = step_totals(stderr_of(function() trainer:run() end))
    assert.equal(calibrated + 1, lines[1][1])
    assert_fixed_total(lines, total)
  end)

  it("cap a time budget's plan at max_steps and refuse a trainer without a budget", function()
    local trainer = tiny_trainer{time_budget = 30}
    local resized
    assert.equal(8, trainer:fit_to_budget{max_steps = 8, on_total = function(t) resized = t end})
    assert.equal(8, resized)
    local calibrated = trainer.step   -- at most a tenth of the steps beyond the minimum (a warm-up and 5 timed)
    assert.is_true(calibrated <= 6, "calibrated on " .. calibrated)
    local lines = step_totals(stderr_of(function() trainer:run() end))
    assert.equal(8 - calibrated, #lines)
    assert_fixed_total(lines, 8)
    assert.equal(8, trainer.step)
    assert.error_matches(function() tiny_trainer{steps = 3}:fit_to_budget() end,
      "fit_to_budget: the trainer has no time_budget")
    assert.error_matches(function() tiny_trainer{time_budget = 1}:fit_to_budget{calibration = 0} end,
      "calibration must be an integer >= 1, got 0")
  end)

  it("of experiments/pretrain.lua under --time-budget: one total, the objective by its command-line name", function()
    local corpus = require("spec.support.tiny_corpus").write(tmpdir() .. ".txt", 40, 3)
    local config = tmpdir() .. ".json"
    local f = assert(io.open(config, "w"))
    f:write(cjson.encode({vocab_size = 100, hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 2,
                          intermediate_size = 64, max_position_embeddings = 64}))
    f:close()
    local out = tmpdir()
    assert.is_true(os.execute(string.format(
      "lua5.4 experiments/pretrain.lua --model %s --corpus %s --tokenizer wordpiece --vocab-size 120 --batch-size 4 " ..
      "--seq-len 32 --log-every 1 --eval-every 10 --save-every 10 --time-budget 4 --threads 1 --no-plot " ..
      "--output %s >/dev/null 2>%s.err", config, corpus, out, out)))
    local err = io.open(out .. ".err"):read("a")
    assert.matches("objective mlm%-nsp,", err)
    local calibrated, planned = err:match("a calibration of (%d+) steps, %d+ timed%): (%d+) steps fit the 4 s budget")
    assert.truthy(planned, err)
    local lines = step_totals(err)
    assert.equal(tonumber(calibrated) + 1, lines[1][1])   -- the calibration's steps are not shown
    assert_fixed_total(lines, tonumber(planned))
  end)
end)
