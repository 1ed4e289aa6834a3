-- Fine-tuning throughput with and without padding: our sequence-
-- classification train step (forward, backward, global-norm clipping at
-- 1.0, AdamW, dropout on) over batches of the real SpamAssassin length
-- distribution, packed (varlen) and padded, paired back to back.
-- Prints real (non-pad) tokens/s per mode and their ratio, one JSON line.
--
--   lua5.4 tools/bench_varlen.lua [--model base] [--batch 32] [--seq-len 256] [--batches 4] [--reps 3]
--                                 [--lengths FILE | --tokenizer VOCAB] [--write-lengths FILE] [--threads N]
--                                 [--modes packed,padded] [--device cpu|vulkan] [--peer 1]
--
-- The lengths: --lengths FILE (one token count per line), or the spam
-- training split encoded at --seq-len with --tokenizer (default
-- data/bert-base-uncased/vocab.txt, from tools/fetch_bert_vocab.sh);
-- --write-lengths saves them for tools/bench_varlen_peer.py, which runs
-- the same batches padded on the PyTorch peer.  Batches are consecutive
-- lengths, shuffled once with --seed; a batch is as wide as its longest
-- sequence, rounded up to 16 when padded (bert.finetune.batch.collate's
-- rule), as fine-tuning collates them.
-- --peer 1 runs the peer (/usr/bin/python3 tools/bench_varlen_peer.py,
-- --peer-size, default --model) on the same lengths after each of our
-- repetitions, so the pairs run back to back, and prints the ratio of the
-- best real tokens/s, and the same from process CPU time (the work, less
-- blurred by other processes on a shared machine).
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cli = require("bert.cli")
local p = cli.parser("bench_varlen.lua", "Times our fine-tuning step (sequence classification) on batches of the " ..
  "SpamAssassin length distribution, packed (varlen) and padded, paired back to back; prints real tokens/s per mode.")
p:option("--model", "A size or FAMILY-SIZE (the family's sequence-classification model)", "base")
p:option("--batch", "Sequences per batch", "32"):convert(cli.integer("--batch", 1, 65536))
p:option("--seq-len", "Maximum sequence length the spam split is encoded at (and the limit of --lengths)", "256")
  :convert(cli.integer("--seq-len", 1, 65536))
p:option("--batches", "Batches per repetition (consecutive lengths)", "4"):convert(cli.integer("--batches", 1))
p:option("--reps", "Repetitions of each mode (the best is kept)", "3"):convert(cli.integer("--reps", 1, 100000))
p:option("--lengths", "A file of token counts, one a line (instead of encoding the spam split)")
p:option("--tokenizer", "The vocabulary the spam split is encoded with (default " ..
  "data/bert-base-uncased/vocab.txt, from tools/fetch_bert_vocab.sh)")
p:option("--write-lengths", "Save the lengths to FILE (for tools/bench_varlen_peer.py)")
cli.add(p, "threads")
p:option("--modes", "packed and/or padded, separated by commas", "packed,padded"):convert(function(v)
  for m in v:gmatch("[^,]*") do
    if m ~= "packed" and m ~= "padded" then
      return nil, "option --modes: expected packed and/or padded, separated by commas, got '" .. v .. "'"
    end
  end
  return v
end)
cli.add(p, "device", "seed", {help = "Random seed (the lengths' shuffle, the weights, the token ids)"})
p:option("--peer", "1: the PyTorch peer (tools/bench_varlen_peer.py) on the same lengths after each repetition",
  "0"):choices({"0", "1"})
p:option("--peer-size", "The peer's model size (default: --model)")
local opts = p:parse()
opts.peer = opts.peer == "1"
local bert = require("bert")
local cjson = require("cjson")
local util = require("bert.finetune.util")

local function fail(msg) io.stderr:write("bench_varlen: ", msg, "\n") os.exit(2) end
if opts.threads then bert.set_num_threads(opts.threads) end
local L = opts.seq_len

