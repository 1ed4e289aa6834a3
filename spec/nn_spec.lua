local bert = require("bert")
-- Fused nn ops (bert.F): forward against references composed from tensor
-- ops, finite-difference gradient checks of every input, dropout
-- statistics and reproducibility, and error messages.
local F = bert.F
local G = require("spec.support.gradcheck")

local function randn(shape, seed) return bert.randn(shape, {seed = seed}) end
local function maxdiff(a, b) return (a - b):abs():max():item() end
-- Lua pattern matching a literal string
local function lit(s) return (s:gsub("%p", "%%%0")) end

describe("F.linear", function()
  it("matches x @ W^T + b over batch dims, with and without bias", function()
    local x, w, b = randn({2, 3, 4}, 1), randn({5, 4}, 2), randn({5}, 3)
    assert.is_true(maxdiff(F.linear(x, w, b), x:matmul(w:t()) + b) < 1e-5)
    assert.is_true(maxdiff(F.linear(x, w), x:matmul(w:t())) < 1e-5)
    assert.same({2, 3, 5}, F.linear(x, w, b):shape())
  end)

  it("accepts non-contiguous input and weight", function()
    local x = randn({4, 3}, 4):t()            -- [3 x 4], transposed view
    local w = randn({4, 5}, 5):t()            -- [5 x 4]
    assert.is_false(x:is_contiguous())
    assert.is_true(maxdiff(F.linear(x, w), x:contiguous():matmul(w:contiguous():t())) < 1e-5)
  end)

  it("has correct gradients for input, weight and bias", function()
    local x, w, b = randn({2, 3, 4}, 6), randn({5, 4}, 7), randn({5}, 8)
    G.gradcheck(function(a, ww, bb) return F.linear(a, ww, bb) end, {x, w, b})
    G.gradcheck(function(a, ww) return F.linear(a, ww) end, {randn({3, 4}, 9), randn({2, 4}, 10)})
  end)

  it("records nothing under no_grad and when no input requires grad", function()
    local w = randn({2, 3}, 11)
    w:requires_grad(true)
    local y = bert.no_grad(function() return F.linear(randn({1, 3}, 12), w) end)
    assert.is_false(y:requires_grad())
    w:requires_grad(false)
  end)

  it("names the shapes in its errors", function()
    assert.error_matches(function() F.linear(bert.zeros({4, 7}), bert.zeros({3, 8})) end,
      lit("linear: input [4 x 7] and weight [3 x 8]: in_features differ (7 vs 8)"))
    assert.error_matches(function() F.linear(bert.zeros({4, 8}), bert.zeros({3, 8}), bert.zeros({4})) end,
      lit("linear: bias [4] does not match weight [3 x 8]"))
    assert.error_matches(function() F.linear(bert.zeros({4, 8}), bert.zeros({8})) end,
      lit("linear: weight must be 2-D [out x in], got [8]"))
    assert.error_matches(function() F.linear(bert.zeros({2}, "int32"), bert.zeros({3, 2})) end,
      "linear: expects float32 tensors, got input int32")
  end)
end)

-- LayerNorm composed from tensor ops (biased variance).
local function ref_layer_norm(x, g, b, eps)
  local mu = x:mean(-1, true)
  local xc = x - mu
  local var = (xc * xc):mean(-1, true)
  return xc / (var + eps):sqrt() * g + b
end

describe("F.layer_norm", function()
  it("matches the reference, with and without residual", function()
    local x, g, b, r = randn({3, 5, 8}, 1), randn({8}, 2), randn({8}, 3), randn({3, 5, 8}, 4)
    assert.is_true(maxdiff(F.layer_norm(x, g, b, 1e-5), ref_layer_norm(x, g, b, 1e-5)) < 1e-5)
    assert.is_true(maxdiff(F.layer_norm(x, g, b, 1e-12, r), ref_layer_norm(x + r, g, b, 1e-12)) < 1e-5)
  end)

  it("treats nil weight and bias as ones and zeros; default eps 1e-12", function()
    local x = randn({4, 6}, 5)
    local ones, zeros = bert.ones({6}), bert.zeros({6})
    assert.is_true(maxdiff(F.layer_norm(x), ref_layer_norm(x, ones, zeros, 1e-12)) < 1e-5)
  end)

  it("normalises a non-contiguous input", function()
    local x = randn({6, 4}, 6):t()
    local g, b = randn({6}, 7), randn({6}, 8)
    assert.is_true(maxdiff(F.layer_norm(x, g, b, 1e-5), ref_layer_norm(x:contiguous(), g, b, 1e-5)) < 1e-5)
  end)

  it("has correct gradients for input, weight, bias and residual", function()
    local x, g, b, r = randn({2, 3, 6}, 9), randn({6}, 10), randn({6}, 11), randn({2, 3, 6}, 12)
    G.gradcheck(function(a, gg, bb, rr) return F.layer_norm(a, gg, bb, 1e-5, rr) end, {x, g, b, r})
    G.gradcheck(function(a) return F.layer_norm(a, nil, nil, 1e-5) end, {randn({3, 5}, 13)})
  end)

  it("gives x and residual the same gradient even when they are one tensor", function()
    local x = randn({2, 4}, 14)
    G.gradcheck(function(a) return F.layer_norm(a, nil, nil, 1e-5, a) end, {x})
  end)

  it("matches the reference at widths that fill the vector lanes and leave a tail", function()
    for _, H in ipairs({16, 37, 768}) do
      local x, g, b, r = randn({3, H}, 20 + H), randn({H}, 21), randn({H}, 22), randn({3, H}, 23)
      assert.is_true(maxdiff(F.layer_norm(x, g, b, 1e-5, r), ref_layer_norm(x + r, g, b, 1e-5)) < 1e-5, "H " .. H)
    end
    local x, g, b, r = randn({2, 37}, 24), randn({37}, 25), randn({37}, 26), randn({2, 37}, 27)
    G.gradcheck(function(a, gg, bb, rr) return F.layer_norm(a, gg, bb, 1e-5, rr) end, {x, g, b, r})
  end)

  it("keeps mean and variance accurate for rows far from zero (sums in double)", function()
    -- x = 1000 + 0.01 * noise: a float sum of 768 such values loses the noise
    local H = 768
    local x = randn({2, H}, 28):mul(0.01):add(1000)
    local y = F.layer_norm(x, nil, nil, 1e-12):totable()
    local xs = x:totable()
    for row = 1, 2 do
      local sum = 0
      for j = 1, H do sum = sum + xs[row][j] end
      local mu, var = sum / H, 0
      for j = 1, H do var = var + (xs[row][j] - mu) ^ 2 end
      local rs = 1 / math.sqrt(var / H + 1e-12)
      local worst = 0
      for j = 1, H do worst = math.max(worst, math.abs(y[row][j] - (xs[row][j] - mu) * rs)) end
      -- the float input's own rounding (ulp(1000) / 0.01 ~ 6e-3) bounds the error; a float sum is far worse
      assert.is_true(worst < 2e-2, string.format("row %d: max error %g", row, worst))
    end
  end)

  it("names the shapes in its errors", function()
    assert.error_matches(function() F.layer_norm(bert.zeros({2, 4}), bert.ones({5}), bert.zeros({4})) end,
      lit("layer_norm: weight [5] does not match the last dim of input [2 x 4] (expected [4])"))
    assert.error_matches(function() F.layer_norm(bert.zeros({2, 4}), nil, nil, 1e-5, bert.zeros({2, 3})) end,
      lit("layer_norm: residual [2 x 3] float32 must match input [2 x 4]"))
  end)
end)

