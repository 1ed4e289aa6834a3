-- A model of data-parallel scaling: bytes per step, ring all-reduce time and
-- efficiency at several rank counts, for a model size (default BERT-base).
--
--   lua5.4 tools/dist_model.lua [--model base] [--tokens-per-s R] [--seq-len 128]
--                               [--batch-per-rank 32] [--bucket-mb 8]
--
-- R is one rank's measured training throughput (tokens/s) on the model,
-- e.g. summary.json's tokens_per_s of a one-process pretrain.lua run.
-- The model (docs/distributed.md explains it):
--   S = 4 * parameters bytes of float32 gradients per step and rank;
--   ring all-reduce of s bytes on N ranks: 2 (N-1) alpha + 2 (N-1)/N * s / bandwidth,
--   once per bucket (alpha: per-message latency);
--   compute C = tokens per rank per step / R, backward = 2/3 of it;
--   no overlap: step = C + T(all buckets);
--   overlap: buckets reduce while backward runs, except the ones holding the
--   embeddings (their gradient is final only when backward ends):
--   step = C + max(0, T(other buckets) - backward) + T(embedding buckets).
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cli = require("bert.cli")
local bert = require("bert")

local parser = cli.parser("dist_model.lua", "Model of data-parallel scaling for a BERT size.")
parser:option("--model", "Size name", "base"):choices(cli.size_names())
parser:option("--tokens-per-s", "One rank's measured tokens/s on this model"):convert(cli.number("--tokens-per-s", 1))
parser:option("--seq-len", "Sequence length", "128"):convert(cli.integer("--seq-len", 1))
parser:option("--batch-per-rank", "Sequences per rank and step", "32"):convert(cli.integer("--batch-per-rank", 1))
parser:option("--bucket-mb", "Gradient bucket size (MiB)", "8"):convert(cli.number("--bucket-mb", 0.001))
local args = parser:parse()

-- parameter counts from the real model definition (no weights allocated twice)
local model = bert.model("BertForPreTraining", args.model, {vocab_size = 30522})
local total, embed = 0, 0
for _, np in ipairs(model:named_parameters()) do
  local n = np.param:numel()
  total = total + n
  if np.name:find("^bert%.embeddings%.") then embed = embed + n end
end
model = nil   -- luacheck: ignore
collectgarbage()

local S = 4 * total
local bucket = args.bucket_mb * 1024 * 1024
local nbuckets = math.ceil(S / bucket)
local tail_buckets = math.ceil(4 * embed / bucket)   -- the embeddings lead the flat buffer
local tail_bytes = math.min(S, tail_buckets * bucket)

local function ring(N, bytes, buckets, gbit, alpha)
  return 2 * (N - 1) * alpha * buckets + 2 * (N - 1) / N * bytes / (gbit * 1e9 / 8)
end

print(string.format("model %s: %.1f M parameters (%.1f M in the embeddings); %.0f MB of float32 gradients per step",
  args.model, total / 1e6, embed / 1e6, S / 1e6))
print(string.format("%d buckets of %g MiB; %d hold embedding gradients (final only when backward ends)",
  nbuckets, args.bucket_mb, tail_buckets))
local tokens = args.seq_len * args.batch_per_rank
local C = args.tokens_per_s and tokens / args.tokens_per_s
if C then
  print(string.format("compute per step and rank: %d tokens / %.0f tokens/s = %.2f s (backward %.2f s)",
    tokens, args.tokens_per_s, C, C * 2 / 3))
end
print()
print("| link | alpha | ranks | all-reduce per step | efficiency, no overlap | efficiency, overlap |")
print("|---|---|---|---|---|---|")
for _, link in ipairs({{10, 20e-6}, {100, 3e-6}}) do
  local gbit, alpha = link[1], link[2]
  for _, N in ipairs({8, 64, 256}) do
    local t = ring(N, S, nbuckets, gbit, alpha)
    local t_tail = ring(N, tail_bytes, tail_buckets, gbit, alpha)
    local eff_no, eff_ov = "-", "-"
    if C then
      eff_no = string.format("%.0f%%", 100 * C / (C + t))
      local step = C + math.max(0, (t - t_tail) - C * 2 / 3) + t_tail
      eff_ov = string.format("%.0f%%", 100 * C / step)
    end
    print(string.format("| %d Gbit/s | %g us | %d | %.3f s | %s | %s |", gbit, alpha * 1e6, N, t, eff_no, eff_ov))
  end
end
