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