-- RMSNorm in plain Lua, row by row over the last dim: y = x / sqrt(mean(x^2) + eps) * w.
local function ref_rms_norm(x, w, eps)
  local H = w:numel()
  local xs, ws, ys = x:contiguous():view(-1):totable(), w:totable(), {}
  for r = 0, #xs // H - 1 do
    local ss = 0
    for j = 1, H do ss = ss + xs[r * H + j] ^ 2 end
    local rs = 1 / math.sqrt(ss / H + eps)
    for j = 1, H do ys[r * H + j] = xs[r * H + j] * rs * ws[j] end
  end
  return bert.tensor(ys):view(x:shape())
end

describe("F.rms_norm", function()
  it("matches the plain-Lua reference at odd shapes; default eps 1e-6", function()
    local x, w = randn({3, 5, 7}, 1), randn({7}, 2)
    assert.is_true(maxdiff(F.rms_norm(x, w), ref_rms_norm(x, w, 1e-6)) < 1e-5)
    assert.is_true(maxdiff(F.rms_norm(x, w, 0.5), ref_rms_norm(x, w, 0.5)) < 1e-5)
    assert.same({3, 5, 7}, F.rms_norm(x, w):shape())
    local v, wv = randn({5}, 3), randn({5}, 4)   -- a single row, 1-D
    assert.is_true(maxdiff(F.rms_norm(v, wv), ref_rms_norm(v, wv, 1e-6)) < 1e-5)
  end)

  it("matches the reference at widths that fill the vector lanes and leave a tail", function()
    for _, H in ipairs({16, 37, 768}) do
      local x, w = randn({3, H}, 5 + H), randn({H}, 6)
      assert.is_true(maxdiff(F.rms_norm(x, w), ref_rms_norm(x, w, 1e-6)) < 1e-5, "H " .. H)
    end
  end)

  it("normalises a non-contiguous input", function()
    local x, w = randn({6, 4}, 7):t(), randn({6}, 8)
    assert.is_false(x:is_contiguous())
    assert.is_true(maxdiff(F.rms_norm(x, w), ref_rms_norm(x, w, 1e-6)) < 1e-5)
  end)

  it("has correct gradients for input and weight", function()
    G.gradcheck(function(a, ww) return F.rms_norm(a, ww, 1e-5) end, {randn({3, 5, 7}, 9), randn({7}, 10)})
    G.gradcheck(function(a, ww) return F.rms_norm(a, ww, 1e-5) end, {randn({2, 37}, 11), randn({37}, 12)})
    -- one of the two only
    G.gradcheck(function(a, ww) return F.rms_norm(a, ww) end, {randn({4, 6}, 13), randn({6}, 14)}, {inputs = {true}})
    G.gradcheck(function(a, ww) return F.rms_norm(a, ww) end, {randn({4, 6}, 15), randn({6}, 16)},
      {inputs = {nil, true}})
  end)

  it("records nothing under no_grad", function()
    local x = randn({2, 3}, 17):requires_grad(true)
    assert.is_false(bert.no_grad(function() return F.rms_norm(x, bert.ones({3})) end):requires_grad())
    assert.is_true(F.rms_norm(x, bert.ones({3})):requires_grad())
  end)

  it("names the function, the argument and the values in its errors", function()
    local x = bert.zeros({2, 4})
    assert.error_matches(function() F.rms_norm(x, bert.ones({5})) end,
      lit("rms_norm: weight [5] does not match the last dim of input [2 x 4] (expected [4])"))
    assert.error_matches(function() F.rms_norm(x, bert.ones({2, 4})) end,
      lit("rms_norm: weight [2 x 4] does not match the last dim of input [2 x 4] (expected [4])"))
    assert.error_matches(function() F.rms_norm(x) end, lit("rms_norm: weight is required"))
    assert.error_matches(function() F.rms_norm(x, bert.ones({4}, "int32")) end,
      lit("rms_norm: weight must be float32, got int32"))
    assert.error_matches(function() F.rms_norm(bert.zeros({2, 4}, "int32"), bert.ones({4})) end,
      lit("rms_norm: input must be float32, got int32"))
    assert.error_matches(function() F.rms_norm(bert.tensor(1.0), bert.ones({1})) end,
      lit("rms_norm: input must have at least 1 dimension"))
    for _, eps in ipairs({0, -1e-6, math.huge, 0 / 0}) do
      assert.error_matches(function() F.rms_norm(x, bert.ones({4}), eps) end,
        "rms_norm: eps must be finite and > 0, got " .. tostring(eps), nil, true)
    end
    local vk = bert.backend_info().vulkan
    if vk and vk.available then   -- no Vulkan kernel: refused by name, not a crash
      local ok, err = pcall(F.rms_norm, x:to("vulkan"), bert.ones({4}):to("vulkan"))
      assert.is_false(ok)
      assert.matches("rms_norm: not supported on device vulkan", err, 1, true)
    end
  end)
end)

