package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local core = require("bert.core")

local FIX = "spec/fixtures/safetensors/"

-- {====================================================== helpers

local dir   -- a fresh scratch directory per test

local function readfile(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function writefile(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
  return path
end

-- A file with the given header text and data bytes.
local function raw(name, header, data)
  return writefile(dir .. "/" .. name, string.pack("<I8", #header) .. header .. (data or ""))
end

local function listdir(d)
  local p = io.popen("ls -A '" .. d .. "'")
  local out = {}
  for line in p:lines() do out[#out + 1] = line end
  p:close()
  table.sort(out)
  return out
end

-- The float32 nearest to v, as Lua sees it.
local function f32(v) return (string.unpack("<f", string.pack("<f", v))) end

local function is_nan(x) return x ~= x end
local function is_negzero(x) return x == 0 and 1 / x < 0 end

-- Compares flat lists bit-for-bit (NaN equals NaN, -0 differs from 0).
local function assert_same(expected, actual)
  assert.are.equal(#expected, #actual)
  for i = 1, #expected do
    local e, a = expected[i], actual[i]
    if is_nan(e) then
      assert.is_true(is_nan(a), ("element %d: expected nan, got %s"):format(i, tostring(a)))
    else
      assert.are.equal(e, a, ("element %d"):format(i))
      assert.are.equal(is_negzero(e), is_negzero(a), ("sign of zero at element %d"):format(i))
    end
  end
end

local function roundtrip(tensors, opts)
  local path = dir .. "/rt.safetensors"
  assert.are.equal(true, core.save_safetensors(path, tensors, opts))
  local t, meta = core.load_safetensors(path)
  assert.is_table(t, meta)
  return t, meta, path
end

-- Asserts load_safetensors(path) fails cleanly with a message that names
-- the path and matches pattern.
local function assert_load_fails(path, pattern)
  local t, msg = core.load_safetensors(path)
  assert.is_nil(t)
  assert.is_string(msg)
  assert.is_truthy(msg:find(path, 1, true), "message does not name the path: " .. msg)
  assert.is_truthy(msg:find(pattern), ("message %q does not match %q"):format(msg, pattern))
  -- the header reader must agree
  local h, msg2 = core.safetensors_header(path)
  assert.is_nil(h)
  assert.are.equal(msg, msg2)
end

local E = '{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'   -- one float
local ONE = string.pack("<f", 1)

-- }======================================================

describe("safetensors", function()
  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir '" .. dir .. "'"))
  end)
  after_each(function()
    os.execute("rm -rf '" .. dir .. "'")
  end)

  describe("round trips", function()
    it("keeps F32 values exact, including extremes, -0, inf and nan", function()
      local vals = { 0.1, -0.0, 1e-45, 3.4028234663852886e38, -1.17549435e-38, math.huge,
                     -math.huge, 0 / 0, 123456.789, -1 }
      local t = roundtrip({ x = core.tensor(vals) })
      assert.are.equal("float32", t.x:dtype())
      local expected = {}
      for i, v in ipairs(vals) do expected[i] = f32(v) end
      assert_same(expected, t.x:totable())
    end)

    it("keeps I32 values exact, and 0-D, empty and 8-D tensors", function()
      local t = roundtrip({
        i = core.tensor({ { -2147483648, 2147483647 }, { 0, -1 } }, "int32"),
        s = core.tensor({ 1 }):view({}),
        e = core.zeros({ 0, 3 }),
        d8 = core.ones({ 1, 2, 1, 2, 1, 2, 1, 2 }),
      })
      assert.are.equal("int32", t.i:dtype())
      assert.are.same({ { -2147483648, 2147483647 }, { 0, -1 } }, t.i:totable())
      assert.are.same({}, t.s:shape())
      assert.are.equal(1, t.s:item())
      assert.are.same({ 0, 3 }, t.e:shape())
      assert.are.same({ 1, 2, 1, 2, 1, 2, 1, 2 }, t.d8:shape())
      assert.are.equal(16, t.d8:sum():item())
    end)

    it("stores int32 tensors as I64 and reads them back exactly", function()
      local vals = { -2147483648, 2147483647, 0, -1, 42 }
      local t, _, path = roundtrip({ ids = core.tensor(vals, "int32") }, { dtype = "I64" })
      assert.are.equal("int32", t.ids:dtype())
      assert.are.same(vals, t.ids:totable())
      local h = core.safetensors_header(path)
      assert.are.same({ dtype = "I64", shape = { 5 }, data_offsets = { 0, 40 } }, h.ids)
      local bytes = readfile(path)
      assert.are.equal(string.pack("<i8i8i8i8i8", table.unpack(vals)), bytes:sub(-40))
    end)

    it("stores F16 exactly for representable values and rounds to nearest even", function()
      local vals = {
        0, -0.0, 1, -2, 0.5, 65504, 2 ^ -24, 2 ^ -14, 1023 * 2 ^ -24, math.huge, -math.huge, 0 / 0,
        1 + 2 ^ -11,          -- tie between 1 and 1+2^-10: even is 1
        1 + 3 * 2 ^ -11,      -- tie: even is 1+2^-9
        1 + 2 ^ -11 + 2 ^ -20, -- just above the tie: up
        65519, 65520, -1e6,   -- largest finite, then overflow to inf
        2 ^ -25,              -- tie between 0 and 2^-24: 0
        1.5 * 2 ^ -25,        -- above the tie: 2^-24
        3 * 2 ^ -25,          -- subnormal tie between 2^-24 and 2^-23: 2^-23
        1 / 3,
      }
      local expected = {
        0, -0.0, 1, -2, 0.5, 65504, 2 ^ -24, 2 ^ -14, 1023 * 2 ^ -24, math.huge, -math.huge, 0 / 0,
        1, 1 + 2 ^ -9, 1 + 2 ^ -10, 65504, math.huge, -math.huge, 0, 2 ^ -24, 2 ^ -23,
        0.333251953125,
      }
      local t, _, path = roundtrip({ h = core.tensor(vals) }, { dtype = "F16" })
      assert.are.equal("float32", t.h:dtype())
      assert_same(expected, t.h:totable())
      assert.are.equal("F16", core.safetensors_header(path).h.dtype)
      -- bit patterns of a few, as an F16 writer must produce them
      local bytes = readfile(path)
      assert.are.equal(string.pack("<I2I2I2", 0x0000, 0x8000, 0x3c00), bytes:sub(-#vals * 2, -#vals * 2 + 5))
    end)

    it("stores BF16 exactly for representable values and rounds to nearest even", function()
      -- (the core sets flush-to-zero, so float32 subnormals are checked at
      -- the byte level, in the fixture test below)
      local vals = { 1, -3.5, 2 ^ 100, 2 ^ -126, -0.0, math.huge, 0 / 0,
                     1 + 2 ^ -8,            -- tie: 1
                     1 + 3 * 2 ^ -8,        -- tie: 1+2^-6
                     1 + 2 ^ -8 + 2 ^ -20,  -- above: 1+2^-7
                     3.4028234663852886e38, -- rounds up to inf
                     1 / 3 }
      local expected = { 1, -3.5, 2 ^ 100, 2 ^ -126, -0.0, math.huge, 0 / 0,
                         1, 1 + 2 ^ -6, 1 + 2 ^ -7, math.huge, 0.333984375 }
      local t = roundtrip({ b = core.tensor(vals) }, { dtype = "BF16" })
      assert_same(expected, t.b:totable())
    end)

    it("keeps metadata, including escapes and non-ASCII text", function()
      local md = { format = "pt", quote = 'a "b" \\ c', ctrl = "tab\tnl\n\1", uni = "café ☃ 😀", empty = "" }
      local _, meta, path = roundtrip({ x = core.zeros({ 2 }) }, { metadata = md })
      assert.are.same(md, meta)
      local _, hmeta = core.safetensors_header(path)
      assert.are.same(md, hmeta)
    end)

    it("writes an empty file with no tensors", function()
      local t, meta = roundtrip({})
      assert.are.same({}, t)
      assert.are.same({}, meta)
    end)

    it("writes non-contiguous, narrowed and expanded tensors in row-major order", function()
      local a = core.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
      local ai = core.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, "int32")
      local t = roundtrip({
        tr = a:transpose(1, 2),
        tr16 = a:transpose(1, 2),
        tri = ai:transpose(1, 2),
        tri64 = ai:transpose(1, 2),
        nar = a:narrow(2, 2, 2),
        exp = core.tensor({ 7, 8, 9 }):expand({ 2, 3 }),
      }, { dtypes = { tr16 = "F16", tri64 = "I64" } })
      local tt = { { 1, 4 }, { 2, 5 }, { 3, 6 } }
      assert.are.same(tt, t.tr:totable())
      assert.are.same(tt, t.tr16:totable())
      assert.are.same(tt, t.tri:totable())
      assert.are.same(tt, t.tri64:totable())
      assert.are.same({ { 2, 3 }, { 5, 6 } }, t.nar:totable())
      assert.are.same({ { 7, 8, 9 }, { 7, 8, 9 } }, t.exp:totable())
    end)

    it("writes a large non-contiguous tensor through several buffers", function()
      local a = core.arange(0, 200 * 300, 1, { dtype = "float32" }):view({ 200, 300 })
      local t = roundtrip({ big = a:transpose(1, 2) }, { dtype = "BF16" })
      assert.are.same({ 300, 200 }, t.big:shape())
      local ref = a:transpose(1, 2):contiguous()
      -- integers below 256 are exact in BF16
      assert.are.equal(ref:get(5, 1), t.big:get(5, 1))
      assert.are.equal(ref:select(1, 300):select(1, 200):item() // 256,
                       t.big:select(1, 300):select(1, 200):item() // 256)
    end)

    it("applies opts.dtype to matching tensors only", function()
      local ts = { f = core.tensor({ 1.5 }), i = core.tensor({ 3 }, "int32") }
      local path = dir .. "/o.safetensors"
      assert.is_true(core.save_safetensors(path, ts, { dtype = "F16" }))
      local h = core.safetensors_header(path)
      assert.are.equal("F16", h.f.dtype)
      assert.are.equal("I32", h.i.dtype)
      assert.is_true(core.save_safetensors(path, ts, { dtype = "I64" }))
      h = core.safetensors_header(path)
      assert.are.equal("F32", h.f.dtype)
      assert.are.equal("I64", h.i.dtype)
      -- per-name dtypes override opts.dtype
      assert.is_true(core.save_safetensors(path, ts, { dtype = "F16", dtypes = { f = "BF16" } }))
      assert.are.equal("BF16", core.safetensors_header(path).f.dtype)
    end)
  end)

  describe("file layout", function()
    it("has an 8-byte length, JSON padded to 8 bytes, and aligned data", function()
      local path = dir .. "/layout.safetensors"
      assert.is_true(core.save_safetensors(path, {
        b = core.tensor({ 1, 2, 3 }),
        a = core.tensor({ { 4, 5 } }, "int32"),
        h = core.tensor({ 0.5, 2, 1 }),
        l = core.tensor({ 9 }, "int32"),
      }, { metadata = { format = "pt" }, dtypes = { h = "F16", l = "I64" } }))
      local bytes = readfile(path)
      local n = string.unpack("<I8", bytes)
      assert.are.equal(0, n % 8)
      local header = bytes:sub(9, 8 + n)
      assert.is_truthy(header:match("^{.*}%s*$"))
      assert.is_truthy(header:match("^[^}]*}[^}]*}[^}]*}[^}]*}[^}]*}[^}]*} *$"), header)
      -- metadata first, then largest dtype first, then by name
      assert.are.equal(
        '{"__metadata__":{"format":"pt"},'
        .. '"l":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},'
        .. '"a":{"dtype":"I32","shape":[1,2],"data_offsets":[8,16]},'
        .. '"b":{"dtype":"F32","shape":[3],"data_offsets":[16,28]},'
        .. '"h":{"dtype":"F16","shape":[3],"data_offsets":[28,34]}}',
        (header:gsub(" +$", "")))
      local data = bytes:sub(9 + n)
      assert.are.equal(string.pack("<i8i4i4fffI2I2I2", 9, 4, 5, 1, 2, 3, 0x3800, 0x4000, 0x3c00), data)
    end)

    it("reads a file written by an independent writer (Python struct + json)", function()
      local t, meta = core.load_safetensors(FIX .. "mixed.safetensors")
      assert.is_table(t, meta)
      assert.are.same({ format = "pt", note = "café ☃" }, meta)
      assert.are.same({ 3, 4 }, t.f16:shape())
      assert.are.equal("float32", t.f16:dtype())
      local f = {}
      for _, row in ipairs(t.f16:totable()) do for _, v in ipairs(row) do f[#f + 1] = v end end
      assert_same({ 0, -0.0, 1, -2.5, 65504, 2 ^ -24, 2 ^ -14, 3 * 2 ^ -24, math.huge, -math.huge,
                    0 / 0, 0.333251953125 }, f)
      local bf = t.bf16:totable()
      bf[6] = nil   -- 2^-133, a float32 subnormal: flushed by totable under FTZ/DAZ
      assert_same({ 1, -3.5, math.huge, -math.huge, 0 / 0, nil, 3.3895313892515355e38, -0.0 }, bf)
      assert.are.equal("int32", t.i64:dtype())
      assert.are.same({ { 0, -1 }, { 2147483647, -2147483648 } }, t.i64:totable())
      assert.are.same({ 0, 255, 7 }, t.u8:totable())
      assert.are.equal("int32", t.mask:dtype())
      assert.are.same({ { 0, 1, 1 } }, t.mask:totable())
      assert.are.same({ 1.5, -0.25 }, t.unaligned:totable())
      assert.are.same({ { 1, -2, 3 }, { 2147483647, -2147483648, 0 } }, t.ids:totable())
      assert.are.equal(7, t.scalar:item())
      assert.are.same({ 0, 5 }, t.empty:shape())
    end)

    it("keeps F16 and BF16 bit patterns through load and save (subnormals, nan)", function()
      local src = readfile(FIX .. "mixed.safetensors")
      local t = core.load_safetensors(FIX .. "mixed.safetensors")
      local path = dir .. "/bits.safetensors"
      assert.is_true(core.save_safetensors(path, { f16 = t.f16, bf16 = t.bf16, bf32 = t.bf16 },
                                           { dtypes = { f16 = "F16", bf16 = "BF16" } }))
      local bytes = readfile(path)
      local data = bytes:sub(9 + string.unpack("<I8", bytes))
      -- layout: bf32 (F32) first, then bf16, then f16
      assert.are.equal(src:sub(8 + 680 + 1 + 24, 8 + 680 + 40), data:sub(33, 48))   -- bf16 bytes
      assert.are.equal(src:sub(8 + 680 + 1, 8 + 680 + 24), data:sub(49, 72))        -- f16 bytes
      assert.are.equal(string.pack("<I4", 0x00010000), data:sub(21, 24))             -- 2^-133 as F32
    end)

    it("describes a file's header without loading its data", function()
      local h, meta = core.safetensors_header(FIX .. "mixed.safetensors")
      assert.are.same({ dtype = "F16", shape = { 3, 4 }, data_offsets = { 0, 24 } }, h.f16)
      assert.are.same({ dtype = "BOOL", shape = { 1, 3 }, data_offsets = { 83, 86 } }, h.mask)
      assert.are.same({ dtype = "F32", shape = {}, data_offsets = { 110, 114 } }, h.scalar)
      assert.are.equal("pt", meta.format)
    end)

    it("accepts whitespace, unknown keys, escaped names and empty tensors inside others", function()
      local header = ' \n{ "\\u00e9\\ud83d\\ude00\\n\\/" : { "shape" : [ 2 ] , "extra" : [ {"x": [true, false, null, -1.5e-3]} ] ,'
        .. ' "data_offsets" : [ 0 , 8 ] , "dtype" : "F32" } , "z" : {"dtype":"F32","shape":[0],"data_offsets":[4,4]},'
        .. ' "__metadata__" : null }\t\r\n'
      local t = core.load_safetensors(raw("ws.safetensors", header, string.pack("<ff", 1, 2)))
      assert.is_table(t)
      assert.are.same({ 1, 2 }, t["é😀\n/"]:totable())
      assert.are.same({ 0 }, t.z:shape())
    end)

    it("maps aligned F32 data without copying, privately", function()
      local path = dir .. "/big.safetensors"
      assert.is_true(core.save_safetensors(path, { w = core.ones({ 512, 512 }) }))
      local before = core.memory_in_use()
      local t = core.load_safetensors(path)
      assert.is_true(core.memory_in_use() - before < 512 * 512 * 4)
      assert.are.equal(512 * 512, t.w:sum():item())
      -- writing to the tensor copies pages and leaves the file alone
      t.w:fill_(3)
      assert.are.equal(3, t.w:get(512, 512))
      local again = core.load_safetensors(path)
      assert.are.equal(1, again.w:get(512, 512))
    end)

    it("saves over the file its tensors were loaded from", function()
      local path = dir .. "/self.safetensors"
      assert.is_true(core.save_safetensors(path, { w = core.tensor({ 1, 2, 3 }) }))
      local t = core.load_safetensors(path)
      assert.is_true(core.save_safetensors(path, { w = t.w * 2 }))
      assert.are.same({ 1, 2, 3 }, t.w:totable())   -- the old mapping is intact
      assert.are.same({ 2, 4, 6 }, core.load_safetensors(path).w:totable())
      collectgarbage()
    end)
  end)

  describe("malformed files give nil, message", function()
    it("empty or shorter than 8 bytes", function()
      assert_load_fails(writefile(dir .. "/empty", ""), "0 bytes, shorter than the 8%-byte")
      assert_load_fails(writefile(dir .. "/five", "abcde"), "5 bytes")
    end)

    it("header length past the end, and 1 TB", function()
      assert_load_fails(writefile(dir .. "/h", string.pack("<I8", 100) .. "{}"), "header length 100 exceeds")
      assert_load_fails(writefile(dir .. "/tb", string.pack("<I8", 1 << 40) .. "{}      "),
                        "header length 1099511627776 exceeds")
      assert_load_fails(writefile(dir .. "/max", string.rep("\255", 8) .. "{}"), "exceeds")
    end)

    it("a header over the 100 MB limit (sparse file)", function()
      local path = dir .. "/huge"
      local f = assert(io.open(path, "wb"))
      f:write(string.pack("<I8", 200000000))
      f:seek("set", 200000000 + 7)
      f:write(" ")
      f:close()
      assert_load_fails(path, "header length 200000000 exceeds the 100000000%-byte limit")
    end)

    it("data shorter than the offsets", function()
      assert_load_fails(raw("short", '{"a":' .. E .. "}", "\0\0"), "'a'.*past the end of the data region")
    end)

    it("/etc/passwd, a directory, a missing file", function()
      assert_load_fails("/etc/passwd", "not a safetensors file")
      assert_load_fails(dir, "is a directory")
      assert_load_fails(dir .. "/missing.safetensors", "cannot open: No such file")
    end)

    local bad_json = {
      { "empty header", "", "expected '{'" },
      { "not an object", "[1, 2]", "expected '{'" },
      { "unterminated object", '{"a":', "expected a value, found the end" },
      { "trailing comma", '{"a":' .. E .. ",}", "expected a string" },
      { "single quotes", "{'a': 1}", "expected a string, found '''" },
      { "missing colon", '{"a" ' .. E .. "}", "expected ':'" },
      { "missing comma", '{"a":{"dtype":"F32" "shape":[1]}}', "expected ',' or '}'" },
      { "trailing garbage", "{} x", "unexpected 'x' after the header object" },
      { "unterminated string", '{"abc', "unterminated string" },
      { "bad escape", '{"a\\q":' .. E .. "}", "invalid escape" },
      { "lone high surrogate", '{"\\ud800x":' .. E .. "}", "high surrogate" },
      { "lone low surrogate", '{"\\udc00":' .. E .. "}", "lone low surrogate" },
      { "bad hex", '{"\\u12g4":' .. E .. "}", "bad hex digit" },
      { "NUL escape", '{"a\\u0000b":' .. E .. "}", "\\u0000 %(NUL%)" },
      { "raw control character", '{"a\tb":' .. E .. "}", "control character" },
      { "invalid UTF-8", '{"a\255":' .. E .. "}", "invalid UTF%-8" },
      { "overlong UTF-8", '{"\192\175":' .. E .. "}", "invalid UTF%-8" },
      { "leading zero", '{"a":{"dtype":"F32","shape":[01],"data_offsets":[0,4]}}', "leading zero" },
      { "bad literal", '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":tru}}', "expected a value" },
      { "bare minus", '{"a":{"dtype":"F32","shape":[-],"data_offsets":[0,4]}}', "expected a digit" },
      { "deep nesting", '{"a":{"x":' .. string.rep("[", 200) .. string.rep("]", 200) .. "}}", "nesting deeper" },
    }
    for _, case in ipairs(bad_json) do
      it("bad JSON: " .. case[1], function()
        assert_load_fails(raw("bad.safetensors", case[2], ONE), "bad JSON at byte %d+ of the header: " .. case[3])
      end)
    end

    local bad_header = {
      { "unknown dtype", '{"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}}', "'a': unknown dtype \"F8_E4M3\"" },
      { "dtype not a string", '{"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}}', "\"dtype\" is not a string" },
      { "missing dtype", '{"a":{"shape":[1],"data_offsets":[0,4]}}', "'a': missing \"dtype\"" },
      { "missing shape", '{"a":{"dtype":"F32","data_offsets":[0,4]}}', "missing \"shape\"" },
      { "missing offsets", '{"a":{"dtype":"F32","shape":[1]}}', "missing \"data_offsets\"" },
      { "entry not an object", '{"a":[1]}', "'a': the entry is not an object" },
      { "negative size", '{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}', "holds %-1, not a non%-negative integer" },
      { "fractional size", '{"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}', "holds 1.0" },
      { "huge size", '{"a":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,4]}}', "fits in 64 bits" },
      { "string size", '{"a":{"dtype":"F32","shape":["1"],"data_offsets":[0,4]}}', "other than a number" },
      { "shape overflow", '{"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,4]}}', "shape %[4294967296 x 4294967296 x 4294967296%] is too large" },
      { "bytes overflow", '{"a":{"dtype":"I64","shape":[4611686018427387904],"data_offsets":[0,4]}}', "shape %[4611686018427387904%] is too large" },
      { "nine dimensions", '{"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}}', "more than 8 dimensions" },
      { "three offsets", '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}', "exactly 2 integers" },
      { "one offset", '{"a":{"dtype":"F32","shape":[1],"data_offsets":[4]}}', "exactly 2 integers" },
      { "begin after end", '{"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}', "%[4, 0%] begin after they end" },
      { "offsets past the end", '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', "'a'.*%[0, 8%] extend past the end of the data region %(4 bytes" },
      { "size and shape disagree", '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}', "span 4 bytes but F32 %[2%] needs 8" },
      { "F16 size and shape disagree", '{"a":{"dtype":"F16","shape":[1],"data_offsets":[0,4]}}', "needs 2" },
      { "overlapping ranges", '{"a":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},"b":{"dtype":"F16","shape":[1],"data_offsets":[1,3]}}', "'a' %[0, 2%] and 'b' %[1, 3%] overlap" },
      { "same range twice", '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}', "overlap" },
      { "range inside another", '{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"c":{"dtype":"U8","shape":[1],"data_offsets":[3,4]},"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', "overlap" },
      { "duplicate name", '{"a":' .. E .. ',"a":' .. E .. "}", "name 'a' appears twice" },
      { "duplicate key", '{"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}}', "key \"dtype\" appears twice" },
      { "metadata not an object", '{"__metadata__":[1]}', "\"__metadata__\" is not an object" },
      { "metadata value not a string", '{"__metadata__":{"k":1}}', "value for key 'k' is not a string" },
      { "metadata twice", '{"__metadata__":{},"__metadata__":{}}', "\"__metadata__\" appears twice" },
      { "metadata key twice", '{"__metadata__":{"k":"1","k":"2"}}', "key 'k' appears twice" },
    }
    for _, case in ipairs(bad_header) do
      it(case[1], function()
        assert_load_fails(raw("bad.safetensors", case[2], ONE), "invalid safetensors header: .*" .. case[3])
      end)
    end

    it("I64 values outside int32 name the tensor and the value", function()
      local t, msg = core.load_safetensors(FIX .. "i64_overflow.safetensors")
      assert.is_nil(t)
      assert.is_truthy(msg:find(FIX .. "i64_overflow.safetensors: tensor 'position_ids' (I64): value 4294967296 at flat index 2 does not fit in int32", 1, true), msg)
      -- the header itself is fine
      assert.are.equal("I64", core.safetensors_header(FIX .. "i64_overflow.safetensors").position_ids.dtype)
    end)

    it("survive a sweep of truncations and byte flips of a valid file", function()
      local good = readfile(FIX .. "mixed.safetensors")
      for cut = 0, #good - 1, 7 do
        local t, msg = core.load_safetensors(writefile(dir .. "/cut", good:sub(1, cut)))
        assert.is_nil(t)
        assert.is_string(msg)
      end
      for pos = 1, 700, 3 do
        local b = good:byte(pos)
        local s = good:sub(1, pos - 1) .. string.char((b + 1 + pos) % 256) .. good:sub(pos + 1)
        local t, msg = core.load_safetensors(writefile(dir .. "/flip", s))
        assert.is_true(t ~= nil or type(msg) == "string")
      end
    end)
  end)

  describe("save errors", function()
    local x = core.tensor({ 1, 2 })

    it("unwritable or missing directories give nil, message", function()
      for _, path in ipairs({ "/proc/bert_test.safetensors", dir .. "/no/such/dir/m.safetensors",
                              "/etc/passwd/m.safetensors" }) do
        local ok, msg = core.save_safetensors(path, { x = x })
        assert.is_nil(ok)
        assert.is_truthy(msg:find(path, 1, true), msg)
        assert.is_truthy(msg:find("cannot create a temporary file"), msg)
      end
    end)

    it("a failed rename leaves no temporary file behind", function()
      local target = dir .. "/target"
      assert(os.execute("mkdir '" .. target .. "'"))
      local ok, msg = core.save_safetensors(target, { x = x })
      assert.is_nil(ok)
      assert.is_truthy(msg:find("cannot rename the temporary file into place"), msg)
      assert.are.same({ "target" }, listdir(dir))
    end)

    it("leaves the target untouched when a save fails", function()
      local path = dir .. "/keep.safetensors"
      assert.is_true(core.save_safetensors(path, { x = x }))
      local before = readfile(path)
      assert.has_error(function() core.save_safetensors(path, { x = x, y = "oops" }) end)
      local freed = core.tensor({ 3 })
      freed:free()
      assert.has_error(function() core.save_safetensors(path, { x = x, y = freed }) end)
      assert.are.equal(before, readfile(path))
      assert.are.same({ "keep.safetensors" }, listdir(dir))
    end)

    it("keeps the permissions of the file it replaces", function()
      local path = dir .. "/perm.safetensors"
      assert.is_true(core.save_safetensors(path, { x = x }))
      assert(os.execute("chmod 640 '" .. path .. "'"))
      assert.is_true(core.save_safetensors(path, { x = x }))
      local p = io.popen("stat -c %a '" .. path .. "'")
      assert.are.equal("640", p:read("l"))
      p:close()
    end)
  end)

  describe("misuse raises an error naming the function and argument", function()
    local x = core.tensor({ 1, 2 })
    local xi = core.tensor({ 1, 2 }, "int32")
    local function p() return dir .. "/m.safetensors" end
    local cases = {
      { "non-table tensors", function() core.save_safetensors(p(), 5) end, "bad argument #2 to 'save_safetensors' %(table expected" },
      { "non-string path", function() core.save_safetensors({}, {}) end, "bad argument #1 to 'save_safetensors'" },
      { "non-table opts", function() core.save_safetensors(p(), {}, "F16") end, "bad argument #3" },
      { "non-tensor value", function() core.save_safetensors(p(), { w = "str" }) end, "save_safetensors: argument #2: value for 'w' is 'str', not a bert.Tensor" },
      { "table value", function() core.save_safetensors(p(), { w = {} }) end, "value for 'w' is a table, not a bert.Tensor" },
      { "non-string name", function() core.save_safetensors(p(), { x }) end, "save_safetensors: argument #2: key 1 is not a string name" },
      { "reserved name", function() core.save_safetensors(p(), { __metadata__ = x }) end, "'__metadata__' is reserved" },
      { "NUL in name", function() core.save_safetensors(p(), { ["a\0b"] = x }) end, "contains a NUL byte" },
      { "invalid UTF-8 name", function() core.save_safetensors(p(), { ["a\255"] = x }) end, "not valid UTF%-8" },
      { "non-string metadata", function() core.save_safetensors(p(), { x = x }, { metadata = { k = 1 } }) end, "argument #3: opts.metadata%['k'%] is 1, not a string" },
      { "non-string metadata key", function() core.save_safetensors(p(), { x = x }, { metadata = { "v" } }) end, "opts.metadata: key 1 is not a string name" },
      { "metadata not a table", function() core.save_safetensors(p(), { x = x }, { metadata = "v" }) end, "opts.metadata is 'v', not a table" },
      { "unknown dtype", function() core.save_safetensors(p(), { x = x }, { dtype = "F8" }) end, "argument #3: opts.dtype: unknown dtype 'F8'" },
      { "U8 is read-only", function() core.save_safetensors(p(), { x = xi }, { dtype = "U8" }) end, "unknown dtype 'U8'" },
      { "float to I64", function() core.save_safetensors(p(), { x = x }, { dtypes = { x = "I64" } }) end, "opts.dtypes%['x'%]: cannot store the float32 tensor 'x' as I64" },
      { "int to F16", function() core.save_safetensors(p(), { i = xi }, { dtypes = { i = "F16" } }) end, "cannot store the int32 tensor 'i' as F16" },
      { "dtypes for a missing name", function() core.save_safetensors(p(), { x = x }, { dtypes = { y = "F16" } }) end, "opts.dtypes names 'y', which is not in the tensors table" },
      { "unknown option", function() core.save_safetensors(p(), { x = x }, { dtyp = "F16" }) end, "save_safetensors: argument #3: unknown option 'dtyp' %(the options: metadata, dtype, dtypes%)" },
      { "load without a path", function() core.load_safetensors() end, "bad argument #1 to 'load_safetensors'" },
      { "header without a path", function() core.safetensors_header(42 > 1) end, "bad argument #1 to 'safetensors_header'" },
    }
    for _, case in ipairs(cases) do
      it(case[1], function()
        assert.error_matches(case[2], case[3])
        assert.are.same({}, listdir(dir))   -- nothing written
      end)
    end
  end)
end)
