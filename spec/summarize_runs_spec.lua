-- tools/summarize_runs.lua: groups runs that differ only in their seed,
-- fine-tuning and pretraining runs alike.
local cjson = require("cjson")

describe("tools/summarize_runs.lua", function()
  local root = os.tmpname()
  os.remove(root)
  local function run_dir(name, init, lr, seed, dev, test)
    local dir = root .. "/" .. name
    os.execute("mkdir -p '" .. dir .. "'")
    local f = assert(io.open(dir .. "/summary.json", "w"))
    f:write(cjson.encode{task = "spam", kind = "classification", model = "m", from_scratch = init == "scratch",
      settings = {lr = lr, seed = seed, batch_size = 32}, dev = {accuracy = dev},
      test = {accuracy = test, macro_f1 = test - 0.01}, n_train = 100})
    f:close()
    return dir
  end
  teardown(function() os.execute("rm -rf '" .. root .. "'") end)

  it("prints mean and sd over seeds per setting, and marks the best dev setting per initialisation", function()
    local dirs = {run_dir("a1", "pre", 1e-3, 1, 0.90, 0.80), run_dir("a2", "pre", 1e-3, 2, 0.92, 0.90),
                  run_dir("b1", "pre", 5e-4, 1, 0.95, 0.70), run_dir("c1", "scratch", 1e-3, 1, 0.50, 0.60),
                  root .. "/missing"}
    local f = io.popen("lua5.4 tools/summarize_runs.lua " .. table.concat(dirs, " ") .. " 2>&1")
    local out = f:read("a")
    f:close()
    local a = out:match("\n([^\n]*pretrained%s+0%.001[^\n]*)")
    assert.is_truthy(a, out)
    assert.matches("^ ", a)                                    -- not the best dev setting
    assert.matches("%s2%s+accuracy 91%.00%%", a)                  -- 2 seeds, mean dev
    assert.matches("accuracy 85%.00 ± 7%.07", a)                -- mean and sample sd of test
    assert.matches("\n%*%s+spam%s+100%s+pretrained%s+0%.0005", out)
    assert.matches("\n%*%s+spam%s+100%s+scratch", out)
    assert.matches("missing: no readable summary.json", out)
  end)

  it("reads pretraining runs and QA runs on the same fraction scale", function()
    local qa = root .. "/qa1"
    os.execute("mkdir -p '" .. qa .. "'")
    local f = assert(io.open(qa .. "/summary.json", "w"))
    f:write(cjson.encode{task = "synthetic-qa", kind = "qa", model = "m", settings = {lr = 1e-3, seed = 1},
      dev = {exact_match = 0.5, f1 = 0.6}, test = {exact_match = 0.4, f1 = 0.5}, n_train = 10})
    f:close()
    local pt = root .. "/pt1"
    os.execute("mkdir -p '" .. pt .. "'")
    f = assert(io.open(pt .. "/summary.json", "w"))
    f:write(cjson.encode{kind = "pretraining", model = "tiny", objective = "nsp", mlm_accuracy = 0.25,
      unigram_baseline_accuracy = 0.06, nsp_accuracy = 0.7, perplexity = 120.5, steps = 300,
      settings = {lr = 1e-3, seed = 1}})
    f:close()
    local p = io.popen("lua5.4 tools/summarize_runs.lua '" .. qa .. "' '" .. pt .. "' 2>&1")
    local out = p:read("a")
    p:close()
    assert.matches("f1 50%.00 ± 0%.00", out)                    -- not 5000 (scaled once)
    assert.matches("mlm_accuracy 25%.00 ± 0%.00", out)
    assert.matches("nsp_accuracy 70%.00", out)
    assert.matches("perplexity 120%.5", out)
    assert.not_matches("no readable", out)
  end)

  it("groups pretraining runs over seeds: every objective's metric, tokens/s, the settings that differ", function()
    local function pt_run(name, seed, mask_prob, fields)
      local dir = root .. "/" .. name
      os.execute("mkdir -p '" .. dir .. "'")
      local sm = {kind = "pretraining", model = "tiny", objective = "sop", corpus = "brown", steps = 100,
        settings = {lr = 1e-3, seed = seed, mask_prob = mask_prob, masking = "dynamic"}}
      for k, v in pairs(fields) do sm[k] = v end
      local f = assert(io.open(dir .. "/summary.json", "w"))
      f:write(cjson.encode(sm))
      f:close()
      return "'" .. dir .. "'"
    end
    local dirs = {
      pt_run("s1", 1, 0.15, {mlm_accuracy = 0.30, perplexity = 100, sop_accuracy = 0.60, tokens_per_s = 1000}),
      pt_run("s2", 2, 0.15, {mlm_accuracy = 0.32, perplexity = 110, sop_accuracy = 0.70, tokens_per_s = 1200}),
      pt_run("h1", 1, 0.3, {mlm_accuracy = 0.20, perplexity = 200, sop_accuracy = 0.55, tokens_per_s = 900}),
      -- an objective without MLM accuracy (no mlm_accuracy field) is still a pretraining run
      pt_run("c1", 1, 0.15, {objective = "clm", perplexity = 50, tokens_per_s = 2000}),
    }
    local p = io.popen("lua5.4 tools/summarize_runs.lua " .. table.concat(dirs, " ") .. " 2>&1")
    local out = p:read("a")
    p:close()
    assert.not_matches("no readable", out)
    local two = out:match("\n(tiny%s+sop%s+100%s+2 [^\n]*)")
    assert.is_truthy(two, out)
    assert.matches("mlm_accuracy 31%.00 ± 1%.41", two)           -- mean and sample sd over the 2 seeds
    assert.matches("perplexity 105%.0 ± 7%.1", two)
    assert.matches("sop_accuracy 65%.00 ± 7%.07", two)
    assert.matches("tokens/s 1100 ± 141", two)
    assert.matches("; mask_prob=0%.15$", two)                     -- the setting that differs, not lr or masking
    assert.not_matches("lr=", out)
    local one = out:match("\n(tiny%s+sop%s+100%s+1 [^\n]*)")
    assert.matches("mlm_accuracy 20%.00 ± 0%.00", one)
    assert.matches("; mask_prob=0%.3$", one)
    assert.matches("\ntiny%s+clm%s+100%s+1%s+perplexity 50%.0 ± 0%.0, tokens/s 2000", out)
  end)
end)
