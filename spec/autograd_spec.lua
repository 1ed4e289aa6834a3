-- Autograd: semantics of the tape, and a finite-difference gradient check
-- for every differentiable tensor op.
local bert = require("bert")
local gradcheck = require("spec.support.gradcheck").gradcheck

local function randn(shape, seed) return bert.randn(shape, {seed = seed or 1}) end

describe("autograd semantics", function()
  it("computes, accumulates and zeroes gradients of leaves", function()
    local x = bert.tensor({1, 2, 3}):requires_grad(true)
    assert.is_true(x:requires_grad())
    assert.is_nil(x:grad())
    local y = (x * x):sum()
    assert.equal("sum", y:grad_fn())
    assert.is_false(y:is_leaf())
    assert.is_true(x:is_leaf())
    y:backward()
    assert.same({2, 4, 6}, x:grad():totable())
    ;(x * 3):sum():backward()
    assert.same({5, 7, 9}, x:grad():totable())
    x:zero_grad()
    assert.same({0, 0, 0}, x:grad():totable())
  end)

  it("refuses a second backward through a freed graph", function()
    local x = bert.tensor({1, 2}):requires_grad(true)
    local y = (x * 2):sum()
    y:backward()
    assert.error_matches(function() y:backward() end, "backward: the graph behind this tensor was already freed")
    local h = x * 2
    h:sum():backward()
    assert.error_matches(function() (h * 1):sum():backward() end, "backward: part of this graph was freed")
  end)

  it("needs a gradient for non-scalar roots", function()
    local x = randn({2, 3}):requires_grad(true)
    local y = x * 2
    assert.error_matches(function() y:backward() end,
      "backward: backward without a gradient needs a 1%-element tensor, got %[2 x 3%]")
    y:backward(bert.ones({2, 3}))
    assert.tensor_near(bert.full({2, 3}, 2), x:grad())
    assert.error_matches(function() (x * 2):backward(bert.ones({3})) end,
      "backward: gradient %[3%] does not match the tensor %[2 x 3%]")
    assert.error_matches(function() bert.ones({1}):backward() end, "does not require grad")
  end)

  it("records nothing under no_grad and after detach", function()
    local x = randn({3}):requires_grad(true)
    local y = bert.no_grad(function() return x * 2 end)
    assert.is_false(y:requires_grad())
    assert.is_nil(y:grad_fn())
    assert.is_true(bert.grad_enabled())
    assert.has_error(function() bert.no_grad(function() error("boom") end) end)
    assert.is_true(bert.grad_enabled())   -- restored after an error
    local d = (x * 2):detach()
    assert.is_false(d:requires_grad())
    local a, b = bert.no_grad(function(p, q) return p + q, 7 end, 1, 2)
    assert.equal(3, a)
    assert.equal(7, b)
  end)

  it("refuses in-place writes to tensors that require grad, and catches modified saved tensors", function()
    local x = randn({3}):requires_grad(true)
    assert.error_matches(function() x:add_(1) end, "add_: in%-place operation on a tensor that requires grad")
    assert.error_matches(function() x:fill_(1) end, "fill_: in%-place operation")
    bert.no_grad(function() x:add_(1) end)   -- allowed for optimizer updates
    local w = randn({3}, 2)
    local y = (x * w):sum()
    w:mul_(2)
    assert.error_matches(function() y:backward() end,
      "mul backward: a tensor saved for the gradient was modified in place")
  end)

  it("lets gradients flow into preset buffers (flat arenas)", function()
    local flat = bert.zeros({6})
    local x = randn({2, 3}):requires_grad(true)
    x:set_grad(flat:view(2, 3))
    ;(x * 3):sum():backward()
    assert.same({3, 3, 3, 3, 3, 3}, flat:totable())
    assert.error_matches(function() x:set_grad(bert.zeros({3})) end, "set_grad: gradient %[3%] float32 does not match")
  end)

  it("handles long chains without deep recursion", function()
    local x = bert.tensor({1}):requires_grad(true)
    local y = x
    for _ = 1, 20000 do y = y + 1 end
    y:sum():backward()
    assert.same({1}, x:grad():totable())
    local z = x
    for _ = 1, 20000 do z = z * 1 end
    z = nil
    collectgarbage()   -- freeing a 20000-node graph must not overflow the C stack
  end)

  it("flows through shared subexpressions once per use", function()
    local x = bert.tensor({2}):requires_grad(true)
    local y = x * x
    local z = (y + y * x):sum()   -- x^2 + x^3 -> 2x + 3x^2 = 16
    z:backward()
    assert.same({16}, x:grad():totable())
  end)

  it("only float32 tensors require grad", function()
    assert.error_matches(function() bert.tensor({1}, "int32"):requires_grad(true) end,
      "requires_grad: only float32 tensors can require gradients, got int32")
  end)
end)

