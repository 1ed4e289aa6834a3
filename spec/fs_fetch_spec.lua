-- bert.fs.fetch_data: the clone's fetcher from the clone's root, else the
-- one beside the running script (an installed bert), writing to ./data of
-- the working directory or $BERT_DATA.
local tmpdir = require("spec.support.tmpdir").dir

local function write(path, text)
  os.execute("mkdir -p '" .. path:match("^(.*)/[^/]+$") .. "'")
  local f = assert(io.open(path, "w")) f:write(text) f:close()
end

local function exists(path)
  local f = io.open(path) if f then f:close() return true end return false
end

describe("fs.fetch_data", function()
  local root = io.popen("pwd"):read("l")
  local build = os.getenv("BERT_BUILD") or "build"
  -- a fake installed layout: SHARE/experiments/x.lua beside SHARE/tools/fetch_data.sh
  local share = tmpdir()
  write(share .. "/tools/fetch_data.sh", 'mkdir -p "$BERT_DATA" && echo fetched > "$BERT_DATA/$1.txt"\n')
  write(share .. "/experiments/x.lua", "-- the running script\n")
  local function run(cwd, env)
    local lua = string.format("package.path = '%s/lua/?.lua;%s/lua/?/init.lua;' .. package.path; " ..
      "package.cpath = '%s/%s/?.so;' .. package.cpath; arg = {[0] = '%s/experiments/x.lua'}; " ..
      "local ok, err = require('bert.fs').fetch_data('glue'); io.write(tostring(ok), ' ', tostring(err))",
      root, root, root, build, share)
    local p = io.popen(string.format("cd '%s' && %s lua5.4 -e \"%s\" 2>&1", cwd, env or "", lua))
    local out = p:read("a") p:close()
    return out
  end

  it("runs the fetcher beside the running script into ./data of the working directory", function()
    local work = tmpdir()
    assert.equals("true nil", run(work))
    assert.is_true(exists(work .. "/data/glue.txt"))
  end)

  it("writes to $BERT_DATA when it is set", function()
    local work, data = tmpdir(), tmpdir()
    assert.equals("true nil", run(work, "BERT_DATA='" .. data .. "/d'"))
    assert.is_true(exists(data .. "/d/glue.txt"))
    assert.is_false(exists(work .. "/data/glue.txt"))
  end)

  it("says what to run when no fetcher is found", function()
    os.remove(share .. "/tools/fetch_data.sh")
    local out = run(tmpdir())
    assert.truthy(out:find("tools/fetch_data.sh not found: run from the clone's root, or `bert fetch glue` first", 1,
      true), out)
  end)
end)
