-- F.lstm on Vulkan (csrc/vulkan/vk_lstm.c, shaders/lstm.comp) against the
-- CPU: outputs, final states and every gradient at odd shapes with padded
-- batches, both directions, with and without a projection, cell and
-- projection clips.  Skipped with the reason when there is no Vulkan device.
local bert = require("bert")
local F = bert.F

local info = bert.backend_info().vulkan
if not info.available then
  describe("lstm on vulkan", function()
    pending("skipped: " .. tostring(info.reason))
  end)
  io.stderr:write("lstm_vulkan_spec: skipped: ", tostring(info.reason), "\n")
  return
end

local function randn(shape, seed) return bert.randn(shape, {seed = seed}) * 0.5 end
-- max |a - b| / max |b|, on the cpu
local function relerr(a, b)
  a, b = a:to("cpu"), b:to("cpu")
  if b:numel() == 0 then return 0 end
  return (a - b):abs():max():item() / math.max(b:abs():max():item(), 1e-6)
end

-- y, h_n, c_n and the gradients of x, h0, c0, w_ih, w_hh, b, w_hr on one device
local function run(dev, ins, opts)
  local t = {}
  for k = 1, 7 do if ins[k] then t[k] = ins[k]:clone():to(dev):requires_grad(true) end end
  local y, h, c = F.lstm(t[1], t[2], t[3], t[4], t[5], t[6], {w_hr = t[7], lengths = opts.lengths,
                         reverse = opts.reverse, clip = opts.clip, proj_clip = opts.proj_clip})
  local loss = (y * opts.R[1]:to(dev)):sum() + (h * opts.R[2]:to(dev)):sum() + (c * opts.R[3]:to(dev)):sum()
  loss:backward()
  local out = {y = y, h = h, c = c}
  for k, name in ipairs({"x", "h0", "c0", "w_ih", "w_hh", "b", "w_hr"}) do
    if t[k] then out["d" .. name] = t[k]:grad() end
  end
  return out
end

describe("F.lstm on vulkan", function()
  local cases = {
    {B = 3, T = 5, I = 7, H = 6, lens = {5, 2, 0}},
    {B = 4, T = 7, I = 5, H = 9, P = 4, lens = {3, 7, 1, 6}, clip = 0.9, proj_clip = 0.25},
    {B = 2, T = 3, I = 3, H = 17, P = 5, nobias = true, noinit = true},
    {B = 5, T = 6, I = 4, H = 33, lens = {6, 6, 2, 5, 1}, clip = 0.5},
    {B = 3, T = 4, I = 2, H = 3, P = 5, lens = {2, 4, 3}},   -- F.lstm allows a projection wider than the cell
  }
  for ci, c in ipairs(cases) do
    for _, rev in ipairs({false, true}) do
      local name = string.format("B %d, T %d, I %d, H %d%s%s%s, %s", c.B, c.T, c.I, c.H,
        c.P and ", proj " .. c.P or "", c.lens and ", padded" or "", c.clip and ", clips" or "",
        rev and "reverse" or "forward")
      it("agrees with the cpu: " .. name, function()
        local O, seed = c.P or c.H, ci * 100 + (rev and 50 or 0)
        local ins = {randn({c.B, c.T, c.I}, seed), not c.noinit and randn({c.B, O}, seed + 1) or nil,
                     not c.noinit and randn({c.B, c.H}, seed + 2) or nil, randn({4 * c.H, c.I}, seed + 3),
                     randn({4 * c.H, O}, seed + 4), not c.nobias and randn({4 * c.H}, seed + 5) or nil,
                     c.P and randn({c.P, c.H}, seed + 6) * 3 or nil}
        local opts = {lengths = c.lens and bert.tensor(c.lens, "int32"), reverse = rev, clip = c.clip,
                      proj_clip = c.proj_clip,
                      R = {randn({c.B, c.T, O}, seed + 7), randn({c.B, O}, seed + 8), randn({c.B, c.H}, seed + 9)}}
        local want, got = run("cpu", ins, opts), run("vulkan", ins, opts)
        local n = 0
        for k, v in pairs(want) do
          local tol = (k == "y" or k == "h" or k == "c") and 1e-4 or 1e-3
          assert.is_true(relerr(got[k], v) < tol, k .. ": relative error " .. relerr(got[k], v))
          assert.equal("vulkan", got[k]:device())
          n = n + 1
        end
        assert.equal(3 + 3 + (c.noinit and 0 or 2) + (c.nobias and 0 or 1) + (c.P and 1 or 0), n)
      end)
    end
  end

  it("keeps padded outputs at 0 and each sequence's final state, as the cpu", function()
    local x, w_ih, w_hh = randn({3, 4, 5}, 900), randn({32, 5}, 901), randn({32, 8}, 902)
    local lens = bert.tensor({4, 1, 0}, "int32")
    local h0, c0 = randn({3, 8}, 903), randn({3, 8}, 904)
    local y, h, c = F.lstm(x:to("vulkan"), h0:to("vulkan"), c0:to("vulkan"), w_ih:to("vulkan"), w_hh:to("vulkan"),
                           nil, {lengths = lens})
    y, h, c = y:to("cpu"), h:to("cpu"), c:to("cpu")
    assert.equal(0, y:narrow(1, 2, 2):narrow(2, 2, 3):abs():max():item())
    assert.equal(0, y:select(1, 3):abs():max():item())
    assert.equal(0, (h:select(1, 3) - h0:select(1, 3)):abs():max():item())   -- an empty sequence keeps h0, c0
    assert.equal(0, (c:select(1, 3) - c0:select(1, 3)):abs():max():item())
    assert.is_true(relerr(h:select(1, 2), y:select(1, 2):select(1, 1)) == 0)
  end)

  -- the module joins a layer's two directions with bert.cat and its states
  -- with bert.stack: both run on the device (the cat entry shared by every
  -- backend), so a stacked bidirectional LSTM trains there as on the cpu
  it("runs bert.nn.LSTM stacked and bidirectional, with a projection and a padded batch, as on the cpu", function()
    local function run(dev)
      bert.manual_seed(7)
      local m = bert.nn.LSTM{input_size = 5, hidden_size = 7, num_layers = 2, bidirectional = true, proj_size = 3}
      m:to(dev)
      local x = randn({3, 6, 5}, 910):to(dev):requires_grad(true)
      local y, h, c = m:forward(x, {6, 2, 4})
      assert.equal(dev, y:device())
      local loss = (y * randn({3, 6, 6}, 911):to(dev)):sum() + (h * randn({4, 3, 3}, 912):to(dev)):sum()
        + (c * randn({4, 3, 7}, 913):to(dev)):sum()
      loss:backward()
      local out = {y = y, h = h, c = c, dx = x:grad()}
      for _, np in ipairs(m:named_parameters()) do out[np.name] = np.param:grad() end
      return out
    end
    local want, got = run("cpu"), run("vulkan")
    local n = 0
    for k, v in pairs(want) do
      assert.is_true(relerr(got[k], v) < 1e-3, k .. ": relative error " .. relerr(got[k], v))
      n = n + 1
    end
    assert.equal(4 + 2 * 2 * 5, n)   -- y, h, c, dx and 5 parameters per layer and direction
  end)
end)