describe("F.embedding", function()
  it("gathers rows for ids of any shape", function()
    local w = randn({6, 3}, 1)
    local ids = bert.tensor({{1, 0, 5}, {2, 2, 4}}, "int32")
    local y = F.embedding(ids, w)
    assert.same({2, 3, 3}, y:shape())
    assert.same(w:index_select(1, ids:view(-1)):view(2, 3, 3):totable(), y:totable())
  end)

  it("accumulates the gradient of repeated ids into their rows", function()
    local w = randn({5, 3}, 2)
    local ids = bert.tensor({{1, 0, 2}, {2, 2, 4}}, "int32")
    G.gradcheck(function(ww) return F.embedding(ids, ww) end, {w})
    local w2 = randn({5, 3}, 3)
    w2:requires_grad(true)
    F.embedding(ids, w2):sum():backward()
    assert.same({{1, 1, 1}, {1, 1, 1}, {3, 3, 3}, {0, 0, 0}, {1, 1, 1}}, w2:grad():totable())
  end)

  it("adds into an existing gradient in place (tied weights, accumulation)", function()
    local w = randn({7, 4}, 4)
    local ids = bert.tensor({{6, 0, 6}, {3, 3, 3}}, "int32")
    local gy = randn({2, 3, 4}, 5)
    w:requires_grad(true)
    F.embedding(ids, w):backward(gy)
    local once = w:grad():clone()
    ;(F.embedding(ids, w) * 1 + w:sum() * 0):backward(gy)
    assert.tensor_near(once * 2, w:grad(), 1e-6)
    -- a gradient that is a strided view (e.g. of a flat buffer) is honoured
    local flat = bert.zeros({7, 6})
    w:set_grad(flat:narrow(2, 2, 4))
    F.embedding(ids, w):backward(gy)
    assert.tensor_near(once, flat:narrow(2, 2, 4), 1e-6)
    assert.same(bert.zeros({7}):totable(), flat:select(2, 1):totable())
    w:requires_grad(false)
  end)

  it("rejects out-of-range ids naming the id and the vocabulary size", function()
    local w = bert.zeros({10, 2})
    assert.error_matches(function() F.embedding(bert.tensor({3, 10}, "int32"), w) end,
      lit("embedding: id 10 at position 2 is out of range for 10 embeddings (valid ids are 0..9)"))
    assert.error_matches(function() F.embedding(bert.tensor({-1}, "int32"), w) end, "id %-1")
    assert.error_matches(function() F.embedding(bert.tensor({1}), w) end,
      "embedding: ids must be int32, got float32")
  end)
end)

