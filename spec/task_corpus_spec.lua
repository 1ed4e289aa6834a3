-- tools/task_corpus.lua: a task split's text as a plain-format pretraining corpus.
local corpus = require("bert.data.corpus")

describe("tools/task_corpus.lua", function()
  local out = os.tmpname()
  after_each(function() os.remove(out) end)
  local function run(args)
    local build = os.getenv("BERT_BUILD") or "build"
    local cmd = string.format("BERT_BUILD=%s lua5.4 tools/task_corpus.lua %s 2>&1", build, args)
    local f = io.popen(cmd)
    local text = f:read("a")
    local ok = f:close()
    return ok, text
  end

  it("writes the added corpora, then one document per training example (text, then pair), nothing else", function()
    local dir = "spec/fixtures/finetune/classify/"
    local ok, msg = run(string.format("--task %strain.tsv,%sdev.tsv --kind classification --add spec/fixtures/data/plain.txt --output %s",
      dir, dir, out))
    assert.is_true(ok, msg)
    local docs = assert(corpus.read(out))
    local added = assert(corpus.read("spec/fixtures/data/plain.txt"))
    local train = require("bert.finetune.readers").read_classification(dir .. "train.tsv")
    assert.equal(#added + #train, #docs)
    for i, d in ipairs(added) do assert.same(d, docs[i]) end
    for i, ex in ipairs(train) do
      assert.same({ex.text, ex.text_pair}, docs[#added + i])
    end
  end)

  it("fails with a message naming the task for an unknown task", function()
    local ok, msg = run("--task no-such-task.tsv --kind classification --output " .. out)
    assert.is_falsy(ok)
    assert.matches("task_corpus:", msg)
    assert.is_nil(io.open(out .. ".tmp"))
  end)
end)
