-- The `bert` command (bin/bert): its subcommands run the experiment scripts
-- from any directory, from the clone and from an installed tree, and a
-- mistyped subcommand is a clear error with a "did you mean" hint.
local root = io.popen("pwd"):read("l")
local build = os.getenv("BERT_BUILD") or "build"

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Runs cmd in dir with no LUA_PATH/LUA_CPATH: output, exit code.
local function sh(dir, cmd)
  local env = "env -u LUA_PATH -u LUA_CPATH -u LUA_INIT OMP_NUM_THREADS=1"
  local f = io.popen(string.format("cd %s && %s %s 2>&1", quote(dir), env, cmd))
  local out = f:read("a")
  local ok, _, code = f:close()
  return out, ok and 0 or code
end

describe("bert command", function()
  local tmp
  setup(function()
    tmp = os.tmpname()
    os.remove(tmp)
    assert(os.execute("mkdir -p " .. quote(tmp)))
  end)
  teardown(function() os.execute("rm -rf " .. quote(tmp)) end)
  local bert_cmd = quote(root .. "/bin/bert")

  it("--help lists the subcommands", function()
    local out, code = sh(tmp, bert_cmd .. " --help")
    assert.equals(0, code, out)
    for _, name in ipairs({"pretrain", "finetune", "cram", "evaluate", "predict", "ablate", "export", "fetch"}) do
      assert.matches("\n  " .. name .. " ", out, 1, true)
    end
    out, code = sh(tmp, bert_cmd)
    assert.equals(2, code)
    assert.matches("usage: bert COMMAND", out, 1, true)
  end)

  it("names an unknown subcommand and suggests the closest", function()
    local out, code = sh(tmp, bert_cmd .. " finetnue --task spam")
    assert.equals(2, code)
    assert.matches("bert: unknown command 'finetnue' (did you mean 'finetune'?)", out, 1, true)
    out, code = sh(tmp, bert_cmd .. " xyzzy")
    assert.equals(2, code)
    assert.matches("unknown command 'xyzzy'; `bert --help` lists the commands", out, 1, true)
    out, code = sh(tmp, bert_cmd .. " finetune clasify")
    assert.equals(2, code)
    assert.matches("unknown finetune kind 'clasify' (did you mean 'classify'?)", out, 1, true)
    out, code = sh(tmp, bert_cmd .. " finetune --task my.tsv")
    assert.equals(2, code)
    assert.matches("'my.tsv' is not a built-in task: say the kind", out, 1, true)
  end)

  it("each subcommand answers --help from another directory, writing nothing", function()
    for _, cmd in ipairs({"pretrain", "finetune", "finetune classify", "finetune tag", "finetune qa", "evaluate",
                          "predict", "cram", "ablate", "export", "fetch", "finetune --task brown-pos"}) do
      local out, code = sh(tmp, bert_cmd .. " " .. cmd .. " --help")
      assert.equals(0, code, cmd .. ":\n" .. out)
      assert.matches("[Uu]sage", out)
    end
    local out = sh(tmp, bert_cmd .. " finetune --task brown-pos --help")
    assert.matches("finetune_tag.lua", out, 1, true)
    assert.equals("", (sh(tmp, "ls -A")))
  end)

  it("predict runs a saved model from another directory", function()
    local bert = require("bert")
    local tok = bert.tokenizer.load("spec/fixtures/finetune/vocab.txt")
    local model = bert.model("BertForMaskedLM", "tiny", {vocab_size = tok:vocab_size()})
    assert(require("bert.model_dir").save(tmp .. "/model", model, tok))
    local out, code = sh(tmp, bert_cmd .. " predict --model model --text 'the food was [MASK] .' --top 2")
    assert.equals(0, code, out)
    assert.matches("%[MASK%]", out)
  end)

  it("works installed: make install puts bin/bert and the scripts it runs under PREFIX", function()
    local dest = tmp .. "/dest"
    local out, code = sh(root, string.format("make -s install BUILD=%s DESTDIR=%s PREFIX=/usr", quote(build), quote(dest)))
    assert.equals(0, code, out)
    local lpath = string.format("%s/usr/share/lua/5.4/?.lua;%s/usr/share/lua/5.4/?/init.lua;;", dest, dest)
    local env = string.format("LUA_PATH=%s LUA_CPATH=%s", quote(lpath), quote(dest .. "/usr/lib/lua/5.4/?.so;;"))
    out, code = sh("/", string.format("%s %s finetune classify --help", env, quote(dest .. "/usr/bin/bert")))
    assert.equals(0, code, out)
    assert.matches("finetune_classify.lua", out, 1, true)
    out, code = sh("/", string.format("%s %s fetch --help", env, quote(dest .. "/usr/bin/bert")))
    assert.equals(0, code, out)
    os.execute("rm -rf " .. quote(dest))
  end)
end)
