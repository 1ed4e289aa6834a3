-- The device agrees with the CPU or refuses as it does: one spec per
-- finding of the differential test of issue 12 (each failed before its
-- fix).  Vulkan runs on Mesa's lavapipe here; skipped without a device.
local bert = require("bert")
local F = bert.F

local info = bert.backend_info().vulkan
if not info.available then
  describe("vulkan agreement", function() pending(require("spec.support.optional").no_vulkan()) end)
  return
end

local function vk(t) return t:to("vulkan") end
local function cpu(t) return t:to("cpu") end
local function randn(shape, seed) return bert.randn(shape, {seed = seed}) end
local nan, inf = 0 / 0, math.huge

-- the error message of f() without the "file:line: " prefix Lua adds
local function err_of(f)
  local ok, e = pcall(f)
  assert.is_false(ok, "expected an error")
  return (tostring(e):gsub("^[^:]*:%d+: ", ""))
end

-- both raise, with the same message
local function same_refusal(f, ...)
  local args = {...}
  local dargs = {}
  for i, a in ipairs(args) do dargs[i] = type(a) == "userdata" and vk(a) or a end
  local ec = err_of(function() return f(table.unpack(args)) end)
  local ed = err_of(function() return f(table.unpack(dargs)) end)
  assert.equal(ec, ed)
  return ec
end

