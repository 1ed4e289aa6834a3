-- bert.recompute: the same values and gradients as the plain computation
-- (dropout included: the random stream is rewound), chained segments,
-- fewer tensors alive after the forward, and clear errors.
local bert = require("bert")
local F = bert.F
local recompute = require("bert.recompute")

local function randn(shape, seed) return bert.randn(shape, {seed = seed}) end
local function leaf(shape, seed) local t = randn(shape, seed); t:requires_grad(true); return t end
local function maxdiff(a, b) return (a - b):abs():max():item() end

-- a small encoder-like block: linear, GELU, dropout, residual + LayerNorm
local function make_block(seed, H)
  local w, b = leaf({H, H}, seed), leaf({H}, seed + 1)
  local g, beta = leaf({H}, seed + 2), leaf({H}, seed + 3)
  local function block(x, scale)
    local h = F.dropout(F.bias_gelu(F.linear(x, w), b), 0.2, true) * scale
    return F.layer_norm(h, g, beta, 1e-12, x)
  end
  return block, {w, b, g, beta}
end

local function grads_of(ts)
  local out = {}
  for k, t in ipairs(ts) do out[k] = t:grad():clone(); t:set_grad(nil) end
  return out
end

describe("bert.recompute", function()
  it("gives the plain computation's output and gradients, dropout included, over chained segments", function()
    local H = 16
    local b1, p1 = make_block(10, H)
    local b2, p2 = make_block(20, H)
    local x = leaf({6, H}, 1)
    local params = {x, p1[1], p1[2], p1[3], p1[4], p2[1], p2[2], p2[3], p2[4]}
    local gy = randn({6, H}, 2)
    bert.manual_seed(3)
    local y = b2(b1(x, 0.5), 2.0)
    y:backward(gy)
    local want = grads_of(params)
    bert.manual_seed(3)
    local y2 = bert.recompute(b2, bert.recompute(b1, x, 0.5), 2.0)
    assert.are.equal("recompute", y2:grad_fn())
    assert.are.equal(0, maxdiff(y2, y))
    y2:backward(gy)
    local got = grads_of(params)
    for k = 1, #params do
      assert.is_true(maxdiff(got[k], want[k]) < 1e-6, "gradient " .. k .. " differs by " .. maxdiff(got[k], want[k]))
    end
    assert.are.equal(0, recompute.pending_count())
  end)

  it("passes the gradient check", function()
    local G = require("spec.support.gradcheck")
    local w = leaf({5, 4}, 30)
    G.gradcheck(function(a, ww)
      return bert.recompute(function(h) return F.linear(h, ww):gelu() end, a)
    end, {leaf({3, 4}, 31), w})
  end)

  it("keeps fewer tensors alive after the forward than the plain graph", function()
    local H, L = 256, 6
    local blocks = {}
    for l = 1, L do blocks[l] = make_block(40 + 4 * l, H) end
    local function run(use)
      collectgarbage(); collectgarbage()
      local before = bert.memory_in_use()
      local x = leaf({512, H}, 5)
      local h = x
      for l = 1, L do h = use and bert.recompute(blocks[l], h, 1.0) or blocks[l](h, 1.0) end
      collectgarbage(); collectgarbage()
      local held = bert.memory_in_use() - before
      h:sum():backward()
      return held
    end
    local plain, rc = run(false), run(true)
    -- plain keeps each block's linear/GELU/dropout outputs and masks; recompute only the block outputs
    assert.is_true(rc < plain / 2, string.format("recompute held %d bytes, plain %d", rc, plain))
  end)

  it("drops its saved inputs when the output is dropped without a backward", function()
    local x = leaf({3, 4}, 50)
    local y = bert.recompute(function(h) return h * 2 end, x)
    assert.is_true(recompute.pending_count() >= 1)
    y = nil   -- luacheck: ignore
    collectgarbage(); collectgarbage()
    assert.are.equal(0, recompute.pending_count())
  end)

  it("is a plain call without grad or without an input requiring grad", function()
    local x = randn({3, 4}, 60)
    assert.is_nil(bert.recompute(function(h) return h * 2 end, x):grad_fn())
    local xl = leaf({3, 4}, 61)
    bert.no_grad(function() assert.is_nil(bert.recompute(function(h) return h * 2 end, xl):grad_fn()) end)
  end)

  it("wraps a module so that its forward recomputes", function()
    local lin = bert.nn.Linear(4, 3)
    local x = leaf({2, 4}, 70)
    local want = lin(x)
    want:sum():backward()
    local gw = lin.p.weight:grad():clone()
    lin.p.weight:set_grad(nil)
    recompute.wrap(lin)
    local y = lin(x)
    assert.are.equal("recompute", y:grad_fn())
    y:sum():backward()
    assert.is_true(maxdiff(lin.p.weight:grad(), gw) < 1e-6)
    recompute.unwrap(lin)
    assert.are_not.equal("recompute", lin(x):grad_fn())
  end)

  it("refuses a non-function and a function that returns no tensor, by name", function()
    assert.error_matches(function() bert.recompute(42, leaf({2}, 1)) end, "bert.recompute: argument #1 must be a function")
    assert.error_matches(function() bert.recompute(function() return 1 end, leaf({2}, 1)) end,
                         "bert.recompute: the function must return one tensor, got number")
    assert.error_matches(function() recompute.wrap(5) end, "recompute.wrap: argument #1 must be a module")
  end)
end)

