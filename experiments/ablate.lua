-- An ablation as one command: the grid in experiments/ablations/NAME.lua
-- (axes, fixed settings, seeds, a pretraining budget per cell, downstream
-- tasks) is pretrained, evaluated (held-out MLM accuracy) and fine-tuned
-- cell by cell, with the same fine-tuning settings for every cell; then
-- DIR/results.json, DIR/results.md (mean ± sd over seeds) and DIR/plots/.
-- A rerun skips finished cells and resumes a killed pretraining run from its
-- checkpoint.  The engine is lua/bert/ablate/.
--
--   lua5.4 experiments/ablate.lua experiments/ablations/nsp.lua
--   lua5.4 experiments/ablate.lua experiments/ablations/nsp.lua --budget-scale 0.05   # a quick look
--   lua5.4 experiments/ablate.lua --summarize runs/ablate/nsp                         # table and plots again
--   lua5.4 experiments/ablate.lua --summarize runs/ablate/nsp --interim               # while it runs
--   lua5.4 experiments/ablate.lua --status runs/ablate/nsp                            # each cell's state, what is left
--   lua5.4 experiments/ablate.lua --archive runs/ablate/nsp                           # results/ablate/nsp, to commit
--   lua5.4 experiments/ablate.lua --archive runs/ablate/nsp --carry                   # and what the running cells need
--   lua5.4 experiments/ablate.lua experiments/ablations/nsp.lua --restore results/ablate/nsp   # on a new machine
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath

local cli = require("bert.cli")

local parser = cli.parser("ablate.lua", "Run an ablation grid: pretrain, evaluate and fine-tune every cell over seeds.",
  "Writes OUTPUT/grid.json, OUTPUT/pretrain/*/ (the runs), OUTPUT/cells/*/done.json (finished cells), " ..
  "OUTPUT/results.json, OUTPUT/results.md and OUTPUT/plots/*.png. The shipped grids are experiments/ablations/*.lua; " ..
  "each says its budget and what it cannot run yet.")
parser:argument("grid", "An ablation file (experiments/ablations/NAME.lua)"):args("?")
parser:option("--output", "Grid directory (default runs/ablate/NAME; NAME-quickX with --budget-scale)")
parser:option("--budget-scale", "Scale every pretraining budget (at least 1 step) and the fine-tuning set sizes " ..
  "(at least 64) by this factor, with held-out evaluations on 512 sequences and the evaluation suite as a quick " ..
  "look (one seed, one rate, 10 steps; printed): 0.01 for a quick end-to-end look", "1"):convert(cli.number("--budget-scale", 0))
parser:option("--summarize", "Only rebuild DIR's results.json, results.md and plots from its finished cells")
parser:flag("--interim", "With --summarize, while the grid runs: DIR/results-interim.json and .md (no plots), with " ..
  "the unfinished cells whose pretraining has finished counted with the tasks evaluated so far, marked partial")
parser:option("--status", "Only say where grid directory DIR stands: each cell finished, evaluating (tasks per " ..
  "evaluation point), pretraining (step, checkpoint, seconds a step) or not started, and what is left")
parser:option("--archive", "Only copy grid directory DIR's results (grid.json, each cell's scores per seed, each " ..
  "pretraining run's summary and metrics; no checkpoint) into results/ablate/NAME (or --into): the folder to " ..
  "commit, so that a grid that runs for days outlives its machine")
parser:option("--into", "With --archive: the folder to copy into (default results/ablate/ and DIR's name)")
parser:flag("--carry", "With --archive: also keep, in FOLDER/carry/ (replaced), what the unfinished cells need to go " ..
  "on on another machine: each unfinished pretraining run's latest checkpoint (optimizer moments in bfloat16) and " ..
  "the snapshots still to evaluate (tens of MB a run: for the end of a session)")
parser:option("--restore", "Before running the grid, copy the finished cells saved by --archive in FOLDER into the " ..
  "grid directory where it lacks them, so that they are skipped (a grid relaunched on a new machine), and the runs " ..
  "it carries (--carry) where the directory has none, so that they resume")
