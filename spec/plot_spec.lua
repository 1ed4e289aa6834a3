-- bert.plot: run metrics as CSV and as overlaid PNG curves (gnuplot).
local bert = require("bert")
local plot = require("bert.plot")

local function run_dir(lines)
  local dir = os.tmpname()
  os.remove(dir)
  assert(bert.mkdir(dir))
  local f = assert(io.open(dir .. "/metrics.jsonl", "w"))
  f:write(table.concat(lines, "\n"), "\n")
  f:close()
  return dir
end

describe("bert.plot", function()
  local a = run_dir({'{"step":1,"loss":2.5,"mlm_accuracy":0.1}', '{"step":2,"loss":2.0,"mlm_accuracy":0.2}',
    '{"step":2,"eval":{"mlm_accuracy":0.15,"unigram_baseline_accuracy":0.05,"mlm_loss":2.2}}'})
  local b = run_dir({'{"step":1,"loss":3.0}', '{"step":2,"eval":{"accuracy":0.7,"loss":1.1}}'})
  teardown(function() os.execute("rm -rf '" .. a .. "' '" .. b .. "'") end)

  it("writes metrics.csv: one row per record, held-out fields prefixed", function()
    assert.equal(a .. "/metrics.csv", plot.write_csv(a))
    local rows = {}
    for l in io.lines(a .. "/metrics.csv") do rows[#rows + 1] = l end
    assert.equal("step,kind,eval_mlm_accuracy,eval_mlm_loss,eval_unigram_baseline_accuracy,loss,mlm_accuracy", rows[1])
    assert.equal("1,train,,,,2.5,0.1", rows[2])
    assert.equal("2,eval,0.15,2.2,0.05,,", rows[4])
  end)

  it("separates training and held-out series", function()
    local series, order = plot.series(assert(plot.read_metrics(a)))
    assert.same({"held-out mlm_accuracy", "held-out mlm_loss", "held-out unigram_baseline_accuracy",
                 "train loss", "train mlm_accuracy"}, order)
    assert.same({{1, 2.5}, {2, 2.0}}, series["train loss"])
  end)

  it("overlays several runs into one pair of PNGs", function()
    if os.execute("command -v gnuplot >/dev/null 2>&1") ~= true then
      pending("gnuplot is not installed (make deps installs gnuplot-nox)")
      return
    end
    local made = assert(plot.runs({a, b}, {output = b, labels = {"pretrained", "scratch"}}))
    assert.same({b .. "/loss.png", b .. "/accuracy.png"}, made)
    for _, png in ipairs(made) do
      local f = assert(io.open(png, "rb"))
      assert.equal("\137PNG", f:read(4))
      f:close()
    end
  end)

  it("names the file and line of a malformed record", function()
    local bad = run_dir({'{"step":1,"loss":1}', 'not json'})
    local ok, err = plot.read_metrics(bad)
    assert.is_nil(ok)
    assert.equal(bad .. "/metrics.jsonl:2: not a JSON object", err)
    os.execute("rm -rf '" .. bad .. "'")
  end)
end)