describe("gradient checks", function()
  local function check(f, inputs, opts) assert.truthy(gradcheck(f, inputs, opts) < 1) end

  it("broadcasting arithmetic", function()
    check(function(a, b) return a + b end, {randn({2, 3}, 1), randn({3}, 2)})
    check(function(a, b) return a - b end, {randn({2, 1}, 1), randn({1, 3}, 2)})
    check(function(a, b) return a:add(b, 0.5) end, {randn({2, 3}, 1), randn({3}, 2)})
    check(function(a, b) return a:sub(b, 2) end, {randn({3}, 1), randn({2, 3}, 2)})
    check(function(a, b) return a * b end, {randn({2, 3}, 3), randn({2, 1}, 4)})
    check(function(a, b) return a / b end, {randn({2, 3}, 5), randn({3}, 6):abs() + 1})
    check(function(a, b) return a:pow(b) end, {randn({4}, 7):abs() + 0.5, randn({4}, 8)})
    check(function(a) return a ^ 2 end, {randn({4}, 9)})
    check(function(a) return 3 - a * 2 end, {randn({4}, 9)})
    check(function(a, b) return a:maximum(b) end, {randn({5}, 10), randn({5}, 11)})
    check(function(a, b) return a:minimum(b) end, {randn({5}, 12), randn({5}, 13)})
  end)

  it("unary math", function()
    for _, name in ipairs({"neg", "exp", "tanh", "sigmoid", "relu", "gelu", "abs", "erf", "silu"}) do
      check(function(a) return a[name](a) end, {randn({3, 4}, 21)})
    end
    check(function(a) return a:gelu("tanh") end, {randn({3, 4}, 22)})
    check(function(a) return a:log() end, {randn({6}, 23):abs() + 0.5})
    check(function(a) return a:sqrt() end, {randn({6}, 24):abs() + 0.5})
    check(function(a) return a:rsqrt() end, {randn({6}, 25):abs() + 0.5})
    check(function(a) return -a end, {randn({6}, 26)})
  end)

  it("masked_fill and where", function()
    local mask = bert.tensor({{1, 0, 1}}, "int32")
    check(function(a) return a:masked_fill(mask, -5) end, {randn({2, 3}, 1)})
    local c = bert.tensor({{1}, {0}}, "int32")
    check(function(a, b) return bert.where(c, a, b) end, {randn({2, 3}, 2), randn({3}, 3)})
  end)

  it("reductions", function()
    local x = randn({3, 4}, 31)
    check(function(a) return a:sum() end, {x})
    check(function(a) return a:sum(1) end, {x})
    check(function(a) return a:sum(2, true) end, {x})
    check(function(a) return a:mean(-1) end, {x})
    check(function(a) return a:mean() end, {x})
    check(function(a) return a:var(2) end, {x})
    check(function(a) return a:var(1, true, 0) end, {x})
    check(function(a) return (a:max(2)) end, {x})
    check(function(a) return (a:min(1, true)) end, {x})
    check(function(a) return a:max() end, {x})
    check(function(a) return a:softmax(2) end, {x})
    check(function(a) return a:softmax(1) end, {x})
    check(function(a) return a:log_softmax(-1) end, {x})
  end)

  it("matmul in every shape", function()
    check(function(a, b) return a:matmul(b) end, {randn({3, 4}, 1), randn({4, 2}, 2)})
    check(function(a, b) return a:matmul(b:t()) end, {randn({3, 4}, 3), randn({2, 4}, 4)})
    check(function(a, b) return a:matmul(b) end, {randn({2, 3, 4}, 5), randn({4, 2}, 6)})
    check(function(a, b) return a:matmul(b) end, {randn({2, 1, 3, 4}, 7), randn({3, 4, 2}, 8)})
    check(function(a, b) return a:matmul(b) end, {randn({4}, 9), randn({4, 3}, 10)})
    check(function(a, b) return a:matmul(b) end, {randn({3, 4}, 11), randn({4}, 12)})
    check(function(a, b) return a:matmul(b) end, {randn({4}, 13), randn({4}, 14)})
  end)

  it("views", function()
    local x = randn({2, 3, 4}, 41)
    check(function(a) return a:view(6, 4) end, {x})
    check(function(a) return a:transpose(1, 3):reshape(4, 6) end, {x})
    check(function(a) return a:permute(3, 1, 2) * 1 end, {x})
    check(function(a) return a:narrow(3, 2, 2) end, {x})
    check(function(a) return a:select(2, 3) end, {x})
    check(function(a) return a:unsqueeze(2):squeeze(2) end, {x})
    check(function(a) return a:narrow(1, 1, 1):expand(5, 3, 4) end, {x})
    check(function(a) return a:t():contiguous() end, {randn({3, 5}, 42)})
    check(function(a) return a:clone() * 2 end, {randn({3}, 43)})
    check(function(a) return a:split(2, 3)[2] end, {x})
  end)

  it("indexing and joining", function()
    local x = randn({4, 3}, 51)
    check(function(a) return a:index_select(1, bert.tensor({3, 0, 3}, "int32")) end, {x})
    check(function(a) return a:gather(2, bert.tensor({{2, 0}, {1, 1}, {0, 0}, {2, 2}}, "int32")) end, {x})
    check(function(a, b) return bert.cat({a, b, a}, 1) end, {x, randn({2, 3}, 52)})
    check(function(a, b) return bert.stack({a, b}, 2) end, {randn({2, 3}, 53), randn({2, 3}, 54)})
    local parts = {}
    for i = 1, 10 do parts[i] = randn({2}, 60 + i) end
    check(function(...) return bert.cat({...}, 1) end, parts, {max_checks = 2})
  end)

  it("a small two-layer network end to end", function()
    local x, y = randn({5, 4}, 1), bert.tensor({0, 2, 1, 2, 0}, "int32")
    local w1, w2 = randn({4, 8}, 2) * 0.5, randn({8, 3}, 3) * 0.5
    check(function(a, b)
      local logits = x:matmul(a):tanh():matmul(b)
      return logits:log_softmax(-1):gather(2, y:view(5, 1)):mean() * -1
    end, {w1, w2})
  end)
end)