parser:flag("--no-reuse", "Pretrain every cell here, even where a grid next to OUTPUT finished a run with equal " ..
  "settings (by default that run, and its fine-tunings with equal task settings, are read instead)")
parser:option("--shard", "K/N: run only cells K, K+N, K+2N, ... (in the grid's order), so that N processes " ..
  "(one per core, --threads 1 each) share a grid; each writes the table of the cells finished so far. " ..
  "K1,K2/N takes several residues (with N = the number of axis values, whole values: 1,2/6)")
cli.add(parser, "threads")
local args = parser:parse()

cli.main("ablate.lua", function()
  local bert = require("bert")
  local ablate = require("bert.ablate")
  if args.threads then bert.set_num_threads(args.threads) end
  local results, dir
  if args.status then
    if args.grid or args.summarize or args.archive or args.restore then
      error("--status DIR runs alone (no grid file, --summarize, --archive or --restore)", 0)
    end
    print(ablate.status(args.status).text)
    return
  end
  if args.into and not args.archive then error("--into goes with --archive DIR", 0) end
  if args.carry and not args.archive then error("--carry goes with --archive DIR", 0) end
  if args.archive then
    if args.grid or args.summarize or args.restore then error("--archive DIR runs alone (no grid file, --summarize or --restore)", 0) end
    local into = args.into or ("results/ablate/" .. args.archive:gsub("/+$", ""):match("[^/]+$"))
    local saved = ablate.archive.save(args.archive, into, {carry = args.carry})
    print(string.format("archived %s into %s: %d finished cells, %d unfinished with some results, %d files",
      args.archive, into, saved.cells, saved.unfinished, saved.files))
    if saved.carry then
      print(string.format("carried %d runs into %s/carry: %d files, %.1f MB", saved.carry.runs, into,
        saved.carry.files, saved.carry.bytes / 1e6))
    end
    return
  end
  if args.summarize then
    dir = args.summarize
    results = ablate.summarize(dir, {interim = args.interim})
  else
    if args.interim then error("--interim goes with --summarize DIR", 0) end
    if not args.grid then error("give an ablation file (experiments/ablations/NAME.lua) or --summarize DIR", 0) end
    if not (args.budget_scale > 0) then error("option --budget-scale: expected a number > 0, got " .. args.budget_scale, 0) end
    local shard
    if args.shard then
      local ks, n = args.shard:match("^([%d,]+)/(%d+)$")
      n = tonumber(n)
      local list = {}
      for k in (ks or ""):gmatch("[^,]+") do list[#list + 1] = tonumber(k) end
      local ok = n and n >= 1 and #list > 0
      for _, k in ipairs(list) do ok = ok and k >= 1 and k <= n end
      if not ok then
        error("option --shard: expected K/N or K1,K2,.../N with 1 <= K <= N, got '" .. args.shard .. "'", 0)
      end
      shard = {list, n}
    end
    local grid = ablate.load(args.grid, {budget_scale = args.budget_scale})
    dir = args.output or ("runs/ablate/" .. grid.name ..
      (args.budget_scale ~= 1 and string.format("-quick%g", args.budget_scale) or ""))
    if args.restore then
      local restored, carried = ablate.archive.restore(args.restore, dir, grid)
      print(string.format("restored %d finished cell%s from %s into %s%s", #restored, #restored == 1 and "" or "s",
        args.restore, dir, #restored > 0 and (": " .. table.concat(restored, ", ")) or ""))
      if #carried > 0 then print("carried back, to resume: " .. table.concat(carried, ", ")) end
    end
    results = ablate.run(grid, dir, {reuse = not args.no_reuse, shard = shard})
  end
  local base = dir .. (args.interim and "/results-interim" or "/results")
  io.stdout:write(require("bert.fs").read_file(base .. ".md") or "", "\n")
  print("results: " .. base .. ".json, " .. base .. ".md")
  if #results.plots > 0 then print("plots:   " .. table.concat(results.plots, ", ")) end
  if results.plot_error then print("plots: " .. results.plot_error) end
  if #results.missing > 0 then print(string.format("%d cells not finished: rerun to complete them", #results.missing)) end
end)
