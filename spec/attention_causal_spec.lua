local bert = require("bert")
-- F.attention with {causal = true}: query i sees keys j <= i.  Against a
-- materialised reference (scores + an additive -inf upper triangle + the
-- key-padding bias, softmax, @ v, all from basic tensor ops), at lengths
-- that cross the kernel's query blocks (128), causal strips (32) and key
-- tiles (256); with padding (right and left), dropout, views and
-- finite-difference gradients.  On the CPU, and on Vulkan (lavapipe here)
-- when a device is present.
local F = bert.F
local DG = require("spec.support.device_grads")

local function randn(shape, seed) return bert.randn(shape, {seed = seed}) end
local function maxdiff(a, b) return (a - b):to("cpu"):abs():max():item() end
local FMIN = -3.4028234663852886e38

-- [Tq, Tk]: 0 where key j <= query i, -inf above the diagonal
local function causal_bias(Tq, Tk)
  local rows = {}
  for i = 1, Tq do
    local r = {}
    for j = 1, Tk do r[j] = j <= i and 0 or -math.huge end
    rows[i] = r
  end
  return bert.tensor(rows)
end

-- softmax(q k^T * scale + causal + padding bias) from basic ops; returns P
local function ref_probs(q, k, mask, scale, mask_value)
  local B, Tq, Tk, d = q:size(1), q:size(3), k:size(3), q:size(4)
  local s = q:matmul(k:transpose(3, 4)) * (scale or 1 / math.sqrt(d))
  s = s + causal_bias(Tq, Tk):to(q:device()):view(1, 1, Tq, Tk)
  if mask then
    local bias = (bert.ones({B, Tk}):to(q:device()) - mask:float()) * (mask_value or FMIN)
    s = s + bias:view(B, 1, 1, Tk)
  end
  return s:softmax(-1)
end

local function ref_attention(q, k, v, mask, scale, mask_value)
  return ref_probs(q, k, mask, scale, mask_value):matmul(v)
end

-- a keep mask [B, T]: batch row b keeps positions lo[b] .. hi[b] (1-based)
local function keep_mask(T, ranges)
  local rows = {}
  for b, r in ipairs(ranges) do
    local row = {}
    for j = 1, T do row[j] = (j >= r[1] and j <= r[2]) and 1 or 0 end
    rows[b] = row
  end
  return bert.tensor(rows, "int32")
end

-- [B, 1, T, 1]: 1 for query rows that see a live key (from the first live key on)
local function rows_from(mask)
  local m = mask:to("cpu"):totable()
  local rows = {}
  for b, r in ipairs(m) do
    local seen, col = false, {}
    for j, x in ipairs(r) do seen = seen or x ~= 0; col[j] = {seen and 1 or 0} end
    rows[b] = {col}
  end
  return bert.tensor(rows)
end

