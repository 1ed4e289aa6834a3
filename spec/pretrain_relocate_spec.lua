-- A run directory is relocatable: --resume works in the directory it names,
-- never in a path recorded inside (issue 30 item 1: a copy of a once-resumed
-- run resumed into, and modified, the original).
local pretrain = require("bert.pretrain")
local cjson = require("cjson")
local tmpdir = require("spec.support.tmpdir").dir

local function mtime(path)
  local p = io.popen("stat -c %Y%N '" .. path .. "' 2>/dev/null")
  local s = p:read("a") p:close()
  return s
end

describe("resuming a copied run", function()
  it("resumes the copy and leaves the original alone", function()
    local d = tmpdir()
    local corpus = require("spec.support.tiny_corpus").write(d .. "/corpus.txt", 40, 3)
    local a, b = d .. "/a", d .. "/b"
    local ok, err = pcall(pretrain.run, pretrain.settings({model = "tiny", corpus = corpus, vocab_size = 120,
      seq_len = 32, batch_size = 4, steps = 2, save_every = 1, output = a, no_plot = true, threads = 1, quiet = true}))
    assert.is_true(ok, err)
    assert.is_true((pcall(pretrain.run, pretrain.settings({resume = a, quiet = true}))))   -- a once-resumed run
    local saved = cjson.decode(assert(io.open(a .. "/args.json")):read("a"))
    assert.is_nil(saved.resume)
    assert(os.execute(string.format("cp -r '%s' '%s'", a, b)))
    os.remove(b .. "/summary.json")
    local before = mtime(a .. "/summary.json")
    os.execute("sleep 1.1")
    ok, err = pcall(pretrain.run, pretrain.settings({resume = b, quiet = true}))
    assert.is_true(ok, err)
    assert.truthy(io.open(b .. "/summary.json"), "the copy was resumed")
    assert.equals(before, mtime(a .. "/summary.json"))
  end)
end)
