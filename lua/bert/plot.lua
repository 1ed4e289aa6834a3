--- bert.plot: a run directory's metrics.jsonl as curves (PNG, with
-- gnuplot) and as CSV.  Used by the experiments at the end of a run and by
-- tools/plot.lua, which overlays several runs.
--
--   local plot = require("bert.plot")
--   plot.runs({"runs/a", "runs/b"}, {output = "runs/cmp"})   -- loss.png, accuracy.png
--   plot.write_csv("runs/a")                                  -- runs/a/metrics.csv
--   plot.bars(png, title, ylabel, bars); plot.curves(png, title, xlabel, ylabel, lines, {logx = true})
--
-- Training metrics are lines, held-out metrics (records with `eval`) are
-- lines with points, and baselines (fields named *baseline*) are horizontal
-- lines at their last value.  Accuracy-like fields (*accuracy, *f1,
-- *exact_match) go to accuracy.png, losses to loss.png.
local cjson = require("cjson.safe")

local M = {}

local function is_accuracy(k) return k:find("accuracy$") or k:find("f1$") or k:find("exact_match$") end
local function is_baseline(k) return k:find("baseline") ~= nil end

--- The records of DIR/metrics.jsonl, or nil and a message.  A line that is
-- not JSON is an error naming the file and the line.
function M.read_metrics(dir)
  local path = dir .. "/metrics.jsonl"
  local f = io.open(path, "rb")
  if not f then return nil, "no " .. path end
  local records, lineno = {}, 0
  for line in f:lines() do
    lineno = lineno + 1
    if line:find("%S") then
      local rec = cjson.decode(line)
      if type(rec) ~= "table" then
        f:close()
        return nil, string.format("%s:%d: not a JSON object", path, lineno)
      end
      records[#records + 1] = rec
    end
  end
  f:close()
  return records
end

--- series[name] = {{step, value}, ...} of one run's records: "train loss",
-- "held-out mlm_accuracy", "held-out unigram_baseline_accuracy", ...
function M.series(records)
  local series, order = {}, {}
  local function add(name, step, value)
    if type(value) ~= "number" or value ~= value then return end
    if not series[name] then series[name] = {}; order[#order + 1] = name end
    table.insert(series[name], {step, value})
  end
  for _, rec in ipairs(records) do
    if type(rec.step) == "number" then
      if type(rec.eval) == "table" then
        for k, v in pairs(rec.eval) do
          if k:find("loss$") or is_accuracy(k) then add("held-out " .. k, rec.step, v) end
        end
      else
        for k, v in pairs(rec) do
          if k == "loss" or is_accuracy(k) then add("train " .. k, rec.step, v) end
        end
      end
    end
  end
  table.sort(order)
  return series, order
end

local function gp_quote(s) return "'" .. tostring(s):gsub("'", "''"):gsub("_", " ") .. "'" end
local function gp_path(s) return "'" .. tostring(s):gsub("'", "''") .. "'" end

-- A name for this call's temporary files: two processes drawing into one
-- directory (the shards of an ablation) must not share them, and a seeded
-- math.random alone may repeat across processes.
local function unique_tag()
  return string.format("%s-%d", tostring({}):match("0x(%x+)") or "t", math.random(1 << 30))
end

-- Runs gnuplot on a script that starts with the PNG terminal (width x 600),
-- the output and the title, then `lines`.  The PNG is drawn under a
-- temporary name and renamed, so that a reader never sees half a file.
-- true, or nil and a message.
local function gnuplot(png, width, title, lines)
  local tmp = string.format("%s.%s.tmp", png, unique_tag())
  local script = {"set terminal png size " .. width .. ",600", "set output " .. gp_path(tmp),
    "set title " .. gp_quote(title)}
  for _, l in ipairs(lines) do script[#script + 1] = l end
  local gp = io.popen("gnuplot 2>&1", "w")
  local ok = false
  if gp then
    gp:write(table.concat(script, "\n"), "\n")
    ok = gp:close()
  end
  if ok then ok = os.rename(tmp, png) end
  if not ok then
    os.remove(tmp)
    return nil, "gnuplot failed or is missing (apt-get install gnuplot-nox)"
  end
  return true
end

-- Draws the series picked by `pick` of every run into one PNG.
local function draw(png, title, ylabel, runs, pick, tmpdir)
  local lines, files, tag = {}, {}, unique_tag()
  for r, run in ipairs(runs) do
    for _, name in ipairs(run.order) do
      local pts = run.series[name]
      if pick(name) and #pts > 0 then
        local label = (#runs > 1 and (run.label .. ": ") or "") .. name
        if is_baseline(name) then
          lines[#lines + 1] = string.format("%.9g with lines dt 2 lw 2 title %s", pts[#pts][2], gp_quote(label))
        else
          local path = string.format("%s/.plot-%s-%d-%d.dat", tmpdir, tag, r, #files + 1)
          local out = io.open(path, "wb")
          if not out then return nil, "cannot write " .. path end
          for _, p in ipairs(pts) do out:write(string.format("%.9g %.9g\n", p[1], p[2])) end
          out:close()
          files[#files + 1] = path
          local style = name:find("^held%-out") and "linespoints pt 7 ps 0.6 lw 2" or "lines"
          lines[#lines + 1] = string.format("%s using 1:2 with %s title %s", gp_path(path), style, gp_quote(label))
        end
      end
    end
  end
  if #lines == 0 then return false end
  local ok, err = gnuplot(png, 1000, title, {
    "set xlabel 'step'",
    "set ylabel " .. gp_quote(ylabel),
    "set grid",
    "set key below",
    "plot " .. table.concat(lines, ", \\\n  "),
  })
  for _, p in ipairs(files) do os.remove(p) end
  return ok, err
end

--- Plots one or more runs: opts.output (default: the first run's
-- directory) gets loss.png and accuracy.png; opts.labels names the runs
-- (default: their directories).  Returns the list of files written, or nil
-- and a message.
function M.runs(dirs, opts)
  opts = opts or {}
  if type(dirs) == "string" then dirs = {dirs} end
  if #dirs == 0 then return nil, "plot.runs: no run directories" end
  local runs = {}
  for i, dir in ipairs(dirs) do
    local records, err = M.read_metrics(dir)
    if not records then return nil, err end
    local series, order = M.series(records)
    runs[i] = {label = (opts.labels and opts.labels[i]) or dir:gsub("/+$", ""), series = series, order = order}
  end
  local out = opts.output or dirs[1]
  local made = {}
  for _, fig in ipairs({
    {"loss.png", "loss", "cross-entropy", function(n) return n:find("loss$") end},
    {"accuracy.png", "accuracy", "fraction", function(n) return is_accuracy(n) end},
  }) do
    local ok, err = draw(out .. "/" .. fig[1], fig[2], fig[3], runs, fig[4], out)
    if ok == nil then return nil, err end
    if ok then made[#made + 1] = out .. "/" .. fig[1] end
  end
  if #made == 0 then return nil, "nothing to plot in " .. table.concat(dirs, ", ") end
  return made
end

--- A bar chart with error bars as a PNG: bars = {{label = "mlm, seed 1..3",
-- mean = 0.41, sd = 0.02}, ...} (sd nil or 0: no bar drawn).  Returns true,
-- or nil and a message (gnuplot missing, nothing to plot).
function M.bars(png, title, ylabel, bars)
  if type(bars) ~= "table" or #bars == 0 then return nil, "plot.bars: no bars for " .. tostring(png) end
  local data = string.format("%s.%s.dat", png, unique_tag())
  local out = io.open(data, "wb")
  if not out then return nil, "cannot write " .. data end
  local top = 0
  for i, b in ipairs(bars) do
    if type(b.mean) ~= "number" then
      out:close(); os.remove(data)
      return nil, string.format("plot.bars: bar %d (%s) has no mean", i, tostring(b.label))
    end
    top = math.max(top, b.mean + (b.sd or 0))
    out:write(string.format("%d %.9g %.9g \"%s\"\n", i - 1, b.mean, b.sd or 0,
      tostring(b.label):gsub("[\"\\]", "'")))
  end
  out:close()
  local ok, err = gnuplot(png, math.max(640, 120 * #bars), title, {
    "set ylabel " .. gp_quote(ylabel),
    "set grid ytics",
    "set style fill solid 0.5 border -1",
    "set boxwidth 0.6",
    -- bars from zero: differences are not exaggerated (all zero: a range gnuplot need not invent)
    top > 0 and "set yrange [0:*]" or "set yrange [0:1]",
    "set xtics rotate by -30",
    "set xrange [-0.6:" .. (#bars - 0.4) .. "]",
    "unset key",
    "plot " .. gp_path(data) .. " using 1:2:3:xtic(4) with boxerrorbars lw 1.5",
  })
  os.remove(data)
  return ok, err
end

--- A learning curve as a PNG and the data behind it: lines = {{label =
-- "pretrained", points = {{x = 100, mean = 0.81, sd = 0.02, n = 3}, ...}},
-- ...}, each line's points sorted by x, drawn as means with sd error bars
-- (sd nil: none).  opts.logx draws x on a log scale (every x must be > 0).
-- The data file (png with .dat for .png) stays beside the plot: one block
-- per line, "# line: LABEL", then "x mean sd n" rows.  Returns true, or nil
-- and a message (the data file is written even when gnuplot is missing).
function M.curves(png, title, xlabel, ylabel, lines, opts)
  opts = opts or {}
  if type(lines) ~= "table" or #lines == 0 then return nil, "plot.curves: no lines for " .. tostring(png) end
  local data = png:gsub("%.png$", "") .. ".dat"
  local blocks = {}
  for i, line in ipairs(lines) do
    if type(line.points) ~= "table" or #line.points == 0 then
      return nil, string.format("plot.curves: line %d (%s) has no points", i, tostring(line.label))
    end
    local pts = {}
    for j, p in ipairs(line.points) do
      if type(p.x) ~= "number" or type(p.mean) ~= "number" or (opts.logx and not (p.x > 0)) then
        return nil, string.format("plot.curves: line %d (%s) point %d needs a number x%s and mean", i,
          tostring(line.label), j, opts.logx and " > 0 (log scale)" or "")
      end
      pts[j] = p
    end
    table.sort(pts, function(a, b) return a.x < b.x end)
    local rows = {"# line: " .. tostring(line.label):gsub("[\r\n]", " ")}
    for _, p in ipairs(pts) do
      rows[#rows + 1] = string.format("%.9g %.9g %.9g %d", p.x, p.mean, p.sd or 0, p.n or 1)
    end
    blocks[i] = table.concat(rows, "\n")
  end
  local ok, werr = require("bert.fs").write_atomic(data, table.concat(blocks, "\n\n\n") .. "\n")
  if not ok then return nil, werr end
  local lo, hi = math.huge, -math.huge
  for _, line in ipairs(lines) do
    for _, p in ipairs(line.points) do lo, hi = math.min(lo, p.x), math.max(hi, p.x) end
  end
  -- room beside the end points, so that their error bars are not on the frame
  local xrange = opts.logx and string.format("set xrange [%.9g:%.9g]", lo / 1.25, hi * 1.25)
    or string.format("set xrange [%.9g:%.9g]", lo - 0.05 * (hi - lo + 1), hi + 0.05 * (hi - lo + 1))
  local plots = {}
  for i, line in ipairs(lines) do
    plots[i] = string.format("%s index %d using 1:2:3 with yerrorlines lw 2 pt 7 ps 0.8 title %s", gp_path(data), i - 1,
      gp_quote(line.label))
  end
  return gnuplot(png, 1000, title, {
    "set xlabel " .. gp_quote(xlabel),
    "set ylabel " .. gp_quote(ylabel),
    "set grid",
    "set key below",
    opts.logx and "set logscale x" or "unset logscale x",
    xrange,
    "plot " .. table.concat(plots, ", \\\n  "),
  })
end

--- Writes DIR/metrics.csv from DIR/metrics.jsonl: one row per record,
-- columns step, kind (train/eval) and every numeric field (held-out ones
-- as eval_NAME), in sorted order; empty where a record lacks a field.
function M.write_csv(dir)
  local records, err = M.read_metrics(dir)
  if not records then return nil, err end
  local cols, seen, rows = {}, {}, {}
  local function col(k) if not seen[k] then seen[k] = true; cols[#cols + 1] = k end end
  for _, rec in ipairs(records) do
    local row = {step = rec.step, kind = type(rec.eval) == "table" and "eval" or "train"}
    local src, prefix = rec, ""
    if row.kind == "eval" then src, prefix = rec.eval, "eval_" end
    for k, v in pairs(src) do
      if type(v) == "number" and k ~= "step" then row[prefix .. k] = v; col(prefix .. k) end
    end
    rows[#rows + 1] = row
  end
  table.sort(cols)
  table.insert(cols, 1, "kind")
  table.insert(cols, 1, "step")
  local lines = {table.concat(cols, ",")}
  for _, row in ipairs(rows) do
    local cells = {}
    for i, k in ipairs(cols) do
      local v = row[k]
      cells[i] = v == nil and "" or (type(v) == "number" and string.format(math.type(v) == "integer" and "%d" or "%.9g", v) or v)
    end
    lines[#lines + 1] = table.concat(cells, ",")
  end
  local ok, werr = require("bert.fs").write_atomic(dir .. "/metrics.csv", table.concat(lines, "\n") .. "\n")
  if not ok then return nil, werr end
  return dir .. "/metrics.csv"
end

return M
