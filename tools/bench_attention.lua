-- Fused attention (bert.F.attention) against a materialised reference
-- (Q K^T, bias, softmax, P V as separate tensor ops with autograd): forward
-- and forward + backward wall time at BERT shapes.
--   lua5.4 tools/bench_attention.lua [--batch 8] [--heads 12] [--seq 128]
--     [--dim 64] [--pad 0.25] [--dropout 0.1] [--repeat 5] [--threads N]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cli = require("bert.cli")
local p = cli.parser("bench_attention.lua", "Fused attention against a materialised reference: forward and " ..
  "forward+backward wall time.")
p:option("--batch", "Sequences", "8"):convert(cli.integer("--batch", 1, 65536))
p:option("--heads", "Attention heads", "12"):convert(cli.integer("--heads", 1, 1024))
p:option("--seq", "Tokens per sequence", "128"):convert(cli.integer("--seq", 1, 65536))
p:option("--dim", "Head dimension", "64"):convert(cli.integer("--dim", 1, 65536))
p:option("--pad", "Fraction of the keys padded in every other sequence", "0.25"):convert(cli.number("--pad", 0, 1))
p:option("--dropout", "Attention dropout probability, in [0, 1)", "0.1"):convert(function(v)
  local n, err = cli.number("--dropout", 0)(v)
  if n and n >= 1 then return nil, "option --dropout: expected a number in [0, 1), got '" .. v .. "'" end
  return n, err
end)
p:option("--repeat", "Runs per figure (the best is kept)", "5"):convert(cli.integer("--repeat", 1, 100000))
cli.add(p, "threads")
local o = p:parse()
local bert = require("bert.core")   -- the C core is all this needs
local F = bert.F

if o.threads then bert.set_num_threads(o.threads) end

local B, A, T, d = o.batch, o.heads, o.seq, o.dim
local clock = bert.wall_time or os.clock
local q = bert.randn({B, A, T, d}, {seed = 1})
local k = bert.randn({B, A, T, d}, {seed = 2})
local v = bert.randn({B, A, T, d}, {seed = 3})
local dout = bert.randn({B, A, T, d}, {seed = 4})
-- key-padding mask: the last pad * T keys of every other sequence padded
local mask = bert.ones({B, T}, "int32")
local npad = math.floor(o.pad * T)
for b = 1, B, 2 do if npad > 0 then mask:select(1, b):narrow(1, T - npad + 1, npad):fill_(0) end end
local bias = ((bert.ones({B, T}) - mask:float()) * -3.4028234663852886e38):view(B, 1, 1, T)

local function naive(qq, kk, vv)
  local s = qq:matmul(kk:transpose(3, 4)) * (1 / math.sqrt(d)) + bias
  local p = s:softmax(-1)
  if o.dropout > 0 then p = F.dropout(p, o.dropout, true) end
  return p:matmul(vv)
end
local function fused(qq, kk, vv)
  return F.attention(qq, kk, vv, {mask = mask, dropout = o.dropout})
end

local function time(fn, backward)
  local best = math.huge
  for _ = 1, o["repeat"] do
    for _, t in ipairs({q, k, v}) do t:requires_grad(backward); if backward then t:zero_grad() end end
    local t0 = clock()
    local out = fn(q, k, v)
    if backward then out:backward(dout) end
    best = math.min(best, clock() - t0)
  end
  for _, t in ipairs({q, k, v}) do t:requires_grad(false) end
  return best
end

-- FLOPs of the unmasked math: 2 GEMMs forward, 5 backward (incl. recompute)
local fwd_flop = 4 * B * A * T * T * d
local info = bert.backend_info and bert.backend_info() or {}
print(string.format("attention B=%d A=%d T=%d d=%d pad=%.2f dropout=%.2f threads=%s gemm=%s",
  B, A, T, d, o.pad, o.dropout, tostring(info.threads), tostring(info.gemm)))
print(string.format("%-12s %10s %10s %12s", "impl", "fwd ms", "fwd+bwd ms", "fwd GFLOP/s"))
for _, row in ipairs({{"fused", fused}, {"materialised", naive}}) do
  local tf = time(row[2], false)
  local tb = time(row[2], true)
  print(string.format("%-12s %10.2f %10.2f %12.1f", row[1], tf * 1e3, tb * 1e3, fwd_flop / tf / 1e9))
end
local out_f = F.attention(q, k, v, {mask = mask})
local s = q:matmul(k:transpose(3, 4)) * (1 / math.sqrt(d)) + bias
local out_n = s:softmax(-1):matmul(v)
print(string.format("max |fused - materialised| (no dropout) = %.3g", (out_f - out_n):abs():max():item()))
