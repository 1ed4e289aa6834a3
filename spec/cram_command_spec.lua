-- experiments/cram.lua: Cramming's choices as the defaults of a pretraining
-- run over a wall-clock budget, each switched off by its flag; the model
-- to fine-tune written with dropout restored; resume; refusals.
local cjson = require("cjson")
local tmpdir = require("spec.support.tmpdir").path

local corpus = require("spec.support.tiny_corpus").write(tmpdir() .. ".txt", 60, 7)

local function sh(cmd)
  local f = io.popen(cmd .. " 2>&1")
  local out = f:read("a")
  local ok = f:close()
  return out, ok == true
end

local function read_json(path) return cjson.decode(assert(io.open(path)):read("a")) end

describe("experiments/cram.lua", function()
  it("pretrains with pre-LN, no dropout, one-cycle, a batch ramp and short sequences first by default", function()
    local out, ok = sh("lua5.4 experiments/cram.lua --dry-run")
    assert.is_true(ok, out)
    for _, want in ipairs({"--config-overrides pre_layer_norm=true,hidden_dropout_prob=0,attention_probs_dropout_prob=0",
                           "--schedule one_cycle", "--warmup 0.5", "--batch-ramp 0.5", "--accum 8",
                           "--seq-len-schedule 64:0.5", "--schedule-clock time", "--time-budget 86400",
                           "--objective mlm",
                           "experiments/evaluate.lua --model runs/cram/final --suite all"}) do
      assert.truthy(out:find(want, 1, true), want .. " not in:\n" .. out)
    end
  end)

  it("switches each choice off with its flag", function()
    local out, ok = sh("lua5.4 experiments/cram.lua --dry-run --no-pre-ln --dropout 0.1 --no-one-cycle " ..
      "--no-batch-ramp --no-short-first")
    assert.is_true(ok, out)
    assert.truthy(out:find("--config-overrides hidden_dropout_prob=0.1,attention_probs_dropout_prob=0.1 ", 1, true), out)
    assert.truthy(out:find("--schedule linear", 1, true), out)
    assert.truthy(out:find("--warmup 0.1", 1, true), out)
    for _, gone in ipairs({"pre_layer_norm", "--batch-ramp", "--seq-len-schedule"}) do
      assert.is_nil(out:find(gone, 1, true), gone .. " in:\n" .. out)
    end
  end)

  it("refuses settings pretraining would refuse, before anything runs", function()
    local out, ok = sh("lua5.4 experiments/cram.lua --dry-run --seq-len-schedule 48:0.5")
    assert.is_false(ok)
    assert.truthy(out:find("cram: --seq-len-schedule: 48 does not divide --seq-len 128", 1, true), out)
    out, ok = sh("lua5.4 experiments/cram.lua --dry-run --warmup 2")
    assert.is_false(ok)
    assert.truthy(out:find("option --warmup: expected a fraction in (0, 1]", 1, true), out)
  end)

  it("trains for its budget, writes the model to fine-tune with dropout restored, and resumes #slow", function()
    local dir = tmpdir()
    local out, ok = sh(string.format("lua5.4 experiments/cram.lua --model tiny --corpus %s --vocab-size 120 " ..
      "--batch-size 4 --seq-len 32 --seq-len-schedule 16:0.5 --accum 2 --time-budget 3 --output %s --no-evaluate",
      corpus, dir))
    assert.is_true(ok, out)
    assert.truthy(out:find("experiments/evaluate.lua --model " .. dir .. "/final --suite all", 1, true), out)
    local trained = read_json(dir .. "/checkpoint/config.json")
    assert.is_true(trained.pre_layer_norm)
    assert.equal(0, trained.hidden_dropout_prob)
    local final = read_json(dir .. "/final/config.json")
    assert.is_true(final.pre_layer_norm)
    assert.equal(0.1, final.hidden_dropout_prob)
    assert.equal(0.1, final.attention_probs_dropout_prob)
    assert.is_nil(io.open(dir .. "/final/optimizer.safetensors"))
    local summary = read_json(dir .. "/summary.json")
    assert.equal("one_cycle", summary.settings.schedule)
    assert.equal("16:0.5", summary.settings.seq_len_schedule)
    local model = require("bert").from_pretrained(dir .. "/final")
    assert.is_true(model.config.pre_layer_norm)
    out, ok = sh(string.format("lua5.4 experiments/cram.lua --resume %s --no-evaluate", dir))
    assert.is_true(ok, out)
    assert.truthy(out:find("s of the 3 s budget spent before this resume", 1, true), out)
    assert.equal(summary.steps, read_json(dir .. "/summary.json").steps)
  end)
end)
