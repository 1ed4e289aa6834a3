-- tokenizer.json ids far beyond the vocabulary's size are refused by key,
-- token and id, at once (issue 30 item 19: 2^31 - 1 allocated 8.4 GB in 25 s).
local T = require("bert.tokenizer")
local tmpdir = require("spec.support.tmpdir").dir

local function file(model)
  local p = tmpdir() .. "/tokenizer.json"
  local f = assert(io.open(p, "w"))
  f:write('{"version": "1.0", "model": ' .. model .. '}')
  f:close()
  return p
end

describe("tokenizer.json vocabulary ids", function()
  it("refuses an id far beyond the entries, WordPiece and BPE, in no time", function()
    for _, model in ipairs({
      '{"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[UNK]": 0, "a": 1, "x": 2100000000}}',
      '{"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 300000000}, "merges": ["a b"]}'}) do
      local t0 = os.clock()
      local tok, err = T.load(file(model))
      assert.is_nil(tok)
      assert.truthy(err:find("key 'model.vocab': id", 1, true), err)
      assert.truthy(err:find("far beyond the vocabulary's 3 entries", 1, true), err)
      assert.is_true(os.clock() - t0 < 1)
    end
  end)

  it("keeps a vocabulary with a few gaps", function()
    local tok = assert(T.load(file('{"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[UNK]": 0, "a": 1, "b": 7}}')))
    assert.equals(7, tok:token_to_id("b"))
  end)
end)
