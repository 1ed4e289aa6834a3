-- Run directories (issue 30 items 2 and 3): one writer per directory (a
-- flock on DIR/.lock, refused with the holder's pid and host, free again
-- when the holder dies, even by kill -9), and no silent overwrite: a fresh
-- run into a directory with a finished or resumable run is refused unless
-- --overwrite.
local pretrain = require("bert.pretrain")
local fs = require("bert.fs")
local tmpdir = require("spec.support.tmpdir").dir

local function settings(corpus, out, more)
  local s = {model = "tiny", corpus = corpus, vocab_size = 120, seq_len = 32, batch_size = 4, steps = 2, save_every = 1,
             output = out, no_plot = true, threads = 1, quiet = true}
  for k, v in pairs(more or {}) do s[k] = v end
  return pretrain.settings(s)
end

local read = fs.read_file   -- nil when missing

local function my_pid() return read("/proc/self/stat"):match("^(%d+)") end

describe("a run directory", function()
  local d, corpus, out
  setup(function()
    d = tmpdir()
    corpus = require("spec.support.tiny_corpus").write(d .. "/corpus.txt", 40, 3)
    out = d .. "/run"
    local ok, err = pcall(pretrain.run, settings(corpus, out))
    assert.is_true(ok, err)
  end)

  it("with a finished run refuses a fresh run, naming it and the ways on, and keeps it", function()
    local before = read(out .. "/summary.json")
    local ok, err = pcall(pretrain.run, settings(corpus, out, {seed = 7}))
    assert.is_false(ok)
    assert.equal(string.format("pretrain: %s holds a finished run (2 steps): --resume %s continues it, " ..
      "--overwrite replaces it, or give another --output", out, out), err)
    assert.equal(before, read(out .. "/summary.json"))
    assert.truthy(read(out .. "/checkpoint/trainer.json"))
    assert.equal(42, require("cjson").decode(read(out .. "/args.json")).seed)
  end)

  it("with a resumable run refuses a fresh run", function()
    local copy = d .. "/resumable"
    assert(os.execute(string.format("cp -r '%s' '%s'", out, copy)))
    os.remove(copy .. "/summary.json")
    local ok, err = pcall(pretrain.run, settings(corpus, copy))
    assert.is_false(ok)
    assert.matches("holds a resumable run %(checkpoint at step 2%)", err)
  end)

  it("is replaced with --overwrite", function()
    local copy = d .. "/overwritten"
    assert(os.execute(string.format("cp -r '%s' '%s'", out, copy)))
    local ok, err = pcall(pretrain.run, settings(corpus, copy, {overwrite = true, seed = 7, steps = 3}))
    assert.is_true(ok, err)
    local saved = require("cjson").decode(read(copy .. "/args.json"))
    assert.equal(7, saved.seed)
    assert.is_nil(saved.overwrite)   -- what one invocation may replace is not a setting of the run
    assert.equal(3, require("cjson").decode(read(copy .. "/summary.json")).steps)
  end)

  it("has one writer: a second run is refused with the holder's pid and host", function()
    local lock = assert(fs.lock_run_dir(out))
    local ok, err = pcall(pretrain.run, pretrain.settings({resume = out, quiet = true}))
    lock:release()
    assert.is_false(ok)
    assert.matches("^pretrain: " .. out:gsub("%p", "%%%0") .. " is in use by another run %(pid " .. my_pid() ..
      " on host [^)]+%): wait for it to end, or give another %-%-output$", err)
    assert.is_true((pcall(pretrain.run, pretrain.settings({resume = out, quiet = true}))))   -- released: free
  end)

  it("is free again when its holder is killed with -9 (and not held by the holder's children)", function()
    local dir = tmpdir()
    local p = io.popen(string.format("lua5.4 -e \"package.cpath = './build/?.so;' .. package.cpath; " ..
      "local lock = require('bert.core').lock_file('%s/.lock'); os.execute('sleep 30')\" >/dev/null 2>&1 & echo $!", dir))
    local pid = p:read("l") p:close()
    for _ = 1, 100 do
      if (read(dir .. "/.lock") or ""):find("pid " .. pid, 1, true) then break end
      os.execute("sleep 0.1")
    end
    local held, why = fs.lock_run_dir(dir)
    assert.is_nil(held)
    assert.matches("pid " .. pid, why)
    os.execute("kill -9 " .. pid)
    os.execute("sleep 0.3")
    local lock = assert(fs.lock_run_dir(dir))   -- the shell's sleep still runs: it did not inherit the lock
    lock:release()
  end)

  for _, case in ipairs({{"1000000", '"step": 1000000 is beyond the 2 steps this run plans'},
                         {"-3", '"step": -3 is not a step count (a whole number >= 0)'},
                         {"1.5", '"step": 1.5 is not a step count (a whole number >= 0)'},
                         {'"2"', '"step": "2" is not a step count (a whole number >= 0)'}}) do
    it("refuses to resume a tampered trainer.json with step " .. case[1] .. ", naming the file, key and value", function()
      local copy = tmpdir() .. "/tampered"
      assert(os.execute(string.format("cp -r '%s' '%s'", out, copy)))
      os.remove(copy .. "/summary.json")
      local path = copy .. "/checkpoint/trainer.json"
      local text = read(path):gsub('"step":%d+', '"step":' .. case[1])
      assert(fs.write_atomic(path, text))
      local ok, err = pcall(pretrain.run, pretrain.settings({resume = copy, quiet = true}))
      assert.is_false(ok)
      assert.equal("pretrain: resume: " .. copy .. "/checkpoint/trainer.json: " .. case[2], err)
    end)
  end

  it("summary.json records the epochs that ran and flags NSP at chance, as the run's last lines say", function()
    local summary = require("cjson").decode(read(out .. "/summary.json"))
    assert.equal(math.floor(2 * 4 / 133 * 100 + 0.5) / 100, summary.epochs)   -- 2 steps of 4 of 133 sequences
    assert.is_true(summary.nsp_at_chance)   -- 9 held-out pairs: anything within 50% +- 33%
    local dir = tmpdir() .. "/printed"
    local p = io.popen(string.format("OMP_NUM_THREADS=1 lua5.4 experiments/pretrain.lua --model tiny --corpus '%s' " ..
      "--vocab-size 120 --seq-len 32 --batch-size 4 --steps 2 --threads 1 --no-plot --output '%s' 2>/dev/null", corpus, dir))
    local text = p:read("a") p:close()
    assert.matches("\nWARNING: NSP accuracy [%d.]+%% is at chance %(50%% %+%- 33%.3%% over 9 held%-out pairs%): the " ..
      "model has not learned next%-sentence prediction yet %(train longer%)\n", text)
  end)

  it("of a finished fine-tuning run refuses a fresh one before its data are read", function()
    local ft = tmpdir()
    assert(fs.write_atomic(ft .. "/summary.json", '{"steps": 12, "test": {}}'))
    local experiment = require("bert.finetune.experiment")
    local ok, err = pcall(experiment.run, "classification", {task = d .. "/no-such-task.tsv", output = ft, quiet = true})
    assert.is_false(ok)
    assert.equal(ft .. " holds a finished run (12 steps): --resume " .. ft .. " continues it, --overwrite replaces " ..
      "it, or give another --output", err)
  end)
end)
