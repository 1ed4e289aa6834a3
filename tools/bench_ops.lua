-- The non-GEMM passes of a BERT-base layer and linear's backward, timed one by
-- one (best of --repeat runs): elementwise / normalisation passes in GB/s of
-- the bytes they must move, linear backward in GFLOP/s beside the same two
-- GEMMs run as plain matmuls (what bench_gemm measures).  Backward times are
-- (forward + backward) - forward.
-- --cpu 1 times process CPU seconds (os.clock) instead of wall time: with
-- --threads 1 on a shared machine that is the figure least disturbed by
-- other processes (it still counts their cache and memory-bandwidth effects).
--   lua5.4 tools/bench_ops.lua [--tokens 1024] [--hidden 768] [--ffn 3072] [--repeat 5] [--threads N] [--cpu 1]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cli = require("bert.cli")
local p = cli.parser("bench_ops.lua", "Times bias_gelu, layer_norm (forward, backward; GB/s) and linear backward " ..
  "(GFLOP/s, beside the same GEMMs as matmuls) at BERT-base sizes; one JSON line per op.")
p:option("--tokens", "Rows (tokens) of every tensor", "1024"):convert(cli.integer("--tokens", 1))
p:option("--hidden", "Hidden size", "768"):convert(cli.integer("--hidden", 1))
p:option("--ffn", "Feed-forward (intermediate) size", "3072"):convert(cli.integer("--ffn", 1))
p:option("--repeat", "Timed runs per figure, after a warm-up (the best is kept)", "5")
  :convert(cli.integer("--repeat", 1, 100000))
cli.add(p, "threads")
p:option("--cpu", "1: process CPU time (os.clock) instead of wall time (meaningful with --threads 1)", "0")
  :convert(cli.integer("--cpu", 0, 1))
local o = p:parse()
local bert = require("bert")
local cjson = require("cjson")
local F = bert.F

if o.threads then bert.set_num_threads(o.threads) end
o.threads = bert.get_num_threads()
local R, H, I = o.tokens, o.hidden, o.ffn
local clock = o.cpu == 1 and os.clock or bert.wall_time

local function best(f)
  f()
  local b = math.huge
  for _ = 1, o["repeat"] do
    local t0 = clock()
    f()
    b = math.min(b, clock() - t0)
  end
  return b
end

local function leaf(shape, seed)
  local t = bert.randn(shape, {seed = seed})
  t:requires_grad(true)
  return t
end

local function report(t)
  t.threads, t.clock = o.threads, o.cpu == 1 and "cpu" or "wall"
  print(cjson.encode(t))
end

-- bias_gelu [R, I]: forward moves x in, y out; backward x, dy in, dx out
do
  local x, b, g = leaf({R, I}, 1), leaf({I}, 2), bert.randn({R, I}, {seed = 3})
  local fwd = best(function() bert.no_grad(function() return F.bias_gelu(x, b) end) end)
  local both = best(function() x:set_grad(nil); b:set_grad(nil); F.bias_gelu(x, b):backward(g) end)
  local graph_fwd = best(function() return F.bias_gelu(x, b) end)
  local bwd = both - graph_fwd
  report({op = "bias_gelu", shape = {R, I}, forward_ms = fwd * 1e3, forward_gbs = 8 * R * I / fwd / 1e9,
          backward_ms = bwd * 1e3, backward_gbs = 12 * R * I / bwd / 1e9})
end

-- layer_norm(x + residual) [R, H]: forward x, r in, y out; backward x, r, dy in, dx out
do
  local x, r, gm, bt = leaf({R, H}, 4), leaf({R, H}, 5), leaf({H}, 6), leaf({H}, 7)
  local g = bert.randn({R, H}, {seed = 8})
  local fwd = best(function() bert.no_grad(function() return F.layer_norm(x, gm, bt, 1e-12, r) end) end)
  local graph_fwd = best(function() return F.layer_norm(x, gm, bt, 1e-12, r) end)
  local both = best(function()
    for _, t in ipairs({x, r, gm, bt}) do t:set_grad(nil) end
    F.layer_norm(x, gm, bt, 1e-12, r):backward(g)
  end)
  local bwd = both - graph_fwd
  report({op = "layer_norm", shape = {R, H}, forward_ms = fwd * 1e3, forward_gbs = 12 * R * H / fwd / 1e9,
          backward_ms = bwd * 1e3, backward_gbs = 16 * R * H / bwd / 1e9})
end

-- linear backward: dX = G W (NN) and dW = G^T X (TN), against the same GEMMs as matmuls
for _, s in ipairs({{H, 3 * H, "QKV projection"}, {H, I, "FFN up"}, {I, H, "FFN down"}}) do
  local inf, outf, role = s[1], s[2], s[3]
  local x, w, b = leaf({R, inf}, 9), leaf({outf, inf}, 10), leaf({outf}, 11)
  local g = bert.randn({R, outf}, {seed = 12})
  local graph_fwd = best(function() return F.linear(x, w, b) end)
  local both = best(function()
    for _, t in ipairs({x, w, b}) do t:set_grad(nil) end
    F.linear(x, w, b):backward(g)
  end)
  local bwd = both - graph_fwd
  local gemms = best(function()
    bert.no_grad(function()
      g:matmul(w):free()
      g:t():matmul(x):free()
    end)
  end)
  local flops = 2 * 2 * R * inf * outf
  report({op = "linear_backward", role = role, x = {R, inf}, w = {outf, inf}, backward_ms = bwd * 1e3,
          backward_gflops = flops / bwd / 1e9, same_gemms_ms = gemms * 1e3, same_gemms_gflops = flops / gemms / 1e9})
end
