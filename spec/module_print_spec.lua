-- print(model): the module tree with shapes and parameter counts.
local bert = require("bert")

describe("tostring(module)", function()
  it("shows the tree, each leaf's parameter shapes and counts, and folds equal layers", function()
    local m = bert.model("BertForSequenceClassification", {vocab_size = 100, hidden_size = 32,
      num_hidden_layers = 3, num_attention_heads = 2, intermediate_size = 64, max_position_embeddings = 40},
      {num_labels = 3})
    local text = tostring(m)
    local lines = {}
    for l in text:gmatch("[^\n]+") do lines[#lines + 1] = l end
    -- the root line carries the model's parameter count
    local total = lines[1]:match("^BertForSequenceClassification%(  %-%- ([%d,]+) parameters$")
    assert.truthy(total, lines[1])
    assert.equal(m:num_parameters(), tonumber((total:gsub(",", ""))))
    assert.truthy(text:find("(word_embeddings): Embedding(weight [100 x 32])  3,200", 1, true), text)
    assert.truthy(text:find("(classifier): Linear(weight [3 x 32], bias [3])  99", 1, true), text)
    assert.truthy(text:find("(0-2): 3 x ", 1, true), text)       -- three equal layers, printed once
    assert.equal(1, select(2, text:gsub("%(intermediate%)", "")))
    -- brackets balance: every "(  --" line is closed by a ")" line
    local opened = select(2, text:gsub("%(  %-%-", ""))
    local closed = 0
    for _, l in ipairs(lines) do if l:match("^%s*%)$") then closed = closed + 1 end end
    assert.equal(opened, closed)
  end)
end)
