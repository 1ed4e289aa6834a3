-- Renders a run directory's metrics.jsonl to PNG with gnuplot:
--   lua5.4 tools/plot.lua RUN_DIR
-- writes RUN_DIR/loss.png (training loss, held-out loss) and
-- RUN_DIR/accuracy.png (training and held-out accuracies, and the unigram
-- baseline when the run recorded one).  Works on pretraining and
-- fine-tuning runs alike: every numeric field whose name ends in
-- "accuracy", "f1" or "exact_match" is plotted.
local cjson = require("cjson.safe")

local dir = arg[1]
if not dir then
  io.stderr:write("usage: lua5.4 tools/plot.lua RUN_DIR\n")
  os.exit(2)
end
local f = io.open(dir .. "/metrics.jsonl", "rb")
if not f then
  io.stderr:write("plot: no ", dir, "/metrics.jsonl\n")
  os.exit(1)
end

-- series[name] = {{step, value}, ...}
local series, order = {}, {}
local function add(name, step, value)
  if type(value) ~= "number" or value ~= value then return end
  if not series[name] then series[name] = {}; order[#order + 1] = name end
  table.insert(series[name], {step, value})
end
local function is_accuracy(k) return k:find("accuracy$") or k:find("f1$") or k:find("exact_match$") end

local lineno = 0
for line in f:lines() do
  lineno = lineno + 1
  local rec = cjson.decode(line)
  if type(rec) == "table" and type(rec.step) == "number" then
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
f:close()
table.sort(order)

local function write_data(name)
  local path = string.format("%s/.plot-%s.dat", dir, name:gsub("[^%w]", "_"))
  local out = assert(io.open(path, "wb"))
  for _, p in ipairs(series[name]) do out:write(string.format("%d %.9g\n", p[1], p[2])) end
  out:close()
  return path
end

local function plot(png, title, ylabel, pick)
  local lines, files = {}, {}
  for _, name in ipairs(order) do
    if pick(name) and #series[name] > 0 then
      local path = write_data(name)
      files[#files + 1] = path
      local style = name:find("^held%-out") and "linespoints pt 7 ps 0.6" or "lines"
      lines[#lines + 1] = string.format("'%s' using 1:2 with %s title '%s'", path, style, name:gsub("_", " "))
    end
  end
  if #lines == 0 then return false end
  local script = table.concat({
    "set terminal png size 900,540",
    string.format("set output '%s/%s'", dir, png),
    string.format("set title '%s'", title),
    "set xlabel 'step'",
    string.format("set ylabel '%s'", ylabel),
    "set grid",
    "set key below",
    "plot " .. table.concat(lines, ", \\\n  "),
  }, "\n")
  local gp = io.popen("gnuplot 2>&1", "w")
  if not gp then return false end
  gp:write(script, "\n")
  local ok = gp:close()
  for _, p in ipairs(files) do os.remove(p) end
  return ok
end

local made = {}
if plot("loss.png", "loss", "cross-entropy", function(n) return n:find("loss$") end) then
  made[#made + 1] = dir .. "/loss.png"
end
if plot("accuracy.png", "accuracy", "accuracy", function(n) return is_accuracy(n) end) then
  made[#made + 1] = dir .. "/accuracy.png"
end
if #made == 0 then
  io.stderr:write("plot: nothing to plot in ", dir, "/metrics.jsonl (or gnuplot missing)\n")
  os.exit(1)
end
print(table.concat(made, "\n"))
