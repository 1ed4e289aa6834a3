-- t:topk and t:sort (csrc/cpu/ops_sort.c + lua/bert/tensor.lua): against a
-- plain Lua reference, ties, NaN, views, errors, and the gradient.
local bert = require("bert")
local gradcheck = require("spec.support.gradcheck").gradcheck

-- reference: positions of one row ordered by value (stable, NaN largest)
local function ref_order(row, descending)
  local idx = {}
  for j = 1, #row do idx[j] = j end
  table.sort(idx, function(a, b)
    local va, vb = row[a], row[b]
    local na, nb = va ~= va, vb ~= vb
    if na ~= nb then if descending then return na else return nb end end
    if not na and va ~= vb then if descending then return va > vb else return va < vb end end
    return a < b
  end)
  for j = 1, #idx do idx[j] = idx[j] - 1 end
  return idx
end

describe("topk and sort", function()
  it("match a reference on random rows, both directions, every k", function()
    local t = bert.randn({7, 33}, {seed = 3})
    local rows = t:totable()
    for _, k in ipairs({0, 1, 5, 33}) do
      local v, i = t:topk(k)
      assert.same({7, k}, v:shape())
      assert.equal("int32", i:dtype())
      local vs, is = v:totable(), i:totable()
      for r = 1, 7 do
        local want = ref_order(rows[r], true)
        for j = 1, k do
          assert.equal(want[j], is[r][j])
          assert.equal(rows[r][want[j] + 1], vs[r][j])
        end
      end
      local _, smallest = t:topk(k, 2, {largest = false})
      for r = 1, 7 do
        local want = ref_order(rows[r], false)
        for j = 1, k do assert.equal(want[j], smallest:totable()[r][j]) end
      end
    end
    local s, o = t:sort(2)
    for r = 1, 7 do
      assert.same(ref_order(rows[r], false), o:totable()[r])
      for j = 2, 33 do assert.is_true(s:totable()[r][j - 1] <= s:totable()[r][j]) end
    end
  end)

  it("keeps ties in position order and puts NaN first when descending", function()
    local t = bert.tensor({2, 0 / 0, 2, 1, 2})
    local _, i = t:sort(1, true)
    assert.same({1, 0, 2, 4, 3}, i:totable())
    local _, a = t:sort(1)
    assert.same({3, 0, 2, 4, 1}, a:totable())
  end)

  it("works along any dimension of a non-contiguous view, and on int32", function()
    local base = bert.randn({4, 6, 5}, {seed = 9})
    local t = base:transpose(1, 3)            -- [5, 6, 4], strided
    local v, i = t:topk(2, 2)
    assert.same({5, 2, 4}, v:shape())
    local c = t:contiguous():totable()
    for a = 1, 5 do
      for b = 1, 4 do
        local col = {}
        for j = 1, 6 do col[j] = c[a][j][b] end
        local want = ref_order(col, true)
        assert.equal(want[1], i:totable()[a][1][b])
        assert.equal(want[2], i:totable()[a][2][b])
      end
    end
    local n = bert.tensor({5, 3, 9, 1}, "int32")
    local nv, ni = n:topk(2)
    assert.same({9, 5}, nv:totable())
    assert.same({2, 0}, ni:totable())
  end)

  it("refuses a bad k or dimension with the op's name and the shape", function()
    local t = bert.zeros({2, 3})
    assert.has_error(function() t:topk(4) end, "topk: k = 4 out of range [0, 3] for dimension 2 of [2 x 3]")
    assert.has_error(function() t:topk(-1) end)
    assert.has_error(function() t:topk(1.5) end)
    assert.has_error(function() t:sort(3) end)
    local vk = bert.backend_info().vulkan
    if vk and vk.available then   -- a CPU op: a device tensor is refused by its front-end, not read wrongly
      local ok, err = pcall(function() return bert.ones({3}):to("vulkan"):topk(1) end)
      assert.is_false(ok)
      assert.matches("topk: not supported on device vulkan", err, 1, true)
    end
  end)

  it("passes the gradient to the selected elements (finite differences)", function()
    local x = bert.randn({3, 8}, {seed = 21}):requires_grad(true)
    assert.truthy(gradcheck(function(a) return (a:topk(3, 2)) end, {x}) < 1)
    local y = bert.randn({5, 4}, {seed = 22}):requires_grad(true)
    assert.truthy(gradcheck(function(a) return (a:sort(1, true)) end, {y}) < 1)
    -- and exactly zero where nothing was selected
    local z = bert.tensor({{1, 5, 3, 4}}):requires_grad(true)
    local v = z:topk(2)
    v:sum():backward()
    assert.same({{0, 1, 0, 1}}, z:grad():totable())
  end)
end)
