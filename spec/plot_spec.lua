-- bert.plot: run metrics as CSV and as overlaid PNG curves (gnuplot), and
-- learning curves with error bars.
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

  it("draws a learning curve: the data file holds each line's points by x, mean, sd and n", function()
    local png = b .. "/curve.png"
    local ok, err = plot.curves(png, "spam accuracy", "examples", "accuracy", {
      {label = "pretrained", points = {{x = 1000, mean = 0.9, sd = 0.01, n = 3}, {x = 100, mean = 0.7, sd = 0.05, n = 3}}},
      {label = "scratch", points = {{x = 100, mean = 0.5, n = 1}, {x = 1000, mean = 0.8, sd = 0.02, n = 2}}},
    }, {logx = true})
    local f = assert(io.open(b .. "/curve.dat", "rb"))
    assert.equal("# line: pretrained\n100 0.7 0.05 3\n1000 0.9 0.01 3\n\n\n" ..
                 "# line: scratch\n100 0.5 0 1\n1000 0.8 0.02 2\n", f:read("a"))
    f:close()
    if os.execute("command -v gnuplot >/dev/null 2>&1") ~= true then
      assert.is_nil(ok)
      assert.matches("gnuplot", err, 1, true)
      return
    end
    assert.is_true(ok, err)
    f = assert(io.open(png, "rb"))
    assert.equal("\137PNG", f:read(4))
    f:close()
    -- a log scale needs x > 0; a line needs points
    local bad, berr = plot.curves(b .. "/bad.png", "t", "x", "y", {{label = "a", points = {{x = 0, mean = 1}}}}, {logx = true})
    assert.is_nil(bad)
    assert.matches("line 1 (a) point 1 needs a number x > 0", berr, 1, true)
    bad, berr = plot.curves(b .. "/bad.png", "t", "x", "y", {{label = "a", points = {}}})
    assert.is_nil(bad)
    assert.matches("line 1 (a) has no points", berr, 1, true)
  end)

  it("names the file and line of a malformed record", function()
    local bad = run_dir({'{"step":1,"loss":1}', 'not json'})
    local ok, err = plot.read_metrics(bad)
    assert.is_nil(ok)
    assert.equal(bad .. "/metrics.jsonl:2: not a JSON object", err)
    os.execute("rm -rf '" .. bad .. "'")
  end)
end)
