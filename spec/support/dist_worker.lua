-- Run by spec/distributed_spec.lua, alone or under `mpirun -np N`:
--   lua5.4 spec/support/dist_worker.lua collectives OUT.json
--   lua5.4 spec/support/dist_worker.lua train ARCH ACCUM STEPS OUT.json [recompute]   (a Trainer on synthetic batches)
--   lua5.4 spec/support/dist_worker.lua mismatch     (rank 1 uses another seed: must be refused)
--   lua5.4 spec/support/dist_worker.lua hang         (rank 1 stops answering: rank 0 must give up)
--   lua5.4 spec/support/dist_worker.lua diverge DIR  (rank 1's weights change: saving must refuse)
-- Rank 0 writes OUT.json.
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local bert = require("bert")
local cjson = require("cjson")
local dist = require("bert.distributed")

local mode = arg[1]
local rank, size = dist.init()

local function write(path, value)
  if rank ~= 0 then return end
  local f = assert(io.open(path, "w"))
  f:write(cjson.encode(value))
  f:close()
end

if mode == "collectives" then
  local r = {size = size}
  r.sum = dist.all_reduce(bert.tensor({rank + 1, 2 * (rank + 1)}), "sum"):totable()
  r.mean = dist.all_reduce(bert.tensor({rank + 1}), "mean"):totable()
  r.max = dist.all_reduce(bert.tensor({rank, -rank}, "int32"), "max"):totable()
  r.min = dist.all_reduce(bert.tensor({rank, -rank}), "min"):totable()
  r.broadcast = dist.broadcast(bert.tensor({rank + 10, rank + 20}), size - 1):totable()
  r.gather = dist.all_gather(bert.tensor({{rank, rank * 2}})):totable()
  r.numbers = dist.all_reduce_numbers({rank, 0.5}, "sum")
  r.any = {dist.any(rank == size - 1), dist.any(false)}
  local absent_on_0 = 3
  if rank == 0 then absent_on_0 = nil end
  r.bnum = {dist.broadcast_number(rank == 0 and 42 or 7), dist.broadcast_number(absent_on_0) == nil}
  dist.barrier()
  local ok, err = pcall(dist.all_reduce, bert.tensor({1}), "median")
  r.bad_op = not ok and tostring(err) or "accepted"
  ok, err = pcall(dist.broadcast, bert.tensor({1}), size)
  r.bad_root = not ok and tostring(err) or "accepted"
  ok, err = pcall(dist.shard, 2 * size + 1, "spec")
  r.bad_shard = not ok and tostring(err) or "accepted"
  r.split = dist.split_map(5, function(first, last)
    local out = {}
    for i = first, last do out[#out + 1] = i * 10 end
    return out
  end)
  r.split_lists = dist.split_map(3, function(first, last)
    local out = {}
    for i = first, last do
      local item = {}
      for j = 1, i do item[j] = 100 * i + j end
      out[#out + 1] = item
    end
    return out
  end, function(i) return i end)
  r.split_floats = dist.split_map(3, function(first, last)
    local out = {}
    for i = first, last do out[#out + 1] = {i + 0.25, -i - 0.5} end
    return out
  end, function() return 2 end, "float32")
  r.info = bert.backend_info().distributed
  write(arg[2], r)
elseif mode == "train" then
  -- the same synthetic global batches on every rank; the Trainer cuts them
  local arch, accum, steps = arg[2], math.tointeger(tonumber(arg[3])), math.tointeger(tonumber(arg[4]))
  bert.manual_seed(5)
  local cfg = {vocab_size = 50, hidden_size = 16, num_hidden_layers = 2, num_attention_heads = 2,
               intermediate_size = 32, max_position_embeddings = 32, num_labels = 3}
  local model = bert.model(arch, cfg)
  if arg[6] == "recompute" then model:set_recompute(true) end
  local opt = bert.optim.AdamW(model, {lr = 1e-2, weight_decay = 0.01})
  local B, T, n = 8, 12, 0
  local function next_batch()
    n = n + 1
    local ids, mask = bert.randint(0, 50, {B, T}, {seed = 100 + n}), bert.ones({B, T}, "int32")
    local batch = {input_ids = ids, attention_mask = mask}
    if arch:find("ForSequenceClassification$") then
      batch.labels = bert.randint(0, 3, {B}, {seed = 900 + n})
    else   -- masked LM: a varying number of targets per row, so per-rank counts differ
      local keep = bert.randint(0, 10, {B, T}, {seed = 500 + n}):lt(2)
      batch.labels = ids:masked_fill(keep:eq(0), -100)
    end
    return batch
  end
  local trainer = bert.train.Trainer{model = model, optimizer = opt, next_batch = next_batch, steps = steps,
                                     accum = accum, clip = 1.0, progress = false, bucket_mb = 0.004}
  local losses = {}
  for _ = 1, steps do losses[#losses + 1] = trainer:train_step().loss end
  local flat = model.flat_params
  write(arg[5], {losses = losses, params = flat:totable(), distributed = trainer.dp and trainer.dp:stats()})
elseif mode == "mismatch" then
  bert.manual_seed(rank == 1 and 2 or 1)
  local model = bert.model("BertForMaskedLM", {vocab_size = 20, hidden_size = 8, num_hidden_layers = 1,
                                               num_attention_heads = 2, intermediate_size = 8})
  bert.train.Trainer{model = model, optimizer = bert.optim.AdamW(model, {lr = 1e-3}), next_batch = function() end}
  print("not refused")
elseif mode == "diverge" then
  local model = bert.model("BertForMaskedLM", {vocab_size = 20, hidden_size = 8, num_hidden_layers = 1,
                                               num_attention_heads = 2, intermediate_size = 8})
  local trainer = bert.train.Trainer{model = model, optimizer = bert.optim.AdamW(model, {lr = 1e-3}),
                                     next_batch = function() end, output = arg[2], progress = false}
  assert(trainer:save())   -- identical replicas: fine
  if rank == 1 then model.flat_params:narrow(1, 5, 1):add_(1e-6) end
  trainer:save()
  print("not refused")
elseif mode == "hang" then
  dist.set_timeout(1)
  if rank == 1 then os.execute("sleep 30") end
  dist.all_reduce(bert.tensor({1}), "sum")
end
dist.finalize()
