-- Vulkan backend: every kernel against the CPU op on small shapes
-- (including sizes that do not divide the tile sizes), relative error
-- <= 1e-4.  Runs on any Vulkan device (CI: Mesa's lavapipe); skipped with
-- a printed reason when there is none.
local bert = require("bert")
local F = bert.F

local info = bert.backend_info().vulkan
if not info.available then
  describe("vulkan", function()
    pending(require("spec.support.optional").no_vulkan())
  end)
  io.stderr:write("vulkan_spec: skipped: ", tostring(info.reason), "\n")
  return
end

local function randn(shape, seed) return bert.randn(shape, {seed = seed}) end
local function vk(t) return t:to("vulkan") end
local function cpu(t) return t:to("cpu") end

-- max |a - b| / (max |b| + 1e-6), both moved to the cpu
local function relerr(a, b)
  a, b = cpu(a), cpu(b)
  assert.same(b:shape(), a:shape())
  if b:numel() == 0 then return 0 end
  return (a:float() - b:float()):abs():max():item() / (b:float():abs():max():item() + 1e-6)
end
local function close(a, b, tol) assert.is_true(relerr(a, b) <= (tol or 1e-4), "relative error " .. relerr(a, b)) end

-- f(inputs...) on the cpu and on the device, every input requiring grad:
-- the outputs and every gradient must agree
local function check(f, inputs, tol)
  local hc, hd = {}, {}
  for i, t in ipairs(inputs) do
    hc[i] = t:clone():requires_grad(true)
    hd[i] = vk(t):requires_grad(true)
  end
  local yc, yd = f(table.unpack(hc)), f(table.unpack(hd))
  close(yd, yc, tol)
  local dy = randn(yc:shape(), 999)
  ;(yc * dy):sum():backward()
  ;(yd * vk(dy)):sum():backward()
  for i = 1, #inputs do close(hd[i]:grad(), hc[i]:grad(), tol) end
end

describe("vulkan device", function()
  it("reports itself in backend_info", function()
    assert.is_string(info.device)
    assert.is_true(info.max_storage_buffer_range > 0)
    assert.is_true(info.max_shared_memory >= 16384)
  end)

  it("moves tensors both ways, keeping values, dtypes and views", function()
    local a = randn({3, 5}, 1)
    local d = vk(a)
    assert.equal("vulkan", d:device())
    assert.equal("cpu", a:device())
    assert.same(a:totable(), cpu(d):totable())
    local i = bert.tensor({{1, -2}, {3, 2147483647}}, "int32")
    assert.same(i:totable(), cpu(vk(i)):totable())
    assert.same(a:t():totable(), cpu(d:t()):totable())            -- strided views read back
    assert.same(a:narrow(2, 2, 3):totable(), cpu(d:narrow(2, 2, 3)):totable())
    assert.same(a:t():contiguous():totable(), cpu(d:t():contiguous()):totable())
    assert.near(a:get(2, 3), d:get(2, 3), 0)                       -- readers get a host copy
    assert.near(a:sum():item(), d:sum():item(), 1e-5)
    assert.is_string(tostring(d))
  end)

  it("refuses cpu-only ops on device tensors with a clear error", function()
    local d = vk(randn({2, 3}, 2))
    assert.has_error(function() d:var(1) end)
    local ok, err = pcall(function() return d:masked_fill(d:gt(0), 0) end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("vulkan"))
    ok, err = pcall(function() return d + randn({2, 3}, 3) end)      -- mixed devices
    assert.is_false(ok)
    assert.truthy(tostring(err):find("cpu"))
  end)

  it("copies between devices with copy_, to(dtype), clone and fill_", function()
    local a = randn({4, 3}, 4)
    local d = bert.vulkan.zeros({4, 3})
    d:copy_(a)
    close(d, a)
    local h = bert.zeros({4, 3})
    h:copy_(d)
    close(h, a)
    close(d:int(), a:int())
    close(d:clone():fill_(2.5), bert.full({4, 3}, 2.5))
  end)
end)

describe("vulkan elementwise", function()
  local shapes = {{{7, 5}, {7, 5}}, {{3, 1, 5}, {4, 1}}, {{2, 3, 4, 5}, {5}}, {{33}, {}}}
  for _, op in ipairs({"add", "sub", "mul", "div", "maximum", "minimum", "pow", "lt", "ge", "eq"}) do
    it(op .. " with broadcasting", function()
      for k, s in ipairs(shapes) do
        local a = randn(s[1], 10 + k)
        local b = #s[2] > 0 and randn(s[2], 20 + k) or bert.tensor(0.7)
        if op == "pow" then a = a:abs() + 0.1 end
        local want = a[op](a, b)
        local got = vk(a)[op](vk(a), #s[2] > 0 and vk(b) or b)
        close(got, want)
        assert.equal(want:dtype(), got:dtype())
      end
    end)
  end
  it("scalars, alpha and in-place forms", function()
    local a, b = randn({5, 6}, 30), randn({5, 6}, 31)
    close(vk(a) * 3 - 1, a * 3 - 1)
    close(vk(a):add(vk(b), 0.5), a:add(b, 0.5))
    local d = vk(a)
    d:mul_(vk(b))
    close(d, a * b)
    close(vk(a):t() + vk(b):t(), a:t() + b:t())
  end)
  for _, op in ipairs({"neg", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "abs", "erf", "silu"}) do
    it(op, function()
      local a = randn({3, 17}, 40)
      if op == "log" or op == "sqrt" or op == "rsqrt" then a = a:abs() + 0.05 end
      close(vk(a)[op](vk(a)), a[op](a), 1e-4)
    end)
  end
  it("gelu tanh", function()
    local a = randn({9, 7}, 41)
    close(vk(a):gelu("tanh"), a:gelu("tanh"))
  end)
end)

describe("vulkan GEMM", function()
  it("matmul for all transpose cases and odd sizes", function()
    for _, s in ipairs({{1, 1, 1}, {7, 5, 3}, {65, 33, 129}, {130, 67, 70}}) do
      local M, K, N = s[1], s[2], s[3]
      local a, b = randn({M, K}, M), randn({K, N}, N)
      local at, bt = randn({K, M}, M + 1), randn({N, K}, N + 1)
      close(vk(a):matmul(vk(b)), a:matmul(b))
      close(vk(at):t():matmul(vk(b)), at:t():matmul(b))
      close(vk(a):matmul(vk(bt):t()), a:matmul(bt:t()))
      close(vk(at):t():matmul(vk(bt):t()), at:t():matmul(bt:t()))
    end
  end)
  it("batched and broadcast matmul, vectors", function()
    local a, b = randn({2, 3, 5, 4}, 1), randn({3, 4, 6}, 2)
    close(vk(a):matmul(vk(b)), a:matmul(b))
    local v = randn({4}, 3)
    close(vk(a):matmul(vk(v)), a:matmul(v))
    close(vk(v):matmul(vk(b)), v:matmul(b))
    local p = randn({2, 4, 3, 5}, 4):permute(1, 3, 2, 4)                  -- non-collapsible batch
    close(vk(randn({2, 4, 3, 5}, 4)):permute(1, 3, 2, 4):matmul(vk(randn({5, 2}, 5))), p:matmul(randn({5, 2}, 5)))
  end)
  it("fused bias and GELU epilogue (gemm and F.linear)", function()
    local x, w, b = randn({37, 20}, 5), randn({19, 20}, 6), randn({19}, 7)
    close(bert.vulkan.gemm(vk(x), vk(w), {tb = true, bias = vk(b)}), F.linear(x, w, b))
    close(bert.vulkan.gemm(vk(x), vk(w), {tb = true, bias = vk(b), gelu = true}), F.linear(x, w, b):gelu())
    local x3 = randn({2, 9, 20}, 8)
    close(F.linear(vk(x3), vk(w), vk(b)), F.linear(x3, w, b))
    close(F.linear(vk(x3), vk(w)), F.linear(x3, w))
  end)
end)

describe("vulkan reductions and softmax", function()
  local a = randn({5, 300, 3}, 50)
  for _, op in ipairs({"sum", "mean", "max", "min"}) do
    it(op .. " over each dim and over everything", function()
      for d = 1, 3 do
        close((vk(a)[op](vk(a), d)), (a[op](a, d)))
        close((vk(a)[op](vk(a), d, true)), (a[op](a, d, true)))
      end
      close(vk(a)[op](vk(a)), a[op](a))
    end)
  end
  it("max returns first indices like the cpu", function()
    local x = bert.tensor({{1, 3, 3}, {2, 0, 2}})
    local _, i = vk(x):max(2)
    assert.same({1, 0}, cpu(i):totable())
  end)
  it("softmax and log_softmax over any dim", function()
    for d = 1, 3 do
      close(vk(a):softmax(d), a:softmax(d))
      close(vk(a):log_softmax(d), a:log_softmax(d))
    end
  end)
end)

describe("vulkan nn kernels", function()
  it("layer norm with residual, forward and backward", function()
    local x, r, g, b = randn({6, 37}, 60), randn({6, 37}, 61), randn({37}, 62), randn({37}, 63)
    close(F.layer_norm(vk(x), vk(g), vk(b), 1e-5, vk(r)), F.layer_norm(x, g, b, 1e-5, r))
    close(F.layer_norm(vk(x), nil, nil, 1e-5), F.layer_norm(x, nil, nil, 1e-5))
    -- backward (dx, and dgamma / dbeta summed over the rows) against the cpu autograd
    check(function(xx, rr, gg, bb) return F.layer_norm(xx, gg, bb, 1e-5, rr) end, {x, r, g, b})
    check(function(xx) return F.layer_norm(xx, nil, nil, 1e-5) end, {x})
  end)
  it("bias + GELU forward and backward (erf and tanh)", function()
    local x, b = randn({7, 13}, 70), randn({13}, 71)
    for _, mode in ipairs({"none", "tanh"}) do
      close(F.bias_gelu(vk(x), vk(b), mode), F.bias_gelu(x, b, mode))
      -- backward: the GELU derivative kernel, the bias gradient from its column sums
      check(function(xx, bb) return F.bias_gelu(xx, bb, mode) end, {x, b})
    end
  end)
  it("cat and stack on the device: every dimension, strided inputs, int32, and the gradient's slices", function()
    local a, b = bert.randn({2, 3, 4}, {seed = 30}), bert.randn({2, 5, 4}, {seed = 31})
    local bt = bert.randn({2, 4, 5}, {seed = 32}):transpose(2, 3)   -- [2, 5, 4], not contiguous
    for _, case in ipairs({{{a, a}, 1}, {{a, b, bt}, 2}, {{a, a:clone()}, 3}}) do
      local want = bert.cat(case[1], case[2])
      local on = {}
      for k, t in ipairs(case[1]) do on[k] = t:to("vulkan") end
      local got = bert.cat(on, case[2])
      assert.equal("vulkan", got:device())
      assert.are.same(want:shape(), got:shape())
      assert.equal(0, (got:to("cpu") - want):abs():max():item())
    end
    local i1, i2 = bert.tensor({{1, 2}}, "int32"), bert.tensor({{3, 4}, {5, 6}}, "int32")
    local ints = bert.cat({i1:to("vulkan"), i2:to("vulkan")}, 1):to("cpu")
    assert.are.same({{1, 2}, {3, 4}, {5, 6}}, ints:totable())
    local s = bert.stack({a:to("vulkan"), a:to("vulkan")}, 2)
    assert.are.same({2, 2, 3, 4}, s:shape())
    assert.equal(0, (s:to("cpu") - bert.stack({a, a}, 2)):abs():max():item())
    -- backward: each input's gradient is its slice of the output's
    local x, y = a:to("vulkan"):requires_grad(true), b:to("vulkan"):requires_grad(true)
    local w = bert.randn({2, 8, 4}, {seed = 33})
    local loss = (bert.cat({x, y}, 2) * w:to("vulkan")):sum()
    loss:backward()
    assert.equal(0, (x:grad():to("cpu") - w:narrow(2, 1, 3)):abs():max():item())
    assert.equal(0, (y:grad():to("cpu") - w:narrow(2, 4, 5)):abs():max():item())
    -- mixed devices are refused, naming the op
    local ok, err = pcall(bert.cat, {a, a:to("vulkan")}, 1)
    assert.is_false(ok)
    assert.matches("cat", tostring(err))
  end)

  it("embedding gather and gradient scatter", function()
    local w = randn({11, 6}, 80)
    local ids = bert.tensor({{1, 0, 10}, {3, 3, 1}}, "int32")
    close(F.embedding(vk(ids), vk(w)), F.embedding(ids, w))
    -- the scatter into a new gradient, then added into the one on the device (ids on the device)
    check(function(t)
      local i = t:device() == "vulkan" and vk(ids) or ids
      return F.embedding(i, t) * 2 + F.embedding(i, t)
    end, {w})
  end)
  it("cross entropy with ignore_index, forward and backward", function()
    local logits = randn({9, 7}, 90)
    local labels = bert.tensor({0, 6, -100, 3, 3, 1, -100, 2, 5}, "int32")
    for _, red in ipairs({"mean", "sum", "none"}) do
      close(F.cross_entropy(vk(logits), vk(labels), {reduction = red}),
            F.cross_entropy(logits, labels, {reduction = red}))
    end
    for _, red in ipairs({"mean", "sum", "none"}) do   -- backward, labels on the device
      check(function(l)
        return F.cross_entropy(l, l:device() == "vulkan" and vk(labels) or labels, {reduction = red})
      end, {logits})
    end
  end)
  it("dropout uses the cpu's Philox counters (same seed and offset, same mask)", function()
    local x = randn({5, 41}, 100)
    bert.set_rng_state(1234, 77)
    local want = F.dropout(x, 0.3, true)
    bert.set_rng_state(1234, 77)
    local got = F.dropout(vk(x), 0.3, true)
    close(got, want, 1e-6)
    check(function(t) bert.set_rng_state(1234, 77); return F.dropout(t, 0.3, true) end, {x}, 1e-6)
    assert.same(bert.rng_state(), select(1, bert.rng_state()))
  end)
  it("flash attention forward with key-padding mask and dropout", function()
    local q, k, v = randn({2, 3, 9, 8}, 110), randn({2, 3, 70, 8}, 111), randn({2, 3, 70, 8}, 112)
    local mask = bert.ones({2, 70}, "int32")
    for j = 50, 70 do mask:set(0, 2, j) end
    close(F.attention(vk(q), vk(k), vk(v)), F.attention(q, k, v))
    close(F.attention(vk(q), vk(k), vk(v), {mask = vk(mask)}), F.attention(q, k, v, {mask = mask}))
    local bias = randn({2, 1, 1, 70}, 113)
    close(F.attention(vk(q), vk(k), vk(v), {mask = vk(bias)}), F.attention(q, k, v, {mask = bias}))
    bert.set_rng_state(5, 0)
    local want = F.attention(q, k, v, {mask = mask, dropout = 0.2, training = true})
    bert.set_rng_state(5, 0)
    local got = F.attention(vk(q), vk(k), vk(v), {mask = vk(mask), dropout = 0.2, training = true})
    close(got, want)
  end)
  it("fused AdamW matches the cpu kernel", function()
    local p, g = randn({1000}, 120), randn({1000}, 121)
    local m, v = randn({1000}, 122) * 0.1, randn({1000}, 123):abs() * 0.01
    local dp, dg, dm, dv = vk(p), vk(g), vk(m), vk(v)
    local K = bert.core and bert.core.optim_kernels or require("bert.core").optim_kernels
    K.adamw(p, g, m, v, 1e-3, 0.9, 0.999, 1e-6, 0.01, true, 3)
    K.adamw(dp, dg, dm, dv, 1e-3, 0.9, 0.999, 1e-6, 0.01, true, 3)
    close(dp, p, 1e-6)
    close(dm, m, 1e-6)
    close(dv, v, 1e-6)
  end)
  it("fused LAMB matches the cpu kernel (trust ratio kept on the device)", function()
    local K = bert.core and bert.core.optim_kernels or require("bert.core").optim_kernels
    for _, c in ipairs({{n = 1000, wd = 0.01, adapt = true}, {n = 70001, wd = 0.01, adapt = true},
                        {n = 300, wd = 0, adapt = false}}) do
      local p, g = randn({c.n}, 124), randn({c.n}, 125)
      local m, v = randn({c.n}, 126) * 0.1, randn({c.n}, 127):abs() * 0.01
      local dp, dg, dm, dv = vk(p), vk(g), vk(m), vk(v)
      local want = K.lamb(p, g, m, v, 1e-3, 0.9, 0.999, 1e-6, c.wd, true, 3, c.adapt)
      local got = K.lamb(dp, dg, dm, dv, 1e-3, 0.9, 0.999, 1e-6, c.wd, true, 3, c.adapt)
      assert.equal("vulkan", got:device())
      assert.near(want, got:item(), 1e-5 * want)
      if not c.adapt then assert.equal(1, got:item()) end
      close(dp, p, 1e-6)
      close(dm, m, 1e-6)
      close(dv, v, 1e-6)
    end
    -- through the optimizer, past a forced binding range (chunks of the tensor)
    bert.vulkan.set_max_range(65536)
    local ok, err = pcall(function()
      local pc = randn({50000}, 128):requires_grad(true)
      local pd = vk(pc:detach()):requires_grad(true)
      local oc = bert.optim.LAMB({{name = "w", param = pc}}, {lr = 1e-2})
      local od = bert.optim.LAMB({{name = "w", param = pd}}, {lr = 1e-2})
      for step = 1, 3 do
        local g = randn({50000}, 130 + step)
        oc:zero_grad()
        od:zero_grad()
        ;(pc * g):sum():backward()
        ;(pd * vk(g)):sum():backward()
        oc:step(); od:step()
        assert.near(oc.trust_ratios.w, od.trust_ratios.w:item(), 1e-5 * oc.trust_ratios.w)
      end
      close(pd, pc, 1e-5)
    end)
    bert.vulkan.set_max_range(0)
    assert(ok, err)
  end)
end)

describe("vulkan autograd", function()
  it("linear with bias, through views (narrow, select, transpose, view)", function()
    check(function(x, w, b) return F.linear(x, w, b):narrow(2, 2, 3):transpose(1, 2) end,
          {randn({3, 4, 7}, 1), randn({9, 7}, 2), randn({9}, 3)})
    check(function(x, w) return F.linear(x:select(1, 2), w):view(-1) end, {randn({3, 5, 7}, 4), randn({6, 7}, 5)})
  end)
  it("binary ops with broadcasting reduce the gradient to each input's shape", function()
    for _, op in ipairs({"add", "sub", "mul", "div", "maximum"}) do
      check(function(a, b) return a[op](a, b) end, {randn({3, 4, 5}, 10), randn({4, 1}, 11):abs() + 0.5})
    end
    check(function(a) return a * 3 - 1 end, {randn({5}, 12)})
  end)
  it("unary ops, softmax, log_softmax, sum and mean", function()
    for _, op in ipairs({"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "abs", "erf", "neg", "silu"}) do
      check(function(a) return a[op](a) end, {randn({4, 9}, 20):abs() + 0.1})
    end
    check(function(a) return a:softmax(2) end, {randn({3, 11}, 21)})
    check(function(a) return a:log_softmax(1) end, {randn({6, 5}, 22)})
    check(function(a) return a:sum(2, true) + a:mean() end, {randn({3, 7}, 23)})
    check(function(a, b) return a:matmul(b) end, {randn({2, 5, 6}, 24), randn({6, 3}, 25)})
  end)
  it("index_select (the MLM gather), embedding and cross entropy with ignore_index", function()
    local idx = bert.tensor({4, 0, 4, 2}, "int32")
    check(function(h) return h:index_select(1, idx) end, {randn({6, 5}, 30)})
    local ids = bert.tensor({{1, 0, 9}, {3, 3, 1}}, "int32")
    check(function(w) return F.embedding(ids, w) end, {randn({10, 4}, 31)})
    local labels = bert.tensor({0, 6, -100, 3, 3}, "int32")
    for _, red in ipairs({"mean", "sum", "none"}) do
      check(function(l) return F.cross_entropy(l, labels, {reduction = red}) end, {randn({5, 7}, 32)})
    end
  end)
  it("layer norm with residual, bias + GELU, dropout", function()
    check(function(x, r, g, b) return F.layer_norm(x, g, b, 1e-5, r) end,
          {randn({5, 33}, 40), randn({5, 33}, 41), randn({33}, 42), randn({33}, 43)})
    check(function(x, b) return F.bias_gelu(x, b) end, {randn({6, 13}, 44), randn({13}, 45)})
    check(function(x) bert.set_rng_state(3, 11); return F.dropout(x, 0.3, true) end, {randn({4, 37}, 46)}, 1e-6)
  end)
  it("flash attention backward with key-padding mask and dropout", function()
    local mask = bert.ones({2, 19}, "int32")
    for j = 15, 19 do mask:set(0, 2, j) end
    check(function(q, k, v) return F.attention(q, k, v, {mask = mask}) end,
          {randn({2, 2, 7, 8}, 50), randn({2, 2, 19, 8}, 51), randn({2, 2, 19, 8}, 52)}, 2e-4)
    check(function(q, k, v)
      bert.set_rng_state(9, 0)
      return F.attention(q, k, v, {mask = mask, dropout = 0.25, training = true})
    end, {randn({2, 2, 19, 8}, 53), randn({2, 2, 19, 8}, 54), randn({2, 2, 19, 8}, 55)}, 2e-4)
  end)

  it("attention straight from the fused projection (F.attention_qkv: narrowed views on the device)", function()
    local mask = bert.ones({2, 19}, "int32")
    for j = 15, 19 do mask:set(0, 2, j) end
    check(function(x) return F.attention_qkv(x, 2, {mask = mask}) end, {randn({2, 19, 48}, 56)}, 2e-4)
  end)
end)

describe("vulkan training", function()
  local B, T = 2, 16
  local ids = bert.randint(0, 100, {B, T}, {seed = 1})
  local mask = bert.ones({B, T}, "int32")
  for j = 12, 16 do mask:set(0, 2, j) end
  local labels = bert.full({B, T}, -100):int()
  for _, p in ipairs({{1, 3}, {1, 5}, {2, 2}, {2, 7}, {1, 10}}) do labels:set(ids:get(p[1], p[2]), p[1], p[2]) end
  local batch = {input_ids = ids, attention_mask = mask, labels = labels, token_type_ids = bert.zeros({B, T}, "int32"),
                 next_sentence_label = bert.tensor({0, 1}, "int32")}
  local function build(device)
    bert.manual_seed(0)
    local m = bert.model("BertForPreTraining", "tiny")
    m:training()
    if device == "vulkan" then m:to("vulkan") end
    return m
  end

  it("a BERT-tiny training step on Vulkan matches the CPU step (loss and every gradient)", function()
    local mc, md = build("cpu"), build("vulkan")
    assert.equal("vulkan", md.flat_grad:device())
    bert.set_rng_state(7, 0)
    local oc = mc:forward(batch)
    bert.set_rng_state(7, 0)
    local od = md:forward(batch)
    assert.near(oc.loss:item(), od.loss:item(), 1e-4 * math.abs(oc.loss:item()))
    oc.loss:backward()
    od.loss:backward()
    local pc, pd = mc:named_parameters(), md:named_parameters()
    for i, e in ipairs(pc) do
      local gc, gd = e.param:grad(), pd[i].param:grad()
      assert.equal("vulkan", gd:device())
      -- absolute against the largest gradient of the tensor (key biases have ~0 gradients)
      local err = (cpu(gd) - gc):abs():max():item() / (gc:abs():max():item() + 1e-3)
      assert.is_true(err <= 1e-3, e.name .. " gradient error " .. err)
    end
    -- clipping and AdamW on the device buffers
    local nc = bert.optim.clip_grad_norm(mc:parameters(), 0.5)
    local nd = bert.optim.clip_grad_norm(md:parameters(), 0.5)
    assert.near(nc, nd, 1e-4 * nc)
    close(md.flat_grad, mc.flat_grad, 1e-3)
  end)

  it("50 steps of tiny pretraining on Vulkan track the CPU loss curve #slow", function()
    local curves = {}
    for _, device in ipairs({"cpu", "vulkan"}) do
      local m = build(device)
      local opt = bert.optim.AdamW(m, {lr = 1e-3, weight_decay = 0.01})
      local losses = {}
      bert.set_rng_state(11, 0)
      for step = 1, 50 do
        opt:zero_grad()
        local out = m:forward(batch)
        out.loss:backward()
        bert.optim.clip_grad_norm(opt, 1.0)
        opt:step()
        losses[step] = out.loss:item()
      end
      curves[device] = losses
    end
    for step = 1, 50 do
      assert.is_true(math.abs(curves.cpu[step] - curves.vulkan[step]) <= 2e-3 * curves.cpu[step] + 1e-3,
        string.format("step %d: cpu %.6f vulkan %.6f", step, curves.cpu[step], curves.vulkan[step]))
    end
    assert.is_true(curves.vulkan[50] < curves.vulkan[1] * 0.8)
  end)
end)

describe("vulkan models", function()
  it("BERT-tiny forward (inference) on vulkan matches the cpu", function()
    local model = bert.model("BertModel", "tiny")
    model:evaluate()
    local ids = bert.randint(0, 100, {2, 16}, {seed = 1})
    local mask = bert.ones({2, 16}, "int32")
    for j = 12, 16 do mask:set(0, 2, j) end
    local function fwd(i, m)
      return bert.no_grad(function() return model:forward{input_ids = i, attention_mask = m} end)
    end
    local ref = fwd(ids, mask)
    require("bert.nn.device").to(model, "vulkan")
    assert.equal("vulkan", model.flat_params:device())
    local out = fwd(ids:to("vulkan"), mask:to("vulkan"))
    close(out.last_hidden_state, ref.last_hidden_state)
    close(out.pooler_output, ref.pooler_output)
    require("bert.nn.device").to(model, "cpu")
    close(fwd(ids, mask).last_hidden_state, ref.last_hidden_state, 1e-6)
  end)
end)

describe("vulkan tensors larger than the binding range (split into windows)", function()
  -- the range ops split to, forced down to 64 KiB (16384 floats) so that
  -- small tensors take the split paths that >128 MiB tensors take on lavapipe
  local LIM = 65536
  setup(function() assert.equal(LIM, bert.vulkan.set_max_range(LIM)) end)
  teardown(function() bert.vulkan.set_max_range(0) end)
  local function dispatches(f)
    local n0 = bert.vulkan.dispatches()
    local r = f()
    return r, bert.vulkan.dispatches() - n0
  end

  it("reports the forced range and refuses nothing that it splits", function()
    assert.equal(LIM, bert.backend_info().vulkan.split_range)
    local big = randn({300, 100}, 1)                                 -- 120 KB
    assert.same(big:totable(), cpu(vk(big)):totable())               -- copies are not bound
  end)

  it("GEMM: output, operand and K windows, every transpose case, bias and GELU", function()
    for _, s in ipairs({{300, 70, 90}, {40, 600, 50}, {130, 20, 700}, {3, 5, 20000}}) do
      local M, K, N = s[1], s[2], s[3]
      local a, b = randn({M, K}, M), randn({K, N}, N)
      local at, bt = randn({K, M}, M + 1), randn({N, K}, N + 1)
      local got, nd = dispatches(function() return vk(a):matmul(vk(b)) end)
      close(got, a:matmul(b))
      assert.is_true(nd > 1, "expected a split GEMM")
      close(vk(at):t():matmul(vk(b)), at:t():matmul(b))
      close(vk(a):matmul(vk(bt):t()), a:matmul(bt:t()))
      close(vk(at):t():matmul(vk(bt):t()), at:t():matmul(bt:t()))
    end
    local x, w, bias = randn({200, 30}, 5), randn({500, 30}, 6), randn({500}, 7)   -- a tied MLM decoder
    close(bert.vulkan.gemm(vk(x), vk(w), {tb = true, bias = vk(bias), gelu = true}), F.linear(x, w, bias):gelu())
    close(vk(randn({3, 90, 70}, 8)):matmul(vk(randn({70, 80}, 9))), randn({3, 90, 70}, 8):matmul(randn({70, 80}, 9)))
    -- the decoder's backward: dW = dY^T X over a K of 200 rows, db = column sums, dX = dY W
    check(function(h, wt, bb) return F.linear(h, wt, bb) end, {x, w, bias})
  end)

  it("elementwise, unary, copies and fill over windows", function()
    local a, b = randn({200, 300}, 10), randn({300}, 11)
    local got, nd = dispatches(function() return vk(a) + vk(b) end)
    close(got, a + b)
    assert.is_true(nd > 1, "expected a split elementwise op")
    close(vk(a):exp(), a:exp())
    close(vk(a):t():contiguous(), a:t():contiguous())
    close(vk(a):t() * vk(a):t(), a:t() * a:t())
    local flat = randn({70001}, 12)                                  -- one dim, split along it
    close(vk(flat):tanh(), flat:tanh())
    local f = vk(a):clone()
    f:fill_(2.5)
    close(f, bert.full({200, 300}, 2.5))
    close(vk(a):to("int32"), a:to("int32"))
  end)

  it("reductions (over windows of rows and in partial slices) and softmax", function()
    local a = randn({200, 300}, 20)
    close(vk(a):sum(), a:sum())
    close(vk(a):mean(), a:mean())
    close(vk(a):max(), a:max())
    close(vk(a):sum(2), a:sum(2))
    close(vk(a):mean(1), a:mean(1))
    local v, i = vk(a):max(2)
    local cv, ci = a:max(2)
    close(v, cv)
    assert.same(ci:totable(), cpu(i):totable())
    close(vk(a):softmax(2), a:softmax(2))
    close(vk(a):log_softmax(2), a:log_softmax(2))
    local ss = (a * a):sum():item()
    assert.is_true(math.abs(bert.vulkan.sumsq(vk(a)) - ss) <= 1e-4 * ss)
    check(function(x) return x:log_softmax(2):mean(2) end, {randn({100, 200}, 21)})
  end)

  it("cross entropy forward and backward over windows of rows", function()
    local logits = randn({200, 500}, 30)
    local lt = {}
    for r = 1, 200 do lt[r] = r % 7 == 0 and -100 or (r * 37) % 500 end
    local labels = bert.tensor(lt, "int32")
    for _, red in ipairs({"mean", "sum", "none"}) do
      close(F.cross_entropy(vk(logits), vk(labels), {reduction = red}),
            F.cross_entropy(logits, labels, {reduction = red}))
    end
    check(function(l) return F.cross_entropy(l, labels) end, {logits})
  end)

  it("layer norm and bias + GELU over windows of rows, forward and backward", function()
    local x, r, g, b = randn({300, 70}, 50), randn({300, 70}, 51), randn({70}, 52), randn({70}, 53)   -- 84 KB
    local got, nd = dispatches(function() return F.layer_norm(vk(x), vk(g), vk(b), 1e-5, vk(r)) end)
    close(got, F.layer_norm(x, g, b, 1e-5, r))
    assert.is_true(nd > 1, "expected a split layer norm")
    check(function(xx, rr, gg, bb) return F.layer_norm(xx, gg, bb, 1e-5, rr) end, {x, r, g, b})
    check(function(xx) return F.layer_norm(xx, nil, nil, 1e-5) end, {x})
    for _, mode in ipairs({"none", "tanh"}) do
      check(function(xx, bb) return F.bias_gelu(xx, bb, mode) end, {randn({300, 70}, 54), randn({70}, 55)})
    end
  end)

  it("attention over windows of batch items, with mask and dropout, forward and backward", function()
    -- one item of k is 2 x 19 x 64 floats: windows of 6 items, 4 with dropout (2*7*19 counters per item)
    local B = 10
    local mask = bert.ones({B, 19}, "int32")
    for j = 13, 19 do mask:set(0, 3, j) end
    local q, k, v = randn({B, 2, 7, 64}, 56), randn({B, 2, 19, 64}, 57), randn({B, 2, 19, 64}, 58)
    local got, nd = dispatches(function() return F.attention(vk(q), vk(k), vk(v), {mask = vk(mask)}) end)
    close(got, F.attention(q, k, v, {mask = mask}))
    assert.is_true(nd > 1, "expected a split attention")
    check(function(qq, kk, vv) return F.attention(qq, kk, vv, {mask = mask}) end, {q, k, v}, 2e-4)
    check(function(qq, kk, vv)
      bert.set_rng_state(9, 3)
      return F.attention(qq, kk, vv, {mask = mask, dropout = 0.25, training = true})
    end, {q, k, v}, 2e-4)
  end)

  it("embedding gather and scatter over windows of a large table, and dropout", function()
    local w = randn({3000, 16}, 40)                                  -- 192 KB
    local ids = bert.tensor({{1, 2999, 1500}, {1023, 1024, 1}, {0, 2048, 7}}, "int32")
    close(F.embedding(vk(ids), vk(w)), F.embedding(ids, w))
    check(function(t) return F.embedding(ids, t) end, {w})
    local idx = bert.tensor({2999, 0, 1025, 2999}, "int32")
    check(function(t) return t:index_select(1, idx) end, {w})
    local x = randn({100, 401}, 41)
    bert.set_rng_state(4321, 5)
    local want = F.dropout(x, 0.25, true)
    bert.set_rng_state(4321, 5)
    close(F.dropout(vk(x), 0.25, true), want, 1e-6)
  end)
end)
