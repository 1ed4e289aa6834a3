-- --model CONFIG.json: its max_position_embeddings is honoured, or refused
-- with the key and the value (issue 30 item 6: a config's 64 positions
-- became 512 with no message); its vocab_size gives way to the tokenizer's.
local pretrain = require("bert.pretrain")
local cjson = require("cjson")
local tmpdir = require("spec.support.tmpdir").dir

describe("pretraining from a config.json", function()
  local d = tmpdir()
  local corpus = require("spec.support.tiny_corpus").write(d .. "/corpus.txt", 40, 7)
  local function config(extra)
    local c = {vocab_size = 100, hidden_size = 32, num_hidden_layers = 1, num_attention_heads = 2, intermediate_size = 64}
    for k, v in pairs(extra) do c[k] = v end
    local path = os.tmpname() .. ".json"
    local f = assert(io.open(path, "w")) f:write(cjson.encode(c)) f:close()
    return path
  end
  local function run(cfg, seq_len, out)
    return pcall(pretrain.run, pretrain.settings({model = cfg, corpus = corpus, vocab_size = 120, seq_len = seq_len,
      batch_size = 4, steps = 1, output = out, no_plot = true, threads = 1, quiet = true}))
  end

  it("keeps the file's max_position_embeddings; the tokenizer decides the vocabulary", function()
    local out = d .. "/a"
    assert.is_true((run(config({max_position_embeddings = 64, vocab_size = 300}), 32, out)))
    local saved = cjson.decode(assert(io.open(out .. "/checkpoint/config.json")):read("a"))
    assert.equals(64, saved.max_position_embeddings)
    local tok = require("bert.tokenizer").load(out .. "/tokenizer")
    assert.equals(tok:vocab_size(), saved.vocab_size)
  end)

  it("refuses positions fewer than --seq-len, naming the key and the value", function()
    local ok, err = run(config({max_position_embeddings = 64}), 128, d .. "/b")
    assert.is_false(ok)
    assert.truthy(tostring(err):find("max_position_embeddings 64 is smaller than --seq-len 128", 1, true), err)
  end)
end)
