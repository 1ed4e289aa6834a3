-- Errors in the order a user needs them, each one line (issue 31 item 5):
-- a bad --model before any data are read; a task the checkpoint was not
-- made for; an ONNX export that fails.
local tmpdir = require("spec.support.tmpdir")

local run = require("spec.support.shell").run

describe("errors a user meets", function()
  it("a bad --model comes first, before the task's data are looked at", function()
    local out, rc = run("lua5.4 experiments/finetune_classify.lua --model nonsense --task /no/such/task.tsv")
    assert.equal(1, rc)
    assert.matches("^finetune_classify%.lua: %-%-model: 'nonsense' is neither FAMILY%-SIZE [^\n]*\n$", out)
    local dir = tmpdir.dir()
    out, rc = run("lua5.4 experiments/finetune_classify.lua --model '" .. dir .. "' --task /no/such/task.tsv")
    assert.equal(1, rc)
    assert.equal("finetune_classify.lua: --model: " .. dir .. " holds no config.json (nor best/ or checkpoint/)\n", out)
  end)

  describe("with a pretraining checkpoint", function()
    local ckpt
    setup(function()
      local bert = require("bert")
      ckpt = tmpdir.dir()
      local model = bert.model("BertForPreTraining", "tiny", {vocab_size = 64})
      assert(model:save_pretrained(ckpt))
    end)

    it("predict.lua --task question-answering ends with one line naming what the model is for", function()
      local out, rc = run("lua5.4 experiments/predict.lua --model '" .. ckpt .. "' --task question-answering " ..
        "--question who --context 'the cat sat'")
      assert.equal(1, rc)
      assert.equal("predict.lua: --task question-answering: " .. ckpt .. " is a BertForPreTraining model, for " ..
        "fill-mask and feature-extraction\n", out)
    end)

    it("tools/export_onnx.lua that cannot write ends with one line", function()
      local out, rc = run("lua5.4 tools/export_onnx.lua --model '" .. ckpt .. "' --output /no/such/dir/model.onnx")
      assert.equal(1, rc)
      assert.matches("^export_onnx%.lua: onnx%.export: [^\n]*\n$", out)
    end)
  end)
end)

describe("fine-tuning's own account", function()
  it("says '1 epoch' and records the epochs that ran in summary.json", function()
    local out_dir = tmpdir.path()
    local out, rc = run("lua5.4 experiments/finetune_classify.lua --task spec/fixtures/finetune/classify --model tiny " ..
      "--tokenizer spec/fixtures/finetune/vocab.txt --epochs 1 --seq-len 32 --batch-size 8 --threads 1 --no-plot " ..
      "--output '" .. out_dir .. "'")
    assert.equal(0, rc, out)
    assert.matches("%(1 epoch x %d+ steps", out)
    assert.not_matches("1 epochs", out)
    local summary = require("cjson").decode(io.open(out_dir .. "/summary.json"):read("a"))
    assert.equal(1, summary.epochs)
    out, rc = run("lua5.4 experiments/finetune_classify.lua --task spec/fixtures/finetune/classify --model tiny " ..
      "--tokenizer spec/fixtures/finetune/vocab.txt --epochs 3 --steps 1 --seq-len 32 --batch-size 8 --threads 1 " ..
      "--no-plot --overwrite --output '" .. out_dir .. "'")
    assert.equal(0, rc, out)
    summary = require("cjson").decode(io.open(out_dir .. "/summary.json"):read("a"))
    assert.is_true(summary.epochs < 1, "one step of " .. tostring(summary.epochs) .. " epochs")
  end)
end)
