-- bert.ablate's report on a grid of one pretraining run per cell: the
-- comparisons use the evaluation suite's fine-tuning seeds (read from each
-- cell's evaluate/ and evaluate-at-F/ results.json), marked as such.
local bert = require("bert")
local cjson = require("cjson")
local ablate = require("bert.ablate")
local util = require("bert.finetune.util")

local tmpdir = require("spec.support.tmpdir").dir

local function write(path, value)
  os.execute("mkdir -p '" .. path:match("^(.*)/[^/]+$") .. "'")
  assert(util.write_file(path, type(value) == "string" and value or cjson.encode(value)))
end

describe("the ablation report with one pretraining run per cell", function()
  it("compares rows over the fine-tuning seeds, per task, per language and per snapshot", function()
    local d = tmpdir()
    local cells = {
      {id = "objective=mlm-nsp_seed=1", label = "objective=mlm-nsp", pretrain_id = "a", seed = 1, finetune = {}},
      {id = "objective=mlm_seed=1", label = "objective=mlm", pretrain_id = "b", seed = 1, finetune = {}},
    }
    write(d .. "/grid.json", {name = "toy", file = "toy.lua", budget_scale = 1, axes = {"objective"}, cells = cells,
      pretrain_runs = {}, planned = {}})
    local scores = {
      ["objective=mlm-nsp_seed=1"] = {rte = {0.60, 0.61, 0.62, 0.60, 0.62}, de = {0.50, 0.52, 0.51, 0.50, 0.52},
                                      zh = {0.40, 0.40, 0.40, 0.40, 0.40}, scratch = {0.45, 0.47}},
      ["objective=mlm_seed=1"] = {rte = {0.50, 0.51, 0.52, 0.50, 0.52}, de = {0.50, 0.53, 0.51, 0.49, 0.52},
                                  zh = {0.40, 0.41, 0.40, 0.41, 0.40}, scratch = {0.45, 0.47}},
    }
    for _, c in ipairs(cells) do
      local s = scores[c.id]
      local mean = 0
      for _, v in ipairs(s.rte) do mean = mean + v / #s.rte end
      write(d .. "/cells/" .. c.id .. "/done.json", {id = c.id, label = c.label, seed = 1, pretrain_id = c.pretrain_id,
        metrics = {mlm_accuracy = 0.3, eval_rte = mean}})
      write(d .. "/cells/" .. c.id .. "/evaluate/results.json", {tasks = {
        rte = {headline = {mean = mean, values = s.rte}, from_scratch = {headline = {values = s.scratch}}},
        xnli = {headline = {mean = 0.5, values = s.de}, languages = {{name = "zh", values = s.zh},
          {name = "de", values = s.de}, {name = "en", values = s.rte}},
          from_scratch = {headline = {values = {0.36, 0.38}}, languages = {{name = "en", values = {0.36, 0.38}},
            {name = "de", values = {0.34, 0.34}}, {name = "zh", values = {0.30, 0.32}}}},
          language_baselines = {en = {majority = {headline = 0.333}, bag_of_words = {headline = 0.45}},
            de = {majority = {headline = 0.333}, bag_of_words = {headline = 0.35}},
            zh = {majority = {headline = 0.333}, bag_of_words = {headline = 0.34}}}}}})
      write(d .. "/cells/" .. c.id .. "/evaluate-at-0.25/results.json", {tasks = {
        rte = {headline = {values = {0.5, 0.5, 0.5}}}}})
    end
    local results = ablate.summarize(d)
    local row = results.rows[1]
    assert.equals("fine-tuning seeds", row.metrics.eval_rte.over)
    assert.equals(5, row.metrics.eval_rte.n)
    assert.is_nil(row.metrics.mlm_accuracy.over)
    assert.equals(5, row.metrics.eval_xnli_de.n)
    assert.equals(3, row.metrics["eval_rte@0.25"].n)
    local c = results.comparisons[1]
    assert.equals("objective=mlm", c.label)
    -- RTE: -0.10 with sd 0.01 a side: a finding; German: within the spread
    assert.is_true(math.abs(c.metrics.eval_rte.difference + 0.1) < 1e-9)
    assert.is_true(c.metrics.eval_rte.finding)
    assert.is_false(c.metrics.eval_xnli_de.finding)
    local md = assert(util.read_file(d .. "/results.md"))
    assert.truthy(md:find("† over the evaluation suite's fine-tuning seeds", 1, true))
    assert.truthy(md:find("0.6100 ± 0.0100 †", 1, true), md)
    -- per-language scores: a table per task, English (the fine-tuning language) first, the
    -- mean of the others last; and out of the wide tables
    assert.truthy(md:find("`eval_xnli` per test language", 1, true), md)
    assert.truthy(md:find("| cell | en | de | zh | other languages |", 1, true), md)
    assert.truthy(md:find("| objective=mlm-nsp | 0.6100 ± 0.0100 | 0.5100 ± 0.0100 | 0.4000 ± 0.0000 | 0.4550 |", 1, true), md)
    -- under the cells: their control (one, shared) and the floors, per language
    assert.truthy(md:find("| from scratch (the control) | 0.3700 ± 0.0141 | 0.3400 ± 0.0000 | 0.3100 ± 0.0141 | 0.3250 |",
      1, true), md)
    assert.truthy(md:find("| majority class | 0.3330 | 0.3330 | 0.3330 | 0.3330 |", 1, true), md)
    assert.truthy(md:find("| bag of words | 0.4500 | 0.3500 | 0.3400 | 0.3450 |", 1, true), md)
    assert.is_nil(md:find("most frequent tag", 1, true), md)
    assert.truthy(md:find("`eval_xnli` per test language, against the baseline row", 1, true), md)
    assert.truthy(md:find("| objective=mlm | objective=mlm-nsp | **-0.1000", 1, true), md)
    assert.is_nil(md:find("eval_xnli_de", 1, true), md)
    assert.is_nil(md:find("eval_xnli_scratch_", 1, true), md)
    assert.truthy(results.comparisons[1].metrics.eval_xnli_zh, "per-language comparisons stay in results.json")
    -- one control shared by both cells (the same architecture): one line under the headline table
    assert.truthy(md:find("| from scratch (the control) |", 1, true), md)
  end)

  it("gives each architecture's from-scratch control its own line under the headline table", function()
    local d = tmpdir()
    local cells = {
      {id = "objective=mlm_seed=1", label = "objective=mlm", pretrain_id = "a", seed = 1, finetune = {}},
      {id = "objective=clm_seed=1", label = "objective=clm", pretrain_id = "b", seed = 1, finetune = {}},
      {id = "objective=mlm-nsp_seed=1", label = "objective=mlm-nsp", pretrain_id = "c", seed = 1, finetune = {}},
    }
    write(d .. "/grid.json", {name = "toy", file = "toy.lua", budget_scale = 1, axes = {"objective"}, cells = cells,
      pretrain_runs = {}, planned = {}})
    -- mlm and mlm-nsp share BERT's control; clm's causal encoder has its own
    local control = {["objective=mlm_seed=1"] = {0.55, 0.57}, ["objective=clm_seed=1"] = {0.51, 0.53},
      ["objective=mlm-nsp_seed=1"] = {0.55, 0.57}}
    for _, c in ipairs(cells) do
      write(d .. "/cells/" .. c.id .. "/done.json", {id = c.id, label = c.label, seed = 1, pretrain_id = c.pretrain_id,
        metrics = {eval_rte = 0.6, eval_sst2 = 0.7}})
      write(d .. "/cells/" .. c.id .. "/evaluate/results.json", {tasks = {
        rte = {headline = {values = {0.6, 0.6}}, from_scratch = {headline = {values = control[c.id]}}},
        sst2 = {headline = {values = {0.7, 0.7}}}}})
    end
    ablate.summarize(d)
    local md = assert(util.read_file(d .. "/results.md"))
    assert.truthy(md:find("| from scratch (the control of objective=mlm, objective=mlm-nsp) | 0.5600 ± 0.0141 † |", 1, true), md)
    assert.truthy(md:find("| from scratch (the control of objective=clm) | 0.5200 ± 0.0141 † |", 1, true), md)
    assert.is_nil(md:find("| from scratch (the control) |", 1, true), md)
  end)
end)
