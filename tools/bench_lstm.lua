-- One LSTM layer (F.lstm: one direction, projection as ELMo's) at the
-- shapes ELMo trains with: effective GFLOP/s (the GEMM work of the real,
-- non-padded steps) and its fraction of the machine's fp32 FMA peak
-- (tools/peak.lua, as tools/bench_peak.lua measures it), forward alone
-- and forward + backward, with the same cases on PyTorch's nn.LSTM
-- (tools/bench_lstm_peer.py) run back to back with --peer 1.
--
--   lua5.4 tools/bench_lstm.lua [--cases all | small,small-ragged,original] [--mode train|infer]
--                               [--reps 3] [--threads N] [--peer 1]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
-- the cases, shared with the peer (tools/bench_lstm_peer.py holds the same
-- table): ELMo-small (128 projection, 512 cells) on 64-token windows, the
-- same with ragged lengths 16..64, and the paper's 512 / 4096 at batch 4 on
-- its 20-token windows
local CASES = {
  {name = "small", B = 32, T = 64, I = 128, H = 512, P = 128},
  {name = "small-ragged", B = 32, T = 64, I = 128, H = 512, P = 128, ragged = 16},
  {name = "original", B = 4, T = 20, I = 512, H = 4096, P = 512},
}
local case_names, is_case = {}, {}
for k, c in ipairs(CASES) do case_names[k], is_case[c.name] = c.name, true end

local cli = require("bert.cli")
local p = cli.parser("bench_lstm.lua", "Times one LSTM layer with projection (F.lstm) at ELMo's shapes; prints " ..
  "per case one JSON line: ms of the best repetition, effective GFLOP/s (2 flops per multiply-add of the GEMMs " ..
  "over the real steps; backward counted as twice forward) and the fraction of the FMA peak for the thread count " ..
  "(BERT_PEAK_GFLOPS=<n> gives the peak instead of measuring it).  --peer 1 runs PyTorch's nn.LSTM on the same " ..
  "case after each of our repetitions (/usr/bin/python3 tools/bench_lstm_peer.py) and prints the ratio of the " ..
  "best times.")
p:option("--cases", "all, or some of " .. table.concat(case_names, ", ") .. ", separated by commas", "all")
  :convert(function(v)
    if v == "all" then return v end
    for name in v:gmatch("[^,]*") do
      if not is_case[name] then
        return nil, "option --cases: expected all, or some of " .. table.concat(case_names, ", ") ..
          " separated by commas, got '" .. v .. "'"
      end
    end
    return v
  end)
p:option("--mode", "train (forward and backward) or infer (forward, no graph)", "train"):choices({"train", "infer"})
p:option("--reps", "Timed repetitions per case (the best is kept)", "3"):convert(cli.integer("--reps", 1, 100000))
cli.add(p, "threads")
p:option("--peer", "1: PyTorch's nn.LSTM on the same case after each repetition", "0"):choices({"0", "1"})
local opts = p:parse()
local bert = require("bert")
local cjson = require("cjson")

local function fail(msg)
  io.stderr:write("bench_lstm: " .. msg .. "\n")
  os.exit(2)
end

local reps = opts.reps
opts.peer = opts.peer == "1"
if opts.threads then bert.set_num_threads(opts.threads) end
local chosen = {}
for _, c in ipairs(CASES) do
  if opts.cases == "all" or ("," .. opts.cases .. ","):find("," .. c.name .. ",", 1, true) then
    chosen[#chosen + 1] = c
  end
end

-- case c's lengths: all T, or ragged: c.ragged .. T spread evenly over the batch
local function lengths_of(c)
  local len = {}
  for b = 1, c.B do len[b] = c.ragged and c.ragged + ((b - 1) * (c.T - c.ragged)) // math.max(c.B - 1, 1) or c.T end
  return len
end

-- the GEMM flops of one forward over the real steps: input projection,
-- recurrent product and projection, 2 per multiply-add
local function forward_flops(c)
  local steps = 0
  for _, n in ipairs(lengths_of(c)) do steps = steps + n end
  return 2 * steps * (4 * c.H * (c.I + c.P) + c.H * c.P)
end

local peak = dofile("tools/peak.lua").measure(bert.get_num_threads())

local function run_peer(c)
  local cmd = string.format("/usr/bin/python3 tools/bench_lstm_peer.py --cases %s --mode %s --reps 1 --threads %d",
                            c.name, opts.mode, bert.get_num_threads())
  local f = assert(io.popen(cmd))
  local text = f:read("a")
  local ok = f:close()
  local r = ok and pcall(cjson.decode, text) and cjson.decode(text)
  if not r then fail("the peer failed: " .. cmd .. "\n" .. text) end
  return r
end

for _, c in ipairs(chosen) do
  local x = bert.randn({c.B, c.T, c.I}, {seed = 1})
  local k = 1 / math.sqrt(c.H)
  local w = {}
  for _, p in ipairs({{"wih", {4 * c.H, c.I}}, {"whh", {4 * c.H, c.P}}, {"b", {4 * c.H}}, {"whr", {c.P, c.H}}}) do
    w[p[1]] = bert.empty(p[2]):uniform_(-k, k)
    if opts.mode == "train" then w[p[1]]:requires_grad(true) end
  end
  local len = bert.tensor(lengths_of(c), "int32")
  local R = bert.randn({c.B, c.T, c.P}, {seed = 2})
  local function once()
    if opts.mode == "infer" then
      bert.no_grad(function() bert.F.lstm(x, nil, nil, w.wih, w.whh, w.b, {w_hr = w.whr, lengths = len}) end)
      return
    end
    for _, t in pairs(w) do t:zero_grad() end
    local y = bert.F.lstm(x, nil, nil, w.wih, w.whh, w.b, {w_hr = w.whr, lengths = len})
    local loss = (y * R):sum()
    loss:backward()
  end
  once()   -- warm up
  local best, peer_best = math.huge, math.huge
  for _ = 1, reps do
    local t0 = bert.wall_time()
    once()
    best = math.min(best, bert.wall_time() - t0)
    if opts.peer then peer_best = math.min(peer_best, run_peer(c).ms / 1e3) end
  end
  local flops = forward_flops(c) * (opts.mode == "train" and 3 or 1)
  local gf = flops / best / 1e9
  local r = {case = c.name, mode = opts.mode, threads = bert.get_num_threads(), batch = c.B, steps = c.T,
             input = c.I, hidden = c.H, proj = c.P, ms = best * 1e3, gflops = gf, of_peak = gf / peak,
             peak_gflops = peak}
  if opts.peer then r.peer_ms, r.speedup = peer_best * 1e3, peer_best / best end
  print(cjson.encode(r))
end
