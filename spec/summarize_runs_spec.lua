-- tools/summarize_runs.lua: groups runs that differ only in their seed.
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
    assert.matches("%s2%s+accuracy 91%.00", a)                  -- 2 seeds, mean dev
    assert.matches("accuracy 85%.00 ± 7%.07", a)                -- mean and sample sd of test
    assert.matches("\n%*%s+spam%s+100%s+pretrained%s+0%.0005", out)
    assert.matches("\n%*%s+spam%s+100%s+scratch", out)
    assert.matches("missing: no readable summary.json", out)
  end)
end)
