-- Helpers shared by the Lua fuzz targets (driven by fuzz/lua_target.c).
local M = {}

M.dir = FUZZ_DIR or os.getenv("TMPDIR") or "/tmp"
M.strict = os.getenv("FUZZ_STRICT") ~= nil

function M.write(name, bytes)
  local path = M.dir .. "/" .. name
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
  return path
end

function M.remove(name) os.remove(M.dir .. "/" .. name) end

-- A reader over the fuzz input: bytes first for choices, the rest as data.
function M.reader(data)
  local pos = 1
  local r = {}
  function r.byte()
    local b = data:byte(pos) or 0
    pos = pos + 1
    return b
  end
  function r.rest() return data:sub(pos) end
  return r
end

-- A broken invariant: the driver aborts and libFuzzer keeps the input.
function M.finding(fmt, ...)
  error("FUZZ FINDING: " .. string.format(fmt, ...), 0)
end

-- A contract of the results (ids inside the vocabulary, lengths within
-- max_length): checked under FUZZ_STRICT, the campaign's mode.  The smoke
-- run in CI checks memory safety and the Lua invariants only, so that an
-- open contract finding (docs/fuzzing.md) does not turn CI red at random.
function M.contract(ok, fmt, ...)
  if not ok and M.strict then M.finding(fmt, ...) end
end

-- Runs fn; a Lua error is a rejection of bad input, except (FUZZ_STRICT)
-- a raw runtime error from inside the library ("attempt to index a nil
-- value"): bad input deserves a message naming the file and the field.
function M.try(fn, ...)
  local ok, a, b = pcall(fn, ...)
  if ok then return a, b end
  local msg = tostring(a)
  if M.strict and (msg:find("attempt to %a+ a") or msg:find("bad argument #%d+ to '%a+'")) then
    M.finding("raw Lua error on bad input: %s", msg)
  end
  return nil, msg
end

return M
