-- Hostile input and limits (issue 16): each finding of the fuzzing campaign
-- has a test here that failed before its fix.
local bert = require("bert")
local core = require("bert.core")

local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p '" .. d .. "'"))
  return d
end

local function writefile(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
  return path
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- {====================================================== safetensors

describe("safetensors header messages", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  local function raw(header, data)
    return writefile(dir .. "/x.safetensors", string.pack("<I8", #header) .. header .. (data or ""))
  end

  -- printable() wrote "..." and a NUL up to 3 bytes past its 40-byte buffer
  -- when an escape landed at its end (ASan: stack-buffer-overflow).
  it("keeps an escaped, truncated dtype inside its buffer", function()
    for letters = 30, 40 do
      local dtype = string.rep("A", letters) .. "\\n\\n\\n"
      local path = raw('{"w":{"dtype":"' .. dtype .. '","shape":[1],"data_offsets":[0,4]}}', "\0\0\0\0")
      local t, msg = core.load_safetensors(path)
      assert.is_nil(t)
      local shown = msg:match('unknown dtype "(.-)" %(supported')
      assert.is_truthy(shown, msg)
      assert.is_true(#shown <= 39, ("%d bytes shown for a 40-byte buffer: %s"):format(#shown, shown))
    end
  end)

  it("finds duplicate metadata keys in linear-logarithmic time", function()
    local function header(n, dup)
      local parts = {}
      for i = 1, n do parts[i] = ('"k%d":"v"'):format(i) end
      if dup then parts[#parts + 1] = '"k1":"v"' end
      return '{"__metadata__":{' .. table.concat(parts, ",") .. '}}'
    end
    local t0 = os.clock()
    local h, msg = core.safetensors_header(raw(header(100000, true)))
    local took = os.clock() - t0
    assert.is_nil(h)
    assert.matches("key 'k1' appears twice", msg, 1, true)
    -- the pairwise comparison took 51 s for 200k keys (a loaded 2-core
    -- machine); sorting takes a fraction of a second
    assert.is_true(took < 3, ("%.1f s for 100k metadata keys"):format(took))
  end)

  it("refuses shapes past 2^40 elements with the file's name", function()
    local path = raw('{"w":{"dtype":"F32","shape":[0,1099511627776,2],"data_offsets":[0,0]}}')
    local t, msg = core.load_safetensors(path)
    assert.is_nil(t)
    assert.matches(path, msg, 1, true)
    assert.matches("too large", msg, 1, true)
  end)
end)
-- }======================================================

-- {====================================================== sizes

describe("overflow-safe sizes", function()
  it("refuses a view whose size product wraps int64", function()
    local ok, err = pcall(function() return bert.zeros(0):view(2 ^ 62, 32) end)
    assert.is_false(ok)
    assert.matches("too large", err)
    ok, err = pcall(function() return bert.zeros(0):view(0, 2 ^ 30, 2 ^ 30, 2 ^ 30) end)
    assert.is_false(ok)
    assert.matches("too large", err)
  end)

  it("refuses an expand past 2^40 elements", function()
    local ok, err = pcall(function() return bert.zeros(1, 1):expand(2 ^ 31, 2 ^ 31) end)
    assert.is_false(ok)
    assert.matches("too large", err)
  end)

  it("still allows empty views and ordinary large ones", function()
    local z = bert.zeros(0):view(0, 5)
    assert.same({0, 5}, z:shape())
    local e = bert.zeros(1, 1):expand(2 ^ 20, 2 ^ 19)
    assert.equal(2 ^ 39, e:numel())
    assert.equal(0, e:get(2 ^ 20, 2 ^ 19))
  end)
end)
-- }======================================================

-- {====================================================== shards

describe("shard reader", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  local function fnv(words)
    local h = 0xcbf29ce484222325
    for _, w in ipairs(words) do
      h = h ~ (w & 0xffffffff)
      h = h * 0x100000001b3
    end
    return h
  end

  -- A masked shard whose instance claims more masked positions than the
  -- file holds: the checksum is right, the counts are not.
  it("rejects per-instance counts past the totals before reading them", function()
    local n, T, P = 1, 5, 1
    local payload = {5, 2, 0, 5,  1, 2, 3, 4, 5,  1,  2}   -- len la label npred | tokens | pos | repl
    local body = {}
    for i, w in ipairs(payload) do body[i] = string.pack("<i4", w) end
    local header = "BERTSHRD" .. string.pack("<I4I4I4I4I8I8I8I4I4", 1, 1, 8, 1, n, T, P, 100, 0)
                   .. string.pack("<i8", fnv(payload))
    local path = writefile(dir .. "/s.bin", header .. table.concat(body))
    local inst, msg = core.data.read_shards({path})
    assert.is_nil(inst)
    assert.matches(path .. ": corrupt instance 0", msg, 1, true)
  end)
end)
-- }======================================================
