-- Curves of one or more run directories (pretraining or fine-tuning), from
-- their metrics.jsonl, as PNG (gnuplot), and the metrics as CSV:
--   lua5.4 tools/plot.lua RUN_DIR                      # RUN_DIR/loss.png, accuracy.png, metrics.csv
--   lua5.4 tools/plot.lua runs/a runs/b --output runs/ab   # the runs overlaid, with a legend
-- Held-out metrics are lines with points, in the colour of the training
-- line of the same metric (of the run, when several are overlaid);
-- baselines (the unigram baseline of pretraining, the majority class of
-- fine-tuning from its summary.json) dashed horizontal lines.
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cli = require("bert.cli")
local plot = require("bert.plot")

local p = cli.parser("plot.lua", "Plot run directories' metrics (loss.png, accuracy.png) and write metrics.csv.",
  "Several runs are overlaid with a legend; --output is then where the PNGs go (default: the first run).")
p:argument("runs", "Run directories (with metrics.jsonl)"):args("+")
p:option("--output", "Directory for the PNGs (default: the first run's)")
p:option("--labels", "Comma-separated legend names, one per run (default: the directories)")
p:flag("--no-csv", "Do not write RUN_DIR/metrics.csv")
p:flag("--script", "Also write each figure's gnuplot script beside it (loss.gp, ...), its data inline")
local args = p:parse()

local labels
if args.labels then
  labels = {}
  for l in args.labels:gmatch("[^,]+") do labels[#labels + 1] = l end
  if #labels ~= #args.runs then
    io.stderr:write(string.format("plot: --labels has %d names for %d runs\n", #labels, #args.runs))
    os.exit(2)
  end
end
if args.output then assert(require("bert").mkdir(args.output)) end
local made, err = plot.runs(args.runs, {output = args.output, labels = labels, keep_script = args.script})
if not made then
  io.stderr:write("plot: ", err, "\n")
  os.exit(1)
end
if not args.no_csv then
  for _, dir in ipairs(args.runs) do
    local csv, cerr = plot.write_csv(dir)
    if not csv then io.stderr:write("plot: ", cerr, "\n") os.exit(1) end
    made[#made + 1] = csv
  end
end
print(table.concat(made, "\n"))
