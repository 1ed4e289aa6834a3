-- Inference against ONNX Runtime (issue 33, item 3): our forward and
-- ONNX Runtime (npm onnxruntime-node, CPU provider, graph optimisations
-- "all", the same intra-op thread count) on the file tools/export_onnx.lua
-- writes for a sequence-classification model of each family (random
-- weights: the time does not depend on them), with the same inputs, in
-- alternating rounds (ours first in odd rounds, ONNX Runtime first in even
-- ones).  Rows: batch 1 x T 16 / 64 / 128 latency (p50, p99 over every
-- timed run of every round) and batch 32 x T 128 throughput.  --int8 adds
-- our int8 model (model:quantize("int8")) and ONNX Runtime's dynamic int8
-- (per-channel QInt8 weights) when Python's onnxruntime.quantization is
-- there to quantise the file (onnxruntime-node cannot); without it that row
-- is left out, with a line saying so.  A family the exporter refuses is
-- skipped with a line; without node or onnxruntime-node the comparison is
-- pending (a line, exit 0).
--
--   lua5.4 tools/bench_onnx.lua [--size base] [--families bert,distilbert] [--threads 2] [--rounds 2] [--int8]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cli = require("bert.cli")

local p = cli.parser("bench_onnx.lua", "Time our inference against ONNX Runtime (onnxruntime-node) on the " ..
  "exported ONNX file: batch 1 latency (p50, p99) and batch 32 throughput, same inputs, alternating rounds.")
p:option("--size", "Model size (tiny, mini, small, base, ...)", "base")
p:option("--families", "Families to compare, comma-separated (a family the exporter refuses is skipped)",
  "bert,distilbert")
p:option("--seqs", "Sequence lengths of the batch-1 latency rows, comma-separated", "16,64,128")
p:option("--throughput", "The throughput row, BATCHxSEQ", "32x128")
p:option("--reps", "Timed runs per latency row and round", "30"):convert(cli.integer("--reps", 1))
p:option("--throughput-reps", "Timed runs of the throughput row per round", "3"):convert(cli.integer("--throughput-reps", 1))
p:option("--warmup", "Untimed runs before each row", "2"):convert(cli.integer("--warmup", 0))
p:option("--rounds", "Alternating rounds", "2"):convert(cli.integer("--rounds", 1))
p:flag("--int8", "Also time our int8 model and ONNX Runtime's dynamic int8 (when a quantiser is available)")
p:option("--node", "The node executable", "node")
p:option("--python", "The Python that may have onnxruntime.quantization (for --int8)", "python3")
p:flag("--json", "Print the results as one JSON line too")
cli.add(p, "threads", {help = "Threads for both engines (default: ours now)"})
local args = p:parse()

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function sh(cmd)
  local f = io.popen(cmd .. " 2>&1")
  local out = f:read("a")
  local ok = f:close()
  return ok, out
end

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

