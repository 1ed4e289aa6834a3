-- The Lua examples of README.md and docs/*.md run as written, as a user runs
-- them: every block fenced ```lua is extracted and run by lua5.4 from the
-- repository root in a clean environment (no LUA_PATH, LUA_CPATH or LUA_INIT:
-- `require("bert")` must find the clone through ./bert.lua after `make`).
-- Blocks fenced ```lua norun need downloaded files and are skipped.  A
-- block whose first require is a submodule (bert.tokenizer) runs after
-- require("bert"), which is what puts the clone on the paths.  The
-- README's one-line pipeline runs the same way on a tiny saved model in
-- place of runs/demo/checkpoint.
local root = io.popen("pwd"):read("l")

local function blocks(path)
  local text = assert(io.open(path)):read("a")
  local out, lineno = {}, 0
  local current, start
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    lineno = lineno + 1
    if current then
      if line:match("^```%s*$") then
        out[#out + 1] = {code = table.concat(current, "\n"), line = start}
        current = nil
      else
        current[#current + 1] = line
      end
    elseif line:match("^```lua%s*$") then
      current, start = {}, lineno
    end
  end
  return out
end

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Only what the test harness itself chose passes through: the build under
-- test (make test-asan's build-asan) and the sanitizer runtime it preloads.
local function clean_env()
  local env = {"env -i", "PATH=" .. quote(os.getenv("PATH")), "HOME=" .. quote(os.getenv("HOME") or "/"),
               "OMP_NUM_THREADS=1", "OMP_WAIT_POLICY=passive"}
  for _, name in ipairs({"BERT_BUILD", "LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS"}) do
    local v = os.getenv(name)
    if v then env[#env + 1] = name .. "=" .. quote(v) end
  end
  return table.concat(env, " ")
end

-- Runs lua5.4 on code from the repository root; true or false, output.
local function run_clean(code)
  local file = os.tmpname()
  local f = assert(io.open(file, "w"))
  f:write(code, "\n")
  f:close()
  local p = io.popen(string.format("cd %s && %s timeout 120 lua5.4 %s 2>&1", quote(root), clean_env(), quote(file)))
  local out = p:read("a")
  local ok = p:close()
  os.remove(file)
  return ok == true, out
end

local pages = {"README.md"}
for name in io.popen("ls docs/*.md 2>/dev/null"):lines() do pages[#pages + 1] = name end

describe("documentation examples", function()
  it("exist", function()
    local n = 0
    for _, page in ipairs(pages) do n = n + #blocks(page) end
    assert.is_true(n >= 4, "only " .. n .. " runnable Lua blocks")
  end)
  for _, page in ipairs(pages) do
    for _, b in ipairs(blocks(page)) do
      it(page .. ":" .. b.line .. " runs", function()
        local first = b.code:match('require%s*%(?%s*["\']([%w_.]+)["\']')
        local ok, out = run_clean((first and first:find("^bert%.") and 'require("bert")\n' or "") .. b.code)
        assert.is_true(ok, page .. ":" .. b.line .. " failed:\n" .. out)
      end)
    end
  end

  it("README.md's one-line pipeline runs on a saved model", function()
    local readme = assert(io.open("README.md")):read("a")
    local call = readme:match("`(bert%.pipeline%b()%b())`")
    assert.is_not_nil(call, "README.md has no `bert.pipeline(...)(...)` line")
    local bert = require("bert")
    local tok = bert.tokenizer.load("spec/fixtures/finetune/vocab.txt")
    local dir = os.tmpname()
    os.remove(dir)
    local model = bert.model("BertForMaskedLM", "tiny", {vocab_size = tok:vocab_size()})
    assert(require("bert.model_dir").save(dir, model, tok))
    local code = call:gsub('"runs/demo/checkpoint"', function() return string.format("%q", dir) end)
    local ok, out = run_clean('local bert = require("bert")\nprint(' .. code .. ')')
    os.execute("rm -rf " .. quote(dir))
    assert.is_true(ok, call .. " failed:\n" .. out)
  end)
end)
