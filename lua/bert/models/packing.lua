--- Packing (varlen): a padded batch [B, T] run without its padding.  The
-- real tokens of every sequence are packed one after the other into
-- [N, ...] rows (N = the count of real tokens), every position-wise op runs
-- on those rows, attention over each sequence's own range of rows
-- (FasterTransformer's "remove padding", FlashAttention's varlen).  A
-- packing says where each row came from; it travels through the layers in
-- place of the attention mask (M.is tells the two apart).
local bert = require("bert.core")

local F = bert.F

local M = {}

local Packing = {}
Packing.__index = Packing
M.Packing = Packing

--- Whether mask is a packing (else an attention mask or nil).
function M.is(mask) return getmetatable(mask) == Packing end

--- M.new(mask, B, T) -> a packing of a [B, T] batch, or nil and the
-- reason it cannot be packed.  mask: int32 [B, T] (nonzero keep) or nil
-- (every token real).  Each row must start with a real token (its first
-- token is the one classification heads read); padding may sit anywhere
-- after it, and the rows' tokens keep their order.
-- Fields: B, T, total (N), lengths {B}, longest, rows (int32 [N]: flat index b*T+j
-- of each packed row), columns (int32 [N]: j, its position in the padded
-- row), first (int32 [B]: the packed row of each sequence's first token),
-- offsets (int32 [B + 1]: 0, len1, len1+len2, ..., N: the attention's
-- cu_seqlens), mask (the one given).
function M.new(mask, B, T)
  local rows, columns, lengths, offsets, first = {}, {}, {}, {0}, {}
  local m = mask and mask:totable()
  local n, longest = 0, 0
  for b = 1, B do
    local row, len = m and m[b], 0
    if row and row[1] == 0 then
      return nil, string.format("row %d of attention_mask starts with padding", b)
    end
    first[b] = n
    for j = 1, T do
      if not row or row[j] ~= 0 then
        n, len = n + 1, len + 1
        rows[n], columns[n] = (b - 1) * T + j - 1, j - 1
      end
    end
    lengths[b], offsets[b + 1] = len, n
    if len > longest then longest = len end
  end
  if n == 0 then return nil, "the batch has no tokens" end
  return setmetatable({B = B, T = T, total = n, lengths = lengths, longest = longest,
    rows = bert.tensor(rows, "int32"), columns = bert.tensor(columns, "int32"),
    first = bert.tensor(first, "int32"), offsets = bert.tensor(offsets, "int32"), mask = mask}, Packing)
end

local function trailing(t, from)
  local s = t:shape()
  return table.move(s, from, #s, 1, {})
end

--- packing:pack(t): t [B, T, ...] -> its real rows [N, ...].
function Packing:pack(t)
  local rest = trailing(t, 3)
  return t:reshape(self.B * self.T, table.unpack(rest)):index_select(1, self.rows)
end

--- packing:row_index() -> int32 [B * T]: the packed row of each padded
-- position (flat b*T+j); 0 at the padding (callers mask those out).
function Packing:row_index()
  if not self.row_of then
    local index = {}
    for i = 1, self.B * self.T do index[i] = 0 end
    for i, r in ipairs(self.rows:totable()) do index[r + 1] = i - 1 end
    self.row_of = bert.tensor(index, "int32")
  end
  return self.row_of
end

-- The mask as float32 [B, T] on a device (1 real, 0 padding), made once per device.
function Packing:keep_on(device)
  self.keep = self.keep or {}
  if not self.keep[device] then
    local keep = self.mask and self.mask:to("cpu"):float() or bert.ones({self.B, self.T})
    self.keep[device] = device == "cpu" and keep or keep:to(device)
  end
  return self.keep[device]
end

--- packing:unpack(t[, fill]): packed rows [N, ...] -> [B, T, ...] with
-- `fill` (default 0) at the padding.  Differentiable: an index_select of
-- the rows, then the padding replaced (t * keep + fill * (1 - keep)).
function Packing:unpack(t, fill)
  local rest = trailing(t, 2)
  local x = t:index_select(1, self:row_index()):view(self.B, self.T, table.unpack(rest))
  local keep = self:keep_on(t:device())
  for _ = 1, #rest do keep = keep:unsqueeze(keep:dim() + 1) end
  x = x * keep
  if fill and fill ~= 0 then x = x + (1 - keep) * fill end
  return x
end

--- packing:first_rows(t): the packed rows [N, ...] of each sequence's first token -> [B, ...].
function Packing:first_rows(t) return t:index_select(1, self.first) end

--- packing:last_rows(t): the rows of each sequence's last real token -> [B, ...].
function Packing:last_rows(t)
  if not self.last then
    local last = {}
    for b, o in ipairs(self.offsets:totable()) do if b > 1 then last[b - 1] = o - 1 end end
    self.last = bert.tensor(last, "int32")
  end
  return t:index_select(1, self.last)
end

--- packing:dropout(x, p, training): dropout of packed rows x [N, W] with
-- the very mask the padded path draws for [B, T, W] (the same counters,
-- keyed by global sample under data parallelism), read at the real rows:
-- packed and padded runs, on any rank count, drop the same units.  The
-- CPU draws only the real rows' masks (F.dropout_rows); a device draws the
-- padded mask and gathers its real rows.
function Packing:dropout(x, p, training)
  if not training or p == 0 then return x end
  local device, W = x:device(), x:size(2)
  if device == "cpu" then return F.dropout_rows(x, p, true, self.rows, self.B, self.T) end
  self.ones = self.ones or {}
  local key = device .. ":" .. W
  if not self.ones[key] then self.ones[key] = bert.ones({self.B, self.T, W}):to(device) end
  local scale = bert.no_grad(function() return self:pack(F.dropout(self.ones[key], p, true)) end)
  return x * scale
end

--- M.dropout(module, x, mask): a Dropout module applied to x, the packed
-- way when mask is a packing.
function M.dropout(module, x, mask)
  if M.is(mask) then return mask:dropout(x, module.prob, module.is_training) end
  return module(x)
end

-- Whether F.attention takes cu_seqlens on a device (the varlen kernel), probed once per device.
local varlen_op = {}
local function has_varlen_op(device)
  if varlen_op[device] == nil then
    local one = bert.zeros({1, 1, 1})
    if device ~= "cpu" then one = one:to(device) end
    varlen_op[device] = pcall(F.attention, one, one, one, {cu_seqlens = bert.tensor({0, 1}, "int32")})
  end
  return varlen_op[device]
end

--- Whether the varlen kernel (F.attention with cu_seqlens) serves a packed
-- batch: the device has it, and attention dropout, when on, draws what the
-- padded path would (the batch is as wide as its longest sequence).
function M.kernel_applies(packing, opts, device)
  local dropping = opts.training and (opts.dropout or 0) > 0
  return (not dropping or packing.longest == packing.T) and has_varlen_op(device)
end

--- Attention over each sequence's own rows: q, k, v [N, A, d] (views
-- fine) -> [N, A, d].  opts: causal, dropout, training, as F.attention.
-- The varlen kernel draws attention dropout as the padded op does on the
-- batch padded to its longest sequence: the padded path's masks when that
-- is the batch's width.  Otherwise while training with attention dropout
-- (whose masks must be the padded path's, see Packing:dropout), and where
-- the device has no varlen kernel: the rows scattered back to the padded
-- grid, the padded kernel with the key mask, the real rows gathered again
-- (the projections and the feed-forward stay packed).
function M.attention(q, k, v, packing, opts)
  if M.kernel_applies(packing, opts, q:device()) then
    return F.attention(q, k, v, {cu_seqlens = packing.offsets, causal = opts.causal, dropout = opts.dropout,
                                 training = opts.training})
  end
  local B, T, A, d = packing.B, packing.T, q:size(2), q:size(3)
  local index = packing:row_index()
  local function padded(t) return t:index_select(1, index):view(B, T, A, d):transpose(2, 3) end
  local mask = packing.mask or bert.ones({B, T}):int()
  local ctx = F.attention(padded(q), padded(k), padded(v), {mask = mask, causal = opts.causal, dropout = opts.dropout,
                                                            training = opts.training})
  return ctx:transpose(2, 3):reshape(B * T, A, d):index_select(1, packing.rows)
end

return M
