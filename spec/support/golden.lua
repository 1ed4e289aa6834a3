-- Parity with Hugging Face tokenizers: runs the golden encodings written
-- once by tools/gen_tokenizer_goldens.js and tools/gen_unigram_goldens.js
-- through tok:encode and compares them field by field.
local cjson = require("cjson")
local assert = require("luassert")

local M = {}

-- An empty or truncated golden file must fail, not pass vacuously.
function M.nonempty(list, min, what)
  assert.is_true(type(list) == "table" and #list >= min,
                 string.format("%s: %d golden entries, expected at least %d", what,
                               type(list) == "table" and #list or 0, min))
  return list
end

-- HF's call options as a golden case records them -> tok:encode's options;
-- overflowing windows are always asked for, since every case lists them.
function M.options(o)
  local r = {return_overflowing_tokens = true}
  if o == nil or o == cjson.null then return r end
  if o.truncation then
    r.truncation = ({LongestFirst = "longest_first", OnlyFirst = "only_first",
                     OnlySecond = "only_second"})[o.strategy or "LongestFirst"]
    r.max_length = o.max_length
    r.stride = o.stride
  end
  if o.padding then
    r.padding = o.padding == "max_length" and "max_length" or "longest"
    r.max_length = r.max_length or o.max_length
  end
  if o.add_special_tokens == false then r.add_special_tokens = false end
  return r
end

-- offsets as "start:end" strings, so that a failure shows which pair differs
local function flat_offsets(offs)
  local r = {}
  for i, p in ipairs(offs) do r[i] = string.format("%d:%d", p[1], p[2]) end
  return r
end

local function check(got, want, fields, label)
  for _, field in ipairs(fields) do
    if field == "offsets" then
      assert.are.same(flat_offsets(want.offsets), flat_offsets(got.offsets), label .. " offsets")
    else
      assert.are.same(want[field], got[field], label .. " " .. field)
    end
  end
end

-- Every case of `cases` (at least `min` of them): the error HF raised, or
-- the encoding's `fields` (those the golden file records) and each of its
-- overflowing windows.
function M.run(tok, cases, min, fields)
  M.nonempty(cases, min, "cases")
  for i, c in ipairs(cases) do
    local pair = c.pair ~= cjson.null and c.pair or nil
    local label = string.format("case %d %q", i, c.text:sub(1, 40))
    if c.error then
      assert.has_error(function() tok:encode(c.text, pair, M.options(c.opts)) end)
    else
      local e = tok:encode(c.text, pair, M.options(c.opts))
      check(e, c, fields, label)
      assert.are.equal(#c.overflowing, #(e.overflowing or {}), label .. " overflow count")
      for k, o in ipairs(c.overflowing) do check(e.overflowing[k], o, fields, label .. " overflow " .. k) end
    end
  end
end

return M
