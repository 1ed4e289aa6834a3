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
-- lines with points in the same colour, and baselines (fields named
-- *baseline*, a fine-tuning run's majority class) are dashed horizontal lines
-- at their last value.  Accuracy-like fields (*accuracy, *f1, *exact_match)
-- go to accuracy.png, losses to loss.png.  gnuplot's warnings never reach
-- the user: they are part of the message when it fails.
local cjson = require("cjson.safe")

local M = {}

local function is_accuracy(k) return k:find("accuracy$") or k:find("f1$") or k:find("exact_match$") end
-- (distillation logs its terms as loss_ce, loss_mlm, ...)
local function is_loss(k) return k:find("loss$") or k:find("^loss_") end
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
          if is_loss(k) or is_accuracy(k) then add("held-out " .. k, rec.step, v) end
        end
      else
        for k, v in pairs(rec) do
          if is_loss(k) or is_accuracy(k) then add("train " .. k, rec.step, v) end
        end
      end
    end
  end
  table.sort(order)
  return series, order
end

local function gp_quote(s) return "'" .. tostring(s):gsub("'", "''"):gsub("_", " ") .. "'" end
local function gp_path(s) return "'" .. tostring(s):gsub("'", "''") .. "'" end
local function sh_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- Colour i of a figure: ten that are told apart easily, then hues spaced
-- by the golden angle (an ablation grid can have more cells than ten).
local PALETTE = {0x1f77b4, 0xd62728, 0x2ca02c, 0xff7f0e, 0x9467bd, 0x8c564b, 0xe377c2, 0x17becf, 0xbcbd22, 0x7f7f7f}
local function colour(i)
  if i <= #PALETTE then return PALETTE[i] end
  local h, s, v = ((i - #PALETTE) * 0.381966) % 1 * 6, 0.75, 0.8
  local f = h - math.floor(h)
  local p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
  local rgb = ({{v, t, p}, {q, v, p}, {p, v, t}, {p, q, v}, {t, p, v}, {v, p, q}})[math.floor(h) + 1]
  return math.floor(rgb[1] * 255 + 0.5) << 16 | math.floor(rgb[2] * 255 + 0.5) << 8 | math.floor(rgb[3] * 255 + 0.5)
end
local function rgb(i) return string.format("lc rgb '#%06x'", colour(i)) end

-- A name for this call's temporary files: two processes drawing into one
-- directory (the shards of an ablation) must not share them, and a seeded
-- math.random alone may repeat across processes.
local function unique_tag()
  return string.format("%s-%d", tostring({}):match("0x(%x+)") or "t", math.random(1 << 30))
end

local function write_file(path, text)
  local f = io.open(path, "wb")
  if not f then return nil, "cannot write " .. path end
  f:write(text)
  f:close()
  return true
end

-- Runs gnuplot on a script that starts with the PNG terminal (width x
-- height pixels), the output and the title, then `lines`.  gnuplot's output and
-- warnings ("empty x range", ...) go to a file shown only when it fails.
-- The PNG is drawn under a temporary name and renamed, so that a reader
-- never sees half a file.  keep_script keeps the script beside the PNG
-- (its name with .gp), drawing the PNG itself.  true, or nil and a message.
local function gnuplot(png, width, height, title, lines, keep_script)
  local tag = unique_tag()
  local tmp, script, log = png .. "." .. tag .. ".tmp", png .. "." .. tag .. ".gp", png .. "." .. tag .. ".log"
  local function text(output)
    -- cairo draws dashes and smooth lines; plain gd where gnuplot lacks it
    local size = " size " .. width .. "," .. height
    return table.concat({'if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) { set terminal pngcairo' .. size ..
      " } else { set terminal png" .. size .. " }", "set output " .. gp_path(output),
      "set title " .. gp_quote(title), table.concat(lines, "\n")}, "\n") .. "\n"
  end
  local ok, err = write_file(script, text(tmp))
  if ok and keep_script then ok, err = write_file(png:gsub("%.png$", "") .. ".gp", text(png)) end
  if not ok then os.remove(script); return nil, err end
  local _, _, code = os.execute(string.format("gnuplot %s >%s 2>&1", sh_quote(script), sh_quote(log)))
  local f = io.open(log, "rb")
  local said = f and f:read("a") or ""
  if f then f:close() end
  os.remove(script); os.remove(log)
  if code == 0 and os.rename(tmp, png) then return true end
  os.remove(tmp)
  if code == 127 then return nil, "gnuplot is not installed (apt-get install gnuplot-nox)" end
  return nil, string.format("gnuplot failed drawing %s: %s", png, said:gsub("%s+$", ""):sub(-400))
end

-- The lines of a datablock $NAME holding points {{x, y}, ...}.
local function datablock(name, pts)
  local rows = {"$" .. name .. " << EOD"}
  for _, p in ipairs(pts) do rows[#rows + 1] = string.format("%.9g %.9g", p[1], p[2]) end
  rows[#rows + 1] = "EOD"
  return table.concat(rows, "\n")
end

-- The legend goes below the plot, where it covers no data: the figure's
-- width and height for `entries` labels of `longest` characters (wider
-- for many, so that they fit in two columns; taller by the rows).
local function figure_size(entries, longest)
  local width = entries > 8 and 1400 or 1000
  local columns = math.max(1, (width - 100) // (longest * 9 + 90))
  return width, 560 + 20 * math.max(2, -(-entries // columns))
end

-- A padded range around lo..hi, so that no point sits on the frame (one
-- value: a range around it, which gnuplot would call empty and warn about).
local function range(lo, hi)
  if hi > lo then
    local pad = 0.04 * (hi - lo)
    return string.format("[%.9g:%.9g]", lo - pad, hi + pad)
  end
  local pad = math.max(math.abs(lo) * 0.1, 0.05)
  return string.format("[%.9g:%.9g]", lo - pad, hi + pad)
end

local function metric_of(name) return (name:gsub("^%S+ ", "")) end

-- The label of series `name` of `run` (the training loss: what it sums).
local function label_of(name, run, several)
  local label = name == "train loss" and run.train_loss or name
  return several and run.label .. ": " .. label or label
end

-- Series names in the legend's order: each metric's training line, then
-- its held-out one; baselines last.
local function legend_order(order)
  local function rank(name)
    return (is_baseline(name) and 2 or 0) + (name:find("^train ") and 0 or 1)
  end
  local sorted = table.move(order, 1, #order, 1, {})
  table.sort(sorted, function(a, b)
    local ra, rb = rank(a) // 2, rank(b) // 2
    if ra ~= rb then return ra < rb end
    if metric_of(a) ~= metric_of(b) then return metric_of(a) < metric_of(b) end
    return rank(a) < rank(b)
  end)
  return sorted
end

-- Draws the series picked by `pick` of every run into one PNG.  One run:
-- a colour per metric, training as a line, held-out with points, the same
-- colour for the same metric; several runs: a colour per run, a dash type
-- per metric.  Baselines are dashed horizontal lines, one for a value that
-- several runs share.  false when nothing is picked.
local function draw(png, title, ylabel, runs, pick, opts)
  local several = #runs > 1
  local blocks, plots, labels, seen_baseline = {}, {}, {}, {}
  local metric_index, metrics = {}, 0
  local xlo, xhi, ylo, yhi = math.huge, -math.huge, math.huge, -math.huge
  local function entry(spec, label)
    plots[#plots + 1] = spec .. " title " .. gp_quote(label)
    labels[#labels + 1] = label
  end
  for r, run in ipairs(runs) do
    for _, name in ipairs(legend_order(run.order)) do
      local pts = run.series[name]
      if pick(name) and #pts > 0 then
        local metric = metric_of(name)
        if not metric_index[metric] then metrics = metrics + 1; metric_index[metric] = metrics end
        local m = metric_index[metric]
        local lc = several and rgb(r) or rgb(m)
        local dt = several and ({1, 4, 5, 3})[(m - 1) % 4 + 1] or 1
        if is_baseline(name) then
          local v = pts[#pts][2]
          local shared = string.format("%s=%.9g", name, v)
          local others = 0
          for r2, other in ipairs(runs) do
            local o = r2 ~= r and other.series[name]
            if o and #o > 0 and string.format("%s=%.9g", name, o[#o][2]) == shared then others = others + 1 end
          end
          if not seen_baseline[shared] then
            seen_baseline[shared] = true
            ylo, yhi = math.min(ylo, v), math.max(yhi, v)
            entry(string.format("%.9g with lines dt 2 lw 2 %s", v, others > 0 and "lc rgb '#555555'" or lc),
              others > 0 and string.format("%s %.4g", name, v) or label_of(name, run, several))
          end
        else
          local block = "d" .. (#blocks + 1)
          blocks[#blocks + 1] = datablock(block, pts)
          for _, p in ipairs(pts) do
            xlo, xhi = math.min(xlo, p[1]), math.max(xhi, p[1])
            ylo, yhi = math.min(ylo, p[2]), math.max(yhi, p[2])
          end
          -- (a training series of one point is a point: a line through it would not show)
          local style = name:find("^held%-out") and "linespoints lw 2.5 pt " .. ({7, 5, 9, 11})[(m - 1) % 4 + 1] .. " ps 1"
            or #pts == 1 and "points pt 6 ps 1.5" or "lines lw 1.5"
          entry(string.format("$%s using 1:2 with %s dt %d %s", block, style, dt, lc), label_of(name, run, several))
        end
      end
    end
  end
  if #blocks == 0 then return false end
  local longest = 0
  for _, l in ipairs(labels) do longest = math.max(longest, utf8.len(l) or #l) end
  local lines = blocks
  for _, l in ipairs({
    "set xlabel 'step'",
    "set ylabel " .. gp_quote(ylabel),
    "set grid",
    "set key below",
    "set xrange " .. range(xlo, xhi),
    "set yrange " .. range(ylo, yhi),
    "plot " .. table.concat(plots, ", \\\n  "),
  }) do lines[#lines + 1] = l end
  local width, height = figure_size(#plots, longest)
  return gnuplot(png, width, height, title, lines, opts.keep_script)
end

-- The label of a run's training loss, which a pretraining run's held-out
-- loss (the MLM part alone) must not be misread against: "train loss = mlm
-- + nsp" (the heads, from the training records' *_accuracy fields), "train
-- loss (mlm)" for one head, "train loss (all terms)" where the run logs the
-- terms themselves (ELECTRA's generator and discriminator, distillation's
-- weighted terms).  Fine-tuning's is "train loss", beside a held-out loss.
local function train_loss_label(records)
  local heads, seen, terms = {}, {}, false
  for _, rec in ipairs(records) do
    if type(rec.eval) ~= "table" then
      for k in pairs(rec) do
        if type(k) == "string" then
          local head = k:match("^(.+)_accuracy$")
          if head and not seen[head] then seen[head] = true; heads[#heads + 1] = head end
          if k ~= "loss" and is_loss(k) then terms = true end
        end
      end
    end
  end
  if terms then return "train loss (all terms)" end
  table.sort(heads, function(a, b)
    if (a == "mlm") ~= (b == "mlm") then return a == "mlm" end
    return a < b
  end)
  if #heads > 1 then return "train loss = " .. table.concat(heads, " + ") end
  return #heads == 1 and "train loss (" .. heads[1] .. ")" or "train loss"
end

--- Plots one or more runs: opts.output (default: the first run's
-- directory) gets loss.png and accuracy.png; opts.labels names the runs
-- (default: their directories); opts.keep_script keeps each figure's
-- gnuplot script (loss.gp, ...), data inline.  A fine-tuning run's
-- majority-class baseline (its summary.json) is a line in accuracy.png.
-- Returns the list of files written, or nil and a message.
function M.runs(dirs, opts)
  opts = opts or {}
  if type(dirs) == "string" then dirs = {dirs} end
  if #dirs == 0 then return nil, "plot.runs: no run directories" end
  local runs = {}
  for i, dir in ipairs(dirs) do
    local records, err = M.read_metrics(dir)
    if not records then return nil, err end
    local series, order = M.series(records)
    local summary = require("bert.fs").read_file(dir .. "/summary.json")
    summary = summary and cjson.decode(summary)
    local majority = type(summary) == "table" and type(summary.majority_baseline) == "table" and
      summary.majority_baseline.accuracy
    if type(majority) == "number" and records[#records] and type(records[#records].step) == "number" then
      series["test majority_baseline_accuracy"] = {{records[#records].step, majority}}
      order[#order + 1] = "test majority_baseline_accuracy"
    end
    runs[i] = {label = (opts.labels and opts.labels[i]) or dir:gsub("/+$", ""), series = series, order = order,
               train_loss = train_loss_label(records)}
  end
  local out = opts.output or dirs[1]
  local made = {}
  for _, fig in ipairs({
    {"loss.png", "loss", "cross-entropy", function(n) return is_loss(metric_of(n)) end},
    {"accuracy.png", "accuracy", "fraction", function(n) return is_accuracy(n) end},
  }) do
    local ok, err = draw(out .. "/" .. fig[1], fig[2], fig[3], runs, fig[4], opts)
    if ok == nil then return nil, err end
    if ok then made[#made + 1] = out .. "/" .. fig[1] end
  end
  if #made == 0 then return nil, "nothing to plot in " .. table.concat(dirs, ", ") end
  return made
end

--- A bar chart with error bars as a PNG, a colour per bar: bars = {{label
-- = "mlm, seed 1..3", mean = 0.41, sd = 0.02}, ...} (sd nil or 0: no bar
-- drawn).  opts.keep_script as in runs.  Returns true, or nil and a
-- message (gnuplot missing, nothing to plot).
function M.bars(png, title, ylabel, bars, opts)
  if type(bars) ~= "table" or #bars == 0 then return nil, "plot.bars: no bars for " .. tostring(png) end
  local rows, top, last_label = {"$bars << EOD"}, 0, 0
  for i, b in ipairs(bars) do
    if type(b.mean) ~= "number" then
      return nil, string.format("plot.bars: bar %d (%s) has no mean", i, tostring(b.label))
    end
    top = math.max(top, b.mean + (b.sd or 0))
    if i == #bars then last_label = utf8.len(tostring(b.label)) or #tostring(b.label) end
    rows[#rows + 1] = string.format("%d %.9g %.9g %d \"%s\"", i - 1, b.mean, b.sd or 0, colour(i),
      tostring(b.label):gsub("[\"\\]", "'"))
  end
  rows[#rows + 1] = "EOD"
  -- room on the right for the last label, which runs right and down from its bar
  local rmargin = math.max(4, math.ceil(0.8 * last_label) - 4)
  return gnuplot(png, math.max(640, 120 * #bars) + 9 * rmargin, 600, title, {
    table.concat(rows, "\n"),
    "set ylabel " .. gp_quote(ylabel),
    "set grid ytics",
    "set style fill solid 0.6 border -1",
    "set boxwidth 0.6",
    -- bars from zero: differences are not exaggerated; room above the tallest
    -- (all zero: a range gnuplot need not invent)
    string.format("set yrange [0:%.9g]", top > 0 and top * 1.08 or 1),
    "set xtics rotate by -30",
    "set rmargin " .. rmargin,
    "set xrange [-0.6:" .. (#bars - 0.4) .. "]",
    "unset key",
    "plot $bars using 1:2:3:4:xtic(5) with boxerrorbars lw 1.5 lc rgb variable",
  }, opts and opts.keep_script)
end

--- A learning curve as a PNG and the data behind it: lines = {{label =
-- "pretrained", points = {{x = 100, mean = 0.81, sd = 0.02, n = 3}, ...}},
-- ...}, each line's points sorted by x, drawn as means with sd error bars
-- (sd nil: none), a colour per line.  opts.logx draws x on a log scale
-- (every x must be > 0); opts.keep_script as in runs.
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
  local lo, hi, ylo, yhi = math.huge, -math.huge, math.huge, -math.huge
  for _, line in ipairs(lines) do
    for _, p in ipairs(line.points) do
      lo, hi = math.min(lo, p.x), math.max(hi, p.x)
      ylo, yhi = math.min(ylo, p.mean - (p.sd or 0)), math.max(yhi, p.mean + (p.sd or 0))
    end
  end
  -- room beside the end points, so that their error bars are not on the frame
  local xrange = opts.logx and string.format("set xrange [%.9g:%.9g]", lo / 1.25, hi * 1.25)
    or string.format("set xrange [%.9g:%.9g]", lo - 0.05 * (hi - lo + 1), hi + 0.05 * (hi - lo + 1))
  local plots, longest = {}, 0
  for i, line in ipairs(lines) do
    plots[i] = string.format("%s index %d using 1:2:3 with yerrorlines lw 2 pt 7 ps 0.8 %s title %s", gp_path(data),
      i - 1, rgb(i), gp_quote(line.label))
    longest = math.max(longest, utf8.len(tostring(line.label)) or #tostring(line.label))
  end
  local width, height = figure_size(#lines, longest)
  return gnuplot(png, width, height, title, {
    "set xlabel " .. gp_quote(xlabel),
    "set ylabel " .. gp_quote(ylabel),
    "set grid",
    "set key below",
    opts.logx and "set logscale x" or "unset logscale x",
    xrange,
    ylo == yhi and "set yrange " .. range(ylo, yhi) or "set yrange [*:*]",
    "plot " .. table.concat(plots, ", \\\n  "),
  }, opts.keep_script)
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
