-- The training loop: exact resume after kill -9, and damaged checkpoints.
local bert = require("bert")
local losses = require("spec.support.losses")
local tmpdir = require("spec.support.tmpdir").path

local function run(dir, steps, extra)
  return os.execute(string.format("lua5.4 spec/support/resume_run.lua %s %d %s", dir, steps, extra or ""))
end

describe("training loop", function()
  it("resumes after kill -9 with the same losses, step for step #slow", function()
    local steps = 12
    local straight, killed = tmpdir(), tmpdir()
    assert.is_true(run(straight, steps))
    -- start a run, kill it hard once it has passed step 5, then resume it
    os.execute(string.format([[
      lua5.4 spec/support/resume_run.lua %s %d & pid=$!
      for i in $(seq 1 600); do
        if grep -q '"step":5[,}]' %s/metrics.jsonl 2>/dev/null; then break; fi
        sleep 0.05
      done
      kill -9 $pid; wait $pid 2>/dev/null]], killed, steps, killed))
    local partial = losses(killed)
    assert.truthy(partial[5], "the run was not killed after step 5")
    assert.is_nil(partial[steps], "the run finished before it was killed")
    assert.is_true(run(killed, steps, "resume"))
    local a, b = losses(straight), losses(killed)
    for s = 1, steps do
      assert.truthy(a[s] and b[s], "missing step " .. s)
      assert.equal(a[s], b[s], "loss differs at step " .. s)
    end
  end)

  it("prints the rate and ETA of this sitting, not the run's lifetime average, after a resume", function()
    local model = bert.model("BertForPreTraining", {vocab_size = 60, hidden_size = 32, num_hidden_layers = 1,
      num_attention_heads = 2, intermediate_size = 64, max_position_embeddings = 16})
    local function batch()
      local ids = bert.randint(1, 60, {2, 8}, {seed = 5})
      return {input_ids = ids, attention_mask = bert.ones({2, 8}, "int32"), labels = ids,
              next_sentence_label = bert.tensor({0, 1}, "int32")}
    end
    local trainer = bert.train.Trainer{model = model, optimizer = bert.optim.AdamW(model), next_batch = batch,
      steps = 4, log_every = 2, output = tmpdir()}
    trainer.tty = false
    -- as a resume from a slow machine leaves it: 2 steps that took 1000 s
    trainer.step, trainer.train_seconds, trainer.tokens = 2, 1000, 32
    local lines, stderr = {}, io.stderr
    io.stderr = {write = function(_, ...) lines[#lines + 1] = table.concat({...}) end, flush = function() end}
    local ok, err = pcall(trainer.run, trainer)
    io.stderr = stderr
    assert(ok, err)
    local text = table.concat(lines)
    local tps, sps = text:match("step 4/4.-(%d+) tok/s, ([%d.]+) s/step")
    assert.truthy(sps, text)
    assert.is_true(tonumber(sps) < 100, text)   -- the lifetime average would be (1000 + x) / 4
    assert.is_true(tonumber(tps) > 1, text)     -- 32 tokens in ~0 s of this sitting, not 64 in 1000 s
  end)

  it("refuses a damaged checkpoint instead of starting over", function()
    local dir = tmpdir()
    assert.is_true(run(dir, 4))
    local f = io.open(dir .. "/checkpoint/trainer.json", "wb")
    f:write("{not json")
    f:close()
    local ok = run(dir, 6, "resume 2>/dev/null")
    assert.is_not_true(ok)
    -- a truncated model file
    assert.is_true(run(dir .. "b", 4))
    local path = dir .. "b/checkpoint/model.safetensors"
    local data = io.open(path, "rb"):read("a")
    io.open(path, "wb"):write(data:sub(1, #data // 2))
    local model = bert.model("BertForPreTraining", {vocab_size = 60, hidden_size = 32, num_hidden_layers = 2,
      num_attention_heads = 2, intermediate_size = 64, max_position_embeddings = 16})
    local trainer = bert.train.Trainer{model = model, optimizer = bert.optim.AdamW(model), next_batch = function() end,
      output = dir .. "b"}
    assert.error_matches(function() trainer:resume() end, "resume: .*model.safetensors")
  end)
end)
