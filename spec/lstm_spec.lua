local bert = require("bert")
-- F.lstm and bert.nn.LSTM: outputs and gradients against torch.nn.LSTM on
-- a padded batch run as packed sequences (spec/fixtures/lstm, written by
-- tools/gen_parity_fixtures.py --family lstm), finite-difference gradients
-- of every input of the op, padding, reverse, cell clipping and the errors.
local F = bert.F
local G = require("spec.support.gradcheck")

local FIX = "spec/fixtures/lstm"
local function randn(shape, seed) return bert.randn(shape, {seed = seed}) * 0.5 end
local function maxdiff(a, b) return (a - b):abs():max():item() end
local function lit(s) return (s:gsub("%p", "%%%0")) end
-- the largest |a - b| relative to b's largest magnitude
local function reldiff(a, b) return maxdiff(a, b) / math.max(b:abs():max():item(), 1e-6) end

describe("bert.nn.LSTM against torch.nn.LSTM (padded batch, lengths 5, 3, 1)", function()
  local io_t = assert(bert.load_safetensors(FIX .. "/io.safetensors"))
  local sd = assert(bert.load_safetensors(FIX .. "/model.safetensors"))
  local lens = io_t.lengths:int()

  for _, case in ipairs({{name = "proj", layers = 2, proj = 4}, {name = "plain", layers = 1}}) do
    it(case.name .. ": " .. case.layers .. " layer(s), bidirectional, proj_size " .. (case.proj or 0), function()
      local m = bert.nn.LSTM{input_size = 7, hidden_size = 6, num_layers = case.layers, bidirectional = true,
                             proj_size = case.proj}
      local own, pre = {}, case.name .. "."
      for k, v in pairs(sd) do if k:sub(1, #pre) == pre then own[k:sub(#pre + 1)] = v end end
      local missing, unexpected = m:load_state_dict(own)
      assert.same({}, missing)
      assert.same({}, unexpected)
      local f = function(k) return io_t[pre .. k] end
      local x, h0, c0 = io_t.x:clone(), f("h0"):clone(), f("c0"):clone()
      for _, t in ipairs({x, h0, c0}) do t:requires_grad(true) end
      local y, h, c = m(x, lens, h0, c0)
      assert.is_true(maxdiff(y, f("output")) < 1e-4, "output " .. maxdiff(y, f("output")))
      assert.is_true(maxdiff(h, f("h_n")) < 1e-4, "h_n " .. maxdiff(h, f("h_n")))
      assert.is_true(maxdiff(c, f("c_n")) < 1e-4, "c_n " .. maxdiff(c, f("c_n")))
      local loss = (y * f("R")):sum() + (h * f("Rh")):sum() + (c * f("Rc")):sum()
      loss:backward()
      local grads = {x = x:grad(), h0 = h0:grad(), c0 = c0:grad()}
      for name, p in pairs(m:state_dict()) do grads[name] = p:grad() end
      local n = 0
      for name, g in pairs(grads) do
        local want = f("grad." .. name)
        assert(want, "no reference gradient for " .. name)
        assert.is_true(reldiff(g, want) < 1e-3, name .. ": " .. reldiff(g, want))
        n = n + 1
      end
      assert.equal(3 + (case.proj and 5 or 4) * 2 * case.layers, n)
    end)
  end

  it("keeps batch_first = false as PyTorch ([T, B, I] in and out)", function()
    local m = bert.nn.LSTM{input_size = 7, hidden_size = 6, bidirectional = true, batch_first = false}
    local x = io_t.x
    local y1 = bert.no_grad(function() return m(x:transpose(1, 2), {5, 3, 1}) end)
    m.batch_first = true
    local y2 = bert.no_grad(function() return m(x, {5, 3, 1}) end)
    assert.same({5, 3, 12}, y1:shape())
    assert.is_true(maxdiff(y1:transpose(1, 2), y2) == 0)
  end)
end)

-- inputs of F.lstm at a tiny size: x, h0, c0, w_ih, w_hh, b, w_hr
local function tiny(B, T, I, H, P, seed)
  local O = P or H
  return {randn({B, T, I}, seed), randn({B, O}, seed + 1), randn({B, H}, seed + 2), randn({4 * H, I}, seed + 3),
          randn({4 * H, O}, seed + 4), randn({4 * H}, seed + 5), P and randn({P, H}, seed + 6) or nil}
end

-- y, h_n and c_n side by side, one tensor for gradcheck
local function packed(opts)
  return function(x, h0, c0, wih, whh, b, whr)
    local y, h, c = F.lstm(x, h0, c0, wih, whh, b, {w_hr = whr, lengths = opts.lengths, reverse = opts.reverse,
                                                    clip = opts.clip, proj_clip = opts.proj_clip})
    return bert.cat({y:reshape({x:shape()[1], -1}), h, c}, 2)
  end
end

describe("F.lstm", function()
  it("has correct gradients for x, h0, c0 and every weight (lengths, reverse, projection, clip)", function()
    local lens = bert.tensor({4, 2, 0}, "int32")
    G.gradcheck(packed({lengths = lens}), tiny(3, 4, 3, 2, nil, 1))
    G.gradcheck(packed({lengths = lens, reverse = true}), tiny(3, 4, 3, 2, 3, 11))
    G.gradcheck(packed({}), tiny(2, 3, 2, 3, 2, 21))
    -- a clip no cell reaches in the checks' steps of 1e-2 (a kink there is no gradient)
    G.gradcheck(packed({lengths = lens, reverse = true, clip = 0.3}), tiny(3, 4, 3, 2, nil, 31))
  end)

  it("never lets padding into the state: padded steps give 0 and the final state is the last real step's", function()
    local x, h0, c0, wih, whh, b = table.unpack(tiny(2, 4, 3, 2, nil, 41))
    local lens = bert.tensor({4, 2}, "int32")
    for _, rev in ipairs({false, true}) do
      local y, h, c = F.lstm(x, h0, c0, wih, whh, b, {lengths = lens, reverse = rev})
      -- sequence 2 alone, cut to its 2 steps, gives the same outputs and state
      local y2, h2, c2 = F.lstm(x:narrow(1, 2, 1):narrow(2, 1, 2), h0:narrow(1, 2, 1), c0:narrow(1, 2, 1),
                                wih, whh, b, {reverse = rev})
      assert.is_true(maxdiff(y:narrow(1, 2, 1):narrow(2, 1, 2), y2) < 1e-6)
      assert.equal(0, y:narrow(1, 2, 1):narrow(2, 3, 2):abs():max():item())
      assert.is_true(maxdiff(h:narrow(1, 2, 1), h2) < 1e-6)
      assert.is_true(maxdiff(c:narrow(1, 2, 1), c2) < 1e-6)
      -- whatever the padding holds
      local xp = x:clone()
      bert.no_grad(function() xp:narrow(1, 2, 1):narrow(2, 3, 2):fill_(1e4) end)
      local yp, hp = F.lstm(xp, h0, c0, wih, whh, b, {lengths = lens, reverse = rev})
      assert.equal(0, maxdiff(y, yp))
      assert.equal(0, maxdiff(h, hp))
    end
    -- reverse: the last output is the first step; without lengths, the same as flipping time
    local yr, hr = F.lstm(x, h0, c0, wih, whh, b, {reverse = true})
    assert.is_true(maxdiff(hr, yr:select(2, 1)) < 1e-7)
    local flip = bert.tensor({4, 3, 2, 1}, "int32") - 1
    local yf = F.lstm(x:index_select(2, flip), h0, c0, wih, whh, b)
    assert.is_true(maxdiff(yf:index_select(2, flip), yr) < 1e-6)
    -- an empty sequence keeps h0, c0
    local _, he, ce = F.lstm(x, h0, c0, wih, whh, b, {lengths = bert.tensor({0, 0}, "int32")})
    assert.equal(0, maxdiff(he, h0))
    assert.equal(0, maxdiff(ce, c0))
  end)

  it("runs finished sequences out of each step, on any number of threads, as each sequence alone", function()
    -- hidden 160 x 7 sequences: a gate pass of several pool chunks
    local B, T, I, H, P = 7, 6, 5, 160, 24
    local x, h0, c0, wih, whh, b, whr = table.unpack(tiny(B, T, I, H, P, 71))
    local lens = {6, 0, 3, 6, 1, 4, 3}
    local len_t = bert.tensor(lens, "int32")
    local before = bert.get_num_threads()
    for _, rev in ipairs({false, true}) do
      local runs = {}
      for w = 1, 2 do
        bert.set_num_threads(w)
        local xs, hs, cs = x:clone(), h0:clone(), c0:clone()
        local ins = {xs, hs, cs, wih:clone(), whh:clone(), whr:clone()}
        for _, t in ipairs(ins) do t:requires_grad(true) end
        local f = packed({lengths = len_t, reverse = rev, clip = 0.8, proj_clip = 0.3})
        local out = f(ins[1], ins[2], ins[3], ins[4], ins[5], b, ins[6])
        local loss = (out * out):sum()
        loss:backward()
        runs[w] = {out}
        for k, t in ipairs(ins) do runs[w][k + 1] = t:grad() end
      end
      bert.set_num_threads(before)
      for k = 1, #runs[1] do assert.is_true(maxdiff(runs[1][k], runs[2][k]) < 1e-5, "part " .. k) end
      local y, h = F.lstm(x, h0, c0, wih, whh, b, {w_hr = whr, lengths = len_t, reverse = rev, clip = 0.8,
                                                   proj_clip = 0.3})
      for bi, n in ipairs(lens) do
        local one = function(t) return t:narrow(1, bi, 1) end
        local y1, h1 = F.lstm(one(x):narrow(2, 1, math.max(n, 1)), one(h0), one(c0), wih, whh, b,
                              {w_hr = whr, lengths = bert.tensor({n}, "int32"), reverse = rev, clip = 0.8,
                               proj_clip = 0.3})
        assert.is_true(maxdiff(one(h), h1) < 1e-5, "h_n of sequence " .. bi)
        if n > 0 then assert.is_true(maxdiff(one(y):narrow(2, 1, n), y1) < 1e-5, "y of sequence " .. bi) end
      end
    end
  end)

  it("clips the cell state to [-clip, clip] when it would exceed it", function()
    local x, h0, c0, wih, whh, b = table.unpack(tiny(2, 5, 3, 4, nil, 51))
    x, b = x * 8, b + 3   -- gates saturated: the cell grows past 1
    local _, _, c = F.lstm(x, h0, c0, wih, whh, b)
    local y1, _, c1 = F.lstm(x, h0, c0, wih, whh, b, {clip = 1})
    assert.is_true(c:abs():max():item() > 1.5)
    assert.is_true(c1:abs():max():item() <= 1)
    assert.is_true(maxdiff(y1, F.lstm(x, h0, c0, wih, whh, b)) > 1e-3)
    local y9 = F.lstm(x, h0, c0, wih, whh, b, {clip = 1e9})   -- a clip never reached changes nothing
    assert.equal(0, maxdiff(y9, F.lstm(x, h0, c0, wih, whh, b)))
  end)

  -- one sequence of F.lstm in plain Lua (no lengths): y [T][O], h_n, c_n and
  -- every projected h before clipping
  local function reference(x, h0, c0, wih, whh, b, whr, cclip, pclip)
    local X, h, c, Wih, Whh, bb, Whr = x:totable(), h0:totable(), c0:totable(), wih:totable(), whh:totable(),
      b:totable(), whr:totable()
    local H, O = #c, #h
    local function clamp(v, k) return k and math.max(-k, math.min(k, v)) or v end
    local function sig(v) return 1 / (1 + math.exp(-v)) end
    local ys, pre = {}, {}
    for t = 1, #X do
      local a = {}
      for r = 1, 4 * H do
        local v = bb[r]
        for k = 1, #X[t] do v = v + Wih[r][k] * X[t][k] end
        for k = 1, O do v = v + Whh[r][k] * h[k] end
        a[r] = v
      end
      local hr = {}
      for j = 1, H do
        c[j] = clamp(sig(a[H + j]) * c[j] + sig(a[j]) * math.tanh(a[2 * H + j]), cclip)
        hr[j] = sig(a[3 * H + j]) * math.tanh(c[j])
      end
      h = {}
      for k = 1, O do
        local v = 0
        for j = 1, H do v = v + Whr[k][j] * hr[j] end
        pre[#pre + 1], h[k] = v, clamp(v, pclip)
      end
      ys[t] = h
    end
    return ys, h, c, pre
  end

  it("clips the projected state to [-proj_clip, proj_clip] (output and recurrence), as ELMo", function()
    local x, h0, c0, wih, whh, b, whr = table.unpack(tiny(1, 5, 3, 4, 3, 81))
    whr = whr * 4   -- projections past 1
    local x1, h1, c1 = x:select(1, 1), h0:select(1, 1), c0:select(1, 1)
    local _, _, _, pre = reference(x1, h1, c1, wih, whh, b, whr, nil, nil)
    local big = 0
    for _, v in ipairs(pre) do big = math.max(big, math.abs(v)) end
    assert.is_true(big > 0.8, "no projection to clip: " .. big)
    local pclip = 0.5
    local want_y, want_h, want_c, clipped = reference(x1, h1, c1, wih, whh, b, whr, nil, pclip)
    local y, h, c = F.lstm(x, h0, c0, wih, whh, b, {w_hr = whr, proj_clip = pclip})
    assert.is_true(maxdiff(y:select(1, 1), bert.tensor(want_y)) < 1e-5)
    assert.is_true(maxdiff(h:select(1, 1), bert.tensor(want_h)) < 1e-5)
    assert.is_true(maxdiff(c:select(1, 1), bert.tensor(want_c)) < 1e-5)
    assert.equal(pclip, y:abs():max():item())
    local n = 0
    for _, v in ipairs(clipped) do n = n + (math.abs(v) > pclip and 1 or 0) end
    assert.is_true(n > 0 and n < #clipped, n .. " of " .. #clipped .. " clipped")
    -- with the cell clip too, and a clip never reached changes nothing
    local wy = reference(x1, h1, c1, wih, whh, b, whr, 0.7, pclip)
    local y2 = F.lstm(x, h0, c0, wih, whh, b, {w_hr = whr, proj_clip = pclip, clip = 0.7})
    assert.is_true(maxdiff(y2:select(1, 1), bert.tensor(wy)) < 1e-5)
    local y9 = F.lstm(x, h0, c0, wih, whh, b, {w_hr = whr, proj_clip = 1e9})
    assert.equal(0, maxdiff(y9, F.lstm(x, h0, c0, wih, whh, b, {w_hr = whr})))
  end)

  it("has correct gradients with proj_clip (zero where clipped), away from the clip's kink", function()
    local args = tiny(2, 4, 3, 4, 3, 91)
    args[7] = args[7] * 4
    local lens, pclip = bert.tensor({4, 3}, "int32"), 0.45
    -- no projection within the checks' step of the clip, and some beyond it
    local margin, beyond = math.huge, 0
    for bi, n in ipairs({4, 3}) do
      local one = {}
      for k = 1, 3 do one[k] = args[k]:select(1, bi) end
      local _, _, _, pre = reference(one[1]:narrow(1, 1, n), one[2], one[3], args[4], args[5], args[6], args[7], nil,
        pclip)
      for _, v in ipairs(pre) do
        margin = math.min(margin, math.abs(math.abs(v) - pclip))
        beyond = beyond + (math.abs(v) > pclip and 1 or 0)
      end
    end
    assert.is_true(margin > 0.03 and beyond > 0, "margin " .. margin .. ", " .. beyond .. " clipped")
    G.gradcheck(packed({lengths = lens, proj_clip = pclip}), args)
  end)

  it("names the function, the argument and the values in its errors", function()
    local x, _, _, wih, whh, b = table.unpack(tiny(2, 3, 3, 2, nil, 61))
    local whr = randn({1, 2}, 68)
    local function err(pat, ...)
      local args = {...}
      assert.error_matches(function() F.lstm(table.unpack(args, 1, 7)) end, lit(pat))
    end
    err("lstm: input must be 3-D [batch x steps x features], got [2 x 3]", x:select(2, 1), nil, nil, wih, whh)
    err("lstm: input must be float32, got int32", bert.zeros({2, 3, 3}, "int32"), nil, nil, wih, whh)
    err("lstm: w_ih must be [4*hidden x 3] (the input's features), got [8 x 2] (input [2 x 3 x 3])",
      x, nil, nil, wih:narrow(2, 1, 2), whh)
    err("lstm: w_ih must be [4*hidden x 3] (the input's features), got [7 x 3]", x, nil, nil, wih:narrow(1, 1, 7), whh)
    err("lstm: w_hh must be [8 x 2] (4*hidden x hidden), got [8 x 1]", x, nil, nil, wih, whh:narrow(2, 1, 1))
    err("lstm: w_hh must be [8 x 1] (4*hidden x proj), got [8 x 2]", x, nil, nil, wih, whh, nil, {w_hr = whr})
    err("lstm: w_hr must be [proj x 2] (hidden 2 from w_ih [8 x 3]), got [1 x 3]", x, nil, nil, wih, whh, nil,
      {w_hr = bert.zeros({1, 3})})
    err("lstm: b must be [8] (4*hidden), got [4]", x, nil, nil, wih, whh, b:narrow(1, 1, 4))
    err("lstm: h0 must be [2 x 2] (batch x hidden), got [3 x 2]", x, bert.zeros({3, 2}), nil, wih, whh)
    err("lstm: c0 must be [2 x 2] (batch x hidden), got [2]", x, nil, bert.zeros({2}), wih, whh)
    err("lstm: w_hh must be float32, got int32", x, nil, nil, wih, bert.zeros({8, 2}, "int32"))
    err("lstm: lengths must be int32 [2] (one per sequence), got float32 [2]", x, nil, nil, wih, whh, nil,
      {lengths = bert.tensor({3, 1})})
    err("lstm: lengths[2] = 4 is out of range for 3 steps (valid: 0..3)", x, nil, nil, wih, whh, nil,
      {lengths = bert.tensor({3, 4}, "int32")})
    err("lstm: lengths[1] = -1 is out of range for 3 steps (valid: 0..3)", x, nil, nil, wih, whh, nil,
      {lengths = bert.tensor({-1, 1}, "int32")})
    err("lstm: clip must be >= 0 (0: none), got -1", x, nil, nil, wih, whh, nil, {clip = -1})
    err("lstm: proj_clip must be >= 0 (0: none), got -2", x, nil, nil, wih, whh, nil, {proj_clip = -2})
    err("lstm: proj_clip 3 clips the projected state: it needs w_hr", x, nil, nil, wih, whh, nil, {proj_clip = 3})
    err("lstm: option 'lengths' must be a tensor, got table", x, nil, nil, wih, whh, nil, {lengths = {3, 1}})
    assert.has_error(function() bert.nn.LSTM{input_size = 3, hidden_size = 2, proj_size = 2} end,
      "LSTM: proj_size must be smaller than hidden_size, got 2 and 2")
    assert.has_error(function() bert.nn.LSTM{input_size = 3, hidden_size = 2, proj_clip = 3} end,
      "LSTM: proj_clip must be a positive number with proj_size > 0, got 3 and proj_size 0")
    local vk = bert.backend_info().vulkan
    if vk and vk.available then   -- operands on two devices: refused by name, not a crash
      local ok, e = pcall(F.lstm, x:to("vulkan"), nil, nil, wih, whh:to("vulkan"))
      assert.is_false(ok)
      assert.matches("lstm: not supported on device vulkan (an operand is on the cpu", e, 1, true)
    end
  end)
end)
