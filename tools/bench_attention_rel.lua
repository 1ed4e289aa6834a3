-- The cost of DeBERTa's relative attention over BERT's: F.attention_rel
-- (c2p + p2c over a relative table of R rows, fused) against F.attention
-- at the same shape, forward and forward + backward, best of --repeat
-- runs (wall time, and the process's CPU time, steadier on a loaded
-- machine: compare builds by the ratio), one JSON line per mode.  The relative tables' projections (two
-- [R x H] GEMMs per layer) are outside both kernels and not timed here.
--   lua5.4 tools/bench_attention_rel.lua [--batch 8] [--heads 12] [--seq 128]
--     [--dim 64] [--rows 512] [--repeat 3] [--threads N]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cli = require("bert.cli")
local p = cli.parser("bench_attention_rel.lua", "DeBERTa's relative attention (F.attention_rel) against " ..
  "F.attention at the same shape, forward and forward + backward, best of --repeat runs (wall and process CPU " ..
  "time); one JSON line per mode.")
p:option("--batch", "Sequences", "8"):convert(cli.integer("--batch", 1, 65536))
p:option("--heads", "Attention heads", "12"):convert(cli.integer("--heads", 1, 1024))
p:option("--seq", "Tokens per sequence", "128"):convert(cli.integer("--seq", 1, 65536))
p:option("--dim", "Head dimension", "64"):convert(cli.integer("--dim", 1, 65536))
p:option("--rows", "Rows R of the relative tables", "512"):convert(cli.integer("--rows", 1, 65536))
p:option("--repeat", "Timed runs per figure, after a warm-up (the best is kept)", "3")
  :convert(cli.integer("--repeat", 1, 100000))
cli.add(p, "threads")
local o = p:parse()
local bert = require("bert.core")
local cjson = require("cjson")
local F = bert.F

if o.threads then bert.set_num_threads(o.threads) end

local B, A, T, d, R = o.batch, o.heads, o.seq, o.dim, o.rows
local function leaf(shape, seed) return bert.randn(shape, {seed = seed}):requires_grad(true) end
local q, k, v = leaf({B, A, T, d}, 1), leaf({B, A, T, d}, 2), leaf({B, A, T, d}, 3)
local kr, qr = leaf({A, R, d}, 4), leaf({A, R, d}, 5)
local dout = bert.randn({B, A, T, d}, {seed = 6})
-- DeBERTa's rows: clamp(R/2 + i - j) (log buckets change which rows, not the cost)
local rows = {}
for a = 0, T - 1 do
  local row = {}
  for b = 0, T - 1 do row[b + 1] = math.max(0, math.min(R - 1, R // 2 + a - b)) end
  rows[a + 1] = row
end
rows = bert.tensor(rows, "int32")
local scale = 1 / math.sqrt(3 * d)

local runs = {
  bert = function() return F.attention(q, k, v) end,
  deberta = function() return F.attention_rel(q, k, v, {kr = kr, qr = qr, rows = rows, scale = scale}) end,
}

local function best(fn, backward)
  local wall, cpu = math.huge, math.huge
  for _ = 1, o["repeat"] + 1 do   -- the first is a warm-up
    local t0, c0 = bert.wall_time(), os.clock()
    if backward then
      local out = fn()
      out:backward(dout)
    else
      bert.no_grad(fn)
    end
    local dt, dc = bert.wall_time() - t0, os.clock() - c0
    if _ > 1 then wall, cpu = math.min(wall, dt), math.min(cpu, dc) end
  end
  return wall, cpu
end

for _, mode in ipairs({"forward", "train"}) do
  local tb, cb = best(runs.bert, mode == "train")
  local td, cd = best(runs.deberta, mode == "train")
  print(cjson.encode({batch = B, heads = A, seq = T, dim = d, rows = R, mode = mode, threads = bert.get_num_threads(),
    bert_attention_s = tb, deberta_attention_s = td, ratio = td / tb,
    bert_attention_cpu_s = cb, deberta_attention_cpu_s = cd, cpu_ratio = cd / cb}))
end
