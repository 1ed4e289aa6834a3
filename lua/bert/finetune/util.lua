--- bert.finetune.util: small helpers shared by the fine-tuning modules:
-- files, JSON, a seeded generator independent of math.random, character
-- (code point) offsets of UTF-8 strings.
local cjson = require("cjson")
local cjson_safe = require("cjson.safe")
local fs = require("bert.fs")
local class = require("bert.nn.class")

local M = {}

M.read_file = fs.read_file

M.exists = fs.exists

M.isdir = fs.isdir

M.write_file = fs.write_atomic   -- through a temporary file and a rename

local pretty = cjson.new()
pretty.encode_number_precision(10)

--- JSON text of a value (numbers to 10 significant digits).
function M.json(v) return pretty.encode(v) end

--- Decodes JSON text; nil, message on failure.
function M.decode_json(text) return cjson_safe.decode(text) end
M.null = cjson.null

--- 1-based line number of a 1-based byte position in text.
function M.line_of(text, pos)
  local line = 1
  for _ in text:sub(1, math.max(pos - 1, 0)):gmatch("\n") do line = line + 1 end
  return line
end

-- {============================================================ random
-- splitmix64: a small seeded generator, so that splits and shuffles do not
-- depend on (or disturb) math.random.
local Rng = class("Rng")

function M.rng(seed)
  return setmetatable({s = math.tointeger(seed) or 0}, Rng)
end

function Rng:next64()
  self.s = self.s + 0x9E3779B97F4A7C15
  local z = self.s
  z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
  z = (z ~ (z >> 27)) * 0x94D049BB133111EB
  return z ~ (z >> 31)
end

--- An integer in [1, n].
function Rng:int(n)
  return (self:next64() >> 11) % n + 1
end

--- A float in [0, 1).
function Rng:float()
  return (self:next64() >> 11) * (1.0 / 9007199254740992.0)
end

--- Shuffles a list in place (Fisher-Yates) and returns it.
function Rng:shuffle(t)
  for i = #t, 2, -1 do
    local j = self:int(i)
    t[i], t[j] = t[j], t[i]
  end
  return t
end
-- }============================================================

-- {============================================================ characters

--- Byte positions of the characters (code points) of a UTF-8 string, as
-- the tokenizer counts them (a byte that starts no valid sequence is one
-- character).  Returns a table pos with pos[k] = the 1-based byte where
-- character k (0-based) starts, for k = 0 .. n, pos[n] = #s + 1, and n.
function M.char_positions(s)
  local pos, i, n, k = {}, 1, #s, 0
  while i <= n do
    pos[k] = i
    k = k + 1
    local c = s:byte(i)
    local len = c < 0x80 and 1 or c >= 0xF0 and c < 0xF5 and 4 or c >= 0xE0 and c < 0xF0 and 3
      or c >= 0xC2 and c < 0xE0 and 2 or 1
    if len > 1 then
      if i + len - 1 > n then
        len = 1
      else
        for j = 1, len - 1 do
          local b = s:byte(i + j)
          if b < 0x80 or b > 0xBF then len = 1 break end
        end
      end
    end
    i = i + len
  end
  pos[k] = n + 1
  return pos, k
end

--- The substring of characters [start, stop) (0-based, exclusive) given
-- char_positions' table.
function M.char_sub(s, pos, start, stop)
  return s:sub(pos[start], pos[stop] - 1)
end

--- Number of characters of a UTF-8 string (as char_positions counts them).
function M.char_len(s)
  local _, n = M.char_positions(s)
  return n
end
-- }============================================================

--- Sorted, de-duplicated list of the values of a list.
function M.sorted_set(values)
  local seen, out = {}, {}
  for _, v in ipairs(values) do
    if not seen[v] then seen[v] = true out[#out + 1] = v end
  end
  table.sort(out)
  return out
end

--- Formats a label set for messages: {a, b, c} (the first 20).
function M.format_set(labels)
  local shown = {}
  for i = 1, math.min(#labels, 20) do shown[i] = tostring(labels[i]) end
  if #labels > 20 then shown[#shown + 1] = "... " .. (#labels - 20) .. " more" end
  return "{" .. table.concat(shown, ", ") .. "}"
end

--- A list's first n items (the list itself when n is nil or not smaller).
function M.take(list, n)
  if not n or n >= #list then return list end
  local out = {}
  for i = 1, n do out[i] = list[i] end
  return out
end

return M
