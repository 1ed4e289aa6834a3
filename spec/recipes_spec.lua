-- --recipe (bert.recipes through bert.pretrain): what each recipe sets, as
-- the papers ran them, overridden by any flag given explicitly; --help
-- lists them; the recipe is printed at the start of a run.
local cjson = require("cjson")
local lib = require("bert.pretrain")
local objectives = require("bert.objectives")

local tmpdir = require("spec.support.tmpdir").path

local function parse(list)
  local args, err = lib.parse_argv(list)
  assert(args, err)
  return args
end

-- the papers' settings, written out here (not read from bert.recipes):
-- model, tokenizer, objective (internal name), masking, optimizer, beta2, warmup, clip
local expected = {
  bert = {model = "bert-tiny", tokenizer = "wordpiece", objective = "nsp", masking = "static", optimizer = "adamw",
          beta2 = 0.999, warmup = 0.01, clip = 1, dupe_factor = 10},
  roberta = {model = "roberta-tiny", tokenizer = "bpe", objective = "none", masking = "dynamic", optimizer = "adamw",
             beta2 = 0.98, warmup = 0.05, clip = 0},
  albert = {model = "albert-tiny", tokenizer = "unigram", objective = "sop", masking = "static", optimizer = "lamb",
            beta2 = 0.999, warmup = 0.025, clip = 1, ngram_mask = 3, whole_word_mask = true},
  deberta = {model = "deberta-tiny", tokenizer = "bpe", objective = "none", masking = "dynamic", optimizer = "adamw",
             beta2 = 0.999, warmup = 0.01, clip = 1},
  ["deberta-v3"] = {model = "deberta-v3-tiny", tokenizer = "unigram", objective = "electra", masking = "dynamic",
                    optimizer = "adamw", beta2 = 0.999, warmup = 0.01, clip = 1, embedding_sharing = "gdes"},
  electra = {model = "electra-tiny", tokenizer = "wordpiece", objective = "electra", masking = "dynamic",
             optimizer = "adamw", beta2 = 0.999, warmup = 0.01, clip = 1, embedding_sharing = "shared",
             generator_size = 0.25, disc_weight = 50},
}

