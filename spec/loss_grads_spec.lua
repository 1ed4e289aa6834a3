-- tools/loss_grads.lua: each loss term's gradient norm apart, on a tiny
-- MLM + NSP run's held-out batches; the sum's gradient is the sum of the
-- terms' (one dropout draw for all), so the norms obey the triangle rule.
local cjson = require("cjson")
local tmpdir = require("spec.support.tmpdir")
local run = require("spec.support.shell").run

describe("tools/loss_grads.lua", function()
  local dir
  setup(function()
    local corpus = require("spec.support.tiny_corpus").write(tmpdir.path() .. ".txt", 40, 3)
    local config = tmpdir.path() .. ".json"
    local f = assert(io.open(config, "w"))
    f:write(cjson.encode({hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 2, intermediate_size = 64,
                          max_position_embeddings = 64}))
    f:close()
    dir = tmpdir.path()
    local out, rc = run(string.format("OMP_NUM_THREADS=1 lua5.4 experiments/pretrain.lua --model %s --corpus %s " ..
      "--tokenizer wordpiece --vocab-size 120 --batch-size 4 --seq-len 32 --no-plot --threads 1 --output %s " ..
      "--steps 4 --objective mlm-nsp", config, corpus, dir))
    assert.equal(0, rc, out)
  end)

  it("prints MLM's, NSP's and their sum's gradient norms per batch", function()
    local out, rc = run("lua5.4 tools/loss_grads.lua --run " .. dir .. " --batches 2 --batch-size 4 --threads 1")
    assert.equal(0, rc, out)
    for b = 1, 2 do
      local norm = {}
      for _, term in ipairs({"mlm_loss", "nsp_loss", "loss"}) do
        local v, g, e = out:match("batch " .. b .. "  " .. term .. "%s+value%s+([%d.]+)%s+gradient norm%s+([%d.]+)%s+" ..
          "%(encoder layers%s+([%d.]+)%)")
        assert.truthy(v, term .. " in\n" .. out)
        norm[term] = tonumber(g)
        assert.is_true(tonumber(e) > 0 and tonumber(e) <= norm[term], out)
      end
      -- |a + b| between ||a| - |b|| and |a| + |b| (3 decimals printed)
      assert.is_true(norm.loss <= norm.mlm_loss + norm.nsp_loss + 2e-3, out)
      assert.is_true(norm.loss >= math.abs(norm.mlm_loss - norm.nsp_loss) - 2e-3, out)
    end
  end)

  it("names a missing run or checkpoint", function()
    local out, rc = run("lua5.4 tools/loss_grads.lua --run " .. dir .. " --checkpoint snapshot-9")
    assert.equal(1, rc)
    assert.truthy(out:find("--checkpoint snapshot-9: " .. dir .. "/snapshot-9/config.json is missing", 1, true), out)
    out, rc = run("lua5.4 tools/loss_grads.lua --run /nonexistent")
    assert.equal(1, rc)
    assert.truthy(out:find("/nonexistent/args.json", 1, true), out)
  end)
end)
