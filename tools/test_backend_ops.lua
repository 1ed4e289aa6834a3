-- Every op and its gradient through every backend against the CPU, over
-- random shapes (odd, size-1, empty), non-contiguous views (transposed,
-- narrowed, expanded), NaN / +-inf / large values and int32 extremes (after
-- ggml's test-backend-ops).  Each case is classified:
--   agree        both give the same values (NaN where NaN, infinities of the
--                same sign, finite values within the tolerance) and, for
--                differentiable ops, the same gradients
--   both refuse  the CPU and the device both raise an error
--   unsupported  the device says "<op>: not supported on device <name>"
-- and anything else fails: a value where the CPU refuses, a different value,
-- or another error from the device.
--
--   lua5.4 tools/test_backend_ops.lua [--seed N] [--cases N] [--op NAME] [--verbose]
-- (the long mode: many cases per op; spec/backend_ops_spec.lua runs a seeded
-- quick mode in `make test`).  Exit status 1 when a case fails.
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local bert = require("bert")
local F = bert.F

local M = {}

local INT_MIN, INT_MAX = -2147483648, 2147483647

-- {====================================================== random inputs

local rng   -- a function(m, n) like math.random, seeded per run

local function normal()
  local u1, u2 = 1 - rng(), rng()
  return math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)
end

local function pick(list) return list[rng(#list)] end

local SIZES = {0, 1, 1, 2, 3, 3, 5, 7, 16, 33}

local function random_shape(min_nd, max_nd)
  local nd = rng(min_nd, max_nd)
  local s = {}
  for i = 1, nd do s[i] = pick(SIZES) end
  return s
end

local function numel(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return n
end

-- A value: mostly normal, sometimes a special one (when specials is set).
local function float_value(specials)
  if specials and rng() < 0.08 then return pick({0 / 0, math.huge, -math.huge, 1e4, -1e4, 0.0, -0.0}) end
  return normal()
end

local function int_value(extremes)
  if extremes and rng() < 0.3 then return pick({INT_MIN, INT_MAX, 16777217, -16777217, 0, 1, -1}) end
  return rng(-9, 9)
end

-- An input: a contiguous base tensor and the view of it the op sees (the
-- same view is taken on each device, so strides survive the move).
local function from_values(shape, dtype, gen)
  local n, vals = numel(shape), {}
  for i = 1, n do vals[i] = gen() end
  if #shape == 0 then return bert.tensor(vals[1], dtype) end
  local t = n > 0 and bert.tensor(vals, dtype) or bert.zeros({0}, dtype)
  return t:view(shape)
end

-- opts: dtype ("float32" | "int32"), specials, layout ("any" | "contiguous")
local function input(shape, opts)
  opts = opts or {}
  local dtype = opts.dtype or "float32"
  local gen = dtype == "int32" and function() return int_value(opts.specials) end
                                or function() return float_value(opts.specials) end
  local kind = opts.layout == "contiguous" and 1 or rng(1, 4)
  local nd = #shape
  if kind == 2 and nd >= 2 then   -- transposed: the last two dims swapped in memory
    local s = {table.unpack(shape)}
    s[nd - 1], s[nd] = s[nd], s[nd - 1]
    return {base = from_values(s, dtype, gen), view = function(t) return t:transpose(nd - 1, nd) end}
  elseif kind == 3 and nd >= 1 then   -- a narrowed slice of a longer first dim
    local s = {table.unpack(shape)}
    local extra = rng(1, 3)
    s[1] = s[1] + extra
    local start = rng(1, extra + 1)
    return {base = from_values(s, dtype, gen), view = function(t) return t:narrow(1, start, shape[1]) end}
  elseif kind == 4 and nd >= 1 and opts.layout ~= "writable" then   -- expanded from size-1 dims
    local s = {}
    for i = 1, nd do s[i] = (rng() < 0.5) and 1 or shape[i] end
    return {base = from_values(s, dtype, gen), view = function(t) return t:expand(shape) end}
  end
  return {base = from_values(shape, dtype, gen), view = function(t) return t end}
end

-- A shape that broadcasts with s: some dims set to 1, maybe fewer dims.
local function broadcast_partner(s)
  local out = {}
  local drop = rng(0, #s)
  for i = drop + 1, #s do out[#out + 1] = (rng() < 0.3) and 1 or s[i] end
  return out
end
-- }======================================================

-- {====================================================== the ops

local BINARY = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge"}
local CMP = {eq = true, ne = true, lt = true, le = true, gt = true, ge = true}
local UNARY = {"neg", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "abs", "erf", "silu"}
local KEEPS_INT = {neg = true, abs = true, relu = true}

-- Each op: make() -> {inputs..., args = {...}} and f(args, x1, x2, ...).
-- grad: differentiable in its float inputs.  tol: relative to the output's
-- largest finite magnitude.
local OPS = {}

-- GLSL's pow is exp2(y * log2(x)): its relative error grows with |y log2 x|
local BINARY_TOL = {pow = 1e-3}

for _, name in ipairs(BINARY) do
  OPS[#OPS + 1] = {
    name = name, grad = not CMP[name], tol = BINARY_TOL[name],
    make = function()
      local s = random_shape(0, 4)
      local ints = rng() < 0.35
      local dt1 = ints and "int32" or "float32"
      local dt2 = ints and (rng() < 0.8 and "int32" or "float32") or "float32"
      return {input(s, {dtype = dt1, specials = true}), input(broadcast_partner(s), {dtype = dt2, specials = true})}
    end,
    f = function(_, a, b) return a[name](a, b) end,
  }
end

for _, name in ipairs(UNARY) do
  OPS[#OPS + 1] = {
    name = name, grad = true,
    make = function()
      local dt = (KEEPS_INT[name] and rng() < 0.4) and "int32" or "float32"
      return {input(random_shape(0, 4), {dtype = dt, specials = true})}
    end,
    f = function(_, a) return a[name](a) end,
  }
end

OPS[#OPS + 1] = {
  name = "gelu_tanh", grad = true,
  make = function() return {input(random_shape(0, 4), {specials = true})} end,
  f = function(_, a) return a:gelu("tanh") end,
}

OPS[#OPS + 1] = {
  name = "fill_",
  make = function()
    local dt = rng() < 0.5 and "int32" or "float32"
    return {input(random_shape(0, 3), {dtype = dt, layout = "contiguous"}),
            args = {value = pick({0, 1.5, -7, 16777217, INT_MAX, 1e30})}}
  end,
  f = function(args, a) return a:clone():fill_(args.value) end,
}

OPS[#OPS + 1] = {
  name = "copy_",
  make = function()
    local s = random_shape(0, 4)
    return {input(s, {specials = true}), input(broadcast_partner(s), {specials = true})}
  end,
  f = function(_, a, b) return a:contiguous():clone():copy_(b) end,
}

-- sums in float on a device, in double on the cpu: agreement is judged
-- against the inputs' magnitude (1e4 values cancel in a float sum)
local SUMS = {sum = true, mean = true, var = true}

for _, name in ipairs({"sum", "mean", "max", "min", "argmax", "argmin", "var"}) do
  OPS[#OPS + 1] = {
    name = name, grad = name ~= "argmax" and name ~= "argmin", input_scale = SUMS[name],
    make = function()
      local dt = (name ~= "var" and name ~= "mean" and rng() < 0.3) and "int32" or "float32"
      local s = random_shape(0, 4)
      local dim = (#s > 0 and rng() < 0.7) and rng(1, #s) or nil
      return {input(s, {dtype = dt, specials = true}), args = {dim = dim, keep = rng() < 0.5}}
    end,
    f = function(args, a)
      if args.dim == nil then return a[name](a) end
      return (a[name](a, args.dim, args.keep))
    end,
  }
end

for _, name in ipairs({"softmax", "log_softmax"}) do
  OPS[#OPS + 1] = {
    name = name, grad = true, input_scale = true,   -- x - lse in float: the inputs' magnitude sets the rounding
    make = function()
      local s = random_shape(1, 4)
      local sp = rng() < 0.3   -- with 1e4 / inf inputs the gradient is rounding noise: forward only
      return {input(s, {specials = sp}), args = {dim = rng(1, #s)}, skip_grad = sp}
    end,
    f = function(args, a) return a[name](a, args.dim) end,
  }
end

OPS[#OPS + 1] = {
  name = "matmul", grad = true, tol = 1e-4,
  make = function()
    local M_, K, N = pick(SIZES), pick(SIZES), pick(SIZES)
    local batch = rng() < 0.5 and {pick({1, 2, 3})} or {}
    local sa, sb = {table.unpack(batch)}, {}
    sa[#sa + 1], sa[#sa + 2] = M_, K
    if rng() < 0.3 then sb = {K} else sb = {K, N} end
    if rng() < 0.2 then sa = {K} end
    return {input(sa), input(sb)}
  end,
  f = function(_, a, b) return a:matmul(b) end,
}

OPS[#OPS + 1] = {
  name = "linear", grad = true, tol = 1e-4,
  make = function()
    local inf, outf = pick(SIZES), pick(SIZES)
    local s = random_shape(1, 3)
    s[#s] = inf
    local bias = rng() < 0.7 and input({outf}) or nil
    return {input(s), input({outf, inf}), bias}
  end,
  f = function(_, x, w, b) return F.linear(x, w, b) end,
}

-- a small eps makes the gradient of a (near-)constant row (an expanded
-- input) a float rounding difference times rstd (1e6 at BERT's 1e-12): the
-- gradient is checked at eps 1e-3, the small ones forward only
for _, v in ipairs({{name = "layer_norm", eps = {1e-3, -1}, grad = true},
                    {name = "layer_norm_small_eps", eps = {1e-5, 1e-12}, grad = false}}) do
  OPS[#OPS + 1] = {
    name = v.name, grad = v.grad, tol = 1e-4,
    make = function()
      local s = random_shape(1, 3)
      local H = s[#s]
      -- specials only forward: a 1e4 in a row leaves the others' gradient to cancellation
      return {input(s, {specials = not v.grad and rng() < 0.2}), rng() < 0.8 and input({H}) or nil,
              rng() < 0.8 and input({H}) or nil, rng() < 0.3 and input(s) or nil, args = {eps = pick(v.eps)}}
    end,
    f = function(args, x, g, b, r) return F.layer_norm(x, g, b, args.eps, r) end,
  }
end

OPS[#OPS + 1] = {
  name = "rms_norm", grad = true, tol = 1e-4,
  make = function()
    local s = random_shape(1, 3)
    return {input(s), input({s[#s]}), args = {eps = pick({1e-6, 1e-3, -1})}}
  end,
  f = function(args, x, w) return F.rms_norm(x, w, args.eps) end,
}

OPS[#OPS + 1] = {
  name = "lstm", grad = true, tol = 1e-4,
  make = function()
    local B, T, I, H = pick({1, 3}), pick({0, 1, 4}), pick(SIZES), pick({1, 3})
    local O = rng() < 0.5 and pick({1, 2}) or nil   -- a projection, or none
    local len = from_values({B}, "int32", function() return rng(0, T + 1) end)   -- T + 1 out of range
    return {input({B, T, I}), rng() < 0.5 and input({B, O or H}) or nil, rng() < 0.5 and input({B, H}) or nil,
            input({4 * H, I}), input({4 * H, O or H}), rng() < 0.7 and input({4 * H}) or nil,
            O and input({O, H}) or nil, {base = len, view = function(t) return t end},
            nograd = {false, false, false, false, false, false, false, true},
            -- one of the three outputs per case (the Vulkan backend has no cat to join them)
            args = {reverse = rng() < 0.5, clip = pick({0, 0, 0.5}), proj_clip = O and pick({0, 0, 0.3}) or 0,
                    output = pick({1, 2, 3})}}
  end,
  f = function(args, x, h0, c0, wih, whh, b, whr, len)
    local outs = {F.lstm(x, h0, c0, wih, whh, b, {w_hr = whr, lengths = len, reverse = args.reverse,
                                                  clip = args.clip, proj_clip = args.proj_clip})}
    return outs[args.output]
  end,
}

OPS[#OPS + 1] = {
  name = "bias_gelu", grad = true,
  make = function()
    local s = random_shape(0, 3)
    local N = s[#s] or 1
    return {input(s, {specials = true, dtype = rng() < 0.1 and "int32" or "float32"}),
            rng() < 0.7 and input({N}) or nil, args = {mode = pick({"none", "tanh"})}}
  end,
  f = function(args, x, b) return F.bias_gelu(x, b, args.mode) end,
}

OPS[#OPS + 1] = {
  name = "dropout", grad = true,
  make = function()
    return {input(random_shape(0, 3), {specials = true}), args = {p = pick({0, 0.1, 0.5, 1}), seed = rng(1, 1000)}}
  end,
  f = function(args, x)
    bert.manual_seed(args.seed)
    return F.dropout(x, args.p, true)
  end,
}

OPS[#OPS + 1] = {
  name = "embedding", grad = true,
  make = function()
    local V, H = pick({1, 3, 7}), pick({1, 2, 5})
    local ids = from_values(random_shape(0, 2), "int32", function() return rng(-1, V) end)   -- -1 and V out of range
    return {{base = ids, view = function(t) return t end}, input({V, H}), nograd = {true, false}}
  end,
  f = function(_, ids, w) return F.embedding(ids, w) end,
}

OPS[#OPS + 1] = {
  name = "index_select", grad = true,
  make = function()
    local s = random_shape(1, 3)
    local dim = rng(1, #s)
    local idx = from_values({pick({0, 1, 3})}, "int32", function() return rng(-1, s[dim]) end)
    return {input(s), {base = idx, view = function(t) return t end}, args = {dim = dim}, nograd = {false, true}}
  end,
  f = function(args, t, idx) return t:index_select(args.dim, idx) end,
}

OPS[#OPS + 1] = {
  name = "cross_entropy", grad = true, tol = 1e-4,
  make = function()
    local N, C = pick({0, 1, 3, 9}), pick({0, 1, 2, 7})
    local labels = from_values({N}, "int32", function()
      local r = rng()
      if r < 0.1 then return -100 elseif r < 0.15 then return C elseif r < 0.18 then return -2 end
      return rng(0, math.max(C - 1, 0))
    end)
    return {input({N, C}, {specials = rng() < 0.2}), {base = labels, view = function(t) return t end},
            args = {red = pick({"mean", "sum", "none"})}, nograd = {false, true}}
  end,
  f = function(args, l, y) return F.cross_entropy(l, y, {reduction = args.red}) end,
}

OPS[#OPS + 1] = {
  name = "attention", grad = true, tol = 1e-4,
  make = function()
    local B, A, Tq, Tk, d = pick({1, 2}), pick({1, 2}), pick({0, 1, 3, 5}), pick({0, 1, 4, 6}), pick({1, 4, 8})
    local mask = nil
    if rng() < 0.5 then
      mask = {base = from_values({B, Tk}, "int32", function() return rng() < 0.7 and 1 or 0 end),
              view = function(t) return t end}
    end
    return {input({B, A, Tq, d}), input({B, A, Tk, d}), input({B, A, Tk, d}), mask, nograd = {false, false, false, true},
            args = {causal = rng() < 0.5}}
  end,
  f = function(args, q, k, v, mask) return F.attention(q, k, v, {mask = mask, causal = args.causal}) end,
}

-- packed sequences: q, k, v [total, A, d] and int32 offsets [B + 1] (empty sequences too)
OPS[#OPS + 1] = {
  name = "attention_varlen", grad = true, tol = 1e-4,
  make = function()
    local offsets = {0}
    for b = 1, pick({1, 2, 3}) do offsets[b + 1] = offsets[b] + pick({0, 1, 2, 5, 9}) end
    local total, A, d = offsets[#offsets], pick({1, 2}), pick({1, 4, 8})
    local i = 0
    local cu = from_values({#offsets}, "int32", function() i = i + 1 return offsets[i] end)
    return {input({total, A, d}), input({total, A, d}), input({total, A, d}),
            {base = cu, view = function(t) return t end}, nograd = {false, false, false, true},
            args = {causal = rng() < 0.5}}
  end,
  f = function(args, q, k, v, cu) return F.attention(q, k, v, {cu_seqlens = cu, causal = args.causal}) end,
}

OPS[#OPS + 1] = {
  name = "where",
  make = function()
    local s = random_shape(0, 3)
    local c = from_values(s, "int32", function() return rng(0, 1) end)
    return {{base = c, view = function(t) return t end}, input(broadcast_partner(s), {specials = true}),
            input(broadcast_partner(s), {specials = true})}
  end,
  f = function(_, c, a, b) return bert.where(c, a, b) end,
}

OPS[#OPS + 1] = {
  name = "masked_fill",
  make = function()
    local s = random_shape(0, 3)
    local m = from_values(broadcast_partner(s), "int32", function() return rng(0, 1) end)
    return {input(s, {specials = true}), {base = m, view = function(t) return t end}}
  end,
  f = function(_, a, m) return a:masked_fill(m, -1) end,
}

OPS[#OPS + 1] = {
  name = "cat",
  make = function()
    local s = random_shape(1, 3)
    local dim = rng(1, #s)
    local s2 = {table.unpack(s)}
    s2[dim] = pick(SIZES)
    return {input(s), input(s2), args = {dim = dim}}
  end,
  f = function(args, a, b) return bert.cat({a, b}, args.dim) end,
}

OPS[#OPS + 1] = {
  name = "gather",
  make = function()
    local s = random_shape(1, 3)
    local dim = rng(1, #s)
    local idx = from_values(s, "int32", function() return rng(0, math.max(s[dim] - 1, 0)) end)
    return {input(s), {base = idx, view = function(t) return t end}, args = {dim = dim}}
  end,
  f = function(args, t, idx) return t:gather(args.dim, idx) end,
}

M.OPS = OPS
-- }======================================================

-- {====================================================== running and comparing

-- "ok" or a description of the first difference.  Finite values agree
-- within tol relative to the largest finite magnitude of the reference (or
-- `scale` when larger).
function M.compare(got, want, tol, scale0)
  if got:dtype() ~= want:dtype() then return "dtypes " .. got:dtype() .. " vs " .. want:dtype() end
  local gs, ws = got:shape(), want:shape()
  if #gs ~= #ws then return "shapes differ" end
  for i = 1, #gs do if gs[i] ~= ws[i] then return "shapes differ" end end
  local n = want:numel()
  if n == 0 then return "ok" end
  local g = got:to("cpu"):contiguous():view({n}):totable()
  local w = want:to("cpu"):contiguous():view({n}):totable()
  local scale = scale0 or 0
  for i = 1, n do
    local v = w[i]
    if v == v and v ~= math.huge and v ~= -math.huge and math.abs(v) > scale then scale = math.abs(v) end
  end
  for i = 1, n do
    local a, b = g[i], w[i]
    if b ~= b then
      if a == a then return string.format("element %d: %s where the cpu has NaN", i, tostring(a)) end
    elseif b == math.huge or b == -math.huge then
      if a ~= b then return string.format("element %d: %s where the cpu has %s", i, tostring(a), tostring(b)) end
    elseif not (math.abs(a - b) <= tol * (1 + scale)) then
      return string.format("element %d: %.9g vs %.9g on the cpu", i, a, b)
    end
  end
  return "ok"
end

local function run_f(op, case, xs)
  local ok, y = pcall(op.f, case.args or {}, table.unpack(xs, 1, op.arity))
  if ok and type(y) ~= "userdata" then return false, "no tensor returned" end
  return ok, y
end

local function is_float(t) return t ~= nil and t:dtype() == "float32" end

-- One case on one device: its class and, when it fails, why.
function M.run_case(op, case, device)
  op.arity = op.arity or 0
  for i = 1, 8 do if case[i] ~= nil then op.arity = math.max(op.arity, i) end end
  local function inputs(dev, grad)
    local xs, leaves = {}, {}
    for i = 1, op.arity do
      local c = case[i]
      if c then
        local base = dev and c.base:to(dev) or c.base:clone()
        if grad and is_float(base) and not (case.nograd and case.nograd[i]) then
          base:requires_grad(true)
          leaves[i] = base
        end
        xs[i] = c.view(base)
      end
    end
    return xs, leaves
  end
  local want_grad = op.grad and not case.skip_grad
  local xc, lc = inputs(nil, want_grad)
  local okc, yc = run_f(op, case, xc)
  local xd, ld = inputs(device, want_grad)
  local okd, yd = run_f(op, case, xd)
  if not okc and not okd then return "both refuse" end
  if okc and not okd then
    if tostring(yd):find("not supported on device " .. device, 1, true) then return "unsupported" end
    return "fail", "the device raises where the cpu gives a value: " .. tostring(yd)
  end
  if not okc and okd then return "fail", "the device gives a value where the cpu raises: " .. tostring(yc) end
  local tol = op.tol or 2e-5
  local in_scale = nil
  if op.input_scale then   -- the largest finite input magnitude
    in_scale = 0
    for i = 1, op.arity do
      local c = case[i]
      if c and c.base:numel() > 0 then
        local v = c.base:float():abs():masked_fill(c.base:float():ne(c.base:float()), 0)
        v = v:masked_fill(v:eq(math.huge), 0)
        in_scale = math.max(in_scale, v:max():item())
      end
    end
  end
  local why = M.compare(yd, yc, tol, in_scale)
  if why ~= "ok" then return "fail", "forward: " .. why end
  if want_grad and is_float(yc) and next(lc) ~= nil and yc:requires_grad() then
    local dy = from_values(yc:shape(), "float32", function() return normal() end)
    local gok_c, gerr_c = pcall(function() (yc * dy):sum():backward() end)
    local gok_d, gerr_d = pcall(function() (yd * dy:to(device)):sum():backward() end)
    if gok_c ~= gok_d then
      if not gok_d and tostring(gerr_d):find("not supported on device " .. device, 1, true) then return "unsupported" end
      return "fail", "backward: " .. tostring(gok_c and gerr_d or gerr_c)
    end
    if gok_c then
      for i, leaf in pairs(lc) do
        local gc, gd = leaf:grad(), ld[i]:grad()
        if (gc == nil) ~= (gd == nil) then return "fail", "gradient " .. i .. ": present on one device only" end
        if gc then
          local gwhy = M.compare(gd, gc, (op.tol or 2e-5) * 10)
          if gwhy ~= "ok" then return "fail", "gradient " .. i .. ": " .. gwhy end
        end
      end
    end
  end
  return "agree"
end

-- opts: seed, cases (per op), device, op (a name: that op only), verbose.
-- Returns {ops = {name = {agree =, ["both refuse"] =, unsupported =, fail =}},
-- failures = {"op case k: why", ...}}.
function M.run(opts)
  opts = opts or {}
  local seed, ncases = opts.seed or 1, opts.cases or 10
  local device = opts.device or "vulkan"
  local report = {ops = {}, failures = {}}
  for _, op in ipairs(OPS) do
    if not opts.op or opts.op == op.name then
      local counts = {agree = 0, ["both refuse"] = 0, unsupported = 0, fail = 0}
      report.ops[op.name] = counts
      local state = math.random   -- one stream per op, so an op's cases do not depend on the others
      math.randomseed(seed, #op.name * 7919 + op.name:byte(1) * 31 + (op.name:byte(-1) or 0))
      rng = state
      for k = 1, ncases do
        local case = op.make()
        local ok, class, why = pcall(M.run_case, op, case, device)
        if not ok then class, why = "fail", "the harness raised: " .. tostring(class) end
        counts[class] = counts[class] + 1
        if class == "fail" then
          report.failures[#report.failures + 1] = string.format("%s case %d (seed %d): %s", op.name, k, seed, why)
        end
        if opts.verbose then print(op.name, k, class, why or "") end
      end
    end
  end
  return report
end
-- }======================================================

if arg and arg[0] and arg[0]:match("test_backend_ops%.lua$") then
  local usage = "usage: lua5.4 tools/test_backend_ops.lua [--seed N] [--cases N] [--op NAME] [--device NAME] [--verbose]"
  local opts = {seed = 1, cases = 200}
  local i = 1
  while i <= #arg do
    local a = arg[i]
    if a == "--help" or a == "-h" then
      print(usage .. "\nRuns every op and its gradient on the device and on the CPU over random cases (" ..
            "default 200 per op) and prints, per op, how many agree, both refuse, are not supported on " ..
            "the device, or fail; exit status 1 when a case fails.")
      os.exit(0)
    elseif a == "--verbose" then opts.verbose = true; i = i + 1
    elseif a == "--seed" or a == "--cases" then opts[a:sub(3)] = assert(tonumber(arg[i + 1]), a .. " needs a number"); i = i + 2
    elseif a == "--op" or a == "--device" then opts[a:sub(3)] = assert(arg[i + 1], a .. " needs a value"); i = i + 2
    else io.stderr:write(usage, "\n"); os.exit(2) end
  end
  local info = bert.backend_info().vulkan
  if (opts.device or "vulkan") == "vulkan" and not info.available then
    print("test_backend_ops: no vulkan device: " .. tostring(info.reason))
    os.exit(0)
  end
  local report = M.run(opts)
  local names = {}
  for name in pairs(report.ops) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local c = report.ops[name]
    print(string.format("%-14s agree %4d  both refuse %4d  unsupported %4d  fail %4d", name, c.agree,
                        c["both refuse"], c.unsupported, c.fail))
  end
  for _, f in ipairs(report.failures) do print("FAIL " .. f) end
  os.exit(#report.failures == 0 and 0 or 1)
end

return M
