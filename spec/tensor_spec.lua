-- Tensor core: creation, views, elementwise ops with broadcasting,
-- reductions, matmul, indexing, RNG, memory and error messages, each
-- checked against the naive references in spec/support/naive.lua.
local bert = require("bert")
local N = require("spec.support.naive")

local function randn(shape, seed) return bert.randn(shape, {seed = seed or 1}) end

describe("tensor creation", function()
  it("builds from nested tables, float32 by default", function()
    local t = bert.tensor({{1, 2, 3}, {4, 5, 6}})
    assert.same({2, 3}, t:shape())
    assert.equal("float32", t:dtype())
    assert.equal("cpu", t:device())
    assert.equal(6, t:numel())
    assert.same({{1, 2, 3}, {4, 5, 6}}, t:totable())
    local i = bert.tensor({7, -8}, "int32")
    assert.equal("int32", i:dtype())
    assert.same({7, -8}, i:totable())
    assert.equal(math.type(i:totable()[1]), "integer")
  end)

  it("makes 0-d tensors from numbers and reads them with item", function()
    local s = bert.tensor(2.5)
    assert.same({}, s:shape())
    assert.equal(2.5, s:item())
    assert.equal(2.5, s:totable())
  end)

  it("fills zeros, ones, full, empty with shapes as tables or sizes", function()
    assert.same({{0, 0}, {0, 0}}, bert.zeros({2, 2}):totable())
    assert.same({{0, 0}, {0, 0}}, bert.zeros(2, 2):totable())
    assert.same({1, 1, 1}, bert.ones({3}):totable())
    assert.same({{7, 7}}, bert.full({1, 2}, 7):totable())
    assert.equal("int32", bert.full({2}, 3, "int32"):dtype())
    assert.equal("int32", bert.zeros({2}, {dtype = "int32"}):dtype())
    assert.same({0, 0}, bert.empty({2}):totable())
    assert.same({0}, bert.zeros({0, 5}):shape() and {bert.zeros({0, 5}):numel()})
  end)

  it("arange and eye", function()
    assert.same({0, 1, 2, 3}, bert.arange(4):totable())
    assert.equal("int32", bert.arange(4):dtype())
    assert.same({2, 4, 6}, bert.arange(2, 8, 2):totable())
    assert.tensor_near({0, 0.5, 1, 1.5}, bert.arange(0, 2, 0.5))
    assert.equal("float32", bert.arange(0, 2, 0.5):dtype())
    assert.same({}, bert.arange(5, 1):totable())
    assert.same({{1, 0, 0}, {0, 1, 0}}, bert.eye(2, 3):totable())
    assert.same({{1, 0}, {0, 1}}, bert.eye(2):totable())
  end)

  it("prints values, shape and dtype, truncating large tensors", function()
    local s = tostring(bert.tensor({{1, 2}, {3, 4}}))
    assert.truthy(s:find("[[1, 2],", 1, true))
    assert.truthy(s:find("bert.Tensor [2 x 2] float32", 1, true))
    local big = tostring(bert.arange(10000):view(100, 100))
    assert.truthy(big:find("...", 1, true))
    assert.truthy(big:find("9999", 1, true))
    assert.truthy(#big < 2000)
    assert.truthy(tostring(bert.tensor(1.5)):find("1.5000", 1, true))
  end)
end)

describe("random numbers", function()
  it("are reproducible from a seed and differ across seeds", function()
    assert.same(bert.randn({50}, {seed = 3}):totable(), bert.randn({50}, {seed = 3}):totable())
    assert.are_not.same(bert.randn({50}, {seed = 3}):totable(), bert.randn({50}, {seed = 4}):totable())
    assert.same(bert.rand({9}, {seed = 5}):totable(), bert.rand({9}, {seed = 5}):totable())
  end)

  it("do not depend on the thread count", function()
    local n = 100000 -- above the parallel threshold
    local before = bert.get_num_threads()
    bert.set_num_threads(1)
    local a = bert.randn({n}, {seed = 11})
    local u = bert.rand({n}, {seed = 11})
    local r = bert.randint(0, 1000, {n}, {seed = 11})
    bert.set_num_threads(4)
    local b = bert.randn({n}, {seed = 11})
    local v = bert.rand({n}, {seed = 11})
    local s = bert.randint(0, 1000, {n}, {seed = 11})
    bert.set_num_threads(before)
    assert.equal(0, a:sub(b):abs():max():item())
    assert.equal(0, u:sub(v):abs():max():item())
    assert.equal(0, r:sub(s):abs():max():item())
  end)

  it("have the right distributions", function()
    local x = bert.randn({200000}, {seed = 1})
    assert.near(0, x:mean():item(), 0.01)
    assert.near(1, x:var():item(), 0.02)
    local u = bert.rand({200000}, {seed = 2})
    assert.near(0.5, u:mean():item(), 0.01)
    assert.truthy(u:min():item() >= 0 and u:max():item() < 1)
    local g = bert.randn({100000}, {seed = 1, mean = 3, std = 0.5})
    assert.near(3, g:mean():item(), 0.01)
    assert.near(0.25, g:var():item(), 0.01)
    local k = bert.randint(-3, 4, {70000}, {seed = 9})
    assert.equal(-3, k:min():item())
    assert.equal(3, k:max():item())
    assert.near(0, k:float():mean():item(), 0.05)
  end)

  it("advance the default generator between unseeded calls", function()
    bert.manual_seed(42)
    local a, b = bert.rand({5}), bert.rand({5})
    assert.are_not.same(a:totable(), b:totable())
    bert.manual_seed(42)
    assert.same(a:totable(), bert.rand({5}):totable())
  end)
end)

describe("views", function()
  it("share storage with their base", function()
    local t = bert.zeros({2, 3})
    local v = t:view(3, 2)
    v:set(5, 3, 2)
    assert.equal(5, t:get(2, 3))
    local tr = t:transpose(1, 2)
    tr:set(9, 1, 2)
    assert.equal(9, t:get(2, 1))
    t:select(1, 1):fill_(4)
    assert.same({{4, 4, 4}, {9, 0, 5}}, t:totable())
    t:narrow(2, 2, 2):fill_(1)
    assert.same({{4, 1, 1}, {9, 1, 1}}, t:totable())
    t:unsqueeze(1):squeeze():select(2, 1):zero_()
    assert.same({{0, 1, 1}, {0, 1, 1}}, t:totable())
  end)

  it("reshape, transpose, permute, narrow, select, squeeze, unsqueeze, expand", function()
    local t = bert.arange(24):view(2, 3, 4)
    assert.same({4, 6}, t:view(4, -1):shape())
    assert.same({3, 2, 4}, t:transpose(1, 2):shape())
    local p = t:permute(3, 1, 2)
    assert.same({4, 2, 3}, p:shape())
    assert.equal(t:get(2, 3, 4), p:get(4, 2, 3))
    assert.equal(t:get(1, 2, 3), p:get(3, 1, 2))
    assert.same({{{4, 5, 6, 7}, {8, 9, 10, 11}}}, t:narrow(1, 1, 1):narrow(2, 2, 2):totable())
    assert.same({12, 13, 14, 15}, t:select(1, 2):select(1, 1):totable())
    assert.same({3, 4}, t:select(1, -1):shape())
    assert.same({2, 1, 3, 4}, t:unsqueeze(2):shape())
    assert.same({2, 3, 4, 1}, t:unsqueeze(-1):shape())
    assert.same({2, 3, 4}, t:unsqueeze(2):squeeze(2):shape())
    local e = bert.tensor({{1}, {2}}):expand(2, 3)
    assert.same({{1, 1, 1}, {2, 2, 2}}, e:totable())
    assert.same({1, 0}, e:stride())
    assert.same({{{1, 2}}, {{1, 2}}}, bert.tensor({1, 2}):expand({2, 1, 2}):totable())
  end)

  it("reshape copies when a view is impossible, view refuses", function()
    local t = bert.arange(6):view(2, 3):t()
    assert.is_false(t:is_contiguous())
    assert.same({0, 3, 1, 4, 2, 5}, t:reshape(6):totable())
    assert.error_matches(function() t:view(6) end, "view: cannot view a non%-contiguous tensor %[3 x 2%]")
  end)

  it("contiguous, clone and copy_", function()
    local t = bert.arange(6):view(2, 3):t()
    local c = t:contiguous()
    assert.is_true(c:is_contiguous())
    assert.same(t:totable(), c:totable())
    local k = c:clone()
    k:fill_(0)
    assert.same({0, 3}, c:select(1, 1):totable())
    local d = bert.zeros({2, 3})
    d:copy_(bert.tensor({1, 2, 3}))
    assert.same({{1, 2, 3}, {1, 2, 3}}, d:totable())
    d:copy_(bert.tensor({{7, 8, 9}, {1, 2, 3}}, "int32"))
    assert.same({{7, 8, 9}, {1, 2, 3}}, d:totable())
    assert.same({1.5, 2}, bert.tensor({1.5, 2}):to("int32"):to("float32"):totable() and {1.5, 2})
    assert.same({1, 2}, bert.tensor({1.7, 2.2}):int():totable())
  end)

  it("split into views", function()
    local t = bert.arange(10)
    local parts = t:split(4)
    assert.equal(3, #parts)
    assert.same({8, 9}, parts[3]:totable())
    local q = bert.arange(12):view(2, 6):split({1, 2, 3}, 2)
    assert.same({{3, 4, 5}, {9, 10, 11}}, q[3]:totable())
    q[1]:fill_(-1)
    assert.error_matches(function() t:split({3, 3}) end, "split: sizes add up to 6 but dimension 1 has size 10")
  end)
end)

describe("elementwise ops", function()
  local cases = {
    {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{4, 1}, {1, 5}}, {{2, 1, 3}, {4, 1}}, {{3}, {}},
    {{1}, {2, 2}}, {{2, 3, 4, 5}, {3, 1, 5}},
  }
  local ops = {
    add = function(x, y) return x + y end, sub = function(x, y) return x - y end,
    mul = function(x, y) return x * y end, div = function(x, y) return x / y end,
    maximum = math.max, minimum = math.min,
    pow = function(x, y) return math.abs(x) ^ y end,
  }
  for name, f in pairs(ops) do
    it(name .. " broadcasts like NumPy", function()
      for ci, c in ipairs(cases) do
        local a, b = randn(c[1], ci), randn(c[2], ci + 100)
        if name == "pow" then a = a:abs() end
        local expected = N.map2(N.from(a), N.from(b), f)
        local got = a[name](a, b)
        assert.same(expected.shape, got:shape())
        assert.tensor_near(expected.data, got, 1e-5)
      end
    end)
  end

  it("compare into int32 masks", function()
    local a, b = bert.tensor({{1, 2, 3}}), bert.tensor({{2}, {2}})
    assert.same({{0, 1, 0}, {0, 1, 0}}, a:eq(b):totable())
    assert.same({{1, 0, 1}, {1, 0, 1}}, a:ne(b):totable())
    assert.same({{1, 0, 0}, {1, 0, 0}}, a:lt(b):totable())
    assert.same({{1, 1, 0}, {1, 1, 0}}, a:le(b):totable())
    assert.same({{0, 0, 1}, {0, 0, 1}}, a:gt(b):totable())
    assert.same({{0, 1, 1}, {0, 1, 1}}, a:ge(b):totable())
    assert.equal("int32", a:gt(2):dtype())
  end)

  it("take numbers on either side through methods and operators", function()
    local a = bert.tensor({1, 2, 4})
    assert.same({3, 4, 6}, (a + 2):totable())
    assert.same({1, 0, -2}, (2 - a):totable())
    assert.same({0.5, 1, 2}, (a / 2):totable())
    assert.same({4, 2, 1}, (4 / a):totable())
    assert.same({-1, -2, -4}, (-a):totable())
    assert.same({1, 4, 16}, (a ^ 2):totable())
    assert.same({2, 4, 8}, (a * 2):totable())
    assert.same({2, 4, 8}, (2 * a):totable())
    assert.same({1, 4, 16}, (a * a):totable())
    assert.same({5, 10, 20}, a:add(a, 4):totable())   -- a + 4 * a
    assert.same({-3, -6, -12}, a:sub(a, 4):totable())
  end)

  it("follow the dtype rules", function()
    local i = bert.tensor({1, 2, 3}, "int32")
    assert.equal("int32", (i + 1):dtype())
    assert.equal("float32", (i + 0.5):dtype())
    assert.equal("float32", (i + bert.tensor({1, 1, 1})):dtype())
    assert.equal("float32", (i / 2):dtype())
    assert.same({0.5, 1, 1.5}, (i / 2):totable())
    assert.equal("int32", (-i):dtype())
    assert.equal("float32", i:exp():dtype())
    assert.same({2, 4, 6}, (i * 2):totable())
  end)

  it("have in-place forms that return self", function()
    local a = bert.tensor({{1, 2}, {3, 4}})
    local r = a:add_(bert.tensor({10, 20}))
    assert.equal(a, r)
    assert.same({{11, 22}, {13, 24}}, a:totable())
    a:mul_(2):sub_(2):div_(2)
    assert.same({{10, 21}, {12, 23}}, a:totable())
    a:neg_()
    assert.same({{-10, -21}, {-12, -23}}, a:totable())
    a:relu_()
    assert.same({{0, 0}, {0, 0}}, a:totable())
    local v = bert.zeros({2, 2})
    v:select(2, 1):add_(1)   -- through a strided view
    assert.same({{1, 0}, {1, 0}}, v:totable())
  end)

  it("unary math matches the reference", function()
    local x = randn({3, 7}, 7)
    local xd = N.from(x)
    local function gelu(v) return 0.5 * v * (1 + N.erf(v / math.sqrt(2))) end
    local function gelu_tanh(v)
      return 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ^ 3)))
    end
    local refs = {
      neg = function(v) return -v end, exp = math.exp, tanh = math.tanh,
      sigmoid = function(v) return 1 / (1 + math.exp(-v)) end,
      relu = function(v) return math.max(v, 0) end, gelu = gelu, abs = math.abs, erf = N.erf,
      silu = function(v) return v / (1 + math.exp(-v)) end,
    }
    for name, f in pairs(refs) do
      assert.tensor_near(N.map(xd, f).data, x[name](x), 2e-6)
    end
    assert.tensor_near(N.map(xd, gelu_tanh).data, x:gelu("tanh"), 2e-6)
    local p = x:abs():add(0.1)
    local pd = N.from(p)
    assert.tensor_near(N.map(pd, math.log).data, p:log(), 2e-6)
    assert.tensor_near(N.map(pd, math.sqrt).data, p:sqrt(), 2e-6)
    assert.tensor_near(N.map(pd, function(v) return 1 / math.sqrt(v) end).data, p:rsqrt(), 2e-6)
    -- sigmoid stays finite far out
    assert.same({0, 1}, bert.tensor({-200, 200}):sigmoid():totable())
  end)

  it("masked_fill and where", function()
    local x = bert.tensor({{1, 2, 3}, {4, 5, 6}})
    local mask = bert.tensor({1, 0, 1}, "int32")
    assert.same({{-1, 2, -1}, {-1, 5, -1}}, x:masked_fill(mask, -1):totable())
    assert.same({{1, 2, 3}, {4, 5, 6}}, x:totable())
    x:masked_fill_(x:gt(4), 0)
    assert.same({{1, 2, 3}, {4, 0, 0}}, x:totable())
    local w = bert.where(bert.tensor({{1}, {0}}, "int32"), bert.tensor({1, 2}), -5)
    assert.same({{1, 2}, {-5, -5}}, w:totable())
  end)

  it("runs the parallel path on large inputs", function()
    local a, b = randn({300, 400}, 1), randn({400}, 2)
    local s = a + b
    local ad, bd = a:totable(), b:totable()
    local st = s:totable()
    for _, i in ipairs({1, 150, 300}) do
      for _, j in ipairs({1, 200, 400}) do
        assert.near(ad[i][j] + bd[j], st[i][j], 1e-6)
      end
    end
    -- transposed (strided) operand on the parallel path
    local t = a:t():contiguous():t()
    assert.equal(0, (t - a):abs():max():item())
  end)
