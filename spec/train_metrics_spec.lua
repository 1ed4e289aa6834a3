-- A run killed before its first checkpoint, mid-write of metrics.jsonl:
-- the resumed run starts again from step 0, and so does its log (issue 30
-- item 5: the old lines and the cut one stayed, steps were logged twice).
local bert = require("bert")
local tmpdir = require("spec.support.tmpdir").dir

describe("resuming a run that never checkpointed", function()
  it("drops the killed run's metrics, the cut last line included", function()
    local dir = tmpdir()
    local f = assert(io.open(dir .. "/metrics.jsonl", "wb"))
    f:write('{"step":1,"loss":9.1}\n{"step":2,"loss":8.7}\n{"step":3,"lo')
    f:close()
    local model = bert.model("BertForPreTraining", {vocab_size = 60, hidden_size = 32, num_hidden_layers = 2,
      num_attention_heads = 2, intermediate_size = 64, max_position_embeddings = 16})
    local trainer = bert.train.Trainer{model = model, optimizer = bert.optim.AdamW(model), next_batch = function() end,
      output = dir}
    assert.is_false(trainer:resume())
    assert.equals("", assert(io.open(dir .. "/metrics.jsonl")):read("a"))
  end)

  it("still refuses a corrupt line that is not the last", function()
    local dir = tmpdir()
    local f = assert(io.open(dir .. "/metrics.jsonl", "wb"))
    f:write('{"step":1,"loss":9.1}\n{not json\n{"step":2,"loss":8.7}\n')
    f:close()
    local model = bert.model("BertForPreTraining", {vocab_size = 60, hidden_size = 32, num_hidden_layers = 2,
      num_attention_heads = 2, intermediate_size = 64, max_position_embeddings = 16})
    local trainer = bert.train.Trainer{model = model, optimizer = bert.optim.AdamW(model), next_batch = function() end,
      output = dir}
    assert.error_matches(function() trainer:resume() end, "metrics.jsonl:2: corrupt metrics line")
  end)
end)
