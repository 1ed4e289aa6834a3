-- A quick look at an ablation (--budget-scale below 1): the evaluation
-- suite's work shrinks with the budget while the file's settings stay, and
-- the table marks scores at their floor (the unigram baseline, the
-- majority class).
local cjson = require("cjson")
local ablate = require("bert.ablate")
local util = require("bert.finetune.util")

local tmpdir = require("spec.support.tmpdir").dir

local function write(path, value)
  os.execute("mkdir -p '" .. path:match("^(.*)/[^/]+$") .. "'")
  assert(util.write_file(path, type(value) == "string" and value or cjson.encode(value)))
end

describe("a quick look at an ablation", function()
  it("scales the evaluation suite's work and keeps the file's settings for the full budget", function()
    local full = ablate.load("experiments/ablations/nsp.lua")
    assert.is_nil(full.quick_evaluation)
    assert.is_nil(full.pretrain_runs[1].settings.max_eval)
    local quick = ablate.load("experiments/ablations/nsp.lua", {budget_scale = 0.01})
    assert.same(full.evaluation, quick.evaluation)
    local ev = quick.quick_evaluation
    assert.same({1}, ev.seeds)
    assert.equal(10, ev.steps)
    assert.equal(320, ev.max_train)
    assert.equal(200, ev.max_dev)
    assert.equal(2, ev.blimp_pairs)
    assert.equal(0.01, ev.quick_scale)
    assert.same(full.evaluation.tasks, ev.tasks)
    assert.equal(200, quick.pretrain_runs[1].settings.steps)
    assert.equal(512, quick.pretrain_runs[1].settings.max_eval)
  end)

  it("marks scores at the unigram floor and at the majority class", function()
    local d = tmpdir()
    local cells = {
      {id = "objective=mlm-nsp_seed=1", label = "objective=mlm-nsp", pretrain_id = "a", seed = 1, finetune = {}},
      {id = "objective=mlm_seed=1", label = "objective=mlm", pretrain_id = "b", seed = 1, finetune = {}},
    }
    write(d .. "/grid.json", {name = "toy", file = "toy.lua", budget_scale = 0.01, axes = {"objective"}, cells = cells,
      pretrain_runs = {}, planned = {}})
    -- the first cell learned nothing: MLM at the unigram baseline, RTE at the majority class
    local cell = {
      ["objective=mlm-nsp_seed=1"] = {mlm = 0.053, rte = 0.47, one_class = 1},
      ["objective=mlm_seed=1"] = {mlm = 0.20, rte = 0.60, one_class = 0},
    }
    for _, c in ipairs(cells) do
      local s = cell[c.id]
      write(d .. "/cells/" .. c.id .. "/done.json", {id = c.id, label = c.label, seed = 1, pretrain_id = c.pretrain_id,
        metrics = {mlm_accuracy = s.mlm, eval_rte = s.rte}})
      write(d .. "/pretrain/" .. c.pretrain_id .. "/summary.json", {mlm_accuracy = s.mlm, unigram_baseline_accuracy = 0.053})
      write(d .. "/cells/" .. c.id .. "/evaluate/results.json", {tasks = {
        rte = {headline = {mean = s.rte, values = {s.rte}}, one_class_runs = s.one_class,
               baselines = {majority = {headline = 0.4729}}}}})
    end
    local results = ablate.summarize(d)
    local floor_row, learned_row = results.rows[1], results.rows[2]
    assert.is_true(floor_row.metrics.mlm_accuracy.at_floor)
    assert.is_true(floor_row.metrics.eval_rte.at_floor)
    assert.is_nil(learned_row.metrics.mlm_accuracy.at_floor)
    assert.is_nil(learned_row.metrics.eval_rte.at_floor)
    local md = assert(util.read_file(d .. "/results.md"))
    assert.truthy(md:find("‡ at the floor", 1, true), md)
    assert.truthy(md:find("as expected of a quick look", 1, true), md)
    assert.truthy(md:find("| objective=mlm-nsp | 1 |", 1, true), md)
    assert.truthy(md:find("0.0530 ‡", 1, true), md)
    assert.is_nil(md:find("0.2000 ‡", 1, true), md)
  end)
end)
