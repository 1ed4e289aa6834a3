-- experiments/ablate.lua --archive --carry and --restore: a grid whose cell
-- was killed mid-pretraining goes on on "another machine" (its directory
-- deleted, then restored from the archive) from the carried checkpoint,
-- its shards rebuilt from the corpus and checked against their digests; a
-- cell killed while evaluating goes on from its carried weights and
-- snapshot.  #slow: the three cases share one grid directory, and the
-- first kills a run mid-pretraining.
local cjson = require("cjson")
local bert = require("bert")
local fs = require("bert.fs")

local root = require("spec.support.tmpdir").dir()
local read = fs.read_file
local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local words = {"the", "cat", "sat", "on", "a", "mat", "dog", "ran", "to", "big", "red", "house",
               "river", "by", "old", "man", "saw", "bird", "fly", "over", "green", "hill"}
local state = 7
local function rnd(n) state = (state * 1103515245 + 12345) % 2147483648 return state % n + 1 end
local function sentence(lo, spread)
  local s = {}
  for _ = 1, lo + rnd(spread) do s[#s + 1] = words[rnd(#words)] end
  return table.concat(s, " ")
end
do
  local lines = {}
  for _ = 1, 40 do
    for _ = 1, 5 + rnd(6) do lines[#lines + 1] = sentence(4, 8) .. " ." end
    lines[#lines + 1] = ""
  end
  write(root .. "/corpus.txt", table.concat(lines, "\n") .. "\n")
  os.execute("mkdir -p '" .. root .. "/evaldata/glue/SST-2'")
  for _, split in ipairs({"train", "dev"}) do
    local rows = {"sentence\tlabel"}
    for _ = 1, 24 do
      local s = sentence(3, 5)
      rows[#rows + 1] = s .. "\t" .. (s:find("bird") and "1" or "0")
    end
    write(root .. "/evaldata/glue/SST-2/" .. split .. ".tsv", table.concat(rows, "\n") .. "\n")
  end
end
write(root .. "/config.json", cjson.encode({vocab_size = 100, hidden_size = 32, num_hidden_layers = 1,
  num_attention_heads = 2, intermediate_size = 64, max_position_embeddings = 64}))

local STEPS, SNAPSHOT = 200, 50
local grid = root .. "/carry.lua"
write(grid, string.format([[
return {
  name = "carry",
  axes = {{name = "objective", values = {"mlm"}}},
  fixed = {model = %q, corpus = %q, tokenizer = "wordpiece", vocab_size = 120, batch_size = 4, seq_len = 32,
           max_eval = 16, threads = 1, log_every = 1, save_every = 5, snapshots = "0.25"},
  seeds = {1},
  budget = {steps = %d},
  evaluation = {tasks = {"sst2"}, data_dir = %q, steps = 2, batch_size = 8, seeds = {1}, lr_grid = {1e-3},
                from_scratch_control = true},
}
]], root .. "/config.json", root .. "/corpus.txt", STEPS, root .. "/evaldata"))

local CELL, RUN = "cells/objective=mlm_seed=1", "pretrain/objective=mlm_seed=1"

local function ablate_cmd(args, log)
  return os.execute(string.format("lua5.4 experiments/ablate.lua %s >%s 2>%s.err", args, log, log))
end

-- step -> loss of a run's metrics.jsonl (training records only)
local function losses(run_dir)
  local out = {}
  for line in (read(run_dir .. "/metrics.jsonl") or ""):gmatch("[^\n]+") do
    local r = cjson.decode(line)
    if r.loss and r.step and not r.eval_loss then
      assert.is_nil(out[r.step], "step " .. r.step .. " logged twice")
      out[r.step] = r.loss
    end
  end
  return out
end

describe("ablate --archive --carry, --restore", function()
  local straight, killed, saved = root .. "/straight", root .. "/killed", root .. "/saved"

  it("a cell killed mid-pretraining resumes elsewhere from the carried checkpoint #slow", function()
    assert.is_true(ablate_cmd(grid .. " --output " .. straight, root .. "/log-straight"), read(root .. "/log-straight.err"))
    -- killed (kill -9) after the snapshot and before the end
    os.execute(string.format([[
      lua5.4 experiments/ablate.lua %s --no-reuse --output %s >/dev/null 2>&1 & pid=$!
      for i in $(seq 1 3000); do
        if grep -q '"step":%d[,}]' %s/%s/metrics.jsonl 2>/dev/null; then break; fi
        sleep 0.02
      done
      kill -9 $pid; wait $pid 2>/dev/null]], grid, killed, SNAPSHOT + 10, killed, RUN))
    local partial = losses(killed .. "/" .. RUN)
    assert.truthy(partial[SNAPSHOT + 10], "the run was not killed after the snapshot")
    assert.is_nil(partial[STEPS], "the run finished before it was killed")

    assert.is_true(ablate_cmd("--archive " .. killed .. " --into " .. saved .. " --carry", root .. "/log-archive"),
      read(root .. "/log-archive.err"))
    assert.matches("carried 1 runs into " .. saved .. "/carry", read(root .. "/log-archive"), 1, true)
    local manifest = cjson.decode(read(saved .. "/carry/carry.json"))
    local carried = manifest.runs["objective=mlm_seed=1"]
    carried.step = math.tointeger(carried.step)
    assert.is_false(carried.finished)
    assert.is_true(carried.step >= SNAPSHOT + 5 and carried.step < STEPS and carried.step % 5 == 0, tostring(carried.step))
    local crun = saved .. "/carry/" .. RUN
    -- the moments in bfloat16, the weights in float32; no shard, the digests instead
    local header = bert.safetensors_header(crun .. "/checkpoint/optimizer.safetensors")
    local dtypes = {}
    for _, e in pairs(header) do dtypes[e.dtype] = true end
    assert.is_true(dtypes.BF16)
    assert.is_nil(dtypes.F32)
    for _, e in pairs(bert.safetensors_header(crun .. "/checkpoint/model.safetensors")) do assert.equal("F32", e.dtype) end
    assert.truthy(read(crun .. "/data/train/sha256.json"))
    local listing = io.popen("cd '" .. saved .. "/carry' && find . -type f"):read("a")
    assert.is_nil(listing:find("shard%-"), listing)
    assert.is_nil(listing:find("training-text", 1, true), listing)
    assert.truthy(listing:find("snapshot-" .. SNAPSHOT .. "/model.safetensors", 1, true), listing)

    -- "another machine": the grid directory gone (the same path: a suite's protocol names its checkpoint's)
    os.execute("rm -rf '" .. killed .. "'")
    local elsewhere = killed
    assert.is_true(ablate_cmd(grid .. " --no-reuse --output " .. elsewhere .. " --restore " .. saved, root .. "/log-resume"),
      read(root .. "/log-resume.err"))
    local log, err = read(root .. "/log-resume"), read(root .. "/log-resume.err")
    assert.matches("carried back, to resume: objective=mlm_seed=1 (pretraining at step " .. carried.step .. ")", log, 1, true)
    assert.matches("resuming the pretraining run objective=mlm_seed=1", log, 1, true)
    assert.matches("rebuilt shards match the carried run's digests", err, 1, true)
    -- every step once; up to the checkpoint the carried losses, the next one computed from its exact
    -- weights; after it the bfloat16 moments move the run only a little
    local a, b = losses(straight .. "/" .. RUN), losses(elsewhere .. "/" .. RUN)
    for s = 1, STEPS do assert.truthy(a[s] and b[s], "missing step " .. s) end
    for s = 1, carried.step + 1 do assert.equal(a[s], b[s], "loss differs at step " .. s) end
    assert.near(a[carried.step + 2], b[carried.step + 2], 1e-2 * a[carried.step + 2])
    assert.near(a[STEPS], b[STEPS], 0.1 * a[STEPS])
    local done = cjson.decode(read(elsewhere .. "/" .. CELL .. "/done.json"))
    assert.is_number(done.metrics.eval_sst2)
    assert.is_number(done.metrics["eval_sst2@0.25"])
  end)

  it("a cell killed while evaluating goes on from its carried weights and snapshot, its finished tasks kept #slow", function()
    -- the resumed cell as if killed after its final suite: no done.json, the snapshot's suite undone
    local evaluating = killed
    local before = cjson.decode(read(evaluating .. "/" .. CELL .. "/done.json"))
    local final_task = read(evaluating .. "/" .. CELL .. "/evaluate/tasks/sst2/result.json")
    os.remove(evaluating .. "/" .. CELL .. "/done.json")
    os.execute("rm -rf '" .. evaluating .. "/" .. CELL .. "/evaluate-at-0.25'")
    local saved2 = root .. "/saved2"
    assert.is_true(ablate_cmd("--archive " .. evaluating .. " --into " .. saved2 .. " --carry", root .. "/log-archive2"),
      read(root .. "/log-archive2.err"))
    local crun = saved2 .. "/carry/" .. RUN
    assert.is_true(cjson.decode(read(saved2 .. "/carry/carry.json")).runs["objective=mlm_seed=1"].finished)
    assert.truthy(read(crun .. "/checkpoint/model.safetensors"))
    assert.is_nil(read(crun .. "/checkpoint/optimizer.safetensors"))   -- nothing to resume: no optimizer
    assert.truthy(read(crun .. "/snapshot-" .. SNAPSHOT .. "/model.safetensors"))
    os.execute("rm -rf '" .. evaluating .. "'")
    local fresh = evaluating
    assert.is_true(ablate_cmd(grid .. " --no-reuse --output " .. fresh .. " --restore " .. saved2, root .. "/log-eval"),
      read(root .. "/log-eval.err"))
    local log = read(root .. "/log-eval")
    assert.matches("(finished at step " .. STEPS .. ")", log, 1, true)
    assert.is_nil(log:find("resuming the pretraining run", 1, true), log)
    -- the final suite's task came back from the archive unchanged; the snapshot's ran here
    assert.equal(final_task, read(fresh .. "/" .. CELL .. "/evaluate/tasks/sst2/result.json"))
    local done = cjson.decode(read(fresh .. "/" .. CELL .. "/done.json"))
    -- (the same scores: the final one read back from its result.json, kept to 10 digits)
    assert.near(before.metrics.eval_sst2, done.metrics.eval_sst2, 1e-9)
    assert.near(before.metrics["eval_sst2@0.25"], done.metrics["eval_sst2@0.25"], 1e-9)
    -- a finished cell is not carried
    assert.is_true(ablate_cmd("--archive " .. fresh .. " --into " .. root .. "/saved3 --carry", root .. "/log-archive3"))
    assert.matches("carried 0 runs", read(root .. "/log-archive3"), 1, true)
  end)

  it("refuses shards rebuilt from another corpus, and a rerun refuses them again #slow", function()
    local saved4 = root .. "/saved4"
    assert(os.execute(string.format("cp -r '%s' '%s'", saved, saved4)))
    local digests_path = saved4 .. "/carry/" .. RUN .. "/data/train/sha256.json"
    local digests = cjson.decode(read(digests_path))
    for k in pairs(digests) do digests[k] = string.rep("0", 64) end
    write(digests_path, cjson.encode(digests))
    local other = root .. "/other"
    for i = 1, 2 do
      assert.falsy(ablate_cmd(grid .. " --no-reuse --output " .. other .. " --restore " .. saved4, root .. "/log-bad" .. i))
      local err = read(root .. "/log-bad" .. i .. ".err")
      assert.matches("differ from those of the carried run", err, 1, true)
      assert.matches(other .. "/" .. RUN .. "/data/train/shard-00000.bin", err, 1, true)
    end
    -- a rebuild killed midway (the carried digests moved aside, a partial shard set) starts again from them
    local data = other .. "/" .. RUN .. "/data/train"
    assert(os.rename(data, data .. ".carried"))
    assert(os.execute("mkdir -p '" .. data .. "'"))
    write(data .. "/shard-00000.bin", "partial")
    assert.falsy(ablate_cmd(grid .. " --no-reuse --output " .. other, root .. "/log-bad3"))
    assert.matches("differ from those of the carried run", read(root .. "/log-bad3.err"), 1, true)
    assert.truthy(read(data .. "/sha256.json"))
  end)
end)
