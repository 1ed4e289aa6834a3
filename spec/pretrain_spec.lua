-- experiments/pretrain.lua end to end on a small synthetic corpus: the three
-- objectives, the summary, and exact resume after kill -9.
local cjson = require("cjson")

local function tmpdir()
  local p = os.tmpname()
  os.remove(p)
  return p
end

-- a corpus in BERT's plain format: 60 documents of 6-12 sentences
local corpus = tmpdir() .. ".txt"
do
  local words = {"the", "cat", "sat", "on", "a", "mat", "dog", "ran", "to", "big", "red", "house",
                 "river", "by", "old", "man", "saw", "bird", "fly", "over", "green", "hill"}
  local state = 7
  local function rnd(n) state = (state * 1103515245 + 12345) % 2147483648 return state % n + 1 end
  local f = assert(io.open(corpus, "w"))
  for _ = 1, 60 do
    for _ = 1, 5 + rnd(7) do
      local s = {}
      for _ = 1, 4 + rnd(8) do s[#s + 1] = words[rnd(#words)] end
      f:write(table.concat(s, " "), " .\n")
    end
    f:write("\n")
  end
  f:close()
end

local config = tmpdir() .. ".json"
do
  local f = assert(io.open(config, "w"))
  f:write(cjson.encode({vocab_size = 100, hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 2,
                        intermediate_size = 64, max_position_embeddings = 64}))
  f:close()
end

local function pretrain(out, extra)
  return os.execute(string.format(
    "lua5.4 experiments/pretrain.lua --model %s --corpus %s --tokenizer wordpiece --vocab-size 120 " ..
    "--batch-size 4 --seq-len 32 --log-every 1 --no-plot --output %s %s >/dev/null 2>%s.err",
    config, corpus, out, extra or "", out))
end

local function losses(dir)
  local out = {}
  for line in io.lines(dir .. "/metrics.jsonl") do
    local rec = cjson.decode(line)
    if rec.loss then out[rec.step] = rec.loss end
  end
  return out
end

describe("experiments/pretrain.lua", function()
  for _, objective in ipairs({"nsp", "sop", "none"}) do
    it("runs with --objective " .. objective .. " and writes the summary", function()
      local out = tmpdir()
      assert.is_true(pretrain(out, "--steps 6 --eval-every 3 --objective " .. objective))
      local summary = cjson.decode(io.open(out .. "/summary.json"):read("a"))
      for _, k in ipairs({"mlm_accuracy", "unigram_baseline_accuracy", "perplexity", "tokens_per_s"}) do
        assert.equal("number", type(summary[k]), k)
      end
      if objective ~= "none" then assert.equal("number", type(summary[objective .. "_accuracy"])) end
      assert.truthy(io.open(out .. "/checkpoint/model.safetensors"))
      assert.truthy(io.open(out .. "/tokenizer/tokenizer.json"))
    end)
  end

  it("resumes after kill -9 with the same losses, step for step", function()
    local steps = 300
    local straight, killed = tmpdir(), tmpdir()
    assert.is_true(pretrain(straight, "--steps " .. steps .. " --save-every 3"))
    os.execute(string.format([[
      lua5.4 experiments/pretrain.lua --model %s --corpus %s --tokenizer wordpiece --vocab-size 120 \
        --batch-size 4 --seq-len 32 --log-every 1 --no-plot --output %s --steps %d --save-every 3 \
        >/dev/null 2>&1 & pid=$!
      for i in $(seq 1 1200); do
        if grep -q '"step":8[,}]' %s/metrics.jsonl 2>/dev/null; then break; fi
        sleep 0.02
      done
      kill -9 $pid; wait $pid 2>/dev/null]], config, corpus, killed, steps, killed))
    local partial = losses(killed)
    assert.truthy(partial[8], "the run was not killed after step 8")
    assert.is_nil(partial[steps], "the run finished before it was killed")
    assert.is_true(os.execute(string.format("lua5.4 experiments/pretrain.lua --resume %s >/dev/null 2>&1", killed)))
    local a, b = losses(straight), losses(killed)
    for s = 1, steps do
      assert.truthy(a[s] and b[s], "missing step " .. s)
      assert.equal(a[s], b[s], "loss differs at step " .. s)
    end
  end)

  it("stops with a clear error on a corrupt checkpoint", function()
    local out = tmpdir()
    assert.is_true(pretrain(out, "--steps 3"))
    local f = io.open(out .. "/checkpoint/optimizer.safetensors", "wb")
    f:write("garbage")
    f:close()
    assert.is_not_true(os.execute(string.format("lua5.4 experiments/pretrain.lua --resume %s >/dev/null 2>%s.err2", out, out)))
    local err = io.open(out .. ".err2"):read("a")
    assert.truthy(err:find("optimizer.safetensors"), err)
  end)
end)