describe("F.cross_entropy", function()
  local logits = randn({5, 7}, 3)
  local labels = bert.tensor({1, -100, 6, 0, 3}, "int32")

  local function ref_rows(l, y)
    local lsm = l:log_softmax(-1)
    local out = {}
    for i, c in ipairs(y:totable()) do out[i] = c == -100 and 0 or -lsm:get(i, c + 1) end
    return out
  end

  it("matches -log_softmax at the label, mean over non-ignored rows", function()
    local rows = ref_rows(logits, labels)
    local sum = 0
    for _, r in ipairs(rows) do sum = sum + r end
    assert.is_true(math.abs(F.cross_entropy(logits, labels):item() - sum / 4) < 1e-5)
    assert.is_true(math.abs(F.cross_entropy(logits, labels, {reduction = "sum"}):item() - sum) < 1e-4)
    assert.tensor_near(rows, F.cross_entropy(logits, labels, {reduction = "none"}), 1e-5)
    assert.same({}, F.cross_entropy(logits, labels):shape())
  end)

  it("honours a custom ignore_index and leading batch dims", function()
    local y = bert.tensor({{1, 2}, {6, 0}}, "int32")
    local l = randn({2, 2, 7}, 4)
    local ref = F.cross_entropy(l:view(4, 7), y:view(4), {reduction = "none", ignore_index = 2})
    local got = F.cross_entropy(l, y, {reduction = "none", ignore_index = 2})
    assert.same({2, 2}, got:shape())
    assert.tensor_near(ref:view(2, 2), got, 1e-6)
    assert.equal(0, got:get(1, 2))
  end)

  it("is stable for large logits", function()
    local l = bert.tensor({{1000, 0, -1000}})
    assert.is_true(math.abs(F.cross_entropy(l, bert.tensor({1}, "int32")):item() - 1000) < 1e-3)
  end)

  it("has correct gradients for every reduction", function()
    for _, red in ipairs({"mean", "sum", "none"}) do
      G.gradcheck(function(l) return F.cross_entropy(l, labels, {reduction = red}) end, {logits})
    end
  end)

  it("gives zero loss and zero gradients when every label is ignored", function()
    local l = randn({3, 4}, 5)
    l:requires_grad(true)
    local loss = F.cross_entropy(l, bert.tensor({-100, -100, -100}, "int32"))
    assert.equal(0, loss:item())
    loss:backward()
    assert.same(bert.zeros({3, 4}):totable(), l:grad():totable())
    l:requires_grad(false)
  end)

  it("rejects bad labels and shapes", function()
    assert.error_matches(function() F.cross_entropy(bert.zeros({2, 3}), bert.tensor({0, 3}, "int32")) end,
      lit("cross_entropy: label 3 at position 2 is out of range for 3 classes"))
    assert.error_matches(function() F.cross_entropy(bert.zeros({2, 3}), bert.tensor({0, 1, 2}, "int32")) end,
      lit("cross_entropy: logits [2 x 3] and labels [3]"))
    assert.error_matches(function() F.cross_entropy(bert.zeros({2, 3}), bert.tensor({0, 1})) end,
      "cross_entropy: labels must be int32, got float32")
    assert.error_matches(function() F.cross_entropy(bert.zeros({2, 3}), bert.tensor({0, 1}, "int32"),
      {reduction = "avg"}) end, "reduction must be")
  end)
end)

describe("F.bias_gelu", function()
  it("matches (x + b):gelu() for the erf and tanh forms", function()
    local x, b = randn({3, 4, 10}, 1) * 3, randn({10}, 2)
    assert.is_true(maxdiff(F.bias_gelu(x, b), (x + b):gelu()) < 2e-6)
    assert.is_true(maxdiff(F.bias_gelu(x, b, "tanh"), (x + b):gelu("tanh")) < 2e-6)
    assert.is_true(maxdiff(F.bias_gelu(x), x:gelu()) < 2e-6)
    local big = randn({200, 300}, 3) * 4     -- threaded, wide range
    assert.is_true(maxdiff(F.bias_gelu(big), big:gelu()) < 5e-6)
  end)

  it("has correct gradients for input and bias", function()
    for _, mode in ipairs({"none", "tanh"}) do
      G.gradcheck(function(a, bb) return F.bias_gelu(a, bb, mode) end, {randn({4, 6}, 4), randn({6}, 5)})
    end
  end)

  it("rejects a bias of the wrong size", function()
    assert.error_matches(function() F.bias_gelu(bert.zeros({2, 4}), bert.zeros({3})) end,
      lit("bias_gelu: bias [3] does not match the last dim of input [2 x 4] (expected [4])"))
  end)
end)