-- values equal, NaN where the other has NaN, infinities of the same sign
local function same_values(a, b, tol)
  a, b = cpu(a):totable(), cpu(b):totable()
  local function walk(x, y, path)
    if type(x) == "table" then
      assert.equal(#y, #x, path)
      for i = 1, #x do walk(x[i], y[i], path .. "[" .. i .. "]") end
      return
    end
    if y ~= y then assert.is_true(x ~= x, path .. ": expected NaN, got " .. tostring(x)) return end
    if y == inf or y == -inf then assert.equal(y, x, path) return end
    assert.is_true(math.abs(x - y) <= (tol or 0) * (1 + math.abs(y)),
                   path .. ": " .. tostring(x) .. " vs " .. tostring(y))
  end
  walk(a, b, "")
end

describe("vulkan refuses what the cpu refuses", function()
  it("cross_entropy: labels out of range, negative, no classes, wrong label shape", function()
    local logits = randn({4, 3}, 1)
    local msg = same_refusal(F.cross_entropy, logits, bert.tensor({0, 3, 1, 2}, "int32"))
    assert.truthy(msg:find("label 3 at position 2 is out of range for 3 classes", 1, true))
    msg = same_refusal(F.cross_entropy, logits, bert.tensor({0, 1, -2, 2}, "int32"))
    assert.truthy(msg:find("label -2 at position 3", 1, true))
    same_refusal(F.cross_entropy, randn({4, 0}, 2), bert.tensor({0, 0, 0, 0}, "int32"))
    same_refusal(F.cross_entropy, logits, bert.tensor({0, 1, 2}, "int32"))
    -- ignore_index rows are no error, on both
    local labels = bert.tensor({0, -100, 1, 2}, "int32")
    same_values(F.cross_entropy(vk(logits), vk(labels)), F.cross_entropy(logits, labels), 1e-5)
  end)

  it("embedding and index_select: ids out of range", function()
    local w = randn({5, 3}, 3)
    same_refusal(F.embedding, bert.tensor({1, 5}, "int32"), w)
    same_refusal(F.embedding, bert.tensor({-1}, "int32"), w)
    same_refusal(function(t, i) return t:index_select(1, i) end, w, bert.tensor({0, 7}, "int32"))
  end)

  it("layer_norm with a negative eps or an int32 weight; bias_gelu on int32 or 0-d input", function()
    local x = randn({2, 4}, 4)
    same_refusal(F.layer_norm, x, bert.ones({4}), bert.zeros({4}), -1e-5)
    same_refusal(F.layer_norm, x, bert.ones({4}, "int32"), bert.zeros({4}), 1e-5)
    same_refusal(F.bias_gelu, bert.ones({2, 4}, "int32"), bert.zeros({4}))
    same_refusal(F.bias_gelu, bert.tensor(1.0), nil)
  end)

  it("attention over more keys than one invocation may loop over: refused, not wrong", function()
    local q, k = randn({1, 1, 1, 4}, 23), randn({1, 1, 40000, 4}, 24)
    local e = err_of(function() return F.attention(vk(q), vk(k), vk(k)) end)
    assert.truthy(e:find("attention: not supported on device vulkan (more than 32768 keys)", 1, true), e)
    assert.equal(4, F.attention(q, k, k):numel())
  end)

  it("F.attention_rel and F.dropout_rows refuse in their front-ends; t:set, a host write, by name", function()
    local q = vk(randn({1, 2, 3, 4}, 30))
    local e = err_of(function() return F.attention_rel(q, q, q, {kr = vk(randn({2, 5, 4}, 31)),
                                                                 rows = bert.zeros({3, 3}, "int32")}) end)
    assert.truthy(e:find("attention_rel: not supported on device vulkan", 1, true), e)
    e = err_of(function() return F.dropout_rows(vk(randn({2, 4}, 32)), 0.1, true, bert.tensor({0, 1}, "int32"), 1, 2) end)
    assert.truthy(e:find("dropout_rows: not supported on device vulkan", 1, true), e)
    e = err_of(function() return q:set(1, 1, 1, 1, 1) end)
    assert.truthy(e:find("set: argument #1 is a vulkan tensor, but 'set' runs on the cpu only", 1, true), e)
  end)

  it("save_safetensors writes device tensors from host copies (in C, no Lua wrapper)", function()
    local a = randn({3, 4}, 25)
    local path = os.tmpname()
    assert.is_true(bert.save_safetensors(path, {w = vk(a), ids = bert.tensor({1, 2}, "int32")}))
    local back = bert.load_safetensors(path)
    os.remove(path)
    assert.same(a:totable(), back.w:totable())
    assert.equal("cpu", back.w:device())
  end)

  it("attention with no keys", function()
    local q, k = randn({1, 1, 2, 4}, 5), bert.zeros({1, 1, 0, 4})
    same_refusal(F.attention, q, k, k)
  end)
end)

describe("vulkan agrees with the cpu", function()
  it("sums 17,000,000 ones (kernel loops are split, not cut at 65,535 iterations) #slow", function()
    assert.equal(17000000, bert.ones({17000000}):to("vulkan"):sum():item())
  end)

  it("bias, embedding and layer-norm gradients over more than 65,535 rows #slow", function()
    local R = 70000
    local x, w, b = randn({R, 2}, 6), randn({3, 2}, 7), randn({3}, 8)
    local function grads(dev)
      local mv = dev and vk or function(t) return t end
      local xs, ws, bs = mv(x):requires_grad(true), mv(w):requires_grad(true), mv(b):requires_grad(true)
      F.linear(xs, ws, bs):sum():backward()
      return bs:grad(), ws:grad()
    end
    local bc, wc = grads(false)
    local bd, wd = grads(true)
    same_values(bd, bc, 1e-4)
    same_values(wd, wc, 1e-4)
    local ids = bert.randint(0, 4, {R}, {seed = 9})
    local e = randn({4, 2}, 10)
    local ec, ed = e:clone():requires_grad(true), vk(e):requires_grad(true)
    F.embedding(ids, ec):sum():backward()
    F.embedding(vk(ids), ed):sum():backward()
    same_values(ed:grad(), ec:grad(), 1e-5)
    local g, bt = bert.ones({2}), bert.zeros({2})
    local gc, gd = g:clone():requires_grad(true), vk(g):requires_grad(true)
    F.layer_norm(x, gc, bt, 1e-5):mul(x):sum():backward()
    F.layer_norm(vk(x), gd, vk(bt), 1e-5):mul(vk(x)):sum():backward()
    same_values(gd:grad(), gc:grad(), 1e-4)
  end)

  it("matmul with K above 1M (the GEMM loop splits K) #slow", function()
    local K = 1100000
    local a, b = randn({1, K}, 30), randn({K, 2}, 31)
    same_values(vk(a):matmul(vk(b)), a:matmul(b), 1e-4)
  end)

  it("reads a non-contiguous bias as the cpu does", function()
    local x, w, b = randn({3, 4}, 11), randn({5, 4}, 12), randn({5, 2}, 13)
    same_values(F.linear(vk(x), vk(w), vk(b):select(2, 1)), F.linear(x, w, b:select(2, 1)), 1e-5)
  end)

  it("int32 arithmetic is exact above 2^24 and wraps as the cpu", function()
    local a = bert.tensor({16777217, 2147483647, -2147483648, 5, -7}, "int32")
    local b = bert.tensor({1, 1, -1, 16777219, 3}, "int32")
    local da, db = vk(a), vk(b)
    for _, op in ipairs({"add", "sub", "mul", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge"}) do
      assert.same(a[op](a, b):totable(), cpu(da[op](da, db)):totable(), op)
    end
    for _, op in ipairs({"neg", "abs", "relu"}) do
      assert.same(a[op](a):totable(), cpu(da[op](da)):totable(), op)
    end
    assert.same((a + 1):totable(), cpu(da + 1):totable())
    assert.same(a:sum():item(), da:sum():item())
    assert.same(a:max():item(), da:max():item())
    assert.same(a:min():item(), da:min():item())
    local f = bert.zeros({3}, "int32"):fill_(16777217)
    assert.same(f:totable(), cpu(vk(bert.zeros({3}, "int32")):fill_(16777217)):totable())
  end)

  it("keeps NaN and special values as the cpu does", function()
    local a = bert.tensor({nan, 1, -inf, 2, 0, -0.0})
    local b = bert.tensor({3, nan, 1, inf, -0.0, 0})
    local da, db = vk(a), vk(b)
    same_values(da:maximum(db), a:maximum(b))
    same_values(da:minimum(db), a:minimum(b))
    same_values(vk(bert.tensor({1, nan, 3})):max(), bert.tensor({1, nan, 3}):max())
    same_values(vk(bert.tensor({1, nan, 3})):min(), bert.tensor({1, nan, 3}):min())
    assert.equal(bert.tensor({1, nan, 3}):argmax():item(), vk(bert.tensor({1, nan, 3})):argmax():item())
    assert.equal(bert.tensor({1, nan, 3}):argmin():item(), vk(bert.tensor({1, nan, 3})):argmin():item())
    same_values(vk(bert.tensor({nan, inf, -inf, 20})):tanh(), bert.tensor({nan, inf, -inf, 20}):tanh(), 1e-6)
    local x = bert.tensor({-2, -2, 0, 0, -0.0, inf, -inf, nan, 1, 2})
    local y = bert.tensor({0.5, 3, -1, 0, -1, -1, 3, 0, nan, -inf})
    same_values(vk(x):pow(vk(y)), x:pow(y), 1e-6)
  end)

  it("dropout keeps a dropped NaN as NaN, as the cpu does", function()
    local x = bert.full({64}, nan)
    bert.manual_seed(3)
    local yc = F.dropout(x, 0.5, true)
    bert.manual_seed(3)
    local yd = F.dropout(vk(x), 0.5, true)
    same_values(yd, yc)
  end)

  it("masked keys get a zero dK and dV, as on the cpu", function()
    local q, k, v = randn({1, 1, 3, 4}, 14), randn({1, 1, 5, 4}, 15), randn({1, 1, 5, 4}, 16)
    local mask = bert.tensor({{1, 1, 0, 1, 0}}, "int32")
    local function grads(mv)
      local ks, vs = mv(k):requires_grad(true), mv(v):requires_grad(true)
      F.attention(mv(q), ks, vs, {mask = mv(mask)}):sum():backward()
      return ks:grad(), vs:grad()
    end
    local kc, vc = grads(function(t) return t end)
    local kd, vd = grads(vk)
    same_values(kd, kc, 1e-4)
    same_values(vd, vc, 1e-4)
  end)

  it("copy_ between overlapping parts of one tensor gives the memmove result", function()
    local a = bert.arange(0, 10):float()
    local d = vk(a)
    a:narrow(1, 2, 8):copy_(a:narrow(1, 1, 8))
    d:narrow(1, 2, 8):copy_(d:narrow(1, 1, 8))
    assert.same(a:totable(), cpu(d):totable())
    local m = bert.arange(0, 16):float():view({4, 4})
    local dm = vk(m)
    m:copy_(m:t())
    dm:copy_(dm:t())
    assert.same(m:totable(), cpu(dm):totable())
  end)

  it("a constant LayerNorm row gives beta at eps 1e-12 (no float cancellation)", function()
    local x = bert.full({2, 768}, 1000.1)
    x:narrow(1, 2, 1):fill_(12345.678)
    local g, b = randn({768}, 17), randn({768}, 18)
    same_values(F.layer_norm(vk(x), vk(g), vk(b), 1e-12), F.layer_norm(x, g, b, 1e-12), 1e-5)
    same_values(F.layer_norm(x, g, b, 1e-12), b:view({1, 768}):expand({2, 768}), 1e-6)
  end)

  it("LAMB with parameters near 1e20 keeps a finite trust ratio", function()
    local K = require("bert.core").optim_kernels
    local p, g = bert.full({1000}, 1e20), randn({1000}, 19)
    local m, v = bert.zeros({1000}), bert.zeros({1000})
    local pd, gd, md, vd = vk(p), vk(g), vk(m), vk(v)
    local tc = K.lamb(p, g, m, v, 1e-3, 0.9, 0.999, 1e-6, 0.01, true, 1, true)
    local td = K.lamb(pd, gd, md, vd, 1e-3, 0.9, 0.999, 1e-6, 0.01, true, 1, true)
    td = type(td) == "number" and td or td:item()
    assert.is_true(tc < inf and td < inf, "trust ratios " .. tostring(tc) .. " " .. tostring(td))
    assert.near(tc, td, 1e-4 * tc)
    same_values(pd, p, 1e-6)
  end)

  it("cross-entropy mean backward is linear in the rows (70,000 rows) #slow", function()
    -- timed against the forward over the same rows (one pass): the
    -- quadratic backward took 15 s here, about 100 forwards
    local logits, labels = randn({70000, 3}, 20), bert.randint(0, 3, {70000}, {seed = 21})
    local lc, ld = logits:clone():requires_grad(true), vk(logits):requires_grad(true)
    F.cross_entropy(lc, labels):backward()
    local dl = vk(labels)
    local t0 = os.clock()
    local loss = F.cross_entropy(ld, dl)
    loss:item()
    local t_fwd = os.clock() - t0
    t0 = os.clock()
    loss:backward()
    local g = cpu(ld:grad())
    local t_bwd = os.clock() - t0
    assert.is_true(t_bwd < 10 * t_fwd + 1, string.format("backward %.2f s, forward %.2f s", t_bwd, t_fwd))
    same_values(g, lc:grad(), 1e-4)
  end)

  it("reads back a permuted 5-D tensor", function()
    local a = randn({2, 3, 2, 3, 2}, 22)
    local p = a:permute({5, 3, 1, 4, 2})
    assert.same(p:contiguous():totable(), cpu(vk(a):permute({5, 3, 1, 4, 2})):totable())
  end)

  it("backward through narrow and select of an empty tensor", function()
    for _, mv in ipairs({function(t) return t end, vk}) do
      local x = mv(bert.zeros({2, 3, 0})):requires_grad(true)
      x:select(2, 2):sum():backward()
      assert.same({2, 3, 0}, x:grad():shape())
      local y = mv(bert.zeros({2, 0, 3})):requires_grad(true)
      y:narrow(3, 1, 2):sum():backward()
      assert.same({2, 0, 3}, y:grad():shape())
    end
  end)
end)
