-- experiments/ablate.lua end to end on a tiny grid (2 objectives x 2 seeds
-- of 4 pretraining steps, a 1-epoch fine-tuning on a synthetic task): the
-- table with mean ± sd, the plots, a rerun that skips finished cells and
-- resumes a killed pretraining run, --summarize, and the refusal of an
-- objective that is not implemented.
local cjson = require("cjson")
local ablate = require("bert.ablate")

local tmpdir = require("spec.support.tmpdir").path
local read = require("bert.fs").read_file   -- nil for a missing file
local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local root = tmpdir()
os.execute("mkdir -p '" .. root .. "/task'")
local words = {"the", "cat", "sat", "on", "a", "mat", "dog", "ran", "to", "big", "red", "house",
               "river", "by", "old", "man", "saw", "bird", "fly", "over", "green", "hill"}
local state = 11
local function rnd(n) state = (state * 1103515245 + 12345) % 2147483648 return state % n + 1 end
do   -- a corpus in BERT's plain format
  local lines = {}
  for _ = 1, 40 do
    for _ = 1, 5 + rnd(6) do
      local s = {}
      for _ = 1, 4 + rnd(8) do s[#s + 1] = words[rnd(#words)] end
      lines[#lines + 1] = table.concat(s, " ") .. " ."
    end
    lines[#lines + 1] = ""
  end
  write(root .. "/corpus.txt", table.concat(lines, "\n") .. "\n")
end
do   -- a classification task: does the text mention a bird?
  for _, split in ipairs({"train", "dev", "test"}) do
    local lines = {"sentence\tlabel"}
    for _ = 1, 40 do
      local s = {}
      for _ = 1, 4 + rnd(6) do s[#s + 1] = words[rnd(#words)] end
      lines[#lines + 1] = table.concat(s, " ") .. "\t" .. (table.concat(s, " "):find("bird") and "yes" or "no")
    end
    write(root .. "/task/" .. split .. ".tsv", table.concat(lines, "\n") .. "\n")
  end
end
write(root .. "/config.json", cjson.encode({vocab_size = 100, hidden_size = 32, num_hidden_layers = 1,
  num_attention_heads = 2, intermediate_size = 64, max_position_embeddings = 64}))

local function grid_file(name, objectives, seeds)
  local path = root .. "/" .. name .. ".lua"
  write(path, string.format([[
return {
  name = %q,
  axes = {{name = "objective", values = {%s}}},
  fixed = {model = %q, corpus = %q, tokenizer = "wordpiece", vocab_size = 120, batch_size = 4, seq_len = 32,
           log_every = 1, max_eval = 16, threads = 1},
  seeds = {%s},
  budget = {steps = 8},
  downstream = {{task = %q, kind = "classification", epochs = 1, batch_size = 8, seq_len = 32}},
}
]], name, '"' .. table.concat(objectives, '", "') .. '"', root .. "/config.json", root .. "/corpus.txt",
    seeds or "1, 2", root .. "/task/"))
  return path
end

local function ablate_cmd(args, log)
  return os.execute(string.format("lua5.4 experiments/ablate.lua %s >%s 2>%s.err", args, log, log))
end

describe("experiments/ablate.lua", function()
  local out = root .. "/out"
  local grid = grid_file("tiny", {"mlm-nsp", "mlm"})

  it("runs a grid end to end: results.json, results.md with mean ± sd, plots", function()
    assert.is_true(ablate_cmd(grid .. " --budget-scale 0.5 --output " .. out, root .. "/log1"),
      read(root .. "/log1.err"))
    local results = cjson.decode(read(out .. "/results.json"))
    assert.equal(2, #results.rows)
    assert.equal(4, #results.cells)
    assert.same({}, results.missing)
    for _, row in ipairs(results.rows) do
      assert.same({1, 2}, row.seeds)
      local m = row.metrics.mlm_accuracy
      assert.equal(2, m.n)
      assert.is_true(m.mean >= 0 and m.mean <= 1)
      -- the mean and the sample sd are those of the two seeds' values
      local a, b = m.values[1], m.values[2]
      assert.near((a + b) / 2, m.mean, 1e-12)
      assert.near(math.abs(a - b) / math.sqrt(2), m.sd, 1e-12)
      assert.is_number(row.metrics["task_accuracy"].mean)
      assert.is_true(row.parameters > 0)
    end
    assert.is_number(results.rows[1].metrics.nsp_accuracy.mean)   -- mlm-nsp reports NSP accuracy
    assert.is_nil(results.rows[2].metrics.nsp_accuracy)
    -- --budget-scale 0.5 halves the 8 steps
    for _, c in ipairs(results.cells) do assert.equal(4, c.pretrain_steps) end
    local md = read(out .. "/results.md")
    assert.matches("| objective=mlm-nsp | 2 |", md, 1, true)
    assert.matches("%d%.%d%d%d%d ± %d%.%d%d%d%d", md)
    if os.execute("command -v gnuplot >/dev/null 2>&1") then
      for _, png in ipairs({"loss.png", "mlm_accuracy.png", "task_accuracy.png", "objective=mlm/loss.png"}) do
        assert.truthy(read(out .. "/plots/" .. png), png)
      end
    end
  end)

  it("reruns without redoing finished cells, and resumes a killed cell from its checkpoint", function()
    local results = cjson.decode(read(out .. "/results.json"))
    local last = results.cells[4]
    -- a kill during the last cell's pretraining: no done-marker, no summary, the checkpoint kept
    os.remove(out .. "/cells/" .. last.id .. "/done.json")
    os.remove(out .. "/pretrain/" .. last.pretrain_id .. "/summary.json")
    -- killed mid-replace of its checkpoint: only checkpoint.old is left
    os.rename(out .. "/pretrain/" .. last.pretrain_id .. "/checkpoint", out .. "/pretrain/" .. last.pretrain_id .. "/checkpoint.old")
    -- and a kill during the third cell's fine-tuning: its run directory holds a checkpoint, no summary
    local third = out .. "/cells/" .. results.cells[3].id
    os.remove(third .. "/done.json")
    os.remove(third .. "/task/summary.json")
    os.execute("mkdir -p '" .. third .. "/task/checkpoint'")
    write(third .. "/task/checkpoint/trainer.json", '{"step": 1}')
    local before = {}
    for i = 1, 2 do
      before[i] = read(out .. "/cells/" .. results.cells[i].id .. "/done.json")
    end
    local metrics_before = read(out .. "/pretrain/" .. results.cells[1].pretrain_id .. "/metrics.jsonl")
    -- the grid file by another path (as from another directory): the same grid
    local same_file = grid:gsub("/tiny%.lua$", "/./tiny.lua")
    assert.is_true(ablate_cmd(same_file .. " --budget-scale 0.5 --output " .. out, root .. "/log2"),
      read(root .. "/log2.err"))
    local log = read(root .. "/log2")
    local skipped = select(2, log:gsub("finished, skipped", ""))
    assert.equal(2, skipped)
    assert.matches("resuming the pretraining run " .. last.pretrain_id, log, 1, true)
    assert.truthy(read(third .. "/task/summary.json"))   -- the killed fine-tuning ran again
    for i = 1, 2 do
      assert.equal(before[i], read(out .. "/cells/" .. results.cells[i].id .. "/done.json"))
    end
    assert.equal(metrics_before, read(out .. "/pretrain/" .. results.cells[1].pretrain_id .. "/metrics.jsonl"))
    local again = cjson.decode(read(out .. "/results.json"))
    assert.equal(4, #again.cells)
    -- the resumed run finished at the step it was killed at: the same number of steps
    assert.equal(4, again.cells[4].pretrain_steps)
  end)

  it("--archive keeps the results without checkpoints; --restore skips the saved cells on a new machine", function()
    local saved = root .. "/saved/tiny"
    assert.is_true(ablate_cmd("--archive " .. out .. " --into " .. saved, root .. "/log-archive"),
      read(root .. "/log-archive.err"))
    assert.matches("4 finished cells, 0 unfinished", read(root .. "/log-archive"), 1, true)
    local results = cjson.decode(read(out .. "/results.json"))
    assert.equal(read(out .. "/grid.json"), read(saved .. "/grid.json"))
    for _, c in ipairs(results.cells) do
      assert.equal(read(out .. "/cells/" .. c.id .. "/done.json"), read(saved .. "/cells/" .. c.id .. "/done.json"))
      assert.truthy(read(saved .. "/cells/" .. c.id .. "/task/summary.json"))
      assert.equal(read(out .. "/pretrain/" .. c.pretrain_id .. "/metrics.jsonl"),
        read(saved .. "/pretrain/" .. c.pretrain_id .. "/metrics.jsonl"))
    end
    local listing = io.popen("cd '" .. saved .. "' && find . -type f"):read("a")
    assert.is_nil(listing:find("checkpoint", 1, true), listing)
    assert.is_nil(listing:find("safetensors", 1, true), listing)
    -- the last cell as if it were still running when saved: no done.json, so it is not restored
    local last = results.cells[4]
    os.remove(saved .. "/cells/" .. last.id .. "/done.json")
    local fresh = root .. "/fresh"
    assert.is_true(ablate_cmd(grid .. " --budget-scale 0.5 --output " .. fresh .. " --restore " .. saved,
      root .. "/log-restore"), read(root .. "/log-restore.err"))
    local log = read(root .. "/log-restore")
    assert.matches("restored 3 finished cells", log, 1, true)
    assert.equal(3, select(2, log:gsub("finished, skipped", "")))
    assert.matches("[4/4] objective=mlm, seed 2: pretraining", log, 1, true)
    for i = 1, 3 do
      local id = results.cells[i].id
      assert.equal(read(out .. "/cells/" .. id .. "/done.json"), read(fresh .. "/cells/" .. id .. "/done.json"))
    end
    local again = cjson.decode(read(fresh .. "/results.json"))
    assert.equal(4, #again.cells)
    assert.same(results.rows[1].metrics.mlm_accuracy.values, again.rows[1].metrics.mlm_accuracy.values)
    -- a restored cell made unfinished cannot run again without its run's checkpoint: an error naming both
    local first = results.cells[1]
    os.remove(fresh .. "/cells/" .. first.id .. "/done.json")
    -- (--no-reuse: the grid next to it, out, has that run with its checkpoint, and would lend it)
    assert.falsy(ablate_cmd(grid .. " --budget-scale 0.5 --no-reuse --output " .. fresh, root .. "/log-nockpt"),
      read(root .. "/log-nockpt"))
    assert.matches("cell " .. first.id .. " needs the checkpoint of the finished pretraining run " .. fresh ..
      "/pretrain/" .. first.pretrain_id, read(root .. "/log-nockpt.err"), 1, true)
    -- a grid with other settings is refused, naming both
    local other = grid_file("other", {"mlm"})
    assert.falsy(ablate_cmd(other .. " --budget-scale 0.5 --output " .. root .. "/o2 --restore " .. saved,
      root .. "/log-refuse"))
    assert.matches("holds a grid with other settings", read(root .. "/log-refuse.err"), 1, true)
  end)

  it("a grid file that adds 'comparisons' reruns nothing, and its pairs are in the table", function()
    local text = read(grid):gsub("  seeds = ", "  comparisons = {{\"objective=mlm-nsp\", \"objective=mlm\"}},\n  seeds = ", 1)
    local path = root .. "/tiny-cmp/tiny.lua"
    os.execute("mkdir -p '" .. root .. "/tiny-cmp'")
    write(path, text)
    assert.is_true(ablate_cmd(path .. " --budget-scale 0.5 --output " .. out, root .. "/log-cmp"), read(root .. "/log-cmp.err"))
    assert.equal(4, select(2, read(root .. "/log-cmp"):gsub("finished, skipped", "")))
    local results = cjson.decode(read(out .. "/results.json"))
    assert.equal(2, #results.comparisons)
    assert.same({"objective=mlm-nsp", "objective=mlm"}, {results.comparisons[2].label, results.comparisons[2].baseline})
    assert.near(-results.comparisons[1].metrics.mlm_accuracy.difference, results.comparisons[2].metrics.mlm_accuracy.difference, 1e-12)
    assert.matches("then the pairs the grid file names in 'comparisons'", read(out .. "/results.md"), 1, true)
  end)

  it("--status says each cell's state from the directory alone, and what is left", function()
    local copy_dir = root .. "/status-copy"
    assert(os.execute(string.format("rm -rf '%s' && cp -r '%s' '%s'", copy_dir, out, copy_dir)))
    local results = cjson.decode(read(out .. "/results.json"))
    local st = ablate.status(copy_dir)
    assert.equal(4, st.finished)
    -- the third cell as if evaluating, the fourth as if pretraining (its summary not written yet)
    os.remove(copy_dir .. "/cells/" .. results.cells[3].id .. "/done.json")
    os.remove(copy_dir .. "/cells/" .. results.cells[4].id .. "/done.json")
    os.remove(copy_dir .. "/pretrain/" .. results.cells[4].pretrain_id .. "/summary.json")
    assert.is_true(ablate_cmd("--status " .. copy_dir, root .. "/log-status"), read(root .. "/log-status.err"))
    local text = read(root .. "/log-status")
    assert.matches("tiny: 4 cells, 2 finished", text, 1, true)
    assert.matches("[3/4] objective=mlm-nsp, seed 2: evaluating", text, 1, true)
    assert.matches("[4/4] objective=mlm, seed 2: pretraining: step 4 of 4 (checkpoint 4)", text, 1, true)
    assert.matches("[1/4] objective=mlm-nsp, seed 1: finished", text, 1, true)
    assert.matches("left: pretraining ", text, 1, true)
    st = ablate.status(copy_dir)
    assert.same({"finished", "finished", "evaluating", "pretraining"},
      {st.cells[1].state, st.cells[2].state, st.cells[3].state, st.cells[4].state})
    assert.equal(0, st.tasks_left)
    -- not a grid directory: an error naming it
    local ok, e = pcall(ablate.status, root .. "/task")
    assert.is_false(ok)
    assert.matches(root .. "/task has no grid.json", e, 1, true)
  end)

  it("--status times a step on the machine the run is on now, leaving out a stop", function()
    local step_seconds = require("bert.ablate.status").step_seconds
    local function log(rates)   -- one line every 50 steps; rates[i]: seconds a step in interval i
      local pts, t = {{step = 0, time = 0}}, 0
      for i, r in ipairs(rates) do t = t + 50 * r; pts[#pts + 1] = {step = 50 * i, time = t} end
      return pts
    end
    local steady = {}
    for i = 1, 19 do steady[i] = 0.5 end
    assert.near(0.5, step_seconds(log(steady)), 1e-12)
    steady[10] = 20                                    -- stopped for ~16 min once: left out
    assert.near(0.5, step_seconds(log(steady)), 1e-12)
    steady[10] = 0.6                                   -- a held-out evaluation in the interval: kept
    assert.near((18 * 0.5 + 0.6) / 19, step_seconds(log(steady)), 1e-12)
    -- carried to a machine 3.6x slower: 14 intervals before, the restart, 4 after
    local moved = {}
    for i = 1, 14 do moved[i] = 0.52 end
    moved[15] = 2.0                                    -- the restart (shards rebuilt) in the first interval
    for i = 16, 19 do moved[i] = 1.9 end
    assert.near(1.9, step_seconds(log(moved)), 0.05)
    -- and to a faster one
    for i = 1, 14 do moved[i] = 1.9 end
    moved[15] = 0.6
    for i = 16, 19 do moved[i] = 0.52 end
    assert.near(0.52, step_seconds(log(moved)), 0.03)
    assert.is_nil(step_seconds({{step = 100, time = 5}}))
  end)

  it("reads a finished run of a grid next to it with equal settings instead of pretraining again #slow", function()
    local other = grid_file("other", {"mlm", "mlm-sop"})
    local dir = root .. "/other"   -- next to out, whose "mlm" cells have the same settings
    assert.is_true(ablate_cmd(other .. " --budget-scale 0.5 --output " .. dir, root .. "/log-reuse"),
      read(root .. "/log-reuse.err"))
    local log = read(root .. "/log-reuse")
    assert.equal(2, select(2, log:gsub("reusing the finished pretraining run", "")))   -- mlm, seeds 1 and 2
    assert.equal(2, select(2, log:gsub("reusing the finished fine%-tuning", "")))
    local mine = cjson.decode(read(dir .. "/results.json"))
    local theirs = cjson.decode(read(out .. "/results.json"))
    -- objective=mlm in both (summary.json keeps 10 digits, a fresh cell's done.json 14)
    local function same_metrics(a, b)
      for k, m in pairs(a) do
        for i, v in ipairs(m.values) do assert.near(v, b[k].values[i], 1e-9, k) end
      end
      for k in pairs(b) do assert.truthy(a[k], k) end
    end
    same_metrics(theirs.rows[2].metrics, mine.rows[1].metrics)
    for _, c in ipairs(mine.cells) do
      local done = cjson.decode(read(dir .. "/cells/" .. c.id .. "/done.json"))
      if c.label == "objective=mlm" then
        assert.equal("out/pretrain/" .. c.pretrain_id, done.pretrain_reused_from)
        assert.is_nil(read(dir .. "/pretrain/" .. c.pretrain_id .. "/args.json"))   -- nothing pretrained here
      else
        assert.is_nil(done.pretrain_reused_from)
        assert.truthy(read(dir .. "/pretrain/" .. c.pretrain_id .. "/summary.json"))
      end
    end
    -- --no-reuse pretrains every cell
    assert.is_true(ablate_cmd(other .. " --budget-scale 0.5 --no-reuse --output " .. root .. "/other-own",
      root .. "/log-noreuse"), read(root .. "/log-noreuse.err"))
    assert.is_nil(read(root .. "/log-noreuse"):find("reusing", 1, true))
    local own = cjson.decode(read(root .. "/other-own/results.json"))
    same_metrics(mine.rows[1].metrics, own.rows[1].metrics)   -- deterministic: the same figures
  end)

  it("--shard K/N splits the cells between processes; together they finish the grid #slow", function()
    local dir = root .. "/sharded"
    for k = 1, 2 do
      assert.is_true(ablate_cmd(grid .. " --budget-scale 0.5 --shard " .. k .. "/2 --output " .. dir,
        root .. "/log-shard" .. k), read(root .. "/log-shard" .. k .. ".err"))
    end
    local first, second = read(root .. "/log-shard1"), read(root .. "/log-shard2")
    assert.matches("shard 1/2: 2 cells to run", first, 1, true)
    assert.equal(2, select(2, first:gsub("another shard's", "")))
    assert.matches("[1/4] objective=mlm-nsp, seed 1: pretraining", first, 1, true)
    assert.matches("[2/4] objective=mlm, seed 1: another shard's", first, 1, true)
    assert.matches("shard 2/2: 2 cells to run", second, 1, true)
    assert.equal(2, select(2, second:gsub("finished, skipped", "")))   -- shard 1's cells
    local results = cjson.decode(read(dir .. "/results.json"))
    assert.equal(4, #results.cells)
    assert.same({}, results.missing)
    assert.is_falsy(ablate_cmd(grid .. " --shard 3/2 --output " .. dir, root .. "/log-shard3"))
    assert.matches("option --shard: expected K/N or K1,K2,.../N with 1 <= K <= N, got '3/2'",
      read(root .. "/log-shard3.err"), 1, true)
    -- several residues: 1,2/4 runs cells 1 and 2 (seed 1), leaves 3 and 4 (seed 2) to another process
    local dir2 = root .. "/sharded2"
    assert.is_true(ablate_cmd(grid .. " --budget-scale 0.5 --shard 1,2/4 --output " .. dir2, root .. "/log-shard4"),
      read(root .. "/log-shard4.err"))
    local log4 = read(root .. "/log-shard4")
    assert.matches("shard 1,2/4: 2 cells to run", log4, 1, true)
    assert.matches("[3/4] objective=mlm-nsp, seed 2: another shard's", log4, 1, true)
    assert.equal(2, #cjson.decode(read(dir2 .. "/results.json")).cells)
  end)

  it("refuses a rerun into the directory with other settings", function()
    assert.is_falsy(ablate_cmd(grid .. " --budget-scale 0.25 --output " .. out, root .. "/log3"))
    assert.matches("holds a grid with other settings", read(root .. "/log3.err"), 1, true)
  end)

  it("a grid file that adds cells after the saved ones (another seed) runs only those; a reordered one is refused", function()
    local dir = root .. "/extended"
    os.execute(string.format("cp -r '%s' '%s'", out, dir))
    local more = grid_file("tiny", {"mlm-nsp", "mlm"}, "1, 2, 3")
    assert.is_true(ablate_cmd(more .. " --budget-scale 0.5 --output " .. dir, root .. "/log-more"),
      read(root .. "/log-more.err"))
    local log = read(root .. "/log-more")
    assert.matches("the grid file adds 2 cells after the 4 saved ones", log, 1, true)
    assert.equal(4, select(2, log:gsub("finished, skipped", "")))
    assert.equal(6, #cjson.decode(read(dir .. "/grid.json")).cells)
    assert.equal(6, #cjson.decode(read(dir .. "/results.json")).cells)
    local swapped = grid_file("tiny", {"mlm", "mlm-nsp"}, "1, 2, 3")
    assert.is_falsy(ablate_cmd(swapped .. " --budget-scale 0.5 --output " .. dir, root .. "/log-swapped"))
    assert.matches("may only add cells after the saved ones", read(root .. "/log-swapped.err"), 1, true)
    os.execute("rm -rf '" .. dir .. "'")
    grid_file("tiny", {"mlm-nsp", "mlm"})   -- the file the later cases run
  end)

  it("--summarize rebuilds the table and plots from the finished cells", function()
    local md = read(out .. "/results.md")
    os.remove(out .. "/results.md")
    os.remove(out .. "/results.json")
    assert.is_true(ablate_cmd("--summarize " .. out, root .. "/log4"), read(root .. "/log4.err"))
    assert.equal(md, read(out .. "/results.md"))
    assert.truthy(read(out .. "/results.json"))
  end)

  it("refuses an axis value that is not implemented, before running anything", function()
    -- any objective still planned (bert.objectives.planned); they land one by one
    local planned = next(require("bert.objectives").planned)
    if not planned then return pending("bert.objectives.planned is empty: no unimplemented objective to refuse") end
    local bad = grid_file("planned", {"mlm", planned})
    local dir = root .. "/bad"
    assert.is_falsy(ablate_cmd(bad .. " --output " .. dir, root .. "/log5"))
    local err = read(root .. "/log5.err")
    assert.matches("cell objective=" .. planned, err, 1, true)
    assert.matches("'" .. planned .. "' is not implemented yet", err, 1, true)
    assert.is_nil(read(dir .. "/grid.json"))
    -- and a setting that does not exist
    local typo = root .. "/typo.lua"
    write(typo, 'return {axes = {{name = "objectiv", values = {"mlm"}}}, seeds = {1}, budget = {steps = 1}}')
    local ok, e = pcall(ablate.load, typo)
    assert.is_false(ok)
    assert.matches("objectiv", e, 1, true)
  end)

  it("loads every shipped ablation file: settings valid, planned values listed, never in the grid", function()
    local files = {}
    for f in io.popen("ls experiments/ablations/*.lua"):lines() do files[#files + 1] = f end
    assert.is_true(#files >= 6)
    for _, f in ipairs(files) do
      local g = ablate.load(f, {budget_scale = 0.05})
      assert.is_true(#g.cells >= 1, f)
      -- spread from pretraining seeds, or (hours a cell) from the suite's fine-tuning seeds
      assert.is_true(#g.seeds >= 3 or (g.evaluation ~= nil and #(g.evaluation.seeds or {}) >= 5),
        f .. ": at least 3 pretraining seeds, or the evaluation suite with at least 5 fine-tuning seeds")
      for _, p in ipairs(g.planned) do
        for _, c in ipairs(g.cells) do
          for _, v in ipairs(p.values) do assert.is_nil(c.label:find(tostring(v), 1, true), f .. ": " .. c.label) end
        end
      end
    end
    -- a family without the objective's head is refused by name before anything runs
    local bad = root .. "/head.lua"
    write(bad, 'return {axes = {{name = "model", values = {"roberta-tiny"}}}, fixed = {objective = "mlm-nsp"}, ' ..
      'seeds = {1}, budget = {steps = 1}}')
    local ok, e = pcall(ablate.load, bad)
    assert.is_false(ok)
    assert.matches("the roberta family has no pretraining head (use --objective mlm)", e, 1, true)
  end)

  it("takes the masking modes as settings, and refuses two at once naming the cell", function()
    local path = root .. "/masking.lua"
    write(path, 'return {axes = {{name = "masking_mode", values = {{label = "tokens"}, {label = "phrases", phrase_mask = true}, ' ..
      '{label = "spans", span_mask = true}}}}, fixed = {model = "tiny"}, seeds = {1}, budget = {steps = 1}}')
    local g = ablate.load(path)
    assert.equal(3, #g.cells)
    assert.is_true(g.pretrain_runs[2].settings.phrase_mask)
    write(path, 'return {axes = {{name = "phrase_mask", values = {true}}}, fixed = {ngram_mask = 3}, seeds = {1}, ' ..
      'budget = {steps = 1}}')
    local ok, e = pcall(ablate.load, path)
    assert.is_false(ok)
    assert.matches("cell phrase_mask=true: --ngram-mask and --phrase-mask exclude each other", e, 1, true)
  end)

  it("pretrains a teacher once per seed for the distill cells (the 'teacher' field) #slow", function()
    local path = root .. "/distill.lua"
    local spec_text = string.format([[
return {
  name = "distill",
  axes = {{name = "student", values = {
    {label = "scratch", objective = "mlm"},
    {label = "distilled", objective = "distill"},
  }}},
  fixed = {model = %q, corpus = %q, tokenizer = "wordpiece", vocab_size = 120, batch_size = 4, seq_len = 32,
           log_every = 1, max_eval = 16, threads = 1},
  teacher = {objective = "mlm", budget = {steps = 6}},
  seeds = {1, 2},
  budget = {steps = 4},
  downstream = {{task = %q, kind = "classification", epochs = 1, batch_size = 8, seq_len = 32}},
}
]], root .. "/config.json", root .. "/corpus.txt", root .. "/task/")
    write(path, spec_text)
    local dir = root .. "/distill-out"
    local g = ablate.load(path)
    assert.equal(2, #g.teachers)
    assert.same({"teacher-1", "teacher-2"}, {g.teachers[1].id, g.teachers[2].id})
    assert.equal(6, g.teachers[1].pretrain_steps)
    -- --no-reuse: the scratch cells equal the first grid's mlm cells, and this case reads their args.json
    assert.is_true(ablate_cmd(path .. " --no-reuse --output " .. dir, root .. "/log6"), read(root .. "/log6.err"))
    local log = read(root .. "/log6")
    assert.equal(2, select(2, log:gsub("pretraining the teacher for seed", "")))
    for seed = 1, 2 do
      local teacher = dir .. "/teacher-" .. seed
      assert.equal(6, cjson.decode(read(teacher .. "/summary.json")).steps)
      assert.equal(seed, cjson.decode(read(teacher .. "/args.json")).seed)
      local args = cjson.decode(read(dir .. "/pretrain/distilled_seed=" .. seed .. "/args.json"))
      assert.equal(teacher .. "/checkpoint", args.teacher)
      assert.equal("distill", args.objective)
      assert.is_nil(cjson.decode(read(dir .. "/pretrain/scratch_seed=" .. seed .. "/args.json")).teacher)
    end
    local results = cjson.decode(read(dir .. "/results.json"))
    assert.equal(2, #results.rows)
    assert.is_number(results.rows[2].metrics.teacher_mlm_accuracy.mean)
    assert.is_nil(results.rows[1].metrics.teacher_mlm_accuracy)
    -- a rerun trains no teacher again
    assert.is_true(ablate_cmd(path .. " --no-reuse --output " .. dir, root .. "/log7"), read(root .. "/log7.err"))
    assert.is_nil(read(root .. "/log7"):find("pretraining the teacher", 1, true))
    -- a distill cell with neither a teacher field nor a teacher directory is refused by name
    write(path, (spec_text:gsub("  teacher = {objective = \"mlm\", budget = {steps = 6}},\n", "")))
    local ok, e = pcall(ablate.load, path)
    assert.is_false(ok)
    assert.matches("cell distilled distils", e, 1, true)
    assert.matches("has no 'teacher'", e, 1, true)
  end)

  it("reads a teacher from a grid next to it when a finished run has the teacher's settings #slow", function()
    local path = root .. "/distill-reuse.lua"
    write(path, string.format([[
return {
  name = "distill-reuse",
  axes = {{name = "student", values = {{label = "distilled", objective = "distill"}}}},
  fixed = {model = %q, corpus = %q, tokenizer = "wordpiece", vocab_size = 120, batch_size = 4, seq_len = 32,
           log_every = 1, max_eval = 16, threads = 1},
  teacher = {objective = "mlm", budget = {steps = 8}},   -- at --budget-scale 0.5: the first grid's mlm cells
  seeds = {1, 2},
  budget = {steps = 8},
  downstream = {{task = %q, kind = "classification", epochs = 1, batch_size = 8, seq_len = 32}},
}
]], root .. "/config.json", root .. "/corpus.txt", root .. "/task/"))
    local dir = root .. "/distill-reuse"
    assert.is_true(ablate_cmd(path .. " --budget-scale 0.5 --output " .. dir, root .. "/log-treuse"),
      read(root .. "/log-treuse.err"))
    local log = read(root .. "/log-treuse")
    assert.is_nil(log:find("pretraining the teacher", 1, true))
    for seed = 1, 2 do
      -- out's mlm cells, or distill-out's scratch cells (the same settings; the first in name order)
      local run = log:match("the teacher for seed " .. seed .. ": reusing the finished pretraining run (%S+)")
      assert.truthy(run, log)
      assert.equal(root, run:sub(1, #root))
      assert.matches("_seed=" .. seed .. "$", run)
      assert.truthy(read(run .. "/summary.json"))
      assert.is_nil(read(dir .. "/teacher-" .. seed .. "/args.json"))   -- nothing pretrained here
      local args = cjson.decode(read(dir .. "/pretrain/distilled_seed=" .. seed .. "/args.json"))
      assert.equal(run .. "/checkpoint", args.teacher)
    end
    assert.is_number(cjson.decode(read(dir .. "/results.json")).rows[1].metrics.teacher_mlm_accuracy.mean)
  end)

  it("mean and sample standard deviation", function()
    local m, sd, n = ablate.mean_sd({1, 2, 3, 4})
    assert.equal(2.5, m)
    assert.near(math.sqrt(5 / 3), sd, 1e-12)
    assert.equal(4, n)
    local m1, sd1 = ablate.mean_sd({0.7})
    assert.equal(0.7, m1)
    assert.is_nil(sd1)
  end)

  it("compares each row with its baseline: difference, Welch's t, larger than the spread or not", function()
    local function row(label, values)
      local m, sd, n = ablate.mean_sd(values)
      return {label = label, metrics = {acc = {mean = m, sd = sd, n = n, values = values}}}
    end
    local rows = {
      row("pretrained, size=100", {0.80, 0.82, 0.84}), row("scratch, size=100", {0.60, 0.62, 0.64}),
      row("pretrained, size=300", {0.90, 0.91, 0.92}), row("scratch, size=300", {0.895, 0.905, 0.935}),
      row("scratch, size=1000", {0.9}),   -- no baseline row at 1000
    }
    local c = ablate.comparisons(rows, {"acc"})
    assert.equal(2, #c)
    assert.equal("scratch, size=100", c[1].label)
    assert.equal("pretrained, size=100", c[1].baseline)
    local a = c[1].metrics.acc
    assert.near(-0.2, a.difference, 1e-12)
    assert.near(-0.2 / math.sqrt(0.02 ^ 2 / 3 + 0.02 ^ 2 / 3), a.welch_t, 1e-9)
    assert.is_true(a.beyond_spread)           -- 0.2 > 0.02 + 0.02
    -- Welch: se = 0.02 * sqrt(2/3), df = 4, t(0.975, 4) = 2.776445
    local se = 0.02 * math.sqrt(2 / 3)
    assert.near(4, a.df, 1e-9)
    assert.near(-0.2 - 2.776445 * se, a.ci95[1], 1e-6)
    assert.near(-0.2 + 2.776445 * se, a.ci95[2], 1e-6)
    assert.is_true(a.finding)
    local b = c[2].metrics.acc
    assert.equal("pretrained, size=300", c[2].baseline)
    assert.near((0.895 + 0.905 + 0.935) / 3 - 0.91, b.difference, 1e-12)
    assert.is_false(b.beyond_spread)          -- 0.0017 < 0.01 + 0.0208
    assert.is_false(b.finding)                -- its interval holds 0
    -- a single seed on a side: no comparison of that metric
    local one = ablate.comparisons({row("a", {1, 2}), row("b", {3})}, {"acc"})
    assert.same({}, one[1].metrics)
    -- the grid file's own pairs after the baseline's, once each (a pair the baseline makes is not repeated)
    local extra = ablate.comparisons(rows, {"acc"}, {{"scratch, size=300", "scratch, size=100"},
      {"scratch, size=100", "pretrained, size=100"}})
    assert.equal(3, #extra)
    assert.same({"scratch, size=300", "scratch, size=100"}, {extra[3].label, extra[3].baseline})
    assert.near((0.895 + 0.905 + 0.935) / 3 - 0.62, extra[3].metrics.acc.difference, 1e-12)
    assert.is_true(extra[3].metrics.acc.finding)
  end)

  it("refuses a misspelt field of a grid file, and comparisons that name no cell", function()
    local path = root .. "/fields.lua"
    local body = [[return {name = "fields", axes = {{name = "objective", values = {"mlm", "clm"}}}, seeds = {1},
      budget = {steps = 2}, %s}]]
    write(path, body:format("evalution = {tasks = {'sst2'}}"))
    local ok, e = pcall(ablate.load, path)
    assert.is_false(ok)
    assert.matches("unknown field 'evalution' (the fields: name,", e, 1, true)
    write(path, body:format("comparisons = {{'objective=clm', 'objective=mlx'}}"))
    ok, e = pcall(ablate.load, path)
    assert.is_false(ok)
    assert.matches("comparison 1 must be two different cell labels", e, 1, true)
    assert.matches("(the labels: objective=mlm, objective=clm)", e, 1, true)
    write(path, body:format("comparisons = {{'objective=clm', 'objective=mlm'}}"))
    assert.same({{"objective=clm", "objective=mlm"}}, ablate.load(path).comparisons)
  end)

  it("fine-tunes on synthetic QA as a downstream task: exact match and F1 per cell #slow", function()
    -- the synthetic-qa task's files, made by its generator from the spec's corpus (not Brown)
    local gen = require("bert.finetune.synthetic_qa")
    local docs, sentences = {}, {}
    for line in io.lines(root .. "/corpus.txt") do
      if line == "" then
        if #sentences > 0 then docs[#docs + 1] = {id = "d" .. #docs, sentences = sentences} end
        sentences = {}
      else
        local ws = {}
        for w in line:gmatch("%S+") do ws[#ws + 1] = w end
        sentences[#sentences + 1] = ws
      end
    end
    local set = gen.generate(docs, {seed = 3})
    gen.write(root .. "/qadata/synthetic_qa", set)
    local path = root .. "/qa.lua"
    write(path, string.format([[
return {
  name = "qa",
  axes = {{name = "objective", values = {"mlm"}}},
  fixed = {model = %q, corpus = %q, tokenizer = "wordpiece", vocab_size = 120, batch_size = 4, seq_len = 32,
           max_eval = 16, threads = 1},
  seeds = {1, 2},
  budget = {steps = 2},
  downstream = {{task = "synthetic-qa", data_dir = %q, max_train = 1000, epochs = 1, batch_size = 8, seq_len = 64}},
}
]], root .. "/config.json", root .. "/corpus.txt", root .. "/qadata"))
    local dir = root .. "/qa-out"
    assert.is_true(ablate_cmd(path .. " --budget-scale 0.05 --output " .. dir, root .. "/log7"), read(root .. "/log7.err"))
    local results = cjson.decode(read(dir .. "/results.json"))
    assert.same({}, results.missing)
    local row = results.rows[1]
    for _, k in ipairs({"synthetic-qa_exact_match", "synthetic-qa_f1"}) do
      assert.equal(2, row.metrics[k].n, k)
      for _, v in ipairs(row.metrics[k].values) do assert.is_true(v >= 0 and v <= 1, k) end
    end
    -- the fine-tuning set scaled as the grid says (1000 x 0.05, at least 64) or all there is
    assert.is_true(#set.train > 20)
    for _, seed in ipairs({1, 2}) do
      local sm = cjson.decode(read(dir .. "/cells/objective=mlm_seed=" .. seed .. "/synthetic-qa/summary.json"))
      assert.equal(math.min(64, #set.train), sm.n_train)
      assert.equal("synthetic-qa", sm.task)
    end
    assert.matches("| synthetic-qa_exact_match | synthetic-qa_f1 |", read(dir .. "/results.md"), 1, true)
  end)

  it("runs the evaluation suite on every cell's checkpoint and snapshot, with the from-scratch control #slow", function()
    -- an SST-2-shaped task in a data folder of the spec's own
    os.execute("mkdir -p '" .. root .. "/evaldata/glue/SST-2'")
    for _, split in ipairs({"train", "dev"}) do
      local lines = {"sentence\tlabel"}
      for _ = 1, 24 do
        local s = {}
        for _ = 1, 3 + rnd(5) do s[#s + 1] = words[rnd(#words)] end
        lines[#lines + 1] = table.concat(s, " ") .. "\t" .. (table.concat(s, " "):find("bird") and "1" or "0")
      end
      write(root .. "/evaldata/glue/SST-2/" .. split .. ".tsv", table.concat(lines, "\n") .. "\n")
    end
    local path = root .. "/ev.lua"
    write(path, string.format([[
return {
  name = "ev",
  axes = {{name = "objective", values = {"mlm"}}},
  fixed = {model = %q, corpus = %q, tokenizer = "wordpiece", vocab_size = 120, batch_size = 4, seq_len = 32,
           max_eval = 16, threads = 1, snapshots = "0.5"},
  seeds = {1},
  budget = {steps = 2},
  evaluation = {tasks = {"sst2"}, data_dir = %q, steps = 2, batch_size = 8, seeds = {1, 2}, lr_grid = {1e-3},
                from_scratch_control = true},
}
]], root .. "/config.json", root .. "/corpus.txt", root .. "/evaldata"))
    local dir = root .. "/ev-out"
    assert.is_true(ablate_cmd(path .. " --output " .. dir, root .. "/log9"), read(root .. "/log9.err"))
    assert.truthy(read(root .. "/log9"):find("1 seeds, evaluated on sst2, output", 1, true), read(root .. "/log9"))
    local results = cjson.decode(read(dir .. "/results.json"))
    assert.same({}, results.missing)
    local m = results.rows[1].metrics
    assert.is_number(m.eval_sst2.mean)
    assert.is_number(m.eval_glue.mean)
    local ev = cjson.decode(read(dir .. "/cells/objective=mlm_seed=1/evaluate/results.json"))
    assert.equal(2, #ev.tasks.sst2.runs)   -- one rate with seed 1, then seed 2
    assert.near(ev.tasks.sst2.headline.mean, m.eval_sst2.mean, 1e-12)
    -- the control: the same protocol from random weights, and pretrained - scratch
    assert.equal(2, #ev.tasks.sst2.from_scratch.runs)
    assert.near(ev.tasks.sst2.from_scratch.headline.mean, m.eval_sst2_scratch.mean, 1e-12)
    assert.near(m.eval_sst2.mean - m.eval_sst2_scratch.mean, m.eval_sst2_gain.mean, 1e-12)
    -- the learning curve: the snapshot at half the steps, evaluated without a second control
    assert.is_number(m["eval_sst2@0.5"].mean)
    assert.near(m["eval_sst2@0.5"].mean - m.eval_sst2_scratch.mean, m["eval_sst2_gain@0.5"].mean, 1e-12)
    local at = cjson.decode(read(dir .. "/cells/objective=mlm_seed=1/evaluate-at-0.5/results.json"))
    assert.is_nil(at.tasks.sst2.from_scratch)
    assert.truthy(at.model:find("snapshot%-1$"))
    -- --status counts the tasks per evaluation point (here in a copy, the snapshot's task undone)
    local sdir = root .. "/ev-status"
    assert(os.execute(string.format("rm -rf '%s' && cp -r '%s' '%s'", sdir, dir, sdir)))
    os.remove(sdir .. "/cells/objective=mlm_seed=1/done.json")
    os.remove(sdir .. "/cells/objective=mlm_seed=1/evaluate-at-0.5/tasks/sst2/result.json")
    local st = ablate.status(sdir)
    assert.equal("evaluating", st.cells[1].state)
    assert.equal("tasks finished: final 1 of 1, @0.5 0 of 1", st.cells[1].detail)
    assert.equal(1, st.tasks_left)
    assert.is_number(st.task_seconds)
    -- a second grid next to it with a cell of equal settings reads the run and its evaluated
    -- tasks (the final checkpoint's and the snapshot's) instead of fine-tuning again
    local path2 = root .. "/ev2.lua"
    write(path2, (read(path):gsub('name = "ev"', 'name = "ev2"')))
    local dir2 = root .. "/ev2-out"
    assert.is_true(ablate_cmd(path2 .. " --output " .. dir2, root .. "/log9b"), read(root .. "/log9b.err"))
    local log = read(root .. "/log9b")
    assert.truthy(log:find("reusing the finished pretraining run", 1, true), log)
    assert.truthy(log:find("reusing 2 finished evaluation tasks", 1, true), log)
    -- nothing fine-tuned here: the task directory holds only the copied result
    local names = require("bert.fs").listdir(dir2 .. "/cells/objective=mlm_seed=1/evaluate/tasks/sst2")
    assert.same({"result.json"}, names)
    local m2 = cjson.decode(read(dir2 .. "/results.json")).rows[1].metrics
    for _, k in ipairs({"eval_sst2", "eval_sst2_scratch", "eval_sst2@0.5"}) do
      assert.near(m[k].mean, m2[k].mean, 1e-12, k)
    end
    local done2 = cjson.decode(read(dir2 .. "/cells/objective=mlm_seed=1/done.json"))
    assert.equal(dir .. "/cells/objective=mlm_seed=1", done2.evaluation_reused_from)
    -- a cell's finetune.* settings reach its suite (pretrain-vs-scratch's set sizes), and
    -- learning_curve = false leaves the snapshots unevaluated; other settings: nothing reused
    local path3 = root .. "/ev3.lua"
    write(path3, (read(path):gsub('name = "ev"', 'name = "ev3"')
      :gsub('axes = {{name = "objective", values = {"mlm"}}}',
            'axes = {{name = "finetune.max_train", values = {12}}}')
      :gsub('fixed = {', 'fixed = {objective = "mlm", ')
      :gsub('from_scratch_control = true}', 'from_scratch_control = true, learning_curve = false}')))
    local dir3 = root .. "/ev3-out"
    assert.is_true(ablate_cmd(path3 .. " --output " .. dir3, root .. "/log9c"), read(root .. "/log9c.err"))
    local log3 = read(root .. "/log9c")
    assert.truthy(log3:find("reusing the finished pretraining run", 1, true), log3)
    assert.is_nil(log3:find("finished evaluation tasks", 1, true))
    local cell3 = dir3 .. "/cells/max_train=12_seed=1"
    assert.equal(12, cjson.decode(read(cell3 .. "/evaluate/protocol.json")).max_train)
    assert.is_nil(read(cell3 .. "/evaluate-at-0.5/results.json"))
    assert.is_number(cjson.decode(read(dir3 .. "/results.json")).rows[1].metrics.eval_sst2.mean)
    -- cells that differ only in pretraining (here its rate) share one from-scratch control:
    -- the second cell reads the first's instead of fine-tuning the same control again
    local path4 = root .. "/ev4.lua"
    write(path4, (read(path):gsub('name = "ev"', 'name = "ev4"')
      :gsub('axes = {{name = "objective", values = {"mlm"}}}', 'axes = {{name = "lr", values = {1e-3, 2e-3}}}')
      :gsub('fixed = {', 'fixed = {objective = "mlm", ')
      :gsub('from_scratch_control = true}', 'from_scratch_control = true, learning_curve = false}')))
    local dir4 = root .. "/ev4-out"
    assert.is_true(ablate_cmd(path4 .. " --output " .. dir4, root .. "/log9d"), read(root .. "/log9d.err"))
    local first_cell, second_cell = dir4 .. "/cells/lr=0.001_seed=1", dir4 .. "/cells/lr=0.002_seed=1"
    local own = cjson.decode(read(first_cell .. "/evaluate/tasks/sst2/result.json")).from_scratch
    local read_in = cjson.decode(read(second_cell .. "/evaluate/tasks/sst2/result.json")).from_scratch
    assert.is_nil(own.read_from)
    assert.equal(first_cell .. "/evaluate", read_in.read_from)
    assert.same(own.test, read_in.test)
    for _, name in ipairs(require("bert.fs").listdir(second_cell .. "/evaluate/tasks/sst2")) do
      assert.is_nil(name:find("^scratch%-"), name)
    end
    local rows4 = cjson.decode(read(dir4 .. "/results.json")).rows
    assert.equal(rows4[1].metrics.eval_sst2_scratch.mean, rows4[2].metrics.eval_sst2_scratch.mean)
    -- --summarize --interim while a grid runs: the second cell unfinished (no done.json, its suite's
    -- results.json not yet written) counts with the tasks evaluated so far, marked partial, into
    -- results-interim.*; results.md is left alone and a plain --summarize lists the cell as missing
    local dir4i = root .. "/ev4-interim"
    os.execute(string.format("cp -r '%s' '%s'", dir4, dir4i))
    local second_i = dir4i .. "/cells/lr=0.002_seed=1"
    os.remove(second_i .. "/done.json")
    os.remove(second_i .. "/evaluate/results.json")
    local md_before = read(dir4i .. "/results.md")
    assert.is_true(ablate_cmd("--summarize " .. dir4i .. " --interim", root .. "/log9i"), read(root .. "/log9i.err"))
    assert.equal(md_before, read(dir4i .. "/results.md"))
    local interim = cjson.decode(read(dir4i .. "/results-interim.json"))
    assert.same({"lr=0.002_seed=1"}, interim.partial)
    assert.equal(2, #interim.rows)
    local task = cjson.decode(read(second_i .. "/evaluate/tasks/sst2/result.json"))
    assert.near(task.headline.mean, interim.rows[2].metrics.eval_sst2.mean, 1e-12)
    assert.near(task.from_scratch.headline.mean, interim.rows[2].metrics.eval_sst2_scratch.mean, 1e-12)
    assert.truthy(read(dir4i .. "/results-interim.md"):find("1 of 2 cells finished, 1 partial", 1, true))
    -- the comparison leaves out the control the two cells share (the same samples on both sides)
    assert.is_number(interim.comparisons[1].metrics.eval_sst2.difference)
    assert.is_nil(interim.comparisons[1].metrics.eval_sst2_scratch)
    assert.is_true(ablate_cmd("--summarize " .. dir4i, root .. "/log9j"), read(root .. "/log9j.err"))
    assert.same({"lr=0.002_seed=1"}, cjson.decode(read(dir4i .. "/results.json")).missing)
    assert.is_falsy(ablate_cmd("--interim " .. path4, root .. "/log9k"))
    assert.matches("--interim goes with --summarize DIR", read(root .. "/log9k.err"), 1, true)
    -- the grid file adds an evaluation task (an RTE-shaped pair task): the finished cell evaluates
    -- it, on its checkpoint and snapshot, and reads SST-2's runs instead of fine-tuning them again
    os.execute("mkdir -p '" .. root .. "/evaldata/glue/RTE'")
    for _, split in ipairs({"train", "dev"}) do
      local lines = {"index\tsentence1\tsentence2\tlabel"}
      for i = 1, 24 do
        local a, b = words[rnd(#words)], words[rnd(#words)]
        lines[#lines + 1] = string.format("%d\tthe %s sat\tthe %s sat\t%s", i, a, b,
          a == b and "entailment" or "not_entailment")
      end
      write(root .. "/evaldata/glue/RTE/" .. split .. ".tsv", table.concat(lines, "\n") .. "\n")
    end
    local sst2_runs = require("bert.fs").listdir(dir .. "/cells/objective=mlm_seed=1/evaluate/tasks/sst2")
    local sst2_before = read(dir .. "/cells/objective=mlm_seed=1/evaluate/tasks/sst2/result.json")
    local path5 = root .. "/ev5.lua"
    write(path5, (read(path):gsub('tasks = {"sst2"}', 'tasks = {"sst2", "rte"}')))
    assert.is_true(ablate_cmd(path5 .. " --output " .. dir, root .. "/log9e"), read(root .. "/log9e.err"))
    local log5 = read(root .. "/log9e")
    assert.truthy(log5:find("the grid file adds evaluation task rte: finished cells evaluate it", 1, true), log5)
    assert.truthy(log5:find("seed 1: evaluating the added tasks", 1, true), log5)
    assert.same(sst2_runs, require("bert.fs").listdir(dir .. "/cells/objective=mlm_seed=1/evaluate/tasks/sst2"))
    assert.equal(sst2_before, read(dir .. "/cells/objective=mlm_seed=1/evaluate/tasks/sst2/result.json"))
    local m5 = cjson.decode(read(dir .. "/results.json")).rows[1].metrics
    for _, k in ipairs({"eval_rte", "eval_rte_scratch", "eval_rte@0.5"}) do assert.is_number(m5[k].mean, k) end
    assert.near(m.eval_sst2.mean, m5.eval_sst2.mean, 1e-12)
    -- run again: nothing left to do; a task list that is not the saved one plus tasks is refused
    assert.is_true(ablate_cmd(path5 .. " --output " .. dir, root .. "/log9f"), read(root .. "/log9f.err"))
    assert.truthy(read(root .. "/log9f"):find("seed 1: finished, skipped", 1, true))
    write(path5, (read(path):gsub('tasks = {"sst2"}', 'tasks = {"rte"}')))
    assert.is_falsy(ablate_cmd(path5 .. " --output " .. dir, root .. "/log9g"))
    assert.matches("holds a grid with other settings", read(root .. "/log9g.err"), 1, true)
  end)

  it("draws a learning curve for a numeric axis, from the finished cells (some missing)", function()
    -- the pretrain-vs-scratch shape: a fine-tuning axis of labelled values and one of set sizes;
    -- the cells' results are written by hand, so the means and sds are known
    local path = root .. "/curve.lua"
    write(path, string.format([[
return {
  name = "curve",
  axes = {
    {name = "finetune.from_scratch", values = {{label = "pretrained", ["finetune.from_scratch"] = false},
                                               {label = "scratch", ["finetune.from_scratch"] = true}}},
    {name = "finetune.max_train", values = {100, 300, 1000}},
  },
  fixed = {model = %q, corpus = %q, tokenizer = "wordpiece", vocab_size = 120, batch_size = 4, seq_len = 32},
  seeds = {1, 2, 3},
  budget = {steps = 8},
  downstream = {{task = %q, kind = "classification", epochs = 1}},
}
]], root .. "/config.json", root .. "/corpus.txt", root .. "/task/"))
    local g = ablate.load(path)
    assert.equal(18, #g.cells)
    assert.equal(3, #g.pretrain_runs)   -- one pretraining run per seed, shared by its cells
    local dir = root .. "/curve-out"
    os.execute("mkdir -p '" .. dir .. "/cells'")
    write(dir .. "/grid.json", ablate.canonical(g))
    local function acc(cell) -- accuracy rises with the set size, pretrained above scratch, a spread over seeds
      local n = cell.finetune.max_train
      return (cell.finetune.from_scratch and 0.4 or 0.6) + 0.1 * math.log(n, 10) + 0.01 * cell.seed
    end
    local skipped
    for i, cell in ipairs(g.cells) do
      if cell.label == "scratch, max_train=1000" and cell.seed == 3 then
        skipped = cell.id   -- an unfinished cell: no done.json
      else
        os.execute("mkdir -p '" .. dir .. "/cells/" .. cell.id .. "'")
        write(dir .. "/cells/" .. cell.id .. "/done.json", cjson.encode({id = cell.id, label = cell.label, seed = cell.seed,
          pretrain_id = cell.pretrain_id, parameters = 1000, pretrain_tokens_per_s = 500 + i,
          metrics = {mlm_accuracy = 0.2, task_accuracy = acc(cell)}}))
      end
    end
    assert.is_true(ablate_cmd("--summarize " .. dir, root .. "/log6"), read(root .. "/log6.err"))
    local results = cjson.decode(read(dir .. "/results.json"))
    assert.same({skipped}, results.missing)
    assert.equal(6, #results.rows)
    -- a scratch row shows no pretraining metric: its model is not the grid's pretraining run
    for _, row in ipairs(results.rows) do
      if row.label:find("^scratch") then
        assert.is_nil(row.metrics.mlm_accuracy, row.label)
        assert.is_nil(row.tokens_per_s, row.label)
      else
        assert.equal(0.2, row.metrics.mlm_accuracy.mean, row.label)
      end
    end
    -- one curve: the fine-tuning metric against max_train (MLM accuracy does not depend on it)
    assert.equal(1, #results.curves)
    local curve = results.curves[1]
    assert.equal("finetune.max_train", curve.axis)
    assert.equal("task_accuracy", curve.metric)
    assert.is_true(curve.logx)
    -- the data file: a block per initialisation, x ascending, mean, sample sd and n over seeds
    local blocks = {}
    for block in (read(dir .. "/plots/curve-finetune.max_train-task_accuracy.dat") .. "\n\n"):gmatch("(.-)\n\n\n?") do
      if block:find("%S") then blocks[#blocks + 1] = block end
    end
    assert.equal(2, #blocks)
    local expect = {{"pretrained", 0.6, 3}, {"scratch", 0.4, 3}}
    for b, block in ipairs(blocks) do
      local lines = {}
      for l in block:gmatch("[^\n]+") do lines[#lines + 1] = l end
      assert.equal("# line: " .. expect[b][1], lines[1])
      assert.equal(4, #lines)
      for j, n in ipairs({100, 300, 1000}) do
        local x, mean, sd, count = lines[j + 1]:match("^(%S+) (%S+) (%S+) (%S+)$")
        local seeds = (b == 2 and n == 1000) and 2 or 3
        assert.equal(n, tonumber(x))
        assert.equal(seeds, tonumber(count))
        assert.near(expect[b][2] + 0.1 * math.log(n, 10) + 0.01 * (seeds == 3 and 2 or 1.5), tonumber(mean), 1e-7)
        assert.near(seeds == 3 and 0.01 or math.sqrt(0.5) * 0.01, tonumber(sd), 1e-7)
      end
    end
    if os.execute("command -v gnuplot >/dev/null 2>&1") then
      local png = read(dir .. "/plots/curve-finetune.max_train-task_accuracy.png")
      assert.equal("\137PNG", png and png:sub(1, 4))
    end
    -- a categorical axis draws no curve
    assert.same({}, ablate.learning_curves({axes = {"objective"}, cells = {{label = "objective=mlm", finetune = {},
      pretrain_id = "p"}}, pretrain_runs = {{id = "p", settings = {objective = "mlm"}}}},
      {{label = "objective=mlm", metrics = {x = {mean = 1, n = 1}}}}, {"x"}))
  end)

  teardown(function() if not os.getenv('KEEP') then os.execute("rm -rf '" .. root .. "'") end end)
end)