describe("pretrain --recipe", function()
  it("sets each paper's family, tokenizer, objective, masking, optimizer and schedule", function()
    for name, want in pairs(expected) do
      local args = parse({"--recipe", name})
      for k, v in pairs(want) do assert.equal(v, args[k], name .. ": " .. k) end
      assert.equal(1e-6, args.eps, name .. ": eps")
      assert.matches("^recipe " .. name:gsub("%-", "%%-") .. ": %-%-model " .. want.model:gsub("%-", "%%-"),
        args.recipe_settings)
    end
    -- no recipe: the defaults, and nothing said about a recipe
    local plain = parse({})
    assert.is_nil(plain.recipe_settings)
    assert.equal("adamw", plain.optimizer)
    assert.equal(0.999, plain.beta2)
  end)

  it("lets every flag given explicitly override the recipe", function()
    local args = parse({"--recipe", "roberta", "--tokenizer", "wordpiece", "--clip=2", "--model", "mini"})
    assert.equal("wordpiece", args.tokenizer)
    assert.equal(2, args.clip)
    assert.equal("roberta-mini", args.model)      -- a bare size: the recipe's family at that size
    assert.equal(0.98, args.beta2)                 -- the rest is still the recipe's
    assert.equal("none", args.objective)
    assert.matches("(given: --tokenizer wordpiece --clip 2)", args.recipe_settings, 1, true)
    assert.is_nil(args.recipe_settings:find("--tokenizer bpe", 1, true))
    -- a family-size or a config path is taken as given
    assert.equal("albert-mini", parse({"--recipe", "roberta", "--model", "albert-mini"}).model)
    -- the flag before or after --recipe alike
    assert.equal("adamw", parse({"--optimizer", "adamw", "--recipe", "albert"}).optimizer)
    -- through pretrain.settings (ablation files): the keys given are the explicit ones
    local s = lib.settings({recipe = "albert", optimizer = "adamw", model = "small"})
    assert.equal("adamw", s.optimizer)
    assert.equal("albert-small", s.model)
    assert.equal("sop", s.objective)
    assert.equal("lamb", lib.settings({recipe = "albert"}).optimizer)
    -- another --objective than the recipe's drops the recipe's settings of its objective, saying so
    local e = parse({"--recipe", "electra", "--objective", "mlm"})
    assert.equal("none", e.objective)
    assert.is_nil(e.generator_size)
    assert.is_nil(e.embedding_sharing)
    assert.matches("(not set, --objective mlm given: --embedding-sharing shared --generator-size 0.25)",
      e.recipe_settings, 1, true)
    assert.equal(0.25, parse({"--recipe", "electra"}).generator_size)
  end)

  it("refuses a bad recipe, and distilbert without its pieces, naming what is missing", function()
    local ok, err = pcall(lib.settings, {recipe = "xlnet"})
    assert.is_false(ok)
    assert.matches("must be one of 'bert', 'roberta', 'albert', 'deberta', 'deberta-v3', 'electra', 'distilbert'", err, 1, true)
    ok, err = pcall(lib.settings, {recipe = "distilbert"})
    assert.is_false(ok)
    if objectives.names.distill then
      assert.matches("--recipe distilbert needs --teacher DIR", err, 1, true)
    else
      assert.matches("--recipe distilbert needs --objective distill", err, 1, true)
    end
  end)

  it("--help lists the recipes with what each sets", function()
    local p = io.popen("lua5.4 experiments/pretrain.lua --help")
    local text = p:read("a")
    assert.is_true(p:close())
    for name, want in pairs(expected) do
      local line = text:match("\n  " .. name:gsub("%-", "%%-") .. ": [^\n]*")
      assert.truthy(line, name)
      assert.matches("--tokenizer " .. want.tokenizer, line, 1, true)
      assert.matches("--optimizer " .. want.optimizer, line, 1, true)
    end
    assert.matches("\n  distilbert: [^\n]*--objective distill", text)
    assert.matches("--recipe {bert,roberta,albert,deberta,deberta-v3,electra,distilbert}", text, 1, true)
  end)

  it("prints what the recipe set at the start of a run and trains with it", function()
    local corpus = tmpdir() .. ".txt"
    local f = assert(io.open(corpus, "w"))
    local words = {"the", "cat", "sat", "on", "a", "mat", "dog", "ran", "to", "big", "red", "house"}
    for d = 1, 30 do
      for s = 1, 8 do
        local line = {}
        for w = 1, 6 + (d + s) % 5 do line[#line + 1] = words[(d * 7 + s * 3 + w * 5) % #words + 1] end
        f:write(table.concat(line, " "), " .\n")
      end
      f:write("\n")
    end
    f:close()
    local out = tmpdir()
    assert.is_true(os.execute(string.format("OMP_WAIT_POLICY=passive lua5.4 experiments/pretrain.lua --recipe albert " ..
      "--corpus %s --vocab-size 150 --batch-size 4 --seq-len 32 --steps 2 --threads 1 --no-plot --dupe-factor 2 " ..
      "--output %s >/dev/null 2>%s.err", corpus, out, out)))
    local err = io.open(out .. ".err"):read("a")
    assert.matches("pretrain: recipe albert: --model albert-tiny --tokenizer unigram --objective mlm-sop " ..
      "--ngram-mask 3 --whole-word-mask --masking static", err, 1, true)
    assert.matches("(given: --dupe-factor 2)", err, 1, true)
    local summary = cjson.decode(io.open(out .. "/summary.json"):read("a"))
    assert.equal("lamb", summary.settings.optimizer)
    assert.equal("albert", summary.settings.recipe)
    assert.equal("albert-tiny", summary.model)
    -- the optimizer state the checkpoint holds is LAMB's
    local state = require("bert").optim.load_state(out .. "/checkpoint/optimizer.safetensors")
    assert.equal("LAMB", state.kind)
    -- DeBERTa-v3's: a Unigram vocabulary, replaced-token detection with GDES
    local v3 = tmpdir()
    assert.is_true(os.execute(string.format("OMP_WAIT_POLICY=passive lua5.4 experiments/pretrain.lua --recipe deberta-v3 " ..
      "--corpus %s --vocab-size 150 --batch-size 4 --seq-len 32 --steps 2 --threads 1 --no-plot " ..
      "--output %s >/dev/null 2>%s.err", corpus, v3, v3)), io.open(v3 .. ".err"):read("a"))
    local s3 = cjson.decode(io.open(v3 .. "/summary.json"):read("a"))
    assert.equal("electra", s3.objective)
    assert.equal("deberta-v3-tiny", s3.model)
    assert.is_number(s3.rtd_accuracy)
    assert.truthy(io.open(v3 .. "/checkpoint/gdes_deltas.safetensors"))
    assert.truthy(io.open(v3 .. "/checkpoint/generator/config.json"))
    os.execute(string.format("rm -rf '%s' '%s.err' '%s' '%s.err' '%s'", out, out, v3, v3, corpus))
  end)
end)