end)

describe("reductions", function()
  local x = randn({3, 4, 5}, 3)
  local xd = N.from(x)
  local function sum(l) local s = 0 for _, v in ipairs(l) do s = s + v end return s end
  local function mean(l) return sum(l) / #l end
  local function var(l) local m, s = mean(l), 0 for _, v in ipairs(l) do s = s + (v - m) ^ 2 end return s / (#l - 1) end
  local function max(l) return math.max(table.unpack(l)) end
  local function min(l) return math.min(table.unpack(l)) end
  local function argmax(l) local b = 1 for i, v in ipairs(l) do if v > l[b] then b = i end end return b - 1 end

  it("sum, mean, var, max, min, argmax over each dim, with keepdim", function()
    for d = 1, 3 do
      for _, keep in ipairs({false, true}) do
        for name, f in pairs({sum = sum, mean = mean, var = var, max = max, min = min, argmax = argmax}) do
          local expected = N.reduce(xd, d, f, keep)
          local got = x[name](x, d, keep)
          assert.same(expected.shape, got:shape())
          assert.tensor_near(expected.data, got, 1e-5)
        end
      end
    end
  end)

  it("reduce everything without a dim, and count dims from the end", function()
    assert.near(sum(xd.data), x:sum():item(), 1e-4)
    assert.same({}, x:sum():shape())
    assert.near(max(xd.data), x:max():item(), 0)
    assert.same(x:sum(3):totable(), x:sum(-1):totable())
    assert.same({1, 1, 1}, x:sum(nil, true):shape())
  end)

  it("max and min with a dim also return indices", function()
    local t = bert.tensor({{1, 5, 2}, {7, 0, 7}})
    local v, i = t:max(2)
    assert.same({5, 7}, v:totable())
    assert.same({1, 0}, i:totable())
    local w, j = t:min(1)
    assert.same({1, 0, 2}, w:totable())
    assert.same({0, 1, 0}, j:totable())
    assert.same({1, 0}, t:argmax(2):totable())
    assert.same({0, 1}, t:argmin(2):totable())
  end)

  it("var takes a correction, integers sum as integers", function()
    local t = bert.tensor({1, 2, 3, 4})
    assert.near(1.25, t:var(1, false, 0):item(), 1e-6)
    assert.near(5 / 3, t:var(1):item(), 1e-6)
    local i = bert.tensor({1, 2, 3}, "int32")
    assert.equal("int32", i:sum():dtype())
    assert.equal(6, i:sum():item())
    assert.equal("float32", i:mean():dtype())
  end)

  it("softmax and log_softmax over any dim", function()
    for d = 1, 3 do
      local expected = {}
      local e = N.map(xd, math.exp)
      local sums = N.reduce(e, d, sum, true)
      local got = x:softmax(d)
      local lgot = x:log_softmax(d)
      for p = 1, #xd.data do
        local idx = N.unravel(xd.shape, p)
        idx[d] = 1
        expected[p] = e.data[p] / sums.data[N.ravel(sums.shape, idx)]
      end
      assert.tensor_near(expected, got, 1e-5)
      assert.tensor_near(N.map({shape = xd.shape, data = expected}, math.log).data, lgot, 1e-5)
    end
    assert.tensor_near(x:softmax(3), x:softmax())
    -- large logits stay finite; an all -inf row is NaN, as in PyTorch
    assert.tensor_near({0, 1}, bert.tensor({-1e30, 1e30}):softmax())
    assert.tensor_near({0.5, 0.5}, bert.tensor({-3e38, -3e38}):softmax())
    assert.tensor_near({0 / 0, 0 / 0}, bert.tensor({-math.huge, -math.huge}):softmax())
  end)
end)

describe("matmul", function()
  it("multiplies 2-D matrices", function()
    local a, b = randn({5, 7}, 1), randn({7, 3}, 2)
    assert.tensor_near(N.matmul(N.from(a), N.from(b)).data, a:matmul(b), 1e-5)
    assert.same({5, 3}, bert.matmul(a, b):shape())
  end)

  it("uses transposed views directly, with the same results as copies", function()
    local a, w = randn({6, 8}, 3), randn({5, 8}, 4)
    local expected = N.matmul(N.from(a), N.from(w:t():contiguous()))
    assert.tensor_near(expected.data, a:matmul(w:t()), 1e-5)
    local at = randn({8, 6}, 5)
    assert.tensor_near(N.matmul(N.from(at:t():contiguous()), N.from(w:t():contiguous())).data,
      at:t():matmul(w:t()), 1e-5)
  end)

  it("batches with broadcast batch dims", function()
    local a, b = randn({2, 1, 4, 3}, 1), randn({3, 3, 5}, 2)
    local c = a:matmul(b)
    assert.same({2, 3, 4, 5}, c:shape())
    for i = 1, 2 do
      for j = 1, 3 do
        local expected = N.matmul(N.from(a:select(1, i):select(1, 1):contiguous()),
                                  N.from(b:select(1, j):contiguous()))
        assert.tensor_near(expected.data, c:select(1, i):select(1, j), 1e-5)
      end
    end
    -- [B, T, H] @ [H, O] (a linear layer) folds into one GEMM
    local x, w = randn({3, 4, 6}, 3), randn({6, 2}, 4)
    local y = x:matmul(w)
    for i = 1, 3 do
      assert.tensor_near(N.matmul(N.from(x:select(1, i):contiguous()), N.from(w)).data, y:select(1, i), 1e-5)
    end
    -- many small per-head products run in parallel
    local q, k = randn({4, 12, 16, 8}, 5), randn({4, 12, 16, 8}, 6)
    local s = q:matmul(k:transpose(-1, -2))
    assert.same({4, 12, 16, 16}, s:shape())
    assert.tensor_near(N.matmul(N.from(q:select(1, 3):select(1, 7):contiguous()),
      N.from(k:select(1, 3):select(1, 7):t():contiguous())).data, s:select(1, 3):select(1, 7), 1e-5)
  end)

  it("handles vectors like NumPy", function()
    local m, v = randn({3, 4}, 1), randn({4}, 2)
    assert.same({3}, m:matmul(v):shape())
    assert.same({}, v:matmul(v):shape())
    assert.near(N.reduce(N.map(N.from(v), function(x) return x * x end), 1,
      function(l) local s = 0 for _, e in ipairs(l) do s = s + e end return s end).data[1], v:matmul(v):item(), 1e-5)
    assert.same({3}, randn({4}, 3):matmul(randn({4, 3}, 4)):shape())
  end)

  it("agrees across GEMM providers", function()
    local a, b = randn({64, 96}, 1), randn({96, 80}, 2)
    local results, saved = {}, bert.backend_info().gemm
    for _, p in ipairs(bert.gemm_providers()) do
      bert.set_gemm(p)
      results[#results + 1] = a:matmul(b)
    end
    for i = 2, #results do assert.tensor_near(results[1], results[i], 1e-5) end
    bert.set_gemm(saved)
  end)

  it("handles empty dims", function()
    assert.same({{0, 0}, {0, 0}}, bert.zeros({2, 0}):matmul(bert.zeros({0, 2})):totable())
    assert.same({0, 2}, bert.zeros({0, 3}):matmul(bert.zeros({3, 2})):shape())
  end)
end)

describe("indexing and joining", function()
  it("index_select picks rows with 0-based indices", function()
    local t = bert.arange(12):view(4, 3)
    local idx = bert.tensor({3, 0, 3}, "int32")
    assert.same({{9, 10, 11}, {0, 1, 2}, {9, 10, 11}}, t:index_select(1, idx):totable())
    assert.same({{2, 0}, {5, 3}, {8, 6}, {11, 9}}, t:index_select(2, bert.tensor({2, 0}, "int32")):totable())
  end)

  it("gather and scatter_add", function()
    local t = bert.tensor({{1, 2, 3}, {4, 5, 6}})
    local idx = bert.tensor({{2, 0}, {1, 1}}, "int32")
    assert.same({{3, 1}, {5, 5}}, t:gather(2, idx):totable())
    assert.same({{4, 2, 3}}, t:gather(1, bert.tensor({{1, 0, 0}}, "int32")):totable())
    local z = bert.zeros({2, 3})
    z:scatter_add_(2, idx, bert.tensor({{10, 20}, {30, 40}}))
    assert.same({{20, 0, 10}, {0, 70, 0}}, z:totable())
    local rows = bert.zeros({3, 2}):scatter_add(1, bert.tensor({{0, 2}, {0, 0}}, "int32"), bert.ones({2, 2}))
    assert.same({{2, 1}, {0, 0}, {0, 1}}, rows:totable())
  end)

  it("cat and stack", function()
    local a, b = bert.tensor({{1, 2}}), bert.tensor({{3, 4}, {5, 6}})
    assert.same({{1, 2}, {3, 4}, {5, 6}}, bert.cat({a, b}, 1):totable())
    assert.same({{1, 2, 1, 2}}, bert.cat({a, a}, 2):totable())
    assert.same({{{1, 2}}, {{1, 2}}}, bert.stack({a, a}):totable())
    assert.same({{{1, 2}, {1, 2}}}, bert.stack({a, a}, 2):totable())
    assert.same({1, 2, 3}, bert.stack({a, a, a}, -1):shape())
  end)
end)

describe("memory", function()
  it("keeps freed blocks for reuse up to a limit that follows the peak bytes in use, or a fixed one", function()
    local auto = bert.cache_limit()
    -- 2 GB, or more after a larger peak (at most half the machine's memory)
    assert.is_true(auto >= 2 ^ 30, "automatic limit " .. auto)
    collectgarbage()
    bert.set_cache_limit(0)                         -- fixed: cache nothing
    assert.equal(0, bert.cache_limit())
    assert.equal(0, bert.memory_cached())
    bert.zeros({1024, 1024}):free()
    assert.equal(0, bert.memory_cached())
    bert.set_cache_limit(64 * 2 ^ 20)               -- fixed: 64 MB
    bert.zeros({1024, 1024}):free()                 -- 4 MB freed: kept
    assert.is_true(bert.memory_cached() >= 4 * 2 ^ 20)
    bert.set_cache_limit("auto")
    assert.equal(auto, bert.cache_limit())
    bert.empty_cache()
    assert.equal(0, bert.memory_cached())
    assert.error_matches(function() bert.set_cache_limit(-1) end, "set_cache_limit.*non%-negative, got %-1")
    assert.error_matches(function() bert.set_cache_limit("big") end, "set_cache_limit.*'auto', got 'big'")
  end)

  it("gives cached blocks back before taking fresh memory past the limit (in use + cached)", function()
    collectgarbage()
    bert.empty_cache()
    local MB = 2 ^ 20
    local base = bert.memory_in_use()
    bert.set_cache_limit(base + 20 * MB)
    -- 2, 4, 6 and 8 MB (four size classes), all freed into the cache
    for k = 1, 4 do bert.zeros({1024, 512 * k}):free() end
    local cached = bert.memory_cached()
    assert.is_true(cached >= 20 * MB, "cached " .. cached)
    -- 10 MB misses: the oldest blocks go until in use + cached + new fit 20 MB
    local t = bert.zeros({1024, 2560})
    assert.is_true(bert.memory_in_use() - base + bert.memory_cached() <= 20 * MB,
      string.format("in use %d + cached %d", bert.memory_in_use() - base, bert.memory_cached()))
    assert.is_true(bert.memory_cached() > 0)   -- only as many as needed
    t:free()
    bert.set_cache_limit("auto")
    bert.empty_cache()
  end)

  it("puts blocks of 4 MB or more on 2 MB boundaries (huge pages), smaller ones on 64 bytes", function()
    local core = require("bert.core")
    local MB = 2 ^ 20
    for _, n in ipairs({3, 5, 17, 100}) do   -- MB: below, above, and bert.zeros' own mapping (>= 16)
      local t = bert.zeros({math.floor(n * MB / 4)})
      local align = n >= 4 and 2 * MB or 64
      assert.equal(0, core._data_address(t) % align, n .. " MB")
      t:fill_(1)
      assert.equal(math.floor(n * MB / 4), t:sum():item())
      t:free()
    end
    local e = bert.empty({1024, 1280})   -- 5 MB from the cache or fresh: aligned either way
    assert.equal(0, core._data_address(e) % (2 * MB))
    e:free()
  end)

  it("is accounted and released by free, <close> and the GC", function()
    collectgarbage()
    local base = bert.memory_in_use()
    local t = bert.zeros({1000, 1000})
    assert.equal(base + 4e6, bert.memory_in_use())
    t:free()
    t:free() -- idempotent
    assert.equal(base, bert.memory_in_use())
    assert.error_matches(function() return t:sum() end, "tensor has been freed")
    assert.truthy(tostring(t):find("freed"))
    do
      local c <close> = bert.zeros({1000})
      assert.equal(base + 4000, bert.memory_in_use())
    end
    assert.equal(base, bert.memory_in_use())
    local v = bert.zeros({500, 500}):t()   -- the view keeps the storage alive
    collectgarbage()
    assert.equal(base + 1e6, bert.memory_in_use())
    v = nil
    collectgarbage()
    assert.equal(base, bert.memory_in_use())
  end)

  it("lets loops allocate far more than RAM-sized totals without manual collection", function()
    local base = bert.memory_in_use()
    for _ = 1, 200 do local _ = bert.zeros({4 * 1024 * 1024}) end -- 3.2 GB in total
    assert.truthy(bert.memory_in_use() - base < 1024 * 1024 * 1024)
  end)
end)

describe("backend", function()
  it("reports the GEMM provider, threads and the OpenBLAS core", function()
    local info = bert.backend_info()
    assert.truthy(info.gemm == "openblas" or info.gemm == "onednn" or info.gemm == "bert")
    assert.equal("string", type(info.openblas_core))
    assert.truthy(info.threads >= 1)
    bert.set_gemm("openblas")
    assert.equal("openblas", bert.backend_info().gemm)
    assert.error_matches(function() bert.set_gemm("mkl") end, "invalid option 'mkl'")
    assert.error_matches(function() bert.set_num_threads(0) end, "thread count must be in 1..1024, got 0")
    assert.equal("string", type(bert.version))
  end)
end)

describe("errors", function()
  local function errs(pattern, f) assert.error_matches(f, pattern) end

  it("name the function, the argument and the shapes", function()
    errs("ragged nested table: row at {2} has 1 elements, expected 2", function() bert.tensor({{1, 2}, {3}}) end)
    errs("element at {1,2} is a string, expected a number", function() bert.tensor({{1, "x"}}) end)
    errs("ragged nested table: element at {2} is a number, expected a table", function() bert.tensor({{1}, 2}) end)
    errs("unknown dtype 'float64'", function() bert.tensor({1}, "float64") end)
    -- a misspelt option is named, not ignored ({sead = 1} drew unseeded numbers)
    errs("rand: unknown option 'sead' %(the options: dtype, seed, low, high%)", function() bert.rand({2}, {sead = 1}) end)
    errs("randn: unknown option 'low' %(the options: dtype, seed, mean, std%)", function() bert.randn({2}, {low = 1}) end)
    errs("randint: unknown option 'high'", function() bert.randint(0, 5, {2}, {high = 9}) end)
    errs("zeros: unknown option 'seed' %(the options: dtype%)", function() bert.zeros({2}, {seed = 1}) end)
    errs("arange: unknown option 'dtyp'", function() bert.arange(3, {dtyp = "int32"}) end)
    assert.are.same({2, 2}, bert.randn({2, 2}, {mean = 1, std = 2, seed = 3, dtype = "float32"}):shape())
    assert.are.equal("int32", bert.eye(2, {dtype = "int32"}):dtype())
    errs("not an integer, for an int32 tensor", function() bert.tensor({1.5}, "int32") end)
    errs("size %-1 of dimension 1 is negative in shape %[%-1%]", function() bert.zeros({-1}) end)
    errs("size %-2 of dimension 2 is negative", function() bert.ones(3, -2) end)
    errs("size 2 of the shape is x, expected an integer", function() bert.zeros({2, "x"}) end)
    errs("matmul: %[2 x 3%] @ %[4 x 5%]: inner dimensions differ %(3 vs 4%)",
      function() bert.zeros({2, 3}):matmul(bert.zeros({4, 5})) end)
    errs("matmul: expects float32 tensors, got int32", function() bert.zeros({2}, "int32"):matmul(bert.zeros({2})) end)
    errs("matmul: %[2 x 2 x 3%] @ %[3 x 3 x 1%]: batch dimensions cannot be broadcast",
      function() bert.zeros({2, 2, 3}):matmul(bert.zeros({3, 3, 1})) end)
    errs("add: shapes %[2 x 3%] and %[4%] cannot be broadcast %(dimension 2: 3 vs 4%)",
      function() return bert.zeros({2, 3}) + bert.zeros({4}) end)
    errs("add_: in%-place result %[3%] must have the broadcast shape %[2 x 3%]",
      function() bert.zeros({3}):add_(bert.zeros({2, 3})) end)
    errs("add_: in%-place result is int32 but the operation gives float32",
      function() bert.zeros({3}, "int32"):add_(0.5) end)
    errs("add_: cannot write in place into an expanded tensor",
      function() bert.zeros({1}):expand(3):add_(1) end)
    errs("bert.Tensor or number expected, got string", function() return bert.zeros({2}) + "x" end)
    errs("bert.Tensor expected, got table", function() bert.zeros({2}):matmul({}) end)
    errs("dimension 3 out of range for a 2D tensor", function() bert.zeros({2, 2}):sum(3) end)
    errs("dimension 0 out of range for a 2D tensor %(dims are 1%-based", function() bert.zeros({2, 2}):transpose(0, 1) end)
    errs("select: index 3 out of range for dimension 1 of size 2 in %[2 x 2%]", function() bert.zeros({2, 2}):select(1, 3) end)
    errs("narrow: range start 2, length 3 does not fit dimension 1 of size 2",
      function() bert.zeros({2, 2}):narrow(1, 2, 3) end)
    errs("view: shape %[5%] is invalid for a tensor of 4 elements %[2 x 2%]", function() bert.zeros({2, 2}):view(5) end)
    errs("view: only one dimension can be %-1", function() bert.zeros({2, 2}):view(-1, -1) end)
    errs("expand: cannot expand %[2%] to %[3%]: only size%-1 dimensions can grow", function() bert.zeros({2}):expand(3) end)
    errs("permute: the order is not a permutation", function() bert.zeros({2, 2}):permute(1, 1) end)
    errs("item: tensor %[2%] has 2 elements, expected exactly 1", function() bert.zeros({2}):item() end)
    errs("get: position 3 out of range 1..2 for dimension 2", function() bert.zeros({2, 2}):get(1, 3) end)
    errs("index_select: index 5 out of range %[0, 4%) for dimension 1",
      function() bert.zeros({4}):index_select(1, bert.tensor({5}, "int32")) end)
    errs("index_select: index must be an int32 tensor, got float32",
      function() bert.zeros({4}):index_select(1, bert.tensor({1})) end)
    errs("gather: index %-1 out of range", function() bert.zeros({2, 2}):gather(2, bert.tensor({{-1, 0}, {0, 0}}, "int32")) end)
    errs("scatter_add_: source is int32 but the tensor is float32",
      function() bert.zeros({2}):scatter_add_(1, bert.tensor({0}, "int32"), bert.tensor({1}, "int32")) end)
    errs("cat: tensor 2 %(%[3%] float32%) does not match tensor 1 %(%[2 x 2%] float32%)",
      function() bert.cat({bert.zeros({2, 2}), bert.zeros({3})}) end)
    errs("element 2 is a number, expected bert.Tensor", function() bert.cat({bert.zeros({2}), 3}) end)
    errs("stack: tensor 2 %[3%] differs in shape from tensor 1 %[2%]", function() bert.stack({bert.zeros({2}), bert.zeros({3})}) end)
    errs("max: cannot reduce an empty dimension", function() bert.zeros({0}):max(1) end)
    errs("randint: empty range %[5, 5%)", function() bert.randint(5, 5, {2}) end)
    errs("arange: invalid range", function() bert.arange(0, 5, 0) end)
    errs("masked_fill: mask %[3%] does not broadcast to the tensor %[2%]",
      function() bert.zeros({2}):masked_fill(bert.zeros({3}, "int32"), 1) end)
    errs("split: size %-1 at position 1 is negative", function() bert.zeros({2}):split({-1, 3}) end)
    errs("9 dimensions, at most 8 supported", function() bert.zeros({1, 1, 1, 1, 1, 1, 1, 1, 1}) end)
    errs("shape %[1048576 x 1048576 x 1048576%] is too large", function() bert.zeros({2^20, 2^20, 2^20}) end)
    errs("bad argument #1 to 'to' %(unknown device or dtype 'gpu'%)", function() bert.zeros({1}):to("gpu") end)
  end)
end)
