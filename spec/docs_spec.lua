-- The Lua examples of README.md and docs/*.md run as written: every block
-- fenced ```lua is extracted and run by lua5.4 from the repository root
-- (blocks fenced ```lua norun need downloaded files and are skipped).
local build = os.getenv("BERT_BUILD") or "build"

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
        local file = os.tmpname()
        local f = assert(io.open(file, "w"))
        f:write(string.format("package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path\n" ..
          "package.cpath = './%s/?.so;' .. package.cpath\n", build), b.code, "\n")
        f:close()
        local p = io.popen("OMP_NUM_THREADS=1 timeout 120 lua5.4 " .. file .. " 2>&1")
        local out = p:read("a")
        local ok = p:close()
        os.remove(file)
        assert.is_true(ok == true, page .. ":" .. b.line .. " failed:\n" .. out)
      end)
    end
  end
end)
