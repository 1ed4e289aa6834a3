-- tools/loss_grads.lua: each loss term's gradient norm apart, on a tiny
-- MLM + NSP run's held-out batches; the sum's gradient is the sum of the
-- terms' (one dropout draw for all), so the printed norms and cosines obey
-- the law of cosines.
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

  it("prints MLM's, NSP's and their sum's gradient norms and cosines per batch, consistent with g = g_mlm + g_nsp",
     function()
    local out, rc = run("lua5.4 tools/loss_grads.lua --run " .. dir .. " --batches 2 --batch-size 4 --threads 1")
    assert.equal(0, rc, out)
    local num = "(%-?[%d.]+)"
    for b = 1, 2 do
      local value, norm = {}, {}
      for _, term in ipairs({"mlm_loss", "nsp_loss", "loss"}) do
        local v, g, e = out:match("batch " .. b .. "  " .. term .. "%s+value%s+" .. num .. "%s+gradient norm%s+" ..
          num .. "%s+%(encoder layers%s+" .. num .. "%)")
        assert.truthy(v, term .. " in\n" .. out)
        value[term], norm[term] = tonumber(v), tonumber(g)
        assert.is_true(tonumber(e) > 0 and tonumber(e) <= norm[term], out)
      end
      local function cos(a, c)
        local x = out:match("batch " .. b .. "  cosine " .. a .. ", " .. c .. "%s+" .. num)
        assert.truthy(x, a .. ", " .. c .. " in\n" .. out)
        return tonumber(x)
      end
      local c_mn, c_ml, c_nl = cos("mlm_loss", "nsp_loss"), cos("mlm_loss", "loss"), cos("nsp_loss", "loss")
      -- mlm-nsp's loss is the plain sum of its terms, and so is its gradient: measured apart (no gradient
      -- left over from one term to the next), the printed norms and cosines obey
      -- |g|^2 = |g_mlm|^2 + |g_nsp|^2 + 2 cos |g_mlm| |g_nsp| and <g, g_mlm> = |g_mlm|^2 + <g_nsp, g_mlm>
      local m, n, l = norm.mlm_loss, norm.nsp_loss, norm.loss
      assert.near(value.mlm_loss + value.nsp_loss, value.loss, 2e-4)
      assert.near(m * m + n * n + 2 * c_mn * m * n, l * l, 2e-3 * l * l + 1e-3)
      assert.near(m * m + c_mn * m * n, c_ml * m * l, 2e-3 * l * l + 1e-3)
      assert.near(n * n + c_mn * m * n, c_nl * n * l, 2e-3 * l * l + 1e-3)
      assert.is_true(math.abs(c_mn) < 0.999, out)   -- two different directions
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
