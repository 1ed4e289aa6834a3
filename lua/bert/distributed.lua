--- bert.distributed: data parallelism over MPI (Open MPI, loaded at run time).
--
--   local dist = require("bert.distributed")
--   local rank, size = dist.init()     -- under mpirun: joins the job; else a world of one
--   dist.all_reduce(t, "sum" | "mean" | "max" | "min")   -- in place, returns t
--   dist.broadcast(t, root)  dist.all_gather(t) -> [size, ...]  dist.barrier()
--   dist.finalize()                    -- at the end of a run, on every rank
--
-- Without mpirun (or without MPI installed) everything works as a world of
-- one: collectives return their input.  bert.backend_info().distributed
-- says whether libmpi can be loaded and whether it is in use.
--
-- Data-parallel training (bert.train uses it; see docs/distributed.md):
-- every rank holds the whole model; a global batch of B rows is split into
-- contiguous slices of B / size rows; gradients are averaged by bucketed
-- all-reduces that start during backward; the optimizer then takes the
-- same step everywhere.  Three things make the numbers independent of the
-- number of ranks: the data loader gives each rank its rows of the global
-- batch (dynamic masks keyed by the global sample index), dropout masks are
-- keyed by the global sample index (set_batch_shard), and mean
-- cross-entropies divide by the number of targets over all ranks.
local core = require("bert.core")
local C = core.dist

local M = {}

local function size() return C.size() end

--- Joins the MPI job when mpirun started this process; returns rank, size.
function M.init()
  local rank, n = C.init()
  if n > 1 and not M._installed then M._install_global_mean() end
  return rank, n
end

function M.rank() return C.rank() end
M.size = size
--- True on rank 0, the rank that prints and writes files.
function M.is_main() return C.rank() == 0 end
--- True when more than one rank takes part.
function M.active() return C.initialized() and C.size() > 1 end
function M.barrier() C.barrier() end
function M.set_timeout(seconds) C.set_timeout(seconds) end
function M.timeout() return C.timeout() end
--- The MPI library in use ("Open MPI v4.1.4 (libmpi.so.40)"), or nil, why.
function M.library() return C.library() end
function M.finalize() if C.initialized() then C.finalize() end end

--- Writes msg to stderr and ends every rank of the job.
function M.abort(msg, code) C.abort(msg or "", code or 1) end

-- device tensors go through host memory
local function with_host(t, fn)
  if t:device() == "cpu" and t:is_contiguous() then fn(t); return t end
  local host = t:to("cpu"):contiguous()
  fn(host)
  t:copy_(t:device() == "cpu" and host or host:to(t:device()))
  return t
end

--- Reduces t over all ranks in place; op "sum" (default), "mean", "max", "min".
function M.all_reduce(t, op)
  op = op or "sum"
  return with_host(t, function(h)
    C.all_reduce(h, op == "mean" and "sum" or op)
    if op == "mean" and size() > 1 then h:div_(size()) end
  end)
end

--- Replaces t everywhere by rank root's t (in place).
function M.broadcast(t, root) return with_host(t, function(h) C.broadcast(h, root or 0) end) end

--- Every rank's t stacked: [size, ...t's shape] (on the CPU).
function M.all_gather(t) return C.all_gather(t:device() == "cpu" and t:contiguous() or t:to("cpu"):contiguous()) end

--- A list of numbers reduced over ranks ("sum", "max", "min"; doubles).
function M.all_reduce_numbers(list, op) return C.all_reduce_numbers(list, op or "sum") end

--- Rank root's value of a number (or nil) on every rank.
function M.broadcast_number(x, root)
  local mine = C.rank() == (root or 0)
  local v = C.all_reduce_numbers({mine and x ~= nil and 1 or 0, mine and x or 0}, "sum")
  if v[1] == 0 then return nil end
  return math.tointeger(v[2]) or v[2]
end

--- True on every rank when flag is true on any rank (a collective).
function M.any(flag)
  if not M.active() then return flag and true or false end
  return C.all_reduce_numbers({flag and 1 or 0}, "max")[1] > 0