describe("model:set_recompute", function()
  it("recomputes every encoder layer and trains to the same gradients", function()
    local function grads(recompute)
      bert.manual_seed(0)
      local model = bert.model("BertForPreTraining", "tiny", {vocab_size = 50})
      model:training()
      if recompute then model:set_recompute(true) end
      local ids = bert.randint(0, 50, {2, 8}, {seed = 1})
      bert.manual_seed(9)
      local out = model:forward{input_ids = ids, token_type_ids = bert.zeros({2, 8}, "int32"),
                                attention_mask = bert.ones({2, 8}, "int32"),
                                labels = ids, next_sentence_label = bert.tensor({0, 1}, "int32")}
      out.loss:backward()
      return model.flat_grad:clone(), out.loss:item()
    end
    local g0, l0 = grads(false)
    local g1, l1 = grads(true)
    assert.is_true(math.abs(l0 - l1) < 1e-6)
    assert.is_true(maxdiff(g0, g1) < 1e-5, "gradients differ by " .. maxdiff(g0, g1))
  end)

  -- DeBERTa's layers take the relative table (layer-normed, dropped out,
  -- shared by every layer) in extra: it is an input of each layer's
  -- recomputation, so its gradient sums over the layers as without it
  for _, case in ipairs({
    {arch = "DebertaV2ForMaskedLM", what = "a padded batch"},
    {arch = "DebertaV2ForPreTraining", what = "the enhanced mask decoder (the last layer run on query states)"},
    {arch = "DebertaV2ForMaskedLM", what = "separate position projections, c2p only",
     config = {share_att_key = false, pos_att_type = {"c2p"}}},
  }) do
    it("recomputes DeBERTa's layers to the same loss and gradients, dropout included: " .. case.what, function()
      local function grads(recompute)
        bert.manual_seed(0)
        local config = {vocab_size = 50}
        for key, v in pairs(case.config or {}) do config[key] = v end
        local model = bert.model(case.arch, "tiny", config)
        model:training()
        if recompute then assert.are.equal(model, model:set_recompute(true)) end
        local ids = bert.randint(1, 50, {2, 9}, {seed = 1})
        local mask = bert.tensor({{1, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 0, 0, 0}}, "int32")
        bert.manual_seed(9)
        local out = model:forward{input_ids = ids, attention_mask = mask, labels = ids}
        out.loss:backward()
        return model.flat_grad:clone(), out.loss:item()
      end
      local g0, l0 = grads(false)
      local g1, l1 = grads(true)
      assert.is_true(math.abs(l0 - l1) < 1e-6, string.format("loss %.9g vs %.9g", l0, l1))
      assert.is_true(maxdiff(g0, g1) < 1e-5, "gradients differ by " .. maxdiff(g0, g1))
      assert.is_true(g0:abs():max():item() > 0)
      -- the decoder reruns the last layer, so that layer's first output is
      -- not in the loss: its recomputation is dropped when the output is
      -- collected, not by a backward
      collectgarbage(); collectgarbage()
      assert.are.equal(0, recompute.pending_count())
    end)
  end

  it("differentiates through tensors in a table argument and passes its other fields as they are", function()
    local x, r = leaf({3, 4}, 80), leaf({4}, 81)
    local function fn(h, extra) return (h * extra.scale + extra.rel):gelu() end
    local gy = randn({3, 4}, 82)
    fn(x, {rel = r, scale = 0.5}):backward(gy)
    local want = grads_of({x, r})
    bert.recompute(fn, x, {rel = r, scale = 0.5}):backward(gy)
    local got = grads_of({x, r})
    assert.is_true(maxdiff(got[1], want[1]) < 1e-6)
    assert.is_true(maxdiff(got[2], want[2]) < 1e-6)
  end)

  it("refuses a model without encoder layers by name", function()
    assert.error_matches(function() bert.nn.Linear(2, 2):set_recompute(true) end,
                         "Linear:set_recompute: the model has no encoder layer")
  end)
end)