describe("F.dropout", function()
  -- Philox4x32-10 in Lua integers: the reference for the C kernels' stream
  -- (element i: word i % 4 of counter offset + i / 4; the vector path draws
  -- 16 counters at once, the scalar one 1)
  local M32 = 0xFFFFFFFF
  local function philox(seed, counter)
    local c0, c1, c2, c3 = counter & M32, (counter >> 32) & M32, 0, 0
    local k0, k1 = seed & M32, (seed >> 32) & M32
    for _ = 1, 10 do
      local p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
      c0, c1, c2, c3 = ((p1 >> 32) ~ c1 ~ k0) & M32, p1 & M32, ((p0 >> 32) ~ c3 ~ k1) & M32, p0 & M32
      k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    end
    return {c0, c1, c2, c3}
  end

  it("draws its mask from the Philox stream (reference in Lua), across a 2^32 counter carry", function()
    local n, p = 1003, 0.3
    local thr = math.floor(p * 4294967296.0)
    for _, st in ipairs({{1234, 77}, {5, 0xFFFFFFF8}, {0x123456789, 3}}) do
      bert.set_rng_state(st[1], st[2])
      local y = F.dropout(bert.ones({n}), p, true):totable()
      local bad
      for i = 0, n - 1 do
        local want = philox(st[1], st[2] + i // 4)[i % 4 + 1] >= thr and 1 / (1 - p) or 0
        if math.abs(y[i + 1] - want) > 1e-6 then bad = bad or i end
      end
      assert.is_nil(bad, string.format("seed %d offset %d: first wrong element", st[1], st[2]))
    end
  end)

  it("is the identity (same tensor) when p = 0 or not training", function()
    local x = randn({4, 4}, 1)
    assert.same(x:totable(), F.dropout(x, 0.5, false):totable())
    assert.same(x:totable(), F.dropout(x, 0, true):totable())
  end)

  it("drops a fraction p and scales the rest by 1 / (1 - p)", function()
    bert.manual_seed(42)
    local x = bert.ones({200, 500})
    local y = F.dropout(x, 0.3, true)
    local kept = y:ne(0):float():sum():item() / x:numel()
    assert.is_true(math.abs(kept - 0.7) < 0.005, "kept fraction " .. kept)
    assert.is_true(math.abs(y:max():item() - 1 / 0.7) < 1e-5)
    assert.is_true(math.abs(y:mean():item() - 1) < 0.01)
  end)

  it("is reproducible from a seed and differs between calls", function()
    local x = randn({3, 7}, 2)
    bert.manual_seed(7)
    local a, b = F.dropout(x, 0.5, true), F.dropout(x, 0.5, true)
    bert.manual_seed(7)
    local c = F.dropout(x, 0.5, true)
    assert.same(a:totable(), c:totable())
    assert.are_not.same(a:totable(), b:totable())
  end)

  it("regenerates the same mask in backward", function()
    local x = randn({4, 9}, 3)
    G.gradcheck(function(a) bert.manual_seed(11); return F.dropout(a, 0.4, true) end, {x})
    local x2 = randn({4, 9}, 4)
    x2:requires_grad(true)
    bert.manual_seed(5)
    local y = F.dropout(x2, 0.5, true)
    y:sum():backward()
    -- gradient is 2 where kept, 0 where dropped: exactly y's pattern
    assert.same(y:ne(0):float():mul(2):totable(), x2:grad():totable())
  end)

  it("rejects a probability outside [0, 1]", function()
    assert.error_matches(function() F.dropout(bert.zeros({2}), 1.5, true) end,
      lit("dropout: probability must be in [0, 1], got 1.5"))
  end)
end)

-- Materialised attention: softmax(Q K^T * scale + bias) V with the bias
-- HF builds from a keep mask.
local function ref_attention(q, k, v, mask, mask_value, scale)
  local d = q:size(4)
  local s = q:matmul(k:transpose(3, 4)) * (scale or 1 / math.sqrt(d))
  if mask then
    local B, T = mask:size(1), mask:size(2)
    local bias = (bert.ones({B, T}) - mask:float()) * (mask_value or -3.4028234663852886e38)
    s = s + bias:view(B, 1, 1, T)
  end
  return s:softmax(-1), v
end

describe("F.dropout_rows", function()
  it("drops packed rows as F.dropout drops them in the padded [B, T, W] tensor, forward and backward", function()
    local B, T, W = 3, 7, 1100   -- W over one mask block (1024)
    local rows = bert.tensor({0, 1, 2, 7, 8, 14, 15, 16, 17, 18, 19, 20}, "int32")
    local x = randn({12, W}, 61):requires_grad(true)
    local g = randn({12, W}, 62)
    bert.manual_seed(5)
    local y = F.dropout_rows(x, 0.3, true, rows, B, T)
    ;(y * g):sum():backward()
    bert.manual_seed(5)
    local m = F.dropout(bert.ones({B, T, W}), 0.3, true):reshape(B * T, W):index_select(1, rows)
    assert.equal(0, maxdiff(y, x:detach() * m))
    assert.equal(0, maxdiff(x:grad(), g * m))
    assert.equal(0, maxdiff(x, F.dropout_rows(x, 0.3, false, rows, B, T)))   -- not training: x
  end)

  it("names the argument that is wrong", function()
    local x, rows = randn({2, 4}, 63), bert.tensor({0, 5}, "int32")
    assert.error_matches(function() F.dropout_rows(x, 0.1, true, rows, 2, 2) end,
      "dropout_rows: rows%[2%] = 5 is outside the 2 x 2 batch")
    assert.error_matches(function() F.dropout_rows(x, 0.1, true, bert.tensor({0}, "int32"), 2, 3) end,
      "dropout_rows: rows must be int32 %[2%] %(one per row of x %[2 x 4%]%), got %[1%] int32")
    assert.error_matches(function() F.dropout_rows(x, 1.5, true, rows, 2, 3) end,
      "dropout_rows: probability must be in %[0, 1%], got 1.5")
    assert.error_matches(function() F.dropout_rows(x, 0.1, true, rows, 0, 3) end,
      "dropout_rows: batch and seq must be positive and batch x seq x width %(4%) fit in 64 bits, got 0 and 3")
  end)
end)

describe("F.attention", function()
  local B, A, T, d = 2, 3, 6, 4
  local q, k, v = randn({B, A, T, d}, 1), randn({B, A, T, d}, 2), randn({B, A, T, d}, 3)
  local mask = bert.tensor({{1, 1, 1, 1, 0, 0}, {1, 1, 1, 1, 1, 1}}, "int32")

  it("matches softmax(QK^T / sqrt(d)) V without a mask", function()
    local p = ref_attention(q, k, v)
    assert.is_true(maxdiff(F.attention(q, k, v), p:matmul(v)) < 1e-5)
  end)

  it("matches HF's additive key-padding bias (finfo.min and -10000, int and float masks)", function()
    local p = ref_attention(q, k, v, mask)
    local want = p:matmul(v)
    assert.is_true(maxdiff(F.attention(q, k, v, {mask = mask}), want) < 1e-5)
    assert.is_true(maxdiff(F.attention(q, k, v, {mask = mask:float()}), want) < 1e-5)
    assert.is_true(maxdiff(F.attention(q, k, v, {mask = mask, mask_value = -10000}), want) < 1e-5)
    local bias = ((bert.ones({B, T}) - mask:float()) * -10000):view(B, 1, 1, T)
    assert.is_true(maxdiff(F.attention(q, k, v, {mask = bias}), want) < 1e-5)
  end)

  it("a mask of all ones is the same as none, bit for bit (the bias pass is skipped)", function()
    local ones = bert.ones({B, T}):int()
    assert.equal(0, maxdiff(F.attention(q, k, v, {mask = ones}), F.attention(q, k, v)))
    assert.equal(0, maxdiff(F.attention(q, k, v, {mask = bert.zeros({B, 1, 1, T})}), F.attention(q, k, v)))
  end)

  it("returns a time-major result and reads a gradient of any layout", function()
    -- the result is [B, A, T, d] over [B, T, A, d] memory: the layer's
    -- transpose back to [B, T, A, d] is contiguous (no copy)
    local out = F.attention(q, k, v, {mask = mask})
    assert.is_true(out:transpose(2, 3):is_contiguous())
    -- a gradient laid out [B, A, T, d] (copied into the result layout) and
    -- one laid out [B, T, A, d] (read in place) give the same gradients
    local w = randn({B, A, T, d}, 21)
    local function grads(through_time_major)
      local qq, kk, vv = q:clone():requires_grad(true), k:clone():requires_grad(true), v:clone():requires_grad(true)
      local o = F.attention(qq, kk, vv, {mask = mask, dropout = 0.3})
      local loss = through_time_major
        and (o:transpose(2, 3):contiguous() * w:transpose(2, 3):contiguous()):sum() or (o * w):sum()
      loss:backward()
      return {qq:grad(), kk:grad(), vv:grad()}
    end
    bert.manual_seed(5)
    local a = grads(false)
    bert.manual_seed(5)
    local b = grads(true)
    for i = 1, 3 do assert.is_true(maxdiff(a[i], b[i]) == 0, "input " .. i) end
    assert.is_true(maxdiff(a[1], bert.zeros({B, A, T, d})) > 0)
  end)

  it("averages all values for a fully padded row, like HF with finfo.min", function()
    local m = bert.tensor({{0, 0, 0, 0, 0, 0}, {1, 1, 0, 1, 1, 1}}, "int32")
    local p = ref_attention(q, k, v, m)
    local out = F.attention(q, k, v, {mask = m})
    assert.is_true(maxdiff(out, p:matmul(v)) < 1e-5)
    assert.is_true(maxdiff(out:select(1, 1), v:select(1, 1):mean(2, true):expand(A, T, d)) < 1e-5)
  end)

  it("honours a custom scale and different query / key lengths", function()
    local q2 = randn({B, A, 3, d}, 4)
    local p = ref_attention(q2, k, v, mask, nil, 0.3)
    assert.is_true(maxdiff(F.attention(q2, k, v, {mask = mask, scale = 0.3}), p:matmul(v)) < 1e-5)
  end)

  it("takes q, k, v as strided views of a fused QKV projection", function()
    local H = A * d
    local qkv = randn({B, T, 3 * H}, 5)
    local function head(i)
      return qkv:narrow(3, i * H + 1, H):view(B, T, A, d):permute(1, 3, 2, 4)
    end
    local hq, hk, hv = head(0), head(1), head(2)
    assert.is_false(hq:is_contiguous())
    local p = ref_attention(hq:contiguous(), hk:contiguous(), hv:contiguous(), mask)
    assert.is_true(maxdiff(F.attention(hq, hk, hv, {mask = mask}), p:matmul(hv:contiguous())) < 1e-5)
    -- and a layout with a non-unit last stride
    local tq = randn({B, A, d, T}, 6):transpose(3, 4)
    local p2 = ref_attention(tq:contiguous(), k, v)
    assert.is_true(maxdiff(F.attention(tq, k, v), p2:matmul(v)) < 1e-5)
  end)

  it("spans several query blocks and key tiles, skipping padded tiles", function()
    local Tl = 600
    local ql, kl, vl = randn({1, 1, 140, 8}, 7), randn({1, 1, Tl, 8}, 8), randn({1, 1, Tl, 8}, 9)
    local m = bert.zeros({1, Tl}, "int32")
    m:narrow(2, 1, 200):fill_(1)        -- tiles 2 and 3 fully padded
    m:narrow(2, 240, 3):fill_(1)        -- a few live keys in tile 1
    local p = ref_attention(ql, kl, vl, m)
    assert.is_true(maxdiff(F.attention(ql, kl, vl, {mask = m}), p:matmul(vl)) < 1e-5)
    local p2 = ref_attention(ql, kl, vl)
    assert.is_true(maxdiff(F.attention(ql, kl, vl), p2:matmul(vl)) < 1e-5)
    G.gradcheck(function(a, b, c) return F.attention(a, b, c, {mask = m}) end, {ql, kl, vl},
      {max_checks = 20})
  end)

  it("writes every row of the gradients over several blocks and tiles (memory filled with NaN first)", function()
    -- dq, dk, dv come from the allocator's cache unzeroed: rows that no
    -- tile writes (dead keys) must be zeroed, the others written whole
    local Tl, A2, d2 = 600, 2, 64
    local m = bert.zeros({1, Tl}, "int32")
    m:narrow(2, 1, 200):fill_(1)
    m:narrow(2, 240, 3):fill_(1)
    local w = randn({1, A2, Tl, d2}, 31)
    for _, mk in ipairs({m, false}) do
      local poison = {}
      for i = 1, 6 do poison[i] = bert.empty({1, Tl, A2, d2}):fill_(0 / 0) end
      for i = 1, 6 do poison[i]:free() end
      local function grads(fused)
        local q = randn({1, A2, Tl, d2}, 32):requires_grad(true)
        local k = randn({1, A2, Tl, d2}, 33):requires_grad(true)
        local v = randn({1, A2, Tl, d2}, 34):requires_grad(true)
        local o
        if fused then o = F.attention(q, k, v, {mask = mk or nil})
        else local p = ref_attention(q, k, v, mk or nil); o = p:matmul(v) end
        (o * w):sum():backward()
        return {q:grad(), k:grad(), v:grad()}
      end
      local got, want = grads(true), grads(false)
      for i = 1, 3 do
        assert.is_true(maxdiff(got[i], want[i]) < 1e-4, (mk and "mask" or "no mask") .. " input " .. i)
      end
      if mk then   -- dead keys: exactly zero
        assert.equal(0, got[2]:narrow(3, 300, 301):abs():max():item())
        assert.equal(0, got[3]:narrow(3, 300, 301):abs():max():item())
      end
    end
  end)

  it("has correct gradients for q, k and v, with a padding mask", function()
    G.gradcheck(function(a, b, c) return F.attention(a, b, c, {mask = mask}) end, {q, k, v})
    G.gradcheck(function(a, b, c) return F.attention(a, b, c) end,
      {randn({1, 2, 5, 3}, 10), randn({1, 2, 4, 3}, 11), randn({1, 2, 4, 3}, 12)})
  end)

  it("passes gradients through strided views", function()
    local x = randn({B, T, 3 * A * d}, 13)
    G.gradcheck(function(qkv)
      local H = A * d
      local function head(i) return qkv:narrow(3, i * H + 1, H):view(B, T, A, d):permute(1, 3, 2, 4) end
      return F.attention(head(0), head(1), head(2), {mask = mask})
    end, {x})
  end)

  it("F.attention_qkv equals F.attention on the thirds of the projection, gradients bit for bit", function()
    local Bq, Tq, Aq, dq = 3, 37, 4, 8
    local H = Aq * dq
    local cu = bert.tensor({0, 20, 21, 50}, "int32")
    local m = bert.ones({Bq, Tq}):int()
    m:narrow(2, 30, 8):fill_(0)
    local function run(fused, opts, packed)
      bert.manual_seed(3)
      local x = randn(packed and {50, 3 * H} or {Bq, Tq, 3 * H}, 41):requires_grad(true)
      local w = randn(packed and {50, Aq, dq} or {Bq, Aq, Tq, dq}, 42)
      local out
      if fused then
        out = F.attention_qkv(x, Aq, opts)
      else
        local function third(i)
          local n = x:narrow(packed and 2 or 3, i * H + 1, H)
          return packed and n:view(50, Aq, dq) or n:view(Bq, Tq, Aq, dq):transpose(2, 3)
        end
        out = F.attention(third(0), third(1), third(2), opts)
      end
      (out * w):sum():backward()
      return out, x:grad()
    end
    local cases = {{{}}, {{mask = m}}, {{mask = m, dropout = 0.3}}, {{causal = true, mask = m}},
                   {{cu_seqlens = cu}, true}, {{cu_seqlens = cu, dropout = 0.2, causal = true}, true}}
    for n, case in ipairs(cases) do
      local o1, g1 = run(false, case[1], case[2])
      local o2, g2 = run(true, case[1], case[2])
      assert.equal(0, maxdiff(o1, o2), "case " .. n .. " output")
      assert.equal(0, maxdiff(g1, g2), "case " .. n .. " gradient")
      assert.is_true(g2:abs():max():item() > 0)
    end
    G.gradcheck(function(x) return F.attention_qkv(x, 2, {mask = mask}) end, {randn({B, T, 3 * 2 * 3}, 43)})
  end)

  it("F.attention_qkv rejects a projection that does not split into q, k, v heads", function()
    local x = randn({2, 5, 24}, 44)
    assert.error_matches(function() F.attention_qkv(x, 5) end,
      "attention_qkv: the last size of qkv %[2 x 5 x 24%] must be a positive multiple of 3 x heads %(5%)")
    assert.error_matches(function() F.attention_qkv(x, 0) end, "multiple of 3 x heads %(0%)")
    assert.error_matches(function() F.attention_qkv(randn({10, 24}, 45), 2) end,
      "attention_qkv: qkv must be float32 %[batch x seq x 3%*hidden%], got %[10 x 24%]")
    assert.error_matches(function() F.attention_qkv(x, 2, {cu_seqlens = bert.tensor({0, 5}, "int32")}) end,
      "attention_qkv: qkv must be float32 %[total_tokens x 3%*hidden%] %(with cu_seqlens%), got %[2 x 5 x 24%]")
  end)

  it("applies dropout to the probabilities with the mask F.dropout would draw", function()
    bert.manual_seed(9)
    local out = F.attention(q, k, v, {mask = mask, dropout = 0.4})
    bert.manual_seed(9)
    local p = ref_attention(q, k, v, mask)
    local want = F.dropout(p, 0.4, true):matmul(v)
    assert.is_true(maxdiff(out, want) < 1e-5)
    -- no dropout when not training
    local p0 = ref_attention(q, k, v, mask)
    assert.is_true(maxdiff(F.attention(q, k, v, {mask = mask, dropout = 0.4, training = false}),
      p0:matmul(v)) < 1e-5)
  end)

  it("regenerates the attention dropout mask in backward", function()
    G.gradcheck(function(a, b, c)
      bert.manual_seed(3)
      return F.attention(a, b, c, {mask = mask, dropout = 0.3})
    end, {q, k, v})
  end)

  it("names shapes in its errors", function()
    assert.error_matches(function() F.attention(bert.zeros({2, 3, 4}), k, v) end,
      lit("attention: query must be a 4-D float32 [batch x heads x seq x head_dim], got [2 x 3 x 4]"))
    assert.error_matches(function() F.attention(q, bert.zeros({B, A, T, 5}), v) end,
      lit("attention: query [2 x 3 x 6 x 4], key [2 x 3 x 6 x 5] and value [2 x 3 x 6 x 4] must agree"))
    assert.error_matches(function() F.attention(q, k, v, {mask = bert.ones({B, T + 1})}) end,
      lit("attention: mask [2 x 7] does not fit query [2 x 3 x 6 x 4] with 6 keys"))
    assert.error_matches(function() F.attention(q, k, v, {mask = 3}) end,
      "attention: option 'mask' must be a tensor, got number")
    assert.error_matches(function() F.attention(q, k, v, {dropout = 1}) end,
      lit("attention: dropout must be in [0, 1), got 1"))
  end)
end)

-- Shapes big enough for the threaded code paths: gradients of the fused
-- ops against autograd through the composed tensor ops.
describe("fused ops at threaded sizes", function()
  local function grads(f, inputs)
    for _, x in ipairs(inputs) do x:requires_grad(true); x:zero_grad() end
    local out = f(table.unpack(inputs))
    local R = bert.randn(out:shape(), {seed = 99})
    ;(out * R):sum():backward()
    local gs = {}
    for i, x in ipairs(inputs) do gs[i] = x:grad():clone(); x:requires_grad(false) end
    return out, gs
  end
  local function same_grads(fused, ref, inputs, tol)
    local o1, g1 = grads(fused, inputs)
    local o2, g2 = grads(ref, inputs)
    assert.is_true(maxdiff(o1, o2) < tol, "outputs differ by " .. maxdiff(o1, o2))
    for i = 1, #inputs do
      local e = maxdiff(g1[i], g2[i])
      assert.is_true(e < tol, "gradient " .. i .. " differs by " .. e)
    end
  end

  it("linear", function()
    same_grads(function(x, w, b) return F.linear(x, w, b) end,
      function(x, w, b) return x:matmul(w:t()) + b end,
      {randn({3, 100, 40}, 1), randn({120, 40}, 2), randn({120}, 3)}, 1e-3)
  end)

  it("layer_norm with residual", function()
    same_grads(function(x, g, b, r) return F.layer_norm(x, g, b, 1e-5, r) end,
      function(x, g, b, r) return ref_layer_norm(x + r, g, b, 1e-5) end,
      {randn({100, 384}, 4), randn({384}, 5), randn({384}, 6), randn({100, 384}, 7)}, 1e-3)
  end)

  it("embedding", function()
    local ids = bert.randint(0, 50, {300}, {seed = 8})
    same_grads(function(w) return F.embedding(ids, w) end,
      function(w) return w:index_select(1, ids) end, {randn({50, 200}, 9)}, 1e-4)
  end)

  it("cross_entropy", function()
    local labels = bert.randint(0, 400, {120}, {seed = 10})
    labels:narrow(1, 1, 20):fill_(-100)
    same_grads(function(l) return F.cross_entropy(l, labels, {reduction = "none"}) end,
      function(l)
        local keep = labels:ne(-100)
        local safe = bert.where(keep, labels, bert.zeros({120}, "int32"))
        local picked = l:log_softmax(-1):gather(2, safe:view(120, 1)):view(120)
        return picked:neg() * keep:float()
      end, {randn({120, 400}, 11) * 3}, 1e-4)
  end)

  it("dropout regenerates its mask in every chunk", function()
    local x = bert.ones({300, 200})
    x:requires_grad(true)
    bert.manual_seed(21)
    local y = F.dropout(x, 0.25, true)
    y:sum():backward()
    assert.same(y:totable(), x:grad():totable())
    x:requires_grad(false)
  end)

  it("attention at BERT-like shapes with padding and dropout", function()
    local Bq, Aq, Tq, dq = 4, 4, 80, 16
    local m = bert.ones({Bq, Tq}, "int32")
    m:select(1, 2):narrow(1, 31, 50):fill_(0)
    m:select(1, 4):narrow(1, 71, 10):fill_(0)
    local bias = ((bert.ones({Bq, Tq}) - m:float()) * -3.4028234663852886e38):view(Bq, 1, 1, Tq)
    same_grads(function(q, k, v)
      bert.manual_seed(4)
      return F.attention(q, k, v, {mask = m, dropout = 0.2})
    end, function(q, k, v)
      bert.manual_seed(4)
      local p = (q:matmul(k:transpose(3, 4)) * 0.25 + bias):softmax(-1)
      return F.dropout(p, 0.2, true):matmul(v)
    end, {randn({Bq, Aq, Tq, dq}, 12), randn({Bq, Aq, Tq, dq}, 13), randn({Bq, Aq, Tq, dq}, 14)}, 1e-4)
  end)
end)

describe("MLM head on masked positions", function()
  it("gathers rows with index_select and trains through linear + cross_entropy", function()
    local h = randn({2 * 5, 6}, 1)                 -- [B*T, H] hidden states
    local pos = bert.tensor({1, 4, 7}, "int32")    -- 0-based flat masked positions
    local w, b = randn({9, 6}, 2), randn({9}, 3)   -- vocab 9
    local labels = bert.tensor({3, 8, 0}, "int32")
    G.gradcheck(function(hh, ww, bb)
      local rows = hh:index_select(1, pos)
      return F.cross_entropy(F.linear(rows, ww, bb), labels)
    end, {h, w, b})
  end)
end)
