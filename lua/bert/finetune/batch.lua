--- bert.finetune.batch: encoded features -> int32 tensors for the heads,
-- and a shuffling loader whose position is part of a checkpoint.
--
-- A feature is a table {ids = {...}, type_ids = {...}} plus its targets:
-- `label` (a class id), `labels` (one per token, -100 where ignored) or
-- `start_position` / `end_position` (token indices, 0-based).
local bert = require("bert")
local util = require("bert.finetune.util")
local class = require("bert.nn.class")

local M = {}

-- Batches are padded to a multiple of this many tokens: the tensor
-- allocator reuses freed blocks of the same size, so a few distinct batch
-- shapes keep its cache useful, where one shape per longest sentence filled
-- it with blocks never reused (a 1.5M-parameter tagger peaked at 3.2 GB
-- evaluating Brown's 11k dev and test sentences).
M.PAD_MULTIPLE = 16

--- Builds the model inputs of a list of features, padded to the longest
-- rounded up to a multiple of opts.pad_multiple (default M.PAD_MULTIPLE),
-- or to opts.pad_to when given: input_ids, token_type_ids,
-- attention_mask, and labels / start_positions / end_positions when the
-- features carry them (opts.targets = false leaves them out).
function M.collate(features, opts)
  opts = opts or {}
  local pad_id = opts.pad_id or 0
  local T = 0
  for _, f in ipairs(features) do if #f.ids > T then T = #f.ids end end
  local multiple = opts.pad_multiple or M.PAD_MULTIPLE
  T = (T + multiple - 1) // multiple * multiple
  if opts.pad_to then T = math.max(T, opts.pad_to) end
  local ids, types, mask = {}, {}, {}
  local labels, label, starts, ends = {}, {}, {}, {}
  local first = features[1]
  local targets = opts.targets ~= false
  for b, f in ipairs(features) do
    local n = #f.ids
    local ri, rt, rm = {}, {}, {}
    for i = 1, T do
      if i <= n then
        ri[i], rt[i], rm[i] = f.ids[i], f.type_ids and f.type_ids[i] or 0, 1
      else
        ri[i], rt[i], rm[i] = pad_id, 0, 0
      end
    end
    ids[b], types[b], mask[b] = ri, rt, rm
    if targets then
      if first.labels then
        local rl = {}
        for i = 1, T do rl[i] = f.labels[i] or -100 end
        labels[b] = rl
      end
      if first.label then label[b] = f.label end
      if first.start_position then starts[b], ends[b] = f.start_position, f.end_position end
    end
  end
  local batch = {
    input_ids = bert.tensor(ids, "int32"),
    token_type_ids = bert.tensor(types, "int32"),
    attention_mask = bert.tensor(mask, "int32"),
  }
  if targets then
    if first.labels then batch.labels = bert.tensor(labels, "int32") end
    if first.label then batch.labels = bert.tensor(label, math.type(first.label) == "float" and "float32" or "int32") end
    if first.start_position then
      batch.start_positions = bert.tensor(starts, "int32")
      batch.end_positions = bert.tensor(ends, "int32")
    end
  end
  return batch
end

--- Iterates over features in batches of `size`, in order: for i, batch, list.
-- opts.progress, when given, is called as progress(done, total) in batches
-- before each batch and once at the end.
function M.each(features, size, opts)
  local i = 0
  local nbatches = (#features + size - 1) // size
  local progress = opts and opts.progress
  return function()
    if progress then progress(i, nbatches) end
    if i * size >= #features then return nil end
    local list = {}
    for k = i * size + 1, math.min((i + 1) * size, #features) do list[#list + 1] = features[k] end
    i = i + 1
    return i, M.collate(list, opts), list
  end
end

local Loader = class("Loader")

--- A loader over training features: each epoch visits them all once in a
-- fresh order drawn from the seed; the last batch of an epoch may be
-- smaller.  loader:next() -> batch; loader:state() / loader:set_state(s).
function M.Loader(features, opts)
  assert(#features > 0, "Loader: no training features")
  local self = setmetatable({features = features, batch_size = opts.batch_size or 32,
    seed = opts.seed or 0, shuffle = opts.shuffle ~= false, collate_opts = opts.collate or {},
    epoch = 0, pos = 0}, Loader)
  self:start_epoch(0)
  return self
end

function Loader:steps_per_epoch()
  return (#self.features + self.batch_size - 1) // self.batch_size
end

function Loader:start_epoch(e)
  self.epoch, self.pos = e, 0
  local order = {}
  for i = 1, #self.features do order[i] = i end
  if self.shuffle then util.rng(self.seed * 1000003 + e):shuffle(order) end
  self.order = order
end

function Loader:next()
  if self.pos >= #self.order then self:start_epoch(self.epoch + 1) end
  local list = {}
  for k = self.pos + 1, math.min(self.pos + self.batch_size, #self.order) do
    list[#list + 1] = self.features[self.order[k]]
  end
  self.pos = self.pos + #list
  return M.collate(list, self.collate_opts)
end

function Loader:state() return {epoch = self.epoch, pos = self.pos} end

function Loader:set_state(s)
  self:start_epoch(math.tointeger(s.epoch) or 0)
  self.pos = math.tointeger(s.pos) or 0
end

return M
