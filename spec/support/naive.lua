-- Naive reference implementations for the tensor specs: a flat Lua list
-- plus a shape, and plain loops for every op.  Slow and obviously right.
local N = {}

local function numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end
N.numel = numel

-- From a bert tensor or nested table.
function N.from(x)
  if type(x) == "userdata" then
    local shape = x:shape()
    local data = {}
    local t = x:totable()
    local function walk(v)
      if type(v) == "number" then data[#data + 1] = v else for i = 1, #v do walk(v[i]) end end
    end
    walk(t)
    return {shape = shape, data = data}
  end
  local shape, data = {}, {}
  local v = x
  while type(v) == "table" do shape[#shape + 1] = #v; v = v[1] end
  local function walk(y)
    if type(y) == "number" then data[#data + 1] = y else for i = 1, #y do walk(y[i]) end end
  end
  walk(x)
  return {shape = shape, data = data}
end

-- Back to a nested table.
function N.nested(t)
  if #t.shape == 0 then return t.data[1] end
  local pos = 0
  local function build(d)
    local out = {}
    for i = 1, t.shape[d] do
      if d == #t.shape then pos = pos + 1; out[i] = t.data[pos] else out[i] = build(d + 1) end
    end
    return out
  end
  return build(1)
end

-- Multi-index (1-based) of flat position p (1-based).
local function unravel(shape, p)
  local idx = {}
  p = p - 1
  for d = #shape, 1, -1 do idx[d] = p % shape[d] + 1; p = p // shape[d] end
  return idx
end
N.unravel = unravel

local function ravel(shape, idx)
  local p = 0
  for d = 1, #shape do p = p * shape[d] + (idx[d] - 1) end
  return p + 1
end
N.ravel = ravel

function N.broadcast_shape(a, b)
  local n = math.max(#a, #b)
  local out = {}
  for i = 1, n do
    local sa = a[i - (n - #a)] or 1
    local sb = b[i - (n - #b)] or 1
    if i - (n - #a) < 1 then sa = 1 end
    if i - (n - #b) < 1 then sb = 1 end
    assert(sa == sb or sa == 1 or sb == 1, "not broadcastable")
    out[i] = sa == 1 and sb or sa
  end
  return out
end

-- Value of t at the multi-index of a broadcast result.
local function at_broadcast(t, oshape, idx)
  local lead = #oshape - #t.shape
  local sub = {}
  for d = 1, #t.shape do
    sub[d] = t.shape[d] == 1 and 1 or idx[d + lead]
  end
  return t.data[ravel(t.shape, sub)]
end

function N.map2(a, b, f)
  local shape = N.broadcast_shape(a.shape, b.shape)
  local out = {shape = shape, data = {}}
  for p = 1, numel(shape) do
    local idx = unravel(shape, p)
    out.data[p] = f(at_broadcast(a, shape, idx), at_broadcast(b, shape, idx))
  end
  return out
end

function N.map(a, f)
  local out = {shape = a.shape, data = {}}
  for p = 1, #a.data do out.data[p] = f(a.data[p]) end
  return out
end

-- Reduce dim d (1-based) with f(list) -> value; keepdim keeps a size-1 dim.
function N.reduce(a, d, f, keepdim)
  local oshape = {}
  for i = 1, #a.shape do
    if i ~= d then oshape[#oshape + 1] = a.shape[i] elseif keepdim then oshape[#oshape + 1] = 1 end
  end
  local groups, order = {}, {}
  for p = 1, #a.data do
    local idx = unravel(a.shape, p)
    idx[d] = 1
    local key = ravel(a.shape, idx)
    if not groups[key] then groups[key] = {}; order[#order + 1] = key end
    table.insert(groups[key], a.data[p])
  end
  table.sort(order)
  local out = {shape = oshape, data = {}}
  for i, key in ipairs(order) do out.data[i] = f(groups[key]) end
  return out
end

function N.matmul(a, b)   -- 2-D only
  local M, K, N2 = a.shape[1], a.shape[2], b.shape[2]
  local out = {shape = {M, N2}, data = {}}
  for i = 1, M do
    for j = 1, N2 do
      local s = 0
      for k = 1, K do s = s + a.data[(i - 1) * K + k] * b.data[(k - 1) * N2 + j] end
      out.data[(i - 1) * N2 + j] = s
    end
  end
  return out
end

function N.erf(x)
  -- Abramowitz-Stegun 7.1.26 is too coarse; integrate the series instead
  local sum, term, n = x, x, 0
  repeat
    n = n + 1
    term = term * -x * x / n
    local add = term / (2 * n + 1)
    sum = sum + add
  until math.abs(add) < 1e-17 or n > 200
  return 2 / math.sqrt(math.pi) * sum
end

return N