-- {------------------------------------------------ the lengths
local lengths = {}
if opts.lengths then
  local f, err = io.open(opts.lengths)
  if not f then fail("--lengths: " .. tostring(err)) end
  local n = 0
  for line in f:lines() do
    n = n + 1
    if line:match("%S") then
      local v = math.tointeger(tonumber(line))
      if not v or v < 1 or v > L then
        fail(string.format("%s:%d: expected a token count in 1..%d (--seq-len), got '%s'", opts.lengths, n, L, line))
      end
      lengths[#lengths + 1] = v
    end
  end
  f:close()
else
  local finetune = require("bert.finetune")
  local task = finetune.tasks.load("spam", {kind = "classification"})
  local tok = finetune.find_tokenizer(nil, opts.tokenizer or "data/bert-base-uncased/vocab.txt")
  for k, f in ipairs(finetune.classify.encode(tok, task.train, {max_length = L, labels = task.labels})) do
    lengths[k] = #f.ids
  end
  util.rng(opts.seed):shuffle(lengths)
end
if #lengths < opts.batch * opts.batches then
  fail(string.format("%d lengths make fewer than --batches %d of --batch %d", #lengths, opts.batches, opts.batch))
end
if opts.peer and not opts.write_lengths then opts.write_lengths = os.tmpname() end
if opts.write_lengths then
  local ok, err = util.write_file(opts.write_lengths, table.concat(lengths, "\n") .. "\n")
  if not ok then fail("--write-lengths: " .. tostring(err)) end
end

-- {------------------------------------------------ the batches
bert.manual_seed(opts.seed)
local resolved = bert.models.resolve(opts.model)
if not resolved or not resolved.size then fail("--model: expected a size or FAMILY-SIZE, got " .. tostring(opts.model)) end
local arch = bert.models.architecture_for(resolved.family, "sequence_classification")
local model = bert.model(arch, resolved.size, {num_labels = 2})
local V = model.config.vocab_size
local pad_id = model.config.pad_token_id or 0
local collate = require("bert.finetune.batch").collate
local batches, packed_batches, real_tokens, padded_tokens = {}, {}, 0, 0
local rng = util.rng(opts.seed + 1)
for b = 1, opts.batches do
  local features = {}
  for k = 1, opts.batch do
    local n = lengths[(b - 1) * opts.batch + k]
    local ids = {2}   -- a [CLS]-like first token, then random ids
    for j = 2, n do ids[j] = 5 + rng:int(V - 6) end
    features[k] = {ids = ids, label = rng:int(2) - 1}
    real_tokens = real_tokens + n
  end
  batches[b] = collate(features, {pad_id = pad_id})
  packed_batches[b] = collate(features, {pad_id = pad_id, pad_multiple = 1})
  padded_tokens = padded_tokens + batches[b].input_ids:numel()
end

-- {------------------------------------------------ the step
if opts.device == "vulkan" then model:to("vulkan") end
model:training()
local opt = bert.optim.AdamW(model:named_parameters(), {lr = 2e-5, weight_decay = 0.01})
local function step(b)
  opt:zero_grad()
  local out = model:forward(b)
  out.loss:backward()
  bert.optim.clip_grad_norm(opt, 1.0)
  opt:step()
  return out.loss:item()
end

local modes = {}
for m in opts.modes:gmatch("[^,]+") do modes[#modes + 1] = m end   -- packed, padded (checked by --modes)
-- one repetition of the peer on the same lengths: its JSON result
local function run_peer()
  local cmd = string.format("/usr/bin/python3 tools/bench_varlen_peer.py --lengths '%s' --size '%s' --batch %d " ..
    "--batches %d --reps 1 --threads %d --seed %d", opts.write_lengths, opts.peer_size or opts.model,
    opts.batch, opts.batches, bert.get_num_threads(), opts.seed)
  local f = assert(io.popen(cmd))
  local text = f:read("a")
  local ok = f:close()
  local r = ok and pcall(cjson.decode, text) and cjson.decode(text)
  if not r then fail("the peer failed: " .. cmd .. "\n" .. text) end
  return r
end

-- minor page faults of this process so far (fresh pages: the allocator's
-- cache missed); a count the machine's load does not blur
local function minor_faults()
  local f = io.open("/proc/self/stat")
  if not f then return 0 end
  local s = f:read("a")
  f:close()
  local after = s:match("%) (.*)$") or ""
  local fields = {}
  for w in after:gmatch("%S+") do fields[#fields + 1] = w end
  return tonumber(fields[8]) or 0   -- field 10 of stat, the 8th after the command name
end

local best, all, faults, cpu_best = {}, {}, {}, {}
local peer_best, peer_all, peer_cpu = math.huge, {}, math.huge
for _, m in ipairs(modes) do
  local _, packs = model:set_varlen(m == "packed")
  if m == "packed" and not packs then fail(arch .. " cannot run packed") end
  step(m == "packed" and packed_batches[1] or batches[1])   -- warm up: allocator caches, the packed shapes
  best[m], all[m], cpu_best[m] = math.huge, {}, math.huge
end
for _ = 1, opts.reps do
  for _, m in ipairs(modes) do
    model:set_varlen(m == "packed")
    local f0, t0, c0 = minor_faults(), bert.wall_time(), os.clock()
    for _, b in ipairs(m == "packed" and packed_batches or batches) do step(b) end
    local dt = bert.wall_time() - t0
    cpu_best[m] = math.min(cpu_best[m], os.clock() - c0)
    faults[m] = (faults[m] or 0) + minor_faults() - f0
    all[m][#all[m] + 1] = dt
    if dt < best[m] then best[m] = dt end
  end
  if opts.peer then
    -- hand our cached blocks back first: both processes must fit the machine
    collectgarbage()
    bert.empty_cache()
    local r = run_peer()
    peer_all[#peer_all + 1] = r.best_seconds
    if r.best_seconds < peer_best then peer_best = r.best_seconds end
    if r.best_cpu_seconds < peer_cpu then peer_cpu = r.best_cpu_seconds end
  end
end

local function loadavg()
  local f = io.open("/proc/loadavg")
  if not f then return nil end
  local s = f:read("l")
  f:close()
  return s
end

local result = {
  model = opts.model, architecture = arch, batch = opts.batch, seq_len = L, batches = opts.batches, reps = opts.reps,
  threads = bert.get_num_threads(), device = opts.device,
  real_tokens = real_tokens, padded_tokens = padded_tokens, padding_fraction = 1 - real_tokens / padded_tokens,
  mean_length = real_tokens / (opts.batch * opts.batches), loadavg = loadavg(),
}
for _, m in ipairs(modes) do
  result[m] = {best_seconds = best[m], seconds = all[m], sec_per_step = best[m] / opts.batches,
    real_tokens_per_s = real_tokens / best[m], minor_faults_per_step = faults[m] / (opts.reps * opts.batches),
    best_cpu_seconds = cpu_best[m]}
end
if best.packed and best.padded then
  result.speedup = best.padded / best.packed
  result.cpu_speedup = cpu_best.padded / cpu_best.packed   -- process CPU time: the work, blurred less by the load
end
if opts.peer then
  result.peer = {size = opts.peer_size or opts.model, best_seconds = peer_best, seconds = peer_all,
    sec_per_step = peer_best / opts.batches, real_tokens_per_s = real_tokens / peer_best, best_cpu_seconds = peer_cpu}
  for _, m in ipairs(modes) do
    result[m].vs_peer = peer_best / best[m]
    result[m].cpu_vs_peer = peer_cpu / cpu_best[m]
  end
end
print(cjson.encode(result))
