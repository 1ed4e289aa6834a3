-- tools/bench.lua: the share of the step outside the GEMMs (from the per-op
-- profile) against its target, and int8 inference (--int8).
local cjson = require("cjson")

-- runs bench.lua; its JSON line, its stderr, its exit code
local function bench(args)
  local err = os.tmpname()
  local p = assert(io.popen("BERT_PEAK_GFLOPS=100 lua5.4 tools/bench.lua --threads 1 --steps 1 --batch 1 --seq 8 "
    .. args .. " 2>" .. err .. "; echo \"rc=$?\""))
  local out = p:read("a")
  p:close()
  local f = assert(io.open(err))
  local stderr = f:read("a")
  f:close()
  os.remove(err)
  local json = out:match("^(%b{})")
  return json and cjson.decode(json), stderr, tonumber(out:match("rc=(%d+)%s*$")), out
end

describe("tools/bench.lua", function()
  it("prints the share of the step outside GEMMs against the target for the size", function()
    local r, stderr, rc, out = bench("--model mini --mode train")
    assert.equal(0, rc, out .. stderr)
    assert.is_true(r.outside_gemm_share > 0 and r.outside_gemm_share < 1, out)
    assert.is_true(r.attention_share > 0 and r.attention_share < r.outside_gemm_share, out)
    assert.equal(0.25, r.outside_gemm_target)
    local pct = stderr:match("outside GEMMs: ([%d.]+)%% of the step %(target <= 25%% for mini: [a-z ]+%); attention [%d.]+%%")
    assert.truthy(pct, stderr)
    assert.is_true(math.abs(tonumber(pct) - 100 * r.outside_gemm_share) < 0.051, stderr)
  end)

  it("prints no share with --share 0, and no target for tiny", function()
    local r, stderr, rc, out = bench("--model base --mode infer --share 0")
    assert.equal(0, rc, out .. stderr)
    assert.is_nil(r.outside_gemm_share)
    assert.falsy(stderr:find("outside GEMMs", 1, true), stderr)
    r, stderr, rc, out = bench("--model tiny --mode infer")
    assert.equal(0, rc, out .. stderr)
    assert.is_nil(r.outside_gemm_target)
    assert.truthy(stderr:find("(no target for tiny)", 1, true), stderr)
  end)

  it("runs int8 inference with --int8, and refuses it for training", function()
    local r, stderr, rc, out = bench("--model tiny --mode infer --int8")
    assert.equal(0, rc, out .. stderr)
    assert.is_true(r.int8)
    assert.is_true(r.outside_gemm_share < 1)
    _, stderr, rc = bench("--model tiny --mode train --int8")
    assert.equal(2, rc)
    assert.truthy(stderr:find("bench: --int8 runs inference on the CPU (--mode infer, --device cpu)", 1, true), stderr)
  end)
end)

describe("tools/bench_onnx.lua", function()
  local function run(args)
    local p = assert(io.popen("lua5.4 tools/bench_onnx.lua " .. args .. " 2>/dev/null; echo \"rc=$?\""))
    local out = p:read("a")
    p:close()
    return out, tonumber(out:match("rc=(%d+)%s*$"))
  end

  it("is pending without node or onnxruntime-node", function()
    local out, rc = run("--node /nonexistent/node")
    assert.equal(0, rc, out)
    assert.truthy(out:find("bench_onnx: pending: no node executable (/nonexistent/node)", 1, true), out)
  end)

  it("times our forward and ONNX Runtime on the exported file, row by row", function()
    if not require("bert.onnx").node_modules() then
      pending("onnxruntime-node is not installed (make deps)")
      return
    end
    local out, rc = run("--size tiny --seqs 8 --throughput 2x8 --reps 2 --throughput-reps 1 --warmup 1 --rounds 2 " ..
      "--threads 1 --int8 --json --python /nonexistent/python")
    assert.equal(0, rc, out)
    assert.truthy(out:find("bert-tiny (BertForSequenceClassification), 1 threads, 2 rounds", 1, true), out)
    for _, row in ipairs({"B1xT8", "B2xT8"}) do
      for _, engine in ipairs({"ours", "onnxruntime", "ours int8"}) do
        assert.truthy(out:find("| " .. row .. " | " .. engine .. " | ", 1, true), row .. " " .. engine .. "\n" .. out)
      end
    end
    assert.truthy(out:find("ONNX Runtime int8: left out: no quantiser", 1, true), out)
    -- DistilBERT: a table once the exporter takes it, a line saying why until then
    assert.truthy(out:find("distilbert-tiny: skipped: tools/export_onnx.lua refuses it: ", 1, true)
      or out:find("distilbert-tiny (DistilBertForSequenceClassification)", 1, true), out)
    local r = require("cjson").decode(out:match("\n(%b{})%s*rc="))
    local runs = {}
    for _, e in ipairs(r.results["bert-tiny"]) do runs[e.row .. " " .. e.engine] = e.runs end
    assert.equal(4, runs["B1xT8 ours"])          -- 2 runs x 2 rounds
    assert.equal(4, runs["B1xT8 onnxruntime"])
    assert.equal(2, runs["B2xT8 ours int8"])
  end)
end)
