local bert = require("bert")
local optim = require("bert.optim")

local K = bert.optim_kernels

-- {====================================================== helpers

local function flat(t)
  local out = {}
  local function rec(x) if type(x) == "number" then out[#out + 1] = x else for i = 1, #x do rec(x[i]) end end end
  rec(t:totable())
  return out
end

local function same_bits(a, b)
  local x, y = flat(a), flat(b)
  if #x ~= #y then return false end
  for i = 1, #x do if x[i] ~= y[i] then return false, i, x[i], y[i] end end
  return true
end

-- Deterministic pseudo-gradients: a different seed per (step, parameter).
local function grad_for(shape, step, k)
  return bert.randn(shape, {seed = 1000 * step + k})
end

local function set_grads(entries, step)
  for k, e in ipairs(entries) do
    local p = e.param or e
    p:set_grad(grad_for(p:shape(), step, k))
  end
end

local function params_fixture()
  return {
    {name = "bert.encoder.layer.0.attention.self.query.weight", param = bert.randn({4, 3}, {seed = 1})},
    {name = "bert.encoder.layer.0.attention.self.query.bias", param = bert.randn({4}, {seed = 2})},
    {name = "bert.encoder.layer.0.attention.output.LayerNorm.weight", param = bert.randn({4}, {seed = 3})},
    {name = "cls.predictions.transform.dense.weight", param = bert.randn({2, 5}, {seed = 4})},
  }
end

local function decays(name)
  return not (name:find("bias", 1, true) or name:find("LayerNorm.weight", 1, true))
end

-- Plain Lua (double precision) reference optimizers over flat lists.
local ref = {}

function ref.adamw(p, g, st, h, step, wd)
  st.m = st.m or {}; st.v = st.v or {}
  local bc1 = h.bias_correction and (1 - h.beta1 ^ step) or 1
  local bc2 = h.bias_correction and (1 - h.beta2 ^ step) or 1
  for i = 1, #p do
    local m = h.beta1 * (st.m[i] or 0) + (1 - h.beta1) * g[i]
    local v = h.beta2 * (st.v[i] or 0) + (1 - h.beta2) * g[i] * g[i]
    st.m[i], st.v[i] = m, v
    p[i] = p[i] * (1 - h.lr * wd) - (h.lr / bc1) * m / (math.sqrt(v) / math.sqrt(bc2) + h.eps)
  end
end

function ref.lamb(p, g, st, h, step, wd, adapt)
  st.m = st.m or {}; st.v = st.v or {}
  local bc1 = h.bias_correction and (1 - h.beta1 ^ step) or 1
  local bc2 = h.bias_correction and (1 - h.beta2 ^ step) or 1
  local u, pn, un = {}, 0, 0
  for i = 1, #p do
    local m = h.beta1 * (st.m[i] or 0) + (1 - h.beta1) * g[i]
    local v = h.beta2 * (st.v[i] or 0) + (1 - h.beta2) * g[i] * g[i]
    st.m[i], st.v[i] = m, v
    u[i] = (m / bc1) / (math.sqrt(v / bc2) + h.eps) + wd * p[i]
    pn, un = pn + p[i] ^ 2, un + u[i] ^ 2
  end
  pn, un = math.sqrt(pn), math.sqrt(un)
  local r = (adapt and pn > 0 and un > 0) and pn / un or 1
  for i = 1, #p do p[i] = p[i] - h.lr * r * u[i] end
  return r
end

function ref.sgd(p, g, st, h, step, wd)
  for i = 1, #p do
    local d = g[i] + wd * p[i]
    if h.momentum ~= 0 then
      st.buf = st.buf or {}
      local b = step == 1 and d or h.momentum * st.buf[i] + (1 - h.dampening) * d
      st.buf[i] = b
      d = h.nesterov and d + h.momentum * b or b
    end
    p[i] = p[i] - h.lr * d
  end
end

-- Runs `steps` steps of opt and of the reference; compares after each.
local function check_against_reference(make_opt, ref_fn, hyper, steps, tol, adapt_fn)
  local entries = params_fixture()
  local refp, refst = {}, {}
  for k, e in ipairs(entries) do refp[k] = flat(e.param); refst[k] = {} end
  local opt = make_opt(entries)
  for step = 1, steps do
    set_grads(entries, step)
    opt:step()
    for k, e in ipairs(entries) do
      local wd = decays(e.name) and (hyper.weight_decay or 0) or 0
      local adapt = adapt_fn and adapt_fn(wd)
      local r = ref_fn(refp[k], flat(grad_for(e.param:shape(), step, k)), refst[k], hyper, step, wd, adapt)
      assert.tensor_near(refp[k], e.param, tol)
      if opt.trust_ratios then
        assert.is_true(math.abs(opt.trust_ratios[e.name] - r) <= 1e-5 * r,
          string.format("trust ratio of %s: %g vs %g", e.name, opt.trust_ratios[e.name], r))
      end
    end
  end
  return opt, entries
end

local tmpfiles = {}
local function tmpname()
  local n = os.tmpname()
  tmpfiles[#tmpfiles + 1] = n
  return n
end
teardown(function() for _, n in ipairs(tmpfiles) do os.remove(n) end end)
-- }======================================================

describe("optim.AdamW", function()
  it("matches the reference with bias correction over several steps", function()
    local h = {lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.05, bias_correction = true}
    check_against_reference(function(ps)
      return optim.AdamW(ps, {lr = h.lr, weight_decay = h.weight_decay})
    end, ref.adamw, h, 6, 2e-6)
  end)

  it("matches the reference without bias correction and with custom betas", function()
    local h = {lr = 0.003, beta1 = 0.8, beta2 = 0.98, eps = 1e-6, weight_decay = 0.1, bias_correction = false}
    check_against_reference(function(ps)
      return optim.AdamW(ps, {lr = h.lr, betas = {0.8, 0.98}, eps = 1e-6, weight_decay = 0.1,
                              bias_correction = false})
    end, ref.adamw, h, 6, 2e-6)
  end)

  it("bert_original selects BERT's variant: eps 1e-6, no bias correction", function()
    local opt = optim.AdamW({bert.zeros({2})}, {bert_original = true, lr = 1e-4})
    assert.same({lr = 1e-4, beta1 = 0.9, beta2 = 0.999, eps = 1e-6, weight_decay = 0.01,
                 bias_correction = false}, opt:state_dict().hyper)
    -- the first update is (1-b1)/sqrt(1-b2) ~ 3.16 times lr per element
    local p = bert.tensor({1, -1, 0.5})
    p:set_grad(bert.tensor({2, -3, 0.25}))
    optim.AdamW({{name = "w.bias", param = p}}, {bert_original = true, lr = 0.1}):step()
    local function upd(g) return 0.1 * (0.1 * g) / (math.sqrt(0.001) * math.abs(g) + 1e-6) end
    assert.tensor_near({1 - upd(2), -1 - upd(-3), 0.5 - upd(0.25)}, p, 1e-6)
    assert.is_true(math.abs(flat(p)[1] - (1 - 0.31623)) < 1e-4)
    -- explicit options override the preset
    local o2 = optim.AdamW({bert.zeros({1})}, {bert_original = true, bias_correction = true, eps = 1e-8})
    assert.is_true(o2.hyper.bias_correction)
    assert.equal(1e-8, o2.hyper.eps)
  end)

  it("excludes biases and LayerNorm weights from weight decay by name", function()
    local names = {"bert.encoder.layer.0.attention.self.query.weight", "bert.encoder.layer.0.attention.self.query.bias",
                   "bert.embeddings.LayerNorm.weight", "bert.embeddings.LayerNorm.bias",
                   "bert.embeddings.word_embeddings.weight"}
    local entries = {}
    for i, n in ipairs(names) do
      entries[i] = {name = n, param = bert.full({3}, 2.0)}
      entries[i].param:set_grad(bert.zeros({3}))     -- zero grad: only decay moves p
    end
    local opt = optim.AdamW(entries, {lr = 0.5, weight_decay = 0.1})
    opt:step()
    local decayed = flat(bert.tensor({2.0 * (1 - 0.5 * 0.1)}))[1]   -- rounded to float32
    assert.same({decayed, decayed, decayed}, flat(entries[1].param))
    assert.same({2, 2, 2}, flat(entries[2].param))
    assert.same({2, 2, 2}, flat(entries[3].param))
    assert.same({2, 2, 2}, flat(entries[4].param))
    assert.same({decayed, decayed, decayed}, flat(entries[5].param))
    local flags = {}
    for _, e in ipairs(opt:param_entries()) do flags[#flags + 1] = e.decay end
    assert.same({true, false, false, false, true}, flags)
    -- custom list and predicate
    local o2 = optim.AdamW(entries, {no_decay = {"word_embeddings"}})
    assert.same({true, true, true, true, false}, (function()
      local f = {} for _, e in ipairs(o2:param_entries()) do f[#f + 1] = e.decay end return f end)())
    local o3 = optim.AdamW(entries, {no_decay = function(name, p) return p:numel() == 3 and name:find("query") ~= nil end})
    assert.same({false, false, true, true, true}, (function()
      local f = {} for _, e in ipairs(o3:param_entries()) do f[#f + 1] = e.decay end return f end)())
  end)

  it("accepts a plain list of tensors and an object with named_parameters()", function()
    local a, b = bert.tensor({1, 2}), bert.tensor({3})
    local opt = optim.AdamW({a, b}, {lr = 0.1, weight_decay = 0})
    a:set_grad(bert.tensor({1, -1}))
    opt:step()
    assert.tensor_near({0.9, 2.1}, a, 1e-6)
    assert.same({3}, flat(b))                      -- no grad: skipped, no state
    local sd = opt:state_dict()
    assert.same({["1"] = 1}, sd.param_steps)
    assert.is_nil(sd.tensors["exp_avg.2"])
    local model = setmetatable({}, {__index = {named_parameters = function()
      return {{name = "w", param = a}} end}})
    assert.equal("w", optim.AdamW(model):param_entries()[1].name)
  end)

  it("keeps per-parameter step counts for bias correction", function()
    local a, b = bert.tensor({1}), bert.tensor({1})
    local opt = optim.AdamW({a, b}, {lr = 0.1, weight_decay = 0})
    a:set_grad(bert.tensor({1}))
    opt:step()
    b:set_grad(bert.tensor({1}))
    opt:step()
    -- b's first update is a full bias-corrected step (lr * sign) despite being step 2
    assert.tensor_near({0.9}, b, 1e-6)
    assert.same({["1"] = 2, ["2"] = 1}, opt:state_dict().param_steps)
    assert.equal(2, opt:state_dict().step)
  end)

  it("zero_grad zeroes the gradients in place", function()
    local p = bert.tensor({1, 2})
    local g = bert.tensor({5, 6})
    p:set_grad(g)
    local opt = optim.AdamW({p})
    opt:zero_grad()
    assert.same({0, 0}, flat(g))
    assert.same({0, 0}, flat(p:grad()))
    opt:zero_grad({set_to_none = true})
    assert.is_nil(p:grad())
  end)

  it("set_lr changes the step size", function()
    local p = bert.tensor({0})
    local opt = optim.AdamW({p}, {lr = 1, weight_decay = 0})
    opt:set_lr(0.25)
    assert.equal(0.25, opt:get_lr())
    p:set_grad(bert.tensor({3}))
    opt:step()
    assert.tensor_near({-0.25}, p, 1e-6)
  end)

  it("gives results independent of the thread count on large tensors", function()
    local n = 100003
    local function run(threads)
      local old = bert.get_num_threads()
      bert.set_num_threads(threads)
      local p = bert.randn({n}, {seed = 7})
      local p2 = bert.randn({n}, {seed = 7})
      local opt = optim.AdamW({p}, {lr = 0.01})
      local lamb = optim.LAMB({p2}, {lr = 0.01})
      for s = 1, 2 do
        p:set_grad(bert.randn({n}, {seed = 100 + s}))
        p2:set_grad(bert.randn({n}, {seed = 100 + s}))
        opt:step(); lamb:step()
      end
      local norm = optim.grad_norm({p})
      bert.set_num_threads(old)
      return p, p2, norm
    end
    local a1, l1, n1 = run(1)
    local a2, l2, n2 = run(2)
    assert.is_true(same_bits(a1, a2))
    assert.is_true(same_bits(l1, l2))
    assert.equal(n1, n2)
  end)
end)

describe("optim.LAMB", function()
  it("matches the reference (trust ratio only for decayed parameters)", function()
    local h = {lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-6, weight_decay = 0.01, bias_correction = true}
    check_against_reference(function(ps) return optim.LAMB(ps, {lr = 0.01}) end,
      ref.lamb, h, 5, 2e-6, function(wd) return wd ~= 0 end)
  end)

  it("matches the reference with always_adapt and no bias correction", function()
    local h = {lr = 0.02, beta1 = 0.9, beta2 = 0.99, eps = 1e-6, weight_decay = 0.1, bias_correction = false}
    check_against_reference(function(ps)
      return optim.LAMB(ps, {lr = 0.02, betas = {0.9, 0.99}, weight_decay = 0.1, bias_correction = false,
                             always_adapt = true})
    end, ref.lamb, h, 5, 2e-6, function() return true end)
  end)

  it("falls back to a trust ratio of 1 when a norm is zero", function()
    local z = bert.zeros({3})
    z:set_grad(bert.tensor({1, -1, 2}))
    local opt = optim.LAMB({{name = "w", param = z}}, {lr = 0.1})
    opt:step()
    assert.equal(1, opt.trust_ratios.w)
    assert.tensor_near({-0.1, 0.1, -0.1}, z, 1e-5)
    -- zero update (zero grad and zero weight decay contribution)
    local q = bert.tensor({3, 4})
    q:set_grad(bert.zeros({2}))
    local o2 = optim.LAMB({{name = "w", param = q}}, {lr = 0.1, weight_decay = 0, always_adapt = true})
    o2:step()
    assert.equal(1, o2.trust_ratios.w)
    assert.same({3, 4}, flat(q))
    -- with weight decay only: u = wd*p, |p|/|u| = 1/wd, so p -= lr*p
    local r = bert.tensor({3, 4})
    r:set_grad(bert.zeros({2}))
    local o3 = optim.LAMB({{name = "w", param = r}}, {lr = 0.1, weight_decay = 0.5})
    o3:step()
    assert.is_true(math.abs(o3.trust_ratios.w - 2) < 1e-6)
    assert.tensor_near({2.7, 3.6}, r, 1e-6)
  end)
end)

describe("optim: one pass over every parameter (adamw_multi, lamb_multi)", function()
  -- The per-parameter kernels, driven by hand: the reference the one-call
  -- step must equal bit for bit.
  local function per_parameter_run(kind, model_params, hyper, steps, skip)
    local st, trust = {}, {}
    for s = 1, steps do
      for k, e in ipairs(model_params) do
        if not (skip and skip(s, k)) then
          local g = grad_for(e.param:shape(), s, k)
          local t = st[k] or {m = bert.zeros(e.param:shape()), v = bert.zeros(e.param:shape()), n = 0}
          st[k] = t
          t.n = t.n + 1
          local wd = decays(e.name) and hyper.weight_decay or 0.0
          if kind == "AdamW" then
            K.adamw(e.param, g, t.m, t.v, hyper.lr, 0.9, 0.999, hyper.eps, wd, true, t.n)
          else
            trust[e.name] = K.lamb(e.param, g, t.m, t.v, hyper.lr, 0.9, 0.999, hyper.eps, wd, true, t.n, wd ~= 0)
          end
        end
      end
    end
    return st, trust
  end

  local function one_call_run(kind, model_params, hyper, steps, skip)
    local opt = optim[kind](model_params, {lr = hyper.lr, eps = hyper.eps, weight_decay = hyper.weight_decay,
                                           no_decay = function(name) return not decays(name) end})
    -- the per-parameter kernels must not run (no silent fallback)
    local adamw, lamb = K.adamw, K.lamb
    K.adamw = function() error("per-parameter adamw called") end
    K.lamb = function() error("per-parameter lamb called") end
    local ok, err = pcall(function()
      for s = 1, steps do
        for k, e in ipairs(model_params) do
          e.param:set_grad((not (skip and skip(s, k))) and grad_for(e.param:shape(), s, k) or nil)
        end
        opt:step()
      end
    end)
    K.adamw, K.lamb = adamw, lamb
    assert(ok, err)
    return opt
  end

  -- parameters large enough for several blocks and threads, plus small ones
  local function fixture()
    local list = params_fixture()
    list[#list + 1] = {name = "big.weight", param = bert.randn({70001}, {seed = 11})}
    list[#list + 1] = {name = "big.bias", param = bert.randn({131075}, {seed = 12})}
    return list
  end

  for _, kind in ipairs({"AdamW", "LAMB"}) do
    it(kind .. ": 10 steps equal the per-parameter kernels bit for bit, at 1 and 2 threads", function()
      local hyper = {lr = 0.01, eps = 1e-6, weight_decay = 0.05}
      -- parameter 2 skips steps 3 and 4 (no gradient): its own step count
      local function skip(s, k) return k == 2 and (s == 3 or s == 4) end
      for _, threads in ipairs({1, 2}) do
        local old = bert.get_num_threads()
        bert.set_num_threads(threads)
        local ref, fast = fixture(), fixture()
        local st, trust = per_parameter_run(kind, ref, hyper, 10, skip)
        local opt = one_call_run(kind, fast, hyper, 10, skip)
        bert.set_num_threads(old)
        local sd = opt:state_dict()
        for k, e in ipairs(ref) do
          local name = e.name
          assert.is_true(same_bits(e.param, fast[k].param), name .. " param")
          assert.is_true(same_bits(st[k].m, sd.tensors["exp_avg." .. name]), name .. " exp_avg")
          assert.is_true(same_bits(st[k].v, sd.tensors["exp_avg_sq." .. name]), name .. " exp_avg_sq")
          assert.equal(st[k].n, sd.param_steps[name])
          if kind == "LAMB" then assert.equal(trust[name], opt.trust_ratios[name]) end
        end
      end
    end)
  end

  it("works over a flattened model's arenas", function()
    local function build()
      bert.manual_seed(5)
      return bert.model("BertForPreTraining", {vocab_size = 40, hidden_size = 16, num_hidden_layers = 1,
        num_attention_heads = 2, intermediate_size = 32, max_position_embeddings = 8})
    end
    local a, b = build(), build()
    local ref = a:named_parameters()
    local hyper = {lr = 0.01, eps = 1e-6, weight_decay = 0.01}
    local st = per_parameter_run("AdamW", ref, hyper, 3)
    local fast = b:named_parameters()
    local opt = one_call_run("AdamW", fast, hyper, 3)
    for k = 1, #ref do assert.is_true(same_bits(ref[k].param, fast[k].param), ref[k].name) end
    local sd = opt:state_dict()
    for k = 1, #ref do assert.is_true(same_bits(st[k].v, sd.tensors["exp_avg_sq." .. ref[k].name])) end
  end)

  it("steps beside an empty parameter", function()
    local hyper = {lr = 0.01, eps = 1e-6, weight_decay = 0.01}
    local function list() return {{name = "empty.weight", param = bert.zeros({0, 3})},
                                  {name = "w.weight", param = bert.randn({5}, {seed = 31})}} end
    local ref, fast = list(), list()
    per_parameter_run("AdamW", ref, hyper, 2)
    one_call_run("AdamW", fast, hyper, 2)
    assert.is_true(same_bits(ref[2].param, fast[2].param))
  end)

  it("refuses arguments that do not fit, naming the kernel, list and element", function()
    local p, g, m, v = bert.zeros({4}), bert.zeros({4}), bert.zeros({4}), bert.zeros({4})
    assert.error_matches(function() K.adamw_multi({p}, {g, g}, {m}, {v}, {0}, {1}, 0.1, 0.9, 0.999, 1e-8, true) end,
      "adamw_multi: argument #2 %(grads%) has 2 elements, the parameter list 1")
    assert.error_matches(function() K.adamw_multi({p}, {"g"}, {m}, {v}, {0}, {1}, 0.1, 0.9, 0.999, 1e-8, true) end,
      "adamw_multi: argument #2 %(grads%): element 1 is not a bert.Tensor")
    assert.error_matches(function() K.adamw_multi({p}, {g}, {m}, {v}, {0}, {1.5}, 0.1, 0.9, 0.999, 1e-8, true) end,
      "adamw_multi: argument #6 %(steps%): element 1 is not an integer")
    assert.error_matches(function() K.adamw_multi({p}, {g}, {m}, {v}, {0}, {0}, 0.1, 0.9, 0.999, 1e-8, true) end,
      "adamw_multi: step 0 of parameter 1 must be >= 1")
    assert.error_matches(function() K.adamw_multi({p}, {g}, {m}, {bert.zeros({5})}, {0}, {1}, 0.1, 0.9, 0.999, 1e-8, true) end,
      "adamw_multi: exp_avg_sq 1 %[5%] has 5 elements but param %[4%] has 4")
    -- two parameters' moments overlapping: refused before anything is written
    local arena = bert.zeros({6})
    local p2, g2 = bert.ones({4}), bert.ones({4})
    assert.error_matches(function()
      K.lamb_multi({p, p2}, {g, g2}, {arena:narrow(1, 1, 4), arena:narrow(1, 3, 4)}, {v, bert.zeros({4})},
                   {0, 0}, {1, 1}, {true, true}, 0.1, 0.9, 0.999, 1e-8, true)
    end, "lamb_multi: exp_avg 1 and exp_avg 2 share memory")
    assert.is_true(same_bits(p2, bert.ones({4})))
    assert.error_matches(function() K.lamb_multi({p}, {g}, {m}, {v}, {0}, {1}, {true}, 0.1, 1.5, 0.999, 1e-8, true) end,
      "lamb_multi: betas %(1.5, 0.999%) must lie in %[0, 1%)")
  end)
end)

describe("optim.SGD", function()
  local cases = {
    {name = "plain", opts = {lr = 0.1}},
    {name = "momentum", opts = {lr = 0.1, momentum = 0.9}},
    {name = "momentum + dampening + weight decay", opts = {lr = 0.05, momentum = 0.8, dampening = 0.3, weight_decay = 0.01}},
    {name = "nesterov + weight decay", opts = {lr = 0.05, momentum = 0.9, nesterov = true, weight_decay = 0.1}},
  }
  for _, c in ipairs(cases) do
    it("matches the reference: " .. c.name, function()
      local h = {lr = c.opts.lr, momentum = c.opts.momentum or 0, dampening = c.opts.dampening or 0,
                 weight_decay = c.opts.weight_decay or 0, nesterov = c.opts.nesterov or false}
      check_against_reference(function(ps) return optim.SGD(ps, c.opts) end, ref.sgd, h, 5, 1e-6)
    end)
  end
end)

describe("optim.clip_grad_norm", function()
  it("returns the global norm and scales gradients above max_norm", function()
    local a, b = bert.tensor({3, 0}), bert.tensor({{0, 4}})
    a:set_grad(bert.tensor({3, 0}))
    b:set_grad(bert.tensor({{0, 4}}))
    local c = bert.tensor({1})                       -- no grad: ignored
    local total = optim.clip_grad_norm({a, b, c}, 1.0)
    assert.equal(5, total)
    local s = 1.0 / (5 + 1e-6)
    assert.tensor_near({3 * s, 0}, a:grad(), 1e-6)
    assert.tensor_near({{0, 4 * s}}, b:grad(), 1e-6)
    assert.is_true(math.abs(optim.grad_norm({a, b}) - 1) < 1e-5)
  end)

  it("leaves gradients below max_norm untouched and accepts an optimizer", function()
    local p = bert.tensor({1, 2})
    p:set_grad(bert.tensor({0.3, 0.4}))
    local opt = optim.SGD({{name = "w", param = p}}, {lr = 1})
    assert.is_true(math.abs(optim.clip_grad_norm(opt, 1.0) - 0.5) < 1e-7)
    assert.same(flat(bert.tensor({0.3, 0.4})), flat(p:grad()))
  end)

  it("matches a plain sum of squares over many tensors", function()
    local ps, expect = {}, 0
    for k = 1, 5 do
      ps[k] = bert.zeros({k * 7 + 40000 * (k == 3 and 1 or 0)})
      local g = grad_for(ps[k]:shape(), 1, k)
      ps[k]:set_grad(g)
      for _, x in ipairs(flat(g)) do expect = expect + x * x end
    end
    local total = optim.clip_grad_norm(ps, 1e9)
    assert.is_true(math.abs(total - math.sqrt(expect)) <= 1e-6 * math.sqrt(expect))
  end)
end)

describe("zero_grad (streaming stores)", function()
  it("zeroes exactly the gradients, unaligned and large, and the optimizer's and module's lists", function()
    -- 1.5M + 3 elements starting 3 floats into an arena: unaligned head,
    -- vector body, tail; the neighbours stay
    local n = 1500003
    local arena = bert.full({n + 7}, 5)
    local view = arena:narrow(1, 4, n)
    K.zero_grad_({view, bert.full({5}, 1)})
    assert.equal(0, view:abs():max():item())
    assert.same({5, 5, 5}, arena:narrow(1, 1, 3):totable())
    assert.same({5, 5, 5, 5}, arena:narrow(1, n + 4, 4):totable())
    local strided = bert.full({4, 6}, 2):narrow(2, 2, 3)   -- not contiguous: fill_ path
    K.zero_grad_(strided)
    assert.equal(0, strided:abs():max():item())
    local p, q = bert.ones({3}), bert.ones({70000})
    p:set_grad(bert.full({3}, 4)); q:set_grad(bert.full({70000}, 4))
    optim.AdamW({p, q}, {lr = 0.1}):zero_grad()
    assert.equal(0, p:grad():abs():max():item() + q:grad():abs():max():item())
    local model = bert.nn.Linear(300, 200)
    model:flatten_parameters()
    model.flat_grad:fill_(3)
    model:zero_grad()
    assert.equal(0, model.flat_grad:abs():max():item())
    assert.error_matches(function() K.zero_grad_({view, "x"}) end,
      "zero_grad_: argument #1: element 2 is string, not a bert.Tensor")
  end)
end)

describe("opt:step{grad_scale}: clipping inside the update", function()
  -- two steps of kind over fresh parameters: clip_grad_norm then step(), or
  -- grad_norm then step{grad_scale}; returns the parameters and the gradients
  local function run(kind, fused, max_norm, per_parameter)
    local ps, named = {}, {}
    for k, shape in ipairs({{3, 5}, {7}, {40000}}) do
      ps[k] = bert.randn(shape, {seed = 10 + k})
      named[k] = {name = "w" .. k, param = ps[k]}
    end
    local opt = optim[kind](named, kind == "SGD" and {lr = 0.1, momentum = 0.9} or {lr = 0.01})
    if per_parameter then opt._update_multi = false end
    for s = 1, 2 do
      for k, p in ipairs(ps) do p:set_grad(grad_for(p:shape(), s, k):mul(3)) end
      if fused then
        opt:step{grad_scale = optim.clip_scale(optim.grad_norm(opt), max_norm)}
      else
        optim.clip_grad_norm(opt, max_norm)
        opt:step()
      end
    end
    return ps, opt
  end

  for _, kind in ipairs({"AdamW", "LAMB", "SGD"}) do
    for _, per_parameter in ipairs({false, true}) do
      it(kind .. (per_parameter and " (per-parameter path)" or "") .. ": bit-identical to clip_grad_norm + step", function()
        for _, max_norm in ipairs({0.5, 1e6}) do   -- clipping, and not
          local a = run(kind, false, max_norm, per_parameter)
          local b = run(kind, true, max_norm, per_parameter)
          for k = 1, #a do assert.is_true(same_bits(a[k], b[k]), kind .. " parameter " .. k) end
        end
      end)
    end
  end

  it("leaves the gradients unscaled on the host's one-call path", function()
    local p = bert.randn({300}, {seed = 1})
    local g = bert.randn({300}, {seed = 2})
    p:set_grad(g:clone())
    local opt = optim.AdamW({{name = "w", param = p}}, {lr = 0.01})
    opt:step{grad_scale = 0.25}
    assert.is_true(same_bits(g, p:grad()))
  end)

  it("clip_scale is max_norm / (norm + 1e-6) below 1, else 1", function()
    assert.equal(1, optim.clip_scale(0.5, 1.0))
    assert.equal(1, optim.clip_scale(0, 1.0))
    assert.equal(2.0 / (8 + 1e-6), optim.clip_scale(8, 2.0))
  end)

  it("checks its arguments", function()
    local p = bert.zeros({2})
    p:set_grad(bert.ones({2}))
    local opt = optim.AdamW({{name = "w", param = p}}, {lr = 0.01})
    for _, bad in ipairs({0, -1, 0 / 0, math.huge, "1"}) do
      assert.error_matches(function() opt:step{grad_scale = bad} end,
        "optim.AdamW.step: option 'grad_scale' must be a finite number > 0, got")
    end
    assert.error_matches(function() opt:step{grad_scal = 1} end, "optim.AdamW.step: unknown option 'grad_scal' %(the options: grad_scale%)")
    assert.error_matches(function() opt:step(1) end, "optim.AdamW.step: argument #1 %(opts%) must be a table or nil")
    assert.same(flat(bert.zeros({2})), flat(p))   -- nothing was stepped
    assert.error_matches(function() optim.clip_scale(0 / 0, 1) end,
      "optim.clip_scale: argument #1 %(norm%) must be a finite number >= 0")
    assert.error_matches(function() optim.clip_scale(1, 0) end,
      "optim.clip_scale: argument #2 %(max_norm%) must be a number > 0")
    assert.error_matches(function()
      K.adamw_multi({p}, {p:grad()}, {bert.zeros({2})}, {bert.zeros({2})}, {0}, {1}, 0.1, 0.9, 0.999, 1e-8, true, -2)
    end, "adamw_multi: grad_scale %-2 must be finite and > 0")
  end)
end)

describe("optim.schedule", function()
  local function near(a, b) return math.abs(a - b) <= 1e-12 * math.max(1, math.abs(b)) end

  it("linear: HF warmup then linear decay to 0", function()
    local f = optim.schedule{kind = "linear", warmup = 10, total = 110, lr = 1e-3}
    assert.equal(0, f(0))
    assert.is_true(near(f(5), 5e-4))
    assert.is_true(near(f(9), 9e-4))
    assert.is_true(near(f(10), 1e-3))
    assert.is_true(near(f(60), 5e-4))
    assert.equal(0, f(110))
    assert.equal(0, f(200))
  end)

  it("linear_tf: TF BERT decays from step 0, jumping at the warmup end", function()
    local f = optim.schedule{kind = "linear_tf", warmup = 10, total = 100, lr = 1}
    assert.is_true(near(f(9), 0.9))
    assert.is_true(near(f(10), 0.9))
    assert.is_true(near(f(50), 0.5))
    assert.equal(0, f(100))
  end)

  it("cosine: half-cosine from lr to min_lr, constant after total", function()
    local f = optim.schedule{kind = "cosine", warmup = 4, total = 104, lr = 2, min_lr = 0.5}
    assert.equal(0, f(0))
    assert.is_true(near(f(2), 1))
    assert.is_true(near(f(4), 2))
    assert.is_true(near(f(54), 1.25))
    assert.is_true(near(f(104), 0.5))
    assert.is_true(near(f(500), 0.5))
  end)

  it("constant: warmup then flat; no warmup means flat from step 0", function()
    local f = optim.schedule{kind = "constant", warmup = 4, lr = 3}
    assert.is_true(near(f(1), 0.75))
    assert.equal(3, f(4))
    assert.equal(3, f(10 ^ 6))
    assert.equal(3, optim.schedule{kind = "constant", lr = 3}(0))
  end)

  it("Scheduler drives the optimizer's lr and restores its state", function()
    local opt = optim.AdamW({bert.zeros({1})}, {lr = 123})
    local fn = optim.schedule{kind = "linear", warmup = 2, total = 6, lr = 1}
    local s = optim.Scheduler(opt, fn)
    assert.equal(0, opt:get_lr())
    assert.equal(0.5, s:step())
    s:step(); s:step()
    assert.equal(0.75, opt:get_lr())
    local sd = s:state_dict()
    assert.same({step = 3}, sd)
    local opt2 = optim.AdamW({bert.zeros({1})})
    local s2 = optim.Scheduler(opt2, fn)
    s2:load_state_dict(sd)
    assert.equal(0.75, opt2:get_lr())
    assert.equal(s:step(), s2:step())
  end)
end)

describe("optimizer state", function()
  local makers = {
    AdamW = function(ps) return optim.AdamW(ps, {lr = 0.01, weight_decay = 0.02}) end,
    ["AdamW (BERT)"] = function(ps) return optim.AdamW(ps, {lr = 0.01, bert_original = true}) end,
    LAMB = function(ps) return optim.LAMB(ps, {lr = 0.01}) end,
    SGD = function(ps) return optim.SGD(ps, {lr = 0.01, momentum = 0.9, nesterov = true, weight_decay = 0.01}) end,
  }
  for kind, make in pairs(makers) do
    it(kind .. ": state_dict round-trips through safetensors, continuing bit for bit", function()
      local a = params_fixture()
      local opt = make(a)
      local sched = optim.Scheduler(opt, optim.schedule{kind = "cosine", warmup = 1, total = 9, lr = 0.01})
      for step = 1, 3 do set_grads(a, step); opt:step(); sched:step() end
      -- snapshot: parameters, optimizer state (+ scheduler step in metadata)
      local path = tmpname()
      local weights = {}
      for _, e in ipairs(a) do weights[e.name] = e.param end
      assert.is_true(bert.save_safetensors(path .. ".w", weights))
      tmpfiles[#tmpfiles + 1] = path .. ".w"
      assert.is_true(optim.save_state(path, opt, {sched_step = sched:state_dict().step}))
      -- resume in a fresh optimizer
      local loaded = bert.load_safetensors(path .. ".w")
      local b = params_fixture()
      for _, e in ipairs(b) do e.param:copy_(loaded[e.name]) end
      local opt2 = make(b)
      opt2:set_lr(42)
      local sd, meta = optim.load_state(path)
      opt2:load_state_dict(sd)
      local sched2 = optim.Scheduler(opt2, optim.schedule{kind = "cosine", warmup = 1, total = 9, lr = 0.01})
      sched2:load_state_dict({step = tonumber(meta.sched_step)})
      assert.equal(opt:get_lr(), opt2:get_lr())
      assert.same(opt:state_dict().hyper, opt2:state_dict().hyper)
      assert.same(opt:state_dict().param_steps, opt2:state_dict().param_steps)
      for step = 4, 6 do
        set_grads(a, step); opt:step(); sched:step()
        set_grads(b, step); opt2:step(); sched2:step()
      end
      for k = 1, #a do
        local ok, i, x, y = same_bits(a[k].param, b[k].param)
        assert.is_true(ok, string.format("%s element %s: %s vs %s", a[k].name, tostring(i), tostring(x), tostring(y)))
      end
      local t1, t2 = opt:state_dict().tensors, opt2:state_dict().tensors
      for key, t in pairs(t1) do assert.is_true(same_bits(t, t2[key]), key) end
    end)
  end

  it("state_to_safetensors writes plain values as exact metadata strings", function()
    local p = bert.tensor({1, 2})
    p:set_grad(bert.tensor({1, 1}))
    local opt = optim.AdamW({{name = "enc.w", param = p}}, {lr = 0.1, eps = 1e-7})
    opt:step()
    local tensors, meta = optim.state_to_safetensors(opt:state_dict())
    assert.equal("AdamW", meta["bert.optim.kind"])
    assert.equal("1", meta["bert.optim.step"])
    assert.equal("1", meta["bert.optim.param_step.enc.w"])
    assert.equal("true", meta["bert.optim.hyper.bias_correction"])
    assert.equal(0.1, tonumber(meta["bert.optim.hyper.lr"]))
    assert.equal(1e-7, tonumber(meta["bert.optim.hyper.eps"]))
    assert.is_not_nil(tensors["exp_avg.enc.w"])
    assert.is_not_nil(tensors["exp_avg_sq.enc.w"])
    local sd = optim.state_from_safetensors(tensors, meta)
    assert.same(opt:state_dict().hyper, sd.hyper)
    assert.equal("float", math.type(sd.hyper.weight_decay))
  end)

  it("load_state_dict copies the buffers", function()
    local p = bert.tensor({1})
    p:set_grad(bert.tensor({1}))
    local opt = optim.AdamW({p})
    opt:step()
    local sd = opt:state_dict()
    local opt2 = optim.AdamW({bert.tensor({1})})
    opt2:load_state_dict(sd)
    sd.tensors["exp_avg.1"]:fill_(7)
    assert.is_true(flat(opt2:state_dict().tensors["exp_avg.1"])[1] < 1)
  end)
end)

describe("convergence", function()
  it("AdamW, LAMB and SGD minimise a quadratic", function()
    local target = bert.tensor({1, -2, 3, 0.5})
    local makers = {
      function(ps) return optim.AdamW(ps, {lr = 0.1, weight_decay = 0}) end,
      function(ps) return optim.LAMB(ps, {lr = 0.1, weight_decay = 0, always_adapt = false}) end,
      function(ps) return optim.SGD(ps, {lr = 0.1, momentum = 0.9}) end,
    }
    for _, make in ipairs(makers) do
      local p = bert.zeros({4})
      local opt = make({p})
      local sched = optim.Scheduler(opt, optim.schedule{kind = "linear", warmup = 10, total = 400,
                                                        lr = opt:get_lr()})
      p:set_grad(bert.zeros({4}))
      for _ = 1, 300 do
        p:grad():copy_((p - target) * 2)           -- d/dp sum((p - t)^2)
        opt:step()
        sched:step()
      end
      assert.tensor_near(target, p, 1e-2)
    end
  end)

  it("works with gradients from autograd", function()
    -- an autograd regression must fail here, not turn into "pending"
    local q = bert.tensor({1.5}):requires_grad(true)
    ;(q * q):sum():backward()
    assert.tensor_near({3}, q:grad(), 1e-6)
    local p = bert.tensor({2, -3}):requires_grad(true)
    local opt = optim.AdamW({p}, {lr = 0.05, weight_decay = 0})
    for _ = 1, 300 do
      opt:zero_grad()
      local loss = (p * p):sum()
      loss:backward()
      opt:step()
    end
    assert.is_true(math.abs(flat(p)[1]) < 0.05 and math.abs(flat(p)[2]) < 0.05)
  end)
end)

describe("optim errors", function()
  it("reports bad constructor arguments", function()
    local p = bert.zeros({2})
    assert.error_matches(function() optim.AdamW("x") end, "optim.AdamW: argument #1 %(params%)")
    assert.error_matches(function() optim.AdamW({}) end, "optim.AdamW: argument #1 %(params%) is empty")
    assert.error_matches(function() optim.AdamW({p, 3}) end, "optim.AdamW: params%[2%] is 3, not a bert.Tensor")
    assert.error_matches(function() optim.AdamW({p}, {lr = -1}) end, "optim.AdamW: option 'lr' must be >= 0, got %-1")
    assert.error_matches(function() optim.AdamW({p}, {lr = 0 / 0}) end, "option 'lr' must be a finite number")
    assert.error_matches(function() optim.AdamW({p}, {betas = {0.9, 1}}) end, "betas%[2%] must be a number in %[0, 1%)")
    assert.error_matches(function() optim.AdamW({p}, {momentum = 0.9}) end, "optim.AdamW: unknown option 'momentum'")
    assert.error_matches(function() optim.AdamW({p}, {bias_correction = 1}) end, "option 'bias_correction' must be a boolean")
    assert.error_matches(function() optim.AdamW({p, p}) end, "params%[2%] %('2'%) is the same tensor as params%[1%]")
    assert.error_matches(function() optim.AdamW({{name = "a", param = p}, {name = "a", param = bert.zeros({1})}}) end,
      "parameter name 'a' appears twice")
    assert.error_matches(function() optim.AdamW({bert.zeros({2}, "int32")}) end,
      "parameter '1' %[2%] is int32, expected float32")
    assert.error_matches(function() optim.AdamW({bert.zeros({2, 3}):transpose(1, 2)}) end,
      "parameter '1' %[3 x 2%] is not contiguous")
    assert.error_matches(function() optim.AdamW({p}, {no_decay = "bias"}) end, "option 'no_decay' must be a list")
    assert.error_matches(function() optim.SGD({p}, {}) end, "optim.SGD: option 'lr' is required")
    assert.error_matches(function() optim.SGD({p}, {lr = 1, nesterov = true}) end,
      "nesterov momentum requires momentum > 0 and dampening 0")
    assert.error_matches(function() optim.AdamW({p}):set_lr("fast") end, "optim.AdamW.set_lr: lr must be a finite number")
  end)

  it("kernels name the function, argument and shapes", function()
    local p, g, m, v = bert.zeros({2, 3}), bert.zeros({6}), bert.zeros({2, 3}), bert.zeros({5})
    assert.error_matches(function() K.adamw(p, g, m, v, 0.1, 0.9, 0.999, 1e-8, 0, true, 1) end,
      "adamw: exp_avg_sq %[5%] has 5 elements but param %[2 x 3%] has 6")
    assert.error_matches(function() K.adamw(p, g, m, m, 0.1, 0.9, 0.999, 1e-8, 0, true, 1) end,
      "adamw: exp_avg and exp_avg_sq share memory")
    assert.error_matches(function() K.adamw(p, g, m, bert.zeros({6}), 0.1, 0.9, 0.999, 1e-8, 0, true, 0) end,
      "adamw: step 0 must be >= 1")
    assert.error_matches(function() K.adamw(p, g, m, bert.zeros({6}), 0.1, 0.9, 0.999, 1e-8, 0, true, 1.5) end,
      "adamw: argument #11 %(step%): expected an integer")
    assert.error_matches(function() K.adamw(p, "g", m, v, 0.1, 0.9, 0.999, 1e-8, 0, true, 1) end,
      "adamw: argument #2 %(grad%): expected a bert.Tensor, got string")
    assert.error_matches(function() K.lamb(p, bert.zeros({6}, "int32"), m, bert.zeros({6}), 0.1, 0.9, 0.999, 1e-8, 0, true, 1) end,
      "lamb: grad %[6%] is int32, expected float32")
    assert.error_matches(function() K.lamb(p, g, m, bert.zeros({6}), 0.1, 1.5, 0.999, 1e-8, 0, true, 1) end,
      "lamb: betas %(1.5, 0.999%) must lie in %[0, 1%)")
    assert.error_matches(function() K.sgd(p, bert.zeros({3, 2}):transpose(1, 2), nil, 0.1, 0, 0, 0) end,
      "sgd: grad %[2 x 3%] is not contiguous")
    assert.error_matches(function() K.sgd(p, g, nil, 0.1, 0.9, 0, 0) end, "sgd: momentum 0.9 needs a momentum buffer")
    assert.error_matches(function() K.sgd(p, g, nil, 1 / 0, 0, 0, 0) end, "sgd: argument #4 %(lr%): inf is not finite")
    assert.error_matches(function() K.sumsq({g, "x"}) end, "sumsq: argument #1: element 2 is string")
    assert.error_matches(function() K.sumsq({bert.zeros({2}, "int32")}) end, "sumsq: argument #1: element 1: .*int32")
    assert.error_matches(function() K.scale_(g, 0 / 0) end, "scale_: argument #2 %(factor%)")
  end)

  it("step names the parameter whose gradient does not fit", function()
    local p = bert.zeros({2, 3})
    local opt = optim.AdamW({{name = "enc.w", param = p}})
    p:set_grad(bert.zeros({2, 3}))
    opt:step()
    -- a gradient that is a strided view (set_grad checks only its shape)
    p:set_grad(bert.zeros({3, 2}):transpose(1, 2))
    assert.error_matches(function() opt:step() end,
      "optim.AdamW.step: parameter 'enc.w' %[2 x 3%]: adamw: grad %[2 x 3%] is not contiguous")
    assert.equal(1, opt:state_dict().param_steps["enc.w"])
  end)

  it("load_state_dict rejects state that does not fit", function()
    local p = bert.tensor({1, 2})
    p:set_grad(bert.tensor({1, 1}))
    local opt = optim.AdamW({{name = "w", param = p}})
    opt:step()
    local sd = opt:state_dict()
    assert.error_matches(function() optim.LAMB({{name = "w", param = p}}):load_state_dict(sd) end,
      "optim.LAMB.load_state_dict: state dict is for \"AdamW\", not LAMB")
    assert.error_matches(function() optim.AdamW({{name = "v", param = p}}):load_state_dict(sd) end,
      "state for unknown parameter 'w'")
    assert.error_matches(function() optim.AdamW({{name = "w", param = bert.zeros({3})}}):load_state_dict(sd) end,
      "tensor 'exp_avg.w' is %[2%] float32, parameter 'w' is %[3%] float32")
    assert.error_matches(function() optim.AdamW({p}):load_state_dict({}) end, "not a version%-1 bert.optim state dict")
    local sd2 = opt:state_dict()
    sd2.tensors["exp_avg_sq.w"] = nil
    assert.error_matches(function() optim.AdamW({{name = "w", param = p}}):load_state_dict(sd2) end,
      "tensor 'exp_avg_sq.w' is missing")
    assert.error_matches(function() optim.Scheduler(opt, function() return 0.1 end):load_state_dict({step = -1}) end,
      "optim.Scheduler.load_state_dict: expected {step = <integer >= 0>}")
  end)

  it("clip_grad_norm and schedule check their arguments", function()
    assert.error_matches(function() optim.clip_grad_norm({bert.zeros({1})}, 0) end,
      "optim.clip_grad_norm: argument #2 %(max_norm%) must be a number > 0")
    assert.error_matches(function() optim.schedule{kind = "step", lr = 1} end, "optim.schedule: option 'kind' must be")
    assert.error_matches(function() optim.schedule{kind = "linear", lr = 1} end, "option 'total' is required")
    assert.error_matches(function() optim.schedule{kind = "linear", lr = 1, warmup = 5, total = 2} end,
      "total %(2%) is smaller than warmup %(5%)")
    assert.error_matches(function() optim.schedule{kind = "linear", warmup = 1.5, total = 3, lr = 1} end,
      "option 'warmup' must be an integer")
    assert.error_matches(function() optim.schedule{kind = "constant"} end, "option 'lr' is required")
    assert.error_matches(function() optim.schedule{kind = "constant", lr = 1, steps = 3} end, "unknown option 'steps' %(the options: kind, lr, min_lr, total, warmup%)")
    assert.error_matches(function() optim.Scheduler({}, print) end, "optim.Scheduler: argument #1 must be an optimizer")
  end)
end)