local function suite(device)
  local function on(t) return t:to(device) end
  local function rnd(shape, seed) return on(randn(shape, seed)) end

  it("matches the masked reference at odd lengths (1, 7, 33, 130, 300)", function()
    for n, T in ipairs({1, 7, 33, 130, 300}) do
      local A = T > 200 and 1 or 2
      local q, k, v = rnd({2, A, T, 8}, n), rnd({2, A, T, 8}, n + 10), rnd({2, A, T, 8}, n + 20)
      local got = F.attention(q, k, v, {causal = true})
      assert.is_true(maxdiff(got, ref_attention(q, k, v)) < 1e-5, "T = " .. T)
    end
  end)

  it("keeps the key-padding mask: right padding, left padding, a whole padded tile", function()
    for n, case in ipairs({
      {T = 33, ranges = {{1, 33}, {1, 20}}},
      {T = 130, ranges = {{5, 130}, {1, 97}}},          -- left padding: rows before the first live key
      {T = 300, ranges = {{260, 300}, {1, 1}}},         -- the first tile (256 keys) wholly padded
    }) do
      local T = case.T
      local q, k, v = rnd({2, 1, T, 4}, 30 + n), rnd({2, 1, T, 4}, 40 + n), rnd({2, 1, T, 4}, 50 + n)
      local mask = on(keep_mask(T, case.ranges))
      local got = F.attention(q, k, v, {causal = true, mask = mask})
      assert.is_true(maxdiff(got, ref_attention(q, k, v, mask)) < 1e-5, "T = " .. T)
      local got10k = F.attention(q, k, v, {causal = true, mask = mask, mask_value = -10000})
      assert.is_true(maxdiff(got10k, ref_attention(q, k, v, mask, nil, -10000)) < 1e-5, "T = " .. T)
    end
  end)

  it("aligns the diagonal top-left when query and key lengths differ", function()
    local k, v = rnd({1, 2, 9, 4}, 60), rnd({1, 2, 9, 4}, 61)
    local q = rnd({1, 2, 5, 4}, 62)
    assert.is_true(maxdiff(F.attention(q, k, v, {causal = true}), ref_attention(q, k, v)) < 1e-5)
    local q2, k2, v2 = rnd({1, 2, 9, 4}, 63), rnd({1, 2, 5, 4}, 64), rnd({1, 2, 5, 4}, 65)
    assert.is_true(maxdiff(F.attention(q2, k2, v2, {causal = true, scale = 0.3}),
      ref_attention(q2, k2, v2, nil, 0.3)) < 1e-5)
  end)

  it("takes strided views of a fused projection", function()
    local B, T, A, d = 2, 37, 3, 4
    local H = A * d
    local qkv = rnd({B, T, 3 * H}, 66)
    local function head(i) return qkv:narrow(3, i * H + 1, H):view(B, T, A, d):permute(1, 3, 2, 4) end
    local q, k, v = head(0), head(1), head(2)
    local want = ref_attention(q:contiguous(), k:contiguous(), v:contiguous())
    assert.is_true(maxdiff(F.attention(q, k, v, {causal = true}), want) < 1e-5)
  end)

  it("draws dropout as F.dropout on the causal probabilities", function()
    local T = 33
    local q, k, v = rnd({2, 2, T, 4}, 70), rnd({2, 2, T, 4}, 71), rnd({2, 2, T, 4}, 72)
    local mask = on(keep_mask(T, {{1, T}, {3, 30}}))
    bert.manual_seed(5)
    local got = F.attention(q, k, v, {causal = true, mask = mask, dropout = 0.3})
    bert.manual_seed(5)
    local want = F.dropout(ref_probs(q, k, mask), 0.3, true):matmul(v)
    assert.is_true(maxdiff(got, want) < 1e-5)
  end)

  it("has correct gradients (finite differences; a device: the cpu's), with padding and dropout", function()
    DG.check(device, function() return function(a, b, c) return F.attention(a, b, c, {causal = true}) end end,
      {randn({1, 2, 7, 3}, 80), randn({1, 2, 7, 3}, 81), randn({1, 2, 7, 3}, 82)})
    -- rows before the first live key see padding only (their scores are
    -- rounded at -3.4e38 or -10000): their outputs are left out of the loss
    local mask = keep_mask(33, {{1, 33}, {4, 25}})
    local live = rows_from(mask)
    DG.check(device, function(to)
      local m, l = to(mask), to(live)
      return function(a, b, c) return F.attention(a, b, c, {causal = true, mask = m}) * l end
    end, {randn({2, 1, 33, 4}, 83), randn({2, 1, 33, 4}, 84), randn({2, 1, 33, 4}, 85)}, {max_checks = 30})
    DG.check(device, function()
      return function(a, b, c)
        bert.manual_seed(11)
        return F.attention(a, b, c, {causal = true, dropout = 0.2})
      end
    end, {randn({1, 1, 9, 3}, 86), randn({1, 1, 9, 3}, 87), randn({1, 1, 9, 3}, 88)})
  end)

  it("gives the reference's gradients across blocks, strips and tiles (T = 130, 300)", function()
    for n, T in ipairs({130, 300}) do
      local mask = on(keep_mask(T, {{3, T}}))
      local function grads(f)
        local q, k, v = rnd({1, 1, T, 8}, 90 + n), rnd({1, 1, T, 8}, 93 + n), rnd({1, 1, T, 8}, 96 + n)
        for _, x in ipairs({q, k, v}) do x:requires_grad(true) end
        local w = rnd({1, 1, T, 8}, 99)
        ;(f(q, k, v) * w):sum():backward()
        return {q:grad(), k:grad(), v:grad()}
      end
      local live = on(rows_from(mask))
      local g1 = grads(function(q, k, v) return F.attention(q, k, v, {causal = true, mask = mask}) * live end)
      local g2 = grads(function(q, k, v) return ref_attention(q, k, v, mask) * live end)
      for i = 1, 3 do assert.is_true(maxdiff(g1[i], g2[i]) < 2e-5, "T = " .. T .. ", input " .. i) end
    end
  end)

  it("is the plain op without the flag", function()
    local q, k, v = rnd({1, 2, 7, 4}, 100), rnd({1, 2, 7, 4}, 101), rnd({1, 2, 7, 4}, 102)
    assert.is_true(maxdiff(F.attention(q, k, v, {causal = false}), F.attention(q, k, v)) == 0)
    assert.is_true(maxdiff(F.attention(q, k, v, {causal = true}), F.attention(q, k, v)) > 1e-3)
  end)
end

describe("F.attention causal (cpu)", function() suite("cpu") end)

local info = bert.backend_info().vulkan
if info.available then
  describe("F.attention causal (vulkan)", function() suite("vulkan") end)
else
  describe("F.attention causal (vulkan)", function() pending(require("spec.support.optional").no_vulkan()) end)
end
