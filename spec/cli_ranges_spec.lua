-- Command-line numbers (issue 30 item 7): a negative number is a value, not
-- a flag; a value past an option's limit is refused with the limit when the
-- command line is read, before the run directory exists, in one line.
local cli = require("bert.cli")
local tmpdir = require("spec.support.tmpdir")

local run = require("spec.support.shell").run

describe("command-line numbers", function()
  it("reads a negative number after an option as its value", function()
    local p = cli.parser("x.lua", "test")
    cli.add(p, "batch_size", "lr")
    local ok, err = p:pparse({"--batch-size", "-3"})
    assert.is_false(ok)
    assert.equal("option --batch-size: expected an integer from 1 to 65536, got '-3'", err)
    ok, err = p:pparse({"--lr", "-1e-3"})
    assert.is_false(ok)
    assert.equal("option --lr: expected a number >= 0, got '-1e-3'", err)
    local parsed, args = p:pparse({"--batch-size", "8", "--lr", "0.5"})
    assert.is_true(parsed)
    assert.equal(8, args.batch_size)
  end)

  it("keeps the limits in the shared option specs", function()
    local p = cli.parser("x.lua", "test")
    cli.add(p, "steps", "accum", "batch_size", "threads", "seq_len", "epochs", "eval_batch_size")
    for _, case in ipairs({{"--steps", "1e18", "from 1 to 100000000"}, {"--accum", "1e9", "from 1 to 4096"},
                           {"--batch-size", "1e12", "from 1 to 65536"}, {"--threads", "100000", "from 1 to 1024"},
                           {"--seq-len", "100000", "from 8 to 8192"}, {"--epochs", "1e9", "from 1 to 100000"}}) do
      local ok, err = p:pparse({case[1], case[2]})
      assert.is_false(ok)
      assert.equal(string.format("option %s: expected an integer %s, got '%s'", case[1], case[3], case[2]), err)
    end
    assert.truthy(p:pparse({"--steps", "100000000", "--threads", "1024", "--seq-len", "8192"}))
  end)

  for _, case in ipairs({{"--batch-size", "-3"}, {"--steps", "1e18"}, {"--accum", "1e9"}, {"--batch-size", "1e12"},
                         {"--threads", "100000"}, {"--seq-len", "100000"}}) do
    it("pretrain.lua " .. case[1] .. " " .. case[2] .. ": one line with the limit, no run directory", function()
      local out_dir = tmpdir.path()
      local out, rc = run(string.format("lua5.4 experiments/pretrain.lua %s %s --output '%s'", case[1], case[2], out_dir))
      assert.equal(1, rc)
      assert.matches("^pretrain%.lua: option " .. case[1]:gsub("%-", "%%-") .. ": expected an integer from %d+ to %d+, got '" ..
        case[2]:gsub("%-", "%%-") .. "'\n", out)
      assert.not_matches("traceback", out)
      assert.not_matches("Usage", out)
      assert.is_nil(io.open(out_dir))
    end)
  end

  -- the tools read their numbers as the experiments do: a bad one was read as nil (tokenize.lua
  -- trained its default vocabulary on --vocab-size abc) or a negative one as an unknown flag;
  -- OUT is a fresh path that must stay unwritten (the old tokenize.lua wrote its vocabulary there)
  for _, case in ipairs({
    {"tools/tokenize.lua train spec/fixtures/finetune/vocab.txt --out OUT --vocab-size abc",
     "tokenize.lua: option --vocab-size: expected an integer, got 'abc'"},
    {"tools/tokenize.lua train spec/fixtures/finetune/vocab.txt --out OUT --vocab-size -5",
     "tokenize.lua: option --vocab-size: expected an integer >= 1, got '-5'"},
    {"tools/tokenize.lua encode spec/fixtures/finetune/vocab.txt --tokenizer spec/fixtures/finetune/vocab.txt " ..
     "--max-length 1", "tokenize.lua: option --max-length: expected an integer >= 2, got '1'"},
    {"tools/tokenize.lua encode /nonexistent.txt --tokenizer spec/fixtures/finetune/vocab.txt",
     "tokenize.lua: /nonexistent.txt: No such file or directory"},
    {"tools/dist_model.lua --tokens-per-s abc", "dist_model.lua: option --tokens-per-s: expected a number, got 'abc'"},
    {"tools/make_synthetic_qa.lua --questions-per-context -1 --out OUT",
     "make_synthetic_qa.lua: option --questions-per-context: expected an integer from 1 to 1000, got '-1'"},
    {"tools/build_corpus.lua --source a=/nonexistent --heldout-per-mille 2000 --output OUT",
     "build_corpus.lua: option --heldout-per-mille: expected an integer from 0 to 1000, got '2000'"},
  }) do
    it(case[1]:match("^tools/(%S+)") .. ": " .. case[2]:match(": (.*)$"), function()
      local out_path = tmpdir.path()
      local out, rc = run("lua5.4 " .. case[1]:gsub("OUT", out_path))
      assert.equal(1, rc)
      assert.equal(case[2], (out:match("^[^\n]*")))
      assert.not_matches("traceback", out)
      assert.is_nil(io.open(out_path))
    end)
  end

  it("a typo'd option: the error and the hint, not the usage", function()
    local out, rc = run("lua5.4 experiments/finetune_classify.lua --modle tiny")
    assert.equal(1, rc)
    assert.equal("finetune_classify.lua: unknown option '--modle'\nDid you mean '--model'?\n" ..
      "finetune_classify.lua --help lists the options\n", out)
  end)
end)
