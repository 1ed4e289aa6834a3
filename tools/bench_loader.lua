-- Measures the pretraining loader: batches/s and microseconds per next() at
-- batch 8 x 128, static and dynamic masking, next to a BERT-tiny
-- BertForPreTraining training step on the same batches.
--   lua5.4 tools/bench_loader.lua [plain-corpus.txt]
-- Uses data/brown/brown.txt (tools/fetch_data.sh brown) when present, else
-- the spec fixtures; the vocabulary is data/bert-base-uncased/vocab.txt or
-- spec/fixtures/tokenizer/bert-base-uncased-vocab.txt.
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
require("bert.cli").help(arg, [[
usage: lua5.4 tools/bench_loader.lua [PLAIN_CORPUS.txt]
Pretraining loader speed (batches/s, microseconds per next()) beside a BERT-tiny training step.]])
local bert = require("bert")
local corpus = require("bert.data.corpus")
local pt = require("bert.data.pretraining")
local tokenizer = require("bert.tokenizer")

local function exists(p) local f = io.open(p) if f then f:close() return true end return false end
local now = assert(bert.wall_time, "bert.wall_time (a monotonic clock) is missing")

local B, T = 8, 128
local text = arg[1] or (exists("data/brown/brown.txt") and "data/brown/brown.txt")
local docs
if text then
  docs = assert(corpus.read(text))
else
  docs = assert(corpus.from_text("spec/fixtures/tokenizer/bpe_corpus.txt"))
end
local vocab = exists("data/bert-base-uncased/vocab.txt") and "data/bert-base-uncased/vocab.txt"
  or "spec/fixtures/tokenizer/bert-base-uncased-vocab.txt"
local tok = assert(tokenizer.load(vocab))
print(string.format("corpus: %s (%d documents), vocab %s", text or "fixtures", #docs, vocab))

local dir = os.tmpname()
os.remove(dir)
local t0 = now()
local info = assert(pt.create_shards{documents = docs, tokenizer = tok, output = dir .. "/static",
  max_seq_length = T, dupe_factor = 1, seed = 1})
print(string.format("create_shards (static, dupe 1): %d instances in %.2f s", info.instances, now() - t0))
assert(pt.create_shards{documents = docs, tokenizer = tok, output = dir .. "/dynamic",
  max_seq_length = T, masking = "dynamic", seed = 1})

-- a BERT-tiny step
local model = bert.model("BertForPreTraining", "tiny", {vocab_size = tok:vocab_size()})
model:training()
local opt = bert.optim.AdamW(model:named_parameters(), {lr = 1e-4})
local L0 = assert(pt.Loader{dir = dir .. "/static", batch_size = B, seq_len = T})
local function step(batch)
  local out = model:forward(batch)
  opt:zero_grad()
  out.loss:backward()
  opt:step()
end
for _ = 1, 3 do step(L0:next()) end
local steps = 20
t0 = now()
for _ = 1, steps do step(L0:next()) end
local step_s = (now() - t0) / steps
L0:close()
print(string.format("BERT-tiny BertForPreTraining step (fwd + bwd + AdamW), %dx%d: %.2f ms",
                    B, T, step_s * 1e3))

for _, masking in ipairs({"static", "dynamic"}) do
  local L = assert(pt.Loader{dir = dir .. "/" .. masking, batch_size = B, seq_len = T, masking = masking})
  -- throughput: next() in a tight loop (the worker is the bottleneck)
  local n = 5000
  t0 = now()
  for _ = 1, n do L:next() end
  local rate = n / (now() - t0)
  -- latency: next() when the ring had time to fill, as during training
  local total, m, ts = 0, 400, {}
  for i = 1, m do
    local w = now() + 0.0005
    while now() < w do end           -- 0.5 ms of "training"
    local a = now()
    L:next()
    ts[i] = now() - a
    total = total + ts[i]
  end
  table.sort(ts)
  local us, med = total / m * 1e6, ts[m // 2] * 1e6
  L:close()
  print(string.format("loader %-7s: %7.0f batches/s in a tight loop; next() with a full ring: " ..
                      "median %.1f us, mean %.1f us (%.3f%% of a BERT-tiny step)",
                      masking, rate, med, us, us / (step_s * 1e6) * 100))
end
collectgarbage()
os.execute("rm -rf '" .. dir .. "'")
