-- A full disk (issue 30 item 4): while writing the tokenizer's training
-- text, the shards, the metrics or a checkpoint, a run ends with one line
-- naming the file and "No space left on device", leaves its last good state
-- as it was, and --resume after space is freed finishes it.  The disk is a
-- small tmpfs, so these need root (pending otherwise).
local pretrain = require("bert.pretrain")
local fs = require("bert.fs")
local cjson = require("cjson")
local tmpdir = require("spec.support.tmpdir")

local sh = require("spec.support.shell").run

-- Mounts a tmpfs of `size` at a fresh directory; nil when it cannot (not root).
local function mount(size)
  if sh("id -u"):match("%d+") ~= "0" then return nil end
  local dir = tmpdir.dir()
  local _, rc = sh(string.format("mount -t tmpfs -o size=%s tmpfs '%s'", size, dir))
  if rc ~= 0 then return nil end
  return dir
end
local function resize(dir, size) assert(sh(string.format("mount -o remount,size=%s '%s'", size, dir)) == "") end
local function used_kib(dir) return tonumber((sh(string.format("df -k --output=used '%s' | tail -1", dir)))) end

local read = fs.read_file   -- nil when missing

describe("a full disk", function()
  local corpus, mounts = nil, {}
  local function disk(size)
    local dir = mount(size)
    if dir then mounts[#mounts + 1] = dir end
    return dir
  end
  setup(function() corpus = require("spec.support.tiny_corpus").write(tmpdir.path(), 40, 3) end)
  teardown(function() for _, dir in ipairs(mounts) do sh("umount '" .. dir .. "'") end end)

  local function settings(out, more)
    local s = {model = "tiny", corpus = corpus, vocab_size = 120, seq_len = 32, batch_size = 4, steps = 2,
               save_every = 1, output = out, no_plot = true, threads = 1, quiet = true}
    for k, v in pairs(more or {}) do s[k] = v end
    return pretrain.settings(s)
  end
  local function resumed(out)
    local ok, summary = pcall(pretrain.run, pretrain.settings({resume = out, quiet = true}))
    assert.is_true(ok, summary)
    return summary
  end

  it("while writing the tokenizer's training text: one line, no tokenizer from a cut text, then resumes", function()
    local d = disk("8k")
    if not d then return pending("needs root to mount a small tmpfs") end
    local out = d .. "/run"
    local text, rc = sh(string.format("OMP_NUM_THREADS=1 lua5.4 experiments/pretrain.lua --model tiny --corpus '%s' " ..
      "--vocab-size 120 --seq-len 32 --batch-size 4 --steps 2 --threads 1 --no-plot --output '%s'", corpus, out))
    assert.equal(1, rc)
    assert.matches("\npretrain: " .. out:gsub("%p", "%%%0") .. "/tokenizer/training%-text%.txt: No space left on device\n$",
      "\n" .. text)
    assert.not_matches("traceback", text)
    assert.is_nil(read(out .. "/tokenizer/tokenizer.json"))
    assert.is_nil(read(out .. "/tokenizer/training-text.txt"))
    resize(d, "64m")
    assert.equal(2, resumed(out).steps)
  end)

  it("while writing the shards: one line, no partial shard set, then resumes", function()
    local d = disk("32k")
    if not d then return pending("needs root to mount a small tmpfs") end
    local out = d .. "/run"
    local ok, err = pcall(pretrain.run, settings(out))
    assert.is_false(ok)
    assert.matches("^pretrain: " .. out:gsub("%p", "%%%0") .. "/data/train/[^ ]*: .*No space left on device$", err)
    assert.is_nil(read(out .. "/data/train/meta.json"))
    assert.is_false(fs.isdir(out .. "/data/train"))
    resize(d, "64m")
    assert.equal(2, resumed(out).steps)
  end)

  -- A run directory whose data are made, on a disk with `free` KiB left for
  -- what a run with `more` writes next (a fresh run with the same data
  -- settings keeps them).
  local function prepared(free, more)
    local d = disk("64m")
    if not d then return nil end
    local out = d .. "/run"
    local ok, err = pcall(pretrain.run, settings(out, {steps = 1, save_every = 1000}))
    assert.is_true(ok, err)
    fs.remove_tree(out .. "/checkpoint")
    for _, name in ipairs({"summary.json", "metrics.jsonl", "metrics.csv"}) do os.remove(out .. "/" .. name) end
    resize(d, (used_kib(d) + free) .. "k")
    return d, out, settings(out, more)
  end

  it("while writing metrics: one line naming metrics.jsonl, then resumes", function()
    local d, out, s = prepared(4, {steps = 40, log_every = 1, save_every = 1000, overwrite = true})
    if not d then return pending("needs root to mount a small tmpfs") end
    local ok, err = pcall(pretrain.run, s)
    assert.is_false(ok)
    assert.equal(out .. "/metrics.jsonl: No space left on device", err)   -- experiments/pretrain.lua adds "pretrain: "
    assert.truthy(read(out .. "/data/train/meta.json"))
    resize(d, "64m")
    assert.equal(40, resumed(out).steps)
    local steps = {}
    for line in read(out .. "/metrics.jsonl"):gmatch("[^\n]+") do   -- whole records, each step once
      local rec = cjson.decode(line)
      if not rec.eval then assert.is_nil(steps[rec.step]) steps[rec.step] = true end
    end
    assert.is_true(steps[40])
  end)

  it("while writing a checkpoint: one line, the last checkpoint kept, then resumes from it", function()
    local d, out = prepared(8 * 1024, {})
    if not d then return pending("needs root to mount a small tmpfs") end
    -- room for one checkpoint (6 MB), not for the next beside it
    local text, rc = sh(string.format("OMP_NUM_THREADS=1 lua5.4 experiments/pretrain.lua --model tiny --corpus '%s' " ..
      "--vocab-size 120 --seq-len 32 --batch-size 4 --steps 4 --save-every 2 --threads 1 --no-plot --overwrite " ..
      "--output '%s'", corpus, out))
    assert.equal(1, rc)
    assert.matches("\npretrain: " .. out:gsub("%p", "%%%0") .. "/checkpoint%.tmp/[^ ]*: [^\n]*No space left on device\n$",
      "\n" .. text)
    assert.not_matches("traceback", text)
    assert.equal(2, cjson.decode(read(out .. "/checkpoint/trainer.json")).step)
    assert.is_false(fs.isdir(out .. "/checkpoint.tmp"))
    resize(d, "64m")
    assert.equal(4, resumed(out).steps)
  end)
end)
