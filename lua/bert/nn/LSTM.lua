--- LSTM: PyTorch's nn.LSTM (stacked, bidirectional, proj_size) over
-- bert.F.lstm, one fused op per layer and direction, with its parameter
-- names (weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, weight_hr_l0,
-- "_reverse" for the backward direction) so that a PyTorch state dict
-- loads as it is.  Padded batches take per-sequence lengths: each
-- direction runs over a sequence's real steps only (as packed sequences
-- do), padded outputs are 0.  cell_clip clamps the cell state and
-- proj_clip the projected hidden state as ELMo's LstmCellWithProjection
-- does.
local bert = require("bert.core")
local class = require("bert.nn.class")
local Module = require("bert.nn.Module")

local LSTM = class("LSTM", Module)

local function positive_int(name, v, zero_ok)
  assert(math.type(v) == "integer" and (v > 0 or (zero_ok and v == 0)),
    "LSTM: " .. name .. " must be a " .. (zero_ok and "non-negative" or "positive") .. " integer, got "
    .. tostring(v))
end

--- LSTM{input_size, hidden_size[, num_layers = 1][, bias = true][, bidirectional = false]
--      [, proj_size = 0][, batch_first = true][, cell_clip][, proj_clip]}
-- Weights and biases uniform in [-1/sqrt(hidden_size), 1/sqrt(hidden_size)] as PyTorch.
function LSTM:__init(opts)
  Module.__init(self)
  assert(type(opts) == "table", "LSTM: expects a table of options, got " .. type(opts))
  local I, H = opts.input_size, opts.hidden_size
  positive_int("input_size", I)
  positive_int("hidden_size", H)
  self.num_layers = opts.num_layers or 1
  positive_int("num_layers", self.num_layers)
  self.proj_size = opts.proj_size or 0
  positive_int("proj_size", self.proj_size, true)
  assert(self.proj_size < H, "LSTM: proj_size must be smaller than hidden_size, got " .. self.proj_size
    .. " and " .. H)
  assert(opts.cell_clip == nil or (type(opts.cell_clip) == "number" and opts.cell_clip > 0),
    "LSTM: cell_clip must be a positive number, got " .. tostring(opts.cell_clip))
  assert(opts.proj_clip == nil or (type(opts.proj_clip) == "number" and opts.proj_clip > 0 and self.proj_size > 0),
    "LSTM: proj_clip must be a positive number with proj_size > 0, got " .. tostring(opts.proj_clip)
    .. " and proj_size " .. self.proj_size)
  self.input_size, self.hidden_size, self.cell_clip, self.proj_clip = I, H, opts.cell_clip, opts.proj_clip
  self.bidirectional, self.bias = opts.bidirectional == true, opts.bias ~= false
  self.batch_first = opts.batch_first ~= false
  local O, D = self.proj_size > 0 and self.proj_size or H, self.bidirectional and 2 or 1
  local k = 1 / math.sqrt(H)
  local function param(name, shape)
    bert.no_grad(function() self:add_parameter(name, bert.empty(shape):uniform_(-k, k)) end)
  end
  for l = 0, self.num_layers - 1 do
    for _, sfx in ipairs(D == 2 and {"", "_reverse"} or {""}) do
      param("weight_ih_l" .. l .. sfx, {4 * H, l == 0 and I or D * O})
      param("weight_hh_l" .. l .. sfx, {4 * H, O})
      if self.bias then
        param("bias_ih_l" .. l .. sfx, {4 * H})
        param("bias_hh_l" .. l .. sfx, {4 * H})
      end
      if self.proj_size > 0 then param("weight_hr_l" .. l .. sfx, {O, H}) end
    end
  end
end

--- forward(x[, lengths][, h0, c0]) -> output, h_n, c_n
-- x [B, T, input_size] ([T, B, input_size] when not batch_first); lengths
-- a table or int32 tensor [B] of each sequence's real steps (default: all
-- T); h0 [layers * directions, B, proj_size or hidden_size] and c0
-- [layers * directions, B, hidden_size] (default zeros), as PyTorch.
-- output [B, T, directions * (proj_size or hidden_size)], h_n and c_n as h0, c0.
function LSTM:forward(x, lengths, h0, c0)
  if not self.batch_first then x = x:transpose(1, 2) end
  if type(lengths) == "table" then lengths = bert.tensor(lengths, "int32") end
  local D = self.bidirectional and 2 or 1
  local hs, cs = {}, {}
  for l = 0, self.num_layers - 1 do
    local outs = {}
    for d = 1, D do
      local sfx, k = d == 2 and "_reverse" or "", l * D + d
      local p = function(name) return self.p[name .. "_l" .. l .. sfx] end
      local b = self.bias and p("bias_ih") + p("bias_hh") or nil
      local y, h, c = bert.F.lstm(x, h0 and h0:select(1, k), c0 and c0:select(1, k), p("weight_ih"),
        p("weight_hh"), b, {w_hr = p("weight_hr"), lengths = lengths, reverse = d == 2, clip = self.cell_clip,
        proj_clip = self.proj_clip})
      outs[d], hs[k], cs[k] = y, h, c
    end
    x = D == 2 and bert.cat(outs, 3) or outs[1]
  end
  if not self.batch_first then x = x:transpose(1, 2) end
  return x, bert.stack(hs, 1), bert.stack(cs, 1)
end

return LSTM
