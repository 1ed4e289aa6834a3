local bert = require("bert")
-- F.attention over packed sequences (FlashAttention's varlen API):
-- q, k, v [total, A, d] and cu_seqlens = int32 {0, len1, len1 + len2, ...};
-- sequence b attends only within its rows.  Against the padded op run on
-- each sequence by itself (within 1e-5), with the causal flag, strided
-- views of a fused projection, dropout (the padded op's draws), gradients
-- by finite differences, and the errors.  On the CPU, and on Vulkan
-- (lavapipe here) when a device is present.
local F = bert.F
local DG = require("spec.support.device_grads")

local function randn(shape, seed) return bert.randn(shape, {seed = seed}) end
local function maxdiff(a, b) return (a:to("cpu") - b:to("cpu")):abs():max():item() end
local function cpu(t) return t:to("cpu") end
local function lit(s) return (s:gsub("%p", "%%%0")) end

local function offsets(lengths)
  local o = {0}
  for i, n in ipairs(lengths) do o[i + 1] = o[i] + n end
  return o
end

-- rows [first, first + n) of x [total, A, d] as [1, A, n, d]
local function as_batch(x, first, n)
  return x:narrow(1, first + 1, n):permute(2, 1, 3):unsqueeze(1)
end

-- the padded op on each sequence by itself, packed back into [total, A, d] (on the CPU)
local function per_sequence(q, k, v, lengths, opts)
  q, k, v = cpu(q), cpu(k), cpu(v)
  local parts, first = {}, 0
  for i, n in ipairs(lengths) do
    if n > 0 then
      local o = F.attention(as_batch(q, first, n), as_batch(k, first, n), as_batch(v, first, n), opts)
      parts[#parts + 1] = o:squeeze(1):permute(2, 1, 3)
    end
    first = first + n
  end
  return bert.cat(parts, 1)
end

local function suite(device)
  local function on(t) return t:to(device) end
  local function rnd(shape, seed) return on(randn(shape, seed)) end
  local function cu_of(lengths) return on(bert.tensor(offsets(lengths), "int32")) end

  it("equals the padded op on each sequence (lengths 1, 7, 33, 300, 2, 1; causal or not)", function()
    local lengths = {1, 7, 33, 300, 2, 1}
    local total = 344
    local q, k, v = rnd({total, 2, 8}, 1), rnd({total, 2, 8}, 2), rnd({total, 2, 8}, 3)
    for _, causal in ipairs({false, true}) do
      local got = F.attention(q, k, v, {cu_seqlens = cu_of(lengths), causal = causal})
      assert.same({total, 2, 8}, got:shape())
      local want = per_sequence(q, k, v, lengths, {causal = causal})
      assert.is_true(maxdiff(got, want) < 1e-5, "causal = " .. tostring(causal))
    end
    local got = F.attention(q, k, v, {cu_seqlens = cu_of(lengths), scale = 0.2})
    assert.is_true(maxdiff(got, per_sequence(q, k, v, lengths, {scale = 0.2})) < 1e-5)
  end)

  it("takes [total, H] projections viewed as [total, A, d], and empty sequences", function()
    local lengths = {5, 0, 12, 1}
    local total, A, d = 18, 3, 4
    local H = A * d
    local qkv = rnd({total, 3 * H}, 4)
    local function head(i) return qkv:narrow(2, i * H + 1, H):view(total, A, d) end
    local q, k, v = head(0), head(1), head(2)
    assert.is_false(q:is_contiguous())
    local got = F.attention(q, k, v, {cu_seqlens = cu_of(lengths), causal = true})
    local want = per_sequence(q, k, v, lengths, {causal = true})
    assert.is_true(maxdiff(got, want) < 1e-5)
  end)

  it("draws dropout as the padded op on the batch padded to the longest sequence", function()
    local lengths, T, A, d = {3, 9, 6}, 9, 2, 4
    local total = 18
    local q, k, v = rnd({total, A, d}, 5), rnd({total, A, d}, 6), rnd({total, A, d}, 7)
    -- the same rows in a padded [B, A, T, d] batch with a keep mask
    local function padded(x)
      x = cpu(x)
      local rows, first = {}, 0
      for b, n in ipairs(lengths) do
        local seq = as_batch(x, first, n)
        if n < T then seq = bert.cat({seq, bert.zeros({1, A, T - n, d})}, 3) end
        rows[b] = seq
        first = first + n
      end
      return on(bert.cat(rows, 1))
    end
    local mrows = {}
    for b, n in ipairs(lengths) do
      mrows[b] = {}
      for j = 1, T do mrows[b][j] = j <= n and 1 or 0 end
    end
    local mask = on(bert.tensor(mrows, "int32"))
    for _, causal in ipairs({false, true}) do
      bert.manual_seed(21)
      local got = F.attention(q, k, v, {cu_seqlens = cu_of(lengths), dropout = 0.3, causal = causal})
      bert.manual_seed(21)
      local pad = F.attention(padded(q), padded(k), padded(v), {mask = mask, dropout = 0.3, causal = causal})
      local first = 0
      for b, n in ipairs(lengths) do
        local want = pad:narrow(1, b, 1):narrow(3, 1, n):squeeze(1):permute(2, 1, 3)
        assert.is_true(maxdiff(got:narrow(1, first + 1, n), want) < 1e-5, "sequence " .. b)
        first = first + n
      end
      -- and none when not training
      local eval = F.attention(q, k, v, {cu_seqlens = cu_of(lengths), dropout = 0.3, training = false,
                                         causal = causal})
      assert.is_true(maxdiff(eval, per_sequence(q, k, v, lengths, {causal = causal})) < 1e-5)
    end
  end)

  it("has correct gradients (finite differences; a device: the cpu's), causal or not, with dropout", function()
    local cu = bert.tensor(offsets({1, 4, 2}), "int32")
    for _, causal in ipairs({false, true}) do
      DG.check(device, function(to)
        local c = to(cu)
        return function(a, b, x) return F.attention(a, b, x, {cu_seqlens = c, causal = causal}) end
      end, {randn({7, 2, 3}, 8), randn({7, 2, 3}, 9), randn({7, 2, 3}, 10)})
    end
    DG.check(device, function(to)
      local c = to(cu)
      return function(a, b, x)
        bert.manual_seed(4)
        return F.attention(a, b, x, {cu_seqlens = c, dropout = 0.25})
      end
    end, {randn({7, 1, 3}, 11), randn({7, 1, 3}, 12), randn({7, 1, 3}, 13)})
  end)

  it("gives the per-sequence gradients at lengths crossing blocks and tiles", function()
    local lengths = {130, 1, 290}
    local total = 421
    local inputs = {randn({total, 1, 8}, 15), randn({total, 1, 8}, 16), randn({total, 1, 8}, 17)}
    local cu = bert.tensor(offsets(lengths), "int32")
    for _, causal in ipairs({false, true}) do
      local g1, o1 = DG.grads(device, function(to)
        local c = to(cu)
        return function(q, k, v) return F.attention(q, k, v, {cu_seqlens = c, causal = causal}) end
      end, inputs)
      local g2, o2 = DG.grads("cpu", function()
        return function(q, k, v) return per_sequence(q, k, v, lengths, {causal = causal}) end
      end, inputs)
      assert.is_true(maxdiff(o1, o2) < 1e-5)
      for i = 1, 3 do assert.is_true(maxdiff(g1[i], g2[i]) < 1e-5, "input " .. i) end
    end
  end)

  it("names the argument and the values in its errors", function()
    local q = rnd({6, 2, 4}, 18)
    local function err(cu, opts, qq)
      opts = opts or {}
      opts.cu_seqlens = cu
      local ok, e = pcall(F.attention, qq or q, qq or q, qq or q, opts)
      assert.is_false(ok)
      return tostring(e)
    end
    assert.truthy(err(on(bert.tensor({1, 3, 6}, "int32"))):find(
      "attention: cu_seqlens must start at 0, got {1, 3, 6}", 1, true))
    assert.truthy(err(on(bert.tensor({0, 4, 2, 6}, "int32"))):find(
      "attention: cu_seqlens must be non-decreasing, got 2 after 4 (entries 2 and 3 of {0, 4, 2, 6})", 1, true))
    assert.truthy(err(on(bert.tensor({0, 3, 5}, "int32"))):find(
      "attention: cu_seqlens must end at the 6 packed tokens of query [6 x 2 x 4], got {0, 3, 5}", 1, true))
    assert.truthy(err(on(bert.tensor({0, 6}))):find(
      "attention: cu_seqlens must be an int32 [batch + 1] tensor of offsets (at least 2), got [2] float32", 1, true))
    assert.truthy(err(on(bert.tensor({0}, "int32"))):find("at least 2", 1, true))
    assert.truthy(err(on(bert.tensor({0, 6}, "int32")), {mask = on(bert.ones({1, 6}))}):find(
      "attention: mask and cu_seqlens do not go together", 1, true))
    assert.truthy(err(on(bert.tensor({0, 6}, "int32")), nil, rnd({1, 2, 6, 4}, 19)):find(
      lit("attention: with cu_seqlens, query, key and value must be float32 [total_tokens x heads x head_dim]"), 1))
    assert.error_matches(function() F.attention(q, q, q, {cu_seqlens = {0, 6}}) end,
      "attention: option 'cu_seqlens' must be a tensor, got table")
  end)
end

describe("F.attention cu_seqlens (cpu)", function() suite("cpu") end)

local info = bert.backend_info().vulkan
if info.available then
  describe("F.attention cu_seqlens (vulkan)", function() suite("vulkan") end)
else
  describe("F.attention cu_seqlens (vulkan)", function() pending(require("spec.support.optional").no_vulkan()) end)
end