-- Runs in node: one session for the whole round, the rows of cases.json in
-- order, each warmed up, then timed run by run; prints {row: [ms...]}.
local RUNNER = [[
const fs = require("fs");
const ort = require("onnxruntime-node");
(async () => {
  const [model, casesPath] = process.argv.slice(2);
  const cfg = JSON.parse(fs.readFileSync(casesPath, "utf8"));
  const session = await ort.InferenceSession.create(model, {graphOptimizationLevel: "all",
    intraOpNumThreads: cfg.threads, interOpNumThreads: 1, executionMode: "sequential"});
  const out = {};
  for (const c of cfg.cases) {
    const feeds = {};
    for (const name of session.inputNames) {
      const rows = c.inputs[name];
      feeds[name] = new ort.Tensor("int64", BigInt64Array.from(rows.flat().map((v) => BigInt(v))),
        [rows.length, rows[0].length]);
    }
    for (let i = 0; i < c.warmup; i++) await session.run(feeds);
    const ms = [];
    for (let i = 0; i < c.reps; i++) {
      const t0 = process.hrtime.bigint();
      await session.run(feeds);
      ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    out[c.name] = ms;
  }
  console.log(JSON.stringify(out));
})().catch((e) => { console.error("onnxruntime: " + String(e)); process.exit(1); });
]]

cli.main("bench_onnx.lua", function()
  local bert = require("bert")
  local cjson = require("cjson")
  local tmpdir = os.tmpname()
  os.remove(tmpdir)
  assert(bert.mkdir(tmpdir))
  local function cleanup() os.execute("rm -rf " .. q(tmpdir)) end

  local modules = require("bert.onnx").node_modules()
  local has_node = sh(q(args.node) .. " --version")
  if not (modules and has_node) then
    cleanup()
    print("bench_onnx: pending: " .. (has_node and "onnxruntime-node is not installed (make deps puts it in .deps/node)"
      or ("no node executable (" .. args.node .. ")")))
    return
  end
  if args.threads then bert.set_num_threads(args.threads) end
  local threads = bert.get_num_threads()
  local runner = tmpdir .. "/runner.js"
  write(runner, RUNNER)

  -- the rows: name, batch, seq, timed runs
  local rows = {}
  for s in args.seqs:gmatch("[^,]+") do
    local T = math.tointeger(tonumber(s)) or error("--seqs: " .. s .. " is not an integer", 0)
    rows[#rows + 1] = {name = string.format("B1xT%d", T), batch = 1, seq = T, reps = args.reps, latency = true}
  end
  local TB, TT = args.throughput:match("^(%d+)x(%d+)$")
  if not TB then error("--throughput: expected BATCHxSEQ, got " .. args.throughput, 0) end
  rows[#rows + 1] = {name = "B" .. TB .. "xT" .. TT, batch = tonumber(TB), seq = tonumber(TT),
                     reps = args.throughput_reps}

  local quantiser = args.int8 and sh(q(args.python) .. " -c 'import onnxruntime.quantization'")
  if args.int8 and not quantiser then
    print("ONNX Runtime int8: left out: no quantiser (onnxruntime-node cannot quantise; Python's " ..
      "onnxruntime.quantization is not installed for " .. args.python .. ")")
  end

  local results = {}
  for fam_name in args.families:gmatch("[^,]+") do
    local spec = fam_name .. "-" .. args.size
    local resolved, rerr = bert.models.resolve(spec)
    if not resolved or not resolved.family then error("--families: " .. tostring(rerr), 0) end
    local family = bert.models.family(resolved.family)
    local arch = bert.models.architecture_for(family, "sequence_classification")
    bert.manual_seed(0)
    local model = bert.model(arch, resolved.size, {num_labels = 2}):evaluate()
    local dir, onnx = tmpdir .. "/" .. spec, tmpdir .. "/" .. spec .. ".onnx"
    model:save_pretrained(dir)
    local ok, out = sh(string.format("lua5.4 tools/export_onnx.lua --model %s --output %s", q(dir), q(onnx)))
    if not ok then
      -- its message without the script's name, positions and traceback
      local why = out:match("[^\n]*"):gsub("^export_onnx%.lua: ", ""):gsub("[%w_/%.%-]+%.lua:%d+: ", "")
      print(string.format("%s: skipped: tools/export_onnx.lua refuses it: %s", spec, why))
    else
      local onnx8 = tmpdir .. "/" .. spec .. ".int8.onnx"
      local has_ort8 = false
      if quantiser then
        local qok, qout = sh(string.format("%s -c %s", q(args.python), q(string.format(
          "from onnxruntime.quantization import quantize_dynamic, QuantType; " ..
          "quantize_dynamic(%q, %q, weight_type=QuantType.QInt8, per_channel=True)", onnx, onnx8))))
        has_ort8 = qok
        if not qok then print(spec .. ": ONNX Runtime int8 left out: the quantiser failed: " .. qout) end
      end
      -- the same inputs for every engine: random ids, no padding, one segment
      local V, cases, inputs = model.config.vocab_size, {}, {}
      for i, r in ipairs(rows) do
        local ids = bert.randint(0, V, {r.batch, r.seq}, {seed = i})
        inputs[r.name] = {input_ids = ids, attention_mask = bert.ones({r.batch, r.seq}, "int32"),
                          token_type_ids = bert.zeros({r.batch, r.seq}, "int32")}
        local feed = {}
        for k, t in pairs(inputs[r.name]) do feed[k] = t:totable() end
        cases[i] = {name = r.name, inputs = feed, warmup = args.warmup, reps = r.reps}
      end
      local cases_path = tmpdir .. "/" .. spec .. ".cases.json"
      write(cases_path, cjson.encode({threads = threads, cases = cases}))

      -- our rows: each warmed up, then timed run by run (ms)
      local function run_ours()
        local ms = {}
        for _, r in ipairs(rows) do
          local b = inputs[r.name]
          local function forward() return bert.no_grad(function() return model:forward(b) end) end
          for _ = 1, args.warmup do forward() end
          ms[r.name] = {}
          for k = 1, r.reps do
            local t0 = bert.wall_time()
            forward()
            ms[r.name][k] = (bert.wall_time() - t0) * 1e3
          end
        end
        return ms
      end
      local engines = {{name = "ours", run = run_ours}, {name = "onnxruntime", file = onnx}}
      if args.int8 then
        engines[#engines + 1] = {name = "ours int8", run = function()
          model:quantize("int8")   -- each weight quantised in the warm-up runs
          local ms = run_ours()
          model:quantize(nil)
          return ms
        end}
        if has_ort8 then engines[#engines + 1] = {name = "onnxruntime int8", file = onnx8} end
      end
      for _, e in ipairs(engines) do
        if e.file then
          e.run = function()
            local rok, text = sh(string.format("NODE_PATH=%s %s %s %s %s", q(modules), q(args.node), q(runner),
              q(e.file), q(cases_path)))
            if not rok then error(spec .. ": " .. e.name .. " failed: " .. text, 0) end
            return cjson.decode(text:match("(%b{})%s*$"))
          end
        end
      end

      local samples = {}
      for _, e in ipairs(engines) do samples[e.name] = {} end
      for round = 1, args.rounds do
        local order = {}
        for i = 1, #engines do order[i] = engines[round % 2 == 1 and i or #engines + 1 - i] end
        for _, e in ipairs(order) do
          io.stderr:write(string.format("%s round %d: %s\n", spec, round, e.name))
          for name, ms in pairs(e.run()) do
            local all = samples[e.name][name] or {}
            table.move(ms, 1, #ms, #all + 1, all)
            samples[e.name][name] = all
          end
        end
      end

      local function percentile(list, pct)
        local s = table.move(list, 1, #list, 1, {})
        table.sort(s)
        return s[math.max(1, math.ceil(pct / 100 * #s))]
      end
      print(string.format("\n%s (%s), %d threads, %d rounds", spec, arch, threads, args.rounds))
      print("| row | engine | p50 ms | p99 ms | sequences/s | ONNX Runtime's p50 / ours |")
      print("|---|---|---|---|---|---|")
      local fam_result = {}
      for _, r in ipairs(rows) do
        local ort50 = percentile(samples.onnxruntime[r.name], 50)
        for _, e in ipairs(engines) do
          local list = samples[e.name][r.name]
          local p50, p99 = percentile(list, 50), percentile(list, 99)
          -- our int8 against ONNX Runtime's int8 when it ran, else against its float32 (said)
          local ort8 = samples["onnxruntime int8"]
          local ref = e.name == "ours int8" and ort8 and percentile(ort8[r.name], 50) or ort50
          local vs = e.name == "ours int8" and not ort8 and " (its float32)" or ""
          print(string.format("| %s | %s | %.1f | %.1f | %.1f | %s |", r.name, e.name, p50, p99, r.batch / p50 * 1e3,
            e.name:find("^ours") and string.format("%.2fx%s", ref / p50, vs) or ""))
          fam_result[#fam_result + 1] = {row = r.name, engine = e.name, p50_ms = p50, p99_ms = p99, runs = #list,
                                         sequences_per_s = r.batch / p50 * 1e3}
        end
      end
      results[spec] = fam_result
    end
  end
  cleanup()
  if args.json then print(cjson.encode({threads = threads, rounds = args.rounds, results = results})) end
end)
