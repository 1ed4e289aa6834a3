-- bert.plot: run metrics as CSV and as overlaid PNG curves (gnuplot), and
-- learning curves with error bars.  The figures are checked on the gnuplot
-- scripts the module writes (keep_script): series, labels, colours, lines.
local bert = require("bert")
local plot = require("bert.plot")
local optional = require("spec.support.optional")
local no_gnuplot = optional.missing("gnuplot")

local function read(path) return assert(require("bert.fs").read_file(path)) end

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
    if no_gnuplot then return pending(no_gnuplot) end
    local made = assert(plot.runs({a, b}, {output = b, labels = {"pretrained", "scratch"}}))
    assert.same({b .. "/loss.png", b .. "/accuracy.png"}, made)
    for _, png in ipairs(made) do
      local f = assert(io.open(png, "rb"))
      assert.equal("\137PNG", f:read(4))
      f:close()
    end
  end)

  it("labels a pretraining run's training loss as the sum of its heads' beside the held-out MLM loss", function()
    if no_gnuplot then return pending(no_gnuplot) end
    local dir = run_dir({'{"step":10,"loss":9.0,"mlm_accuracy":0.04,"nsp_accuracy":0.56}',
      '{"step":20,"loss":8.3,"mlm_accuracy":0.05,"nsp_accuracy":0.62}',
      '{"step":20,"eval":{"mlm_loss":6.9,"mlm_accuracy":0.05,"unigram_baseline_accuracy":0.049,"nsp_accuracy":0.52}}'})
    assert(plot.runs({dir}, {keep_script = true}))
    local loss, acc = read(dir .. "/loss.gp"), read(dir .. "/accuracy.gp")
    assert.matches("title 'train loss = mlm + nsp'", loss, 1, true)
    assert.matches("title 'held-out mlm loss'", loss, 1, true)
    -- a metric's training and held-out series share a colour; the baseline is a dashed line
    local train_colour = acc:match("lc rgb '(#%x+)' title 'train mlm accuracy'")
    assert.truthy(train_colour, acc)
    assert.equal(train_colour, acc:match("lc rgb '(#%x+)' title 'held%-out mlm accuracy'"))
    assert.matches("0.049 with lines dt 2 lw 2 lc rgb '#%x+' title 'held%-out unigram baseline accuracy'", acc)
    os.execute("rm -rf '" .. dir .. "'")
    -- one head: its name; terms logged (ELECTRA's generator and discriminator): drawn, and the total says so
    for _, case in ipairs({
      {'{"step":10,"loss":9.0,"mlm_accuracy":0.04}', {"train loss (mlm)"}},
      {'{"step":10,"loss":30.0,"generator_loss":6.0,"discriminator_loss":0.48,"mlm_accuracy":0.1,"rtd_accuracy":0.9}',
       {"train loss (all terms)", "train generator loss", "train discriminator loss"}},
    }) do
      dir = run_dir({case[1], '{"step":10,"eval":{"mlm_loss":6.9,"mlm_accuracy":0.05}}'})
      assert(plot.runs({dir}, {keep_script = true}))
      loss = read(dir .. "/loss.gp")
      for _, title in ipairs(case[2]) do assert.matches("title '" .. title .. "'", loss, 1, true) end
      os.execute("rm -rf '" .. dir .. "'")
    end
  end)

  it("draws a fine-tuning run's majority-class baseline as a line", function()
    if no_gnuplot then return pending(no_gnuplot) end
    local dir = run_dir({'{"step":10,"loss":0.6,"accuracy":0.7}', '{"step":10,"eval":{"accuracy":0.69,"loss":0.62}}',
      '{"step":20,"loss":0.5,"accuracy":0.8}', '{"step":20,"eval":{"accuracy":0.71,"loss":0.6}}'})
    local f = assert(io.open(dir .. "/summary.json", "w"))
    f:write('{"majority_baseline":{"label":"ham","accuracy":0.6925,"predicted_classes":1}}\n')
    f:close()
    assert(plot.runs({dir}, {keep_script = true}))
    assert.matches("\n?  0.6925 with lines dt 2 lw 2 lc rgb '#%x+' title 'test majority baseline accuracy'",
      read(dir .. "/accuracy.gp"))
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("gives each run of an overlay (each ablation cell) its own colour, the legend below the data", function()
    if no_gnuplot then return pending(no_gnuplot) end
    local dirs, labels = {}, {}
    for i = 1, 12 do
      dirs[i] = run_dir({string.format('{"step":1,"loss":%g}', 10 - i / 2), string.format('{"step":2,"loss":%g}', 9 - i / 2)})
      labels[i] = "objective=mlm_seed=" .. i
    end
    assert(plot.runs(dirs, {output = dirs[1], labels = labels, keep_script = true}))
    local script = read(dirs[1] .. "/loss.gp")
    local colours = {}
    for c in script:gmatch("lc rgb '(#%x+)' title") do
      assert.is_nil(colours[c], "colour " .. c .. " used twice:\n" .. script)
      colours[c] = true
    end
    assert.equal(12, select(2, script:gsub(" title 'objective=mlm seed=", "")))
    assert.matches("set key below", script, 1, true)
    assert.matches("set terminal pngcairo size 1400,", script, 1, true)   -- two columns of legend
    local bars = dirs[1] .. "/bars.png"
    assert(plot.bars(bars, "t", "acc", {{label = "a", mean = 0.5, sd = 0.1}, {label = "b", mean = 0.6}}, {keep_script = true}))
    assert.matches("with boxerrorbars lw 1.5 lc rgb variable", read(dirs[1] .. "/bars.gp"), 1, true)
    for _, d in ipairs(dirs) do os.execute("rm -rf '" .. d .. "'") end
  end)

  it("plots a one-point run without a word from gnuplot (no 'empty x range')", function()
    if no_gnuplot then return pending(no_gnuplot) end
    local dir = run_dir({'{"step":1,"loss":2.5,"mlm_accuracy":0.1}',
      '{"step":1,"eval":{"mlm_accuracy":0.1,"unigram_baseline_accuracy":0.05,"mlm_loss":2.2}}'})
    local p = io.popen("lua5.4 tools/plot.lua --no-csv '" .. dir .. "' 2>&1")
    local out = p:read("a")
    assert.is_true(p:close(), out)
    assert.equal(dir .. "/loss.png\n" .. dir .. "/accuracy.png\n", out)
    -- the lone training point is drawn as a point: a line through one point would not show
    assert(plot.runs({dir}, {keep_script = true}))
    assert.matches("using 1:2 with points pt 6 ps 1.5 dt 1 lc rgb '#%x+' title 'train mlm accuracy'",
      read(dir .. "/accuracy.gp"))
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("says in one line that gnuplot is missing (no shell noise, no death by a broken pipe)", function()
    local path = optional.path_without({"gnuplot"})
    local p = io.popen(string.format("PATH='%s' lua5.4 -e 'package.path = \"./lua/?.lua;./lua/?/init.lua;\" .. " ..
      "package.path; package.cpath = \"./%s/?.so;\" .. package.cpath; " ..
      "print(require(\"bert.plot\").runs({\"%s\"}))' 2>&1", path, os.getenv("BERT_BUILD") or "build", a))
    local out = p:read("a")
    local ok, _, code = p:close()
    os.execute("rm -rf '" .. path .. "'")
    assert.is_true(ok, "exit " .. tostring(code) .. ": " .. out)
    assert.equal("nil\tgnuplot is not installed (apt-get install gnuplot-nox)\n", out)
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
    if no_gnuplot then
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