end

-- A barrier without the collective timeout (rank 0 may be busy for long).
local function long_barrier()
  local t = C.timeout()
  C.set_timeout(7 * 24 * 3600)
  local ok, err = pcall(C.barrier)
  C.set_timeout(t)
  if not ok then error(err, 0) end
end

--- Rank 0 makes shared files between wait_for_main() and main_ready();
-- the other ranks wait in wait_for_main() until it is done, then read them:
--   dist.wait_for_main()  ... create-or-read the files ...  dist.main_ready()
function M.wait_for_main() if M.active() and not M.is_main() then long_barrier() end end
function M.main_ready() if M.active() and M.is_main() then long_barrier() end end

--- This rank's rows of a global batch of `total`: first (0-based), count.
-- The batch must split evenly (a loader's fixed batch size), unless uneven
-- is set (a last short batch): then ranks differ by at most one row.
-- Either way each sample keeps its place, so its dropout mask does not
-- depend on the number of ranks.
function M.shard(total, who, uneven)
  local n = size()
  if uneven and total >= n then
    local first = C.rank() * total // n
    return first, (C.rank() + 1) * total // n - first
  end
  if total % n ~= 0 then
    error(string.format("%s: the global batch of %d does not split evenly over %d ranks "
      .. "(use a multiple of %d)", who or "distributed.shard", total, n, n), 2)
  end
  local rows = total // n
  return C.rank() * rows, rows
end

--- Whether this rank handles item i (1-based) of a list split round-robin.
function M.owns(i) return (i - 1) % size() == C.rank() end

--- Work on items 1..n split over the ranks in contiguous slices:
-- fn(first, last) returns the results of items first..last (1-based,
-- inclusive), each an integer, or with width(i) given, a list of width(i)
-- integers; every rank gets all n results, in order.  dtype "float32"
-- carries float32 numbers (logits) instead.  Evaluation uses it to
-- predict a dev set's parts in parallel.
function M.split_map(n, fn, width, dtype)
  if not M.active() or n == 0 then return fn(1, n) end
  local N, r = size(), C.rank()
  local function bounds(q) return q * n // N + 1, (q + 1) * n // N end
  local function count(q)
    local a, b = bounds(q)
    if not width then return b - a + 1 end
    local c = 0
    for i = a, b do c = c + width(i) end
    return c
  end
  local lo, hi = bounds(r)
  local mine = hi >= lo and fn(lo, hi) or {}
  if #mine ~= hi - lo + 1 then
    error(string.format("distributed.split_map: fn(%d, %d) returned %d results, expected %d", lo, hi, #mine,
      hi - lo + 1), 2)
  end
  local per = 0
  for q = 0, N - 1 do per = math.max(per, count(q)) end
  local buf = {}
  for k, v in ipairs(mine) do
    if width then
      for j = 1, width(lo + k - 1) do buf[#buf + 1] = v[j] end
    else
      buf[#buf + 1] = v
    end
  end
  for i = #buf + 1, math.max(per, 1) do buf[i] = 0 end
  local all = C.all_gather(require("bert").tensor(buf, dtype or "int32")):totable()
  local out = {}
  for q = 0, N - 1 do
    local a, b = bounds(q)
    local at, row = 0, all[q + 1]
    for i = a, b do
      if width then
        local item = {}
        for j = 1, width(i) do item[j] = row[at + j] end
        at = at + width(i)
        out[#out + 1] = item
      else
        at = at + 1
        out[#out + 1] = row[at]
      end
    end
  end
  return out
end

--- Refuses to go on unless every rank passes the same value for each key
-- (strings or numbers): {model = config_json, seed = 1, ...}.  Raises an
-- error naming the first key that differs and its values on rank 0 and on
-- the first rank that differs.
function M.check_same(values, who)
  if not M.active() then return true end
  local keys = {}
  for k in pairs(values) do keys[#keys + 1] = k end
  table.sort(keys)
  local bert = require("bert")
  for _, k in ipairs(keys) do
    local s = tostring(values[k])
    local h = 0
    for i = 1, #s do h = (h * 31 + s:byte(i)) % 2147483647 end
    local all = M.all_gather(bert.tensor({h, #s}, "int32")):totable()
    for r = 2, #all do
      if all[r][1] ~= all[1][1] or all[r][2] ~= all[1][2] then
        -- the strings themselves for the message: gathered by rank
        local mine = s
        if #mine > 200 then mine = mine:sub(1, 200) .. "..." end
        error(string.format("%s: rank %d has a different %s than rank 0; every rank must be started with "
          .. "the same settings (this rank, %d: %s)", who or "distributed", r - 1, k, C.rank(), mine), 2)
      end
    end
  end
  return true
end

-- {============================================================ data parallel training

-- Mean cross-entropy over every rank's targets: inside a training step,
-- F.cross_entropy's "mean" becomes this rank's sum / (targets on all ranks
-- / size), so that the average over ranks (gradients, losses) is the mean
-- over the global batch, exactly as one process computes it.
function M._install_global_mean()
  local F = core.F
  local plain = F.cross_entropy
  M._installed = true
  F.cross_entropy = function(logits, labels, opts)
    if not M._global_mean or (opts ~= nil and opts.reduction ~= nil and opts.reduction ~= "mean") then
      return plain(logits, labels, opts)
    end
    local ignore = opts and opts.ignore_index or -100
    local here = labels:ne(ignore):sum():item()
    local all = C.all_reduce_numbers({here}, "sum")[1]
    local sum = plain(logits, labels, {ignore_index = ignore, reduction = "sum"})
    return sum * (all > 0 and size() / all or 0)
  end
end

local DataParallel = {}
DataParallel.__index = DataParallel

-- A deterministic text of plain values (sorted keys; functions skipped).
local function describe(v, depth)
  depth = depth or 0
  if type(v) ~= "table" then
    if type(v) == "number" and math.type(v) == "float" then return string.format("%.17g", v) end
    return (type(v) == "function" or type(v) == "userdata") and "" or tostring(v)
  end
  if depth > 8 then return "{...}" end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do
    local x = v[k]
    if x == nil then x = v[tonumber(k)] end
    parts[#parts + 1] = k .. "=" .. describe(x, depth + 1)
  end
  return "{" .. table.concat(parts, ",") .. "}"
end
M.describe = describe

--- The data-parallel side of a bert.train.Trainer, or nil for one process.
-- Broadcasts rank 0's parameters, checks that every rank runs the same
-- configuration (model, seed, optimizer, accumulation, and the caller's
-- trainer.fingerprint), and prepares the gradient buckets.
-- trainer.sharded_batches: the batches next_batch returns are already this
-- rank's rows (a loader built with this rank's shard); otherwise each
-- global batch is cut here.  trainer.bucket_mb (or $BERT_DIST_BUCKET_MB):
-- bucket size in MiB (default 8); $BERT_DIST_OVERLAP=0 starts every bucket
-- only after backward (to measure what the overlap gains).
function M.data_parallel(trainer)
  M.init()
  if not M.active() then return nil end
  local bert = require("bert")
  local model, opt = trainer.model, trainer.optimizer
  if not model.flat_grad then
    error("Trainer: data parallelism needs the model's flat buffers (Module:flatten_parameters)", 3)
  end
  local seed = bert.rng_state()
  M.check_same({
    model = describe(model.config or {}) .. "/" .. model:num_parameters(),
    seed = seed, accum = trainer.accum, clip = tostring(trainer.clip),
    optimizer = describe(opt.hyper or {}), steps = tostring(trainer.steps),
    settings = describe(trainer.fingerprint or ""),
  }, "Trainer")
  M.broadcast(model.flat_params, 0)
  local self = setmetatable({trainer = trainer, overlapped = 0, buckets_total = 0, wait = 0,
                              overlap = os.getenv("BERT_DIST_OVERLAP") ~= "0"}, DataParallel)
  if model.flat_grad:device() == "cpu" then
    local mb = trainer.bucket_mb or tonumber(os.getenv("BERT_DIST_BUCKET_MB") or "") or 8
    local elems = math.max(1, math.floor(mb * 1024 * 1024 / 4))
    self.reducer = C.reducer(model.flat_grad, elems)
  end
  return self
end

local function rows_of(batch)
  for _, k in ipairs({"input_ids", "labels", "attention_mask"}) do
    local t = batch[k]
    if type(t) == "userdata" and #t:shape() > 0 then return t:size(1) end
  end
  for _, t in pairs(batch) do
    if type(t) == "userdata" and #t:shape() > 0 then return t:size(1) end
  end
  error("Trainer: data parallelism: the batch holds no tensor to split by rows", 3)
end

--- This rank's part of the next micro-batch, with the step's keying set:
-- dropout masks by global sample index, mean losses over the global batch.
function DataParallel:enter(batch)
  local first, rows, total
  if self.trainer.sharded_batches then
    rows = rows_of(batch)
    total = rows * size()
    first = C.rank() * rows
  else
    total = rows_of(batch)
    first, rows = M.shard(total, "Trainer", true)
    local mine = {}
    for k, v in pairs(batch) do
      if type(v) == "userdata" and #v:shape() > 0 and v:size(1) == total then
        mine[k] = v:narrow(1, first + 1, rows):contiguous()
      else
        mine[k] = v
      end
    end
    batch = mine
  end
  C.set_batch_shard(first, rows, total)
  M._global_mean = true
  return batch
end

--- Backward of one micro-batch; the last of a step reduces the gradients
-- while it runs (earlier ones only accumulate locally).
function DataParallel:backward(loss, last)
  if last and self.reducer and self.overlap then self.reducer:arm() end
  local ok, err = pcall(loss.backward, loss)
  C.set_batch_shard(0, 0, 0)
  M._global_mean = false
  if not ok then error(err, 0) end
end

--- Completes the gradient average, then the step's numbers over ranks:
-- loss and metrics averaged, tokens summed.  Returns loss_sum, tokens.
function DataParallel:finish_step(metrics, loss_sum, tokens)
  local t0 = require("bert").wall_time()
  if self.reducer then
    local overlapped = self.reducer:finish()
    self.overlapped = self.overlapped + overlapped
    self.buckets_total = self.buckets_total + self.reducer:buckets()
  else
    M.all_reduce(self.trainer.model.flat_grad, "mean")
  end
  self.wait = self.wait + (require("bert").wall_time() - t0)
  local keys = {}
  for k, v in pairs(metrics) do if type(v) == "number" then keys[#keys + 1] = k end end
  table.sort(keys)
  local list = {loss_sum, tokens}
  for i, k in ipairs(keys) do list[i + 2] = metrics[k] end
  local all = C.all_reduce_numbers(list, "sum")
  local n = size()
  for i, k in ipairs(keys) do metrics[k] = all[i + 2] / n end
  return all[1] / n, math.tointeger(all[2]) or all[2]
end

--- Stops with an error when the ranks' weights are not bit-for-bit the same
-- (they never should be: a broken reduction or a rank that skipped a step).
function DataParallel:check_weights()
  local flat = self.trainer.model.flat_params
  local sum = C.checksum(flat:device() == "cpu" and flat or flat:to("cpu"))
  local r = C.all_reduce_numbers({sum, -sum}, "max")
  if r[1] ~= -r[2] then
    error(string.format("Trainer: at step %d the ranks' weights differ (checksums from %.0f to %.0f); "
      .. "data-parallel replicas must stay identical", self.trainer.step, -r[2], r[1]), 0)
  end
end

--- {ranks, buckets, reduce_wait_s = seconds waiting for gradient
-- reductions after backward, overlapped = the fraction of buckets that had
-- started during backward}.
function DataParallel:stats()
  return {ranks = size(), buckets = self.reducer and self.reducer:buckets() or 1, reduce_wait_s = self.wait,
          overlapped = self.buckets_total > 0 and self.overlapped / self.buckets_total or 0}
end
-- }============================================================

return M
