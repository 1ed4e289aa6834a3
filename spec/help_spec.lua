-- Every script in experiments/ and tools/ answers --help with its usage and
-- exit status 0, and writes nothing: each runs in an empty temporary
-- directory (the library found through LUA_PATH/LUA_CPATH), which must
-- still be empty afterwards, and no file in the repository may change.
local root = io.popen("pwd"):read("l")
local build = os.getenv("BERT_BUILD") or "build"

local function sh(cmd)
  local f = io.popen(cmd .. " 2>&1")
  local out = f:read("a")
  local ok, _, code = f:close()
  return out, ok and 0 or code
end

local function has(cmd) return (sh("command -v " .. cmd)) ~= "" end

local function scripts()
  local list = {}
  for _, dir in ipairs({"experiments", "tools"}) do
    for name in io.popen("ls " .. dir):lines() do
      if name:find("%.lua$") or name:find("%.sh$") or name:find("%.py$") or name:find("%.js$") then
        list[#list + 1] = dir .. "/" .. name
      end
    end
  end
  table.sort(list)
  return list
end

local interpreters = {lua = "lua5.4", sh = "sh", py = "python3", js = "node"}

describe("--help", function()
  local tmp = os.tmpname()
  os.remove(tmp)
  local mark = tmp .. ".mark"
  setup(function()
    assert(os.execute("mkdir -p '" .. tmp .. "' && touch '" .. mark .. "'"))
  end)
  teardown(function() os.execute("rm -rf '" .. tmp .. "' '" .. mark .. "'") end)

  it("covers the scripts in experiments/ and tools/", function()
    local list = scripts()
    local set = {}
    for _, p in ipairs(list) do set[p] = true end
    for _, p in ipairs({"experiments/pretrain.lua", "experiments/predict.lua", "experiments/finetune_classify.lua",
                        "tools/plot.lua", "tools/fetch_data.sh", "tools/embed_shaders.lua"}) do
      assert.is_true(set[p] == true, p .. " is not among " .. table.concat(list, " "))
    end
  end)

  for _, path in ipairs(scripts()) do
    local ext = path:match("%.(%w+)$")
    it(path .. " prints its usage, exits 0 and writes nothing", function()
      local interp = interpreters[ext]
      if not has(interp) then
        pending(require("spec.support.optional").missing(interp))   -- python3, node
        return
      end
      local env = string.format("LUA_PATH='%s/lua/?.lua;%s/lua/?/init.lua;;' LUA_CPATH='%s/%s/?.so;;'",
        root, root, root, build)
      local out, code = sh(string.format("cd '%s' && %s timeout 60 %s '%s/%s' --help </dev/null",
        tmp, env, interp, root, path))
      assert.are.equal(0, code, path .. " --help exited " .. tostring(code) .. ":\n" .. out)
      assert.matches("[Uu]sage", out, 1, false, path .. " --help printed no usage:\n" .. out)
      local left = sh("ls -A '" .. tmp .. "'")
      os.execute("rm -rf '" .. tmp .. "' && mkdir -p '" .. tmp .. "'")   -- a fresh one for the next script
      assert.are.equal("", left, path .. " --help wrote into the working directory: " .. left)
      -- nothing in the repository is newer than the mark (build trees aside, and runs/,
      -- which experiments running alongside the suite write; the scripts write
      -- relative paths, which the empty working directory above catches)
      local changed = sh(string.format("cd '%s' && find . -path ./build -prune -o -path ./build-asan -prune " ..
        "-o -path ./.git -prune -o -path ./runs -prune -o -newer '%s' -type f -print", root, mark))
      assert.are.equal("", changed, path .. " --help wrote into the repository: " .. changed)
    end)
  end
end)
