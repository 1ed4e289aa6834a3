--- Options tables: the one check that a function was given only the
-- options it reads, so that a misspelt one (max_lenght, sead, model for
-- kind) is an error naming it instead of a default taken silently.  The C
-- bindings have its twin, lbert_check_options (csrc/lua/l_tensor.c).
local M = {}

local function describe(k)
  if type(k) == "string" then return "'" .. k .. "'" end
  return "[" .. tostring(k) .. "]"
end

--- check(who, opts, known[, level[, noun]]): raises "who: unknown option
-- 'k' (the options: a, b, c)" at `level` (default 3: the caller of the
-- function that checks) for a key of opts that known does not name.  known:
-- a list (its order is the message's) or a set of names (listed sorted).
-- noun replaces "option" (a file's "field").
function M.check(who, opts, known, level, noun)
  local set, names = known, known
  if known[1] ~= nil then
    set = {}
    for _, k in ipairs(known) do set[k] = true end
  else
    names = {}
    for k in pairs(known) do names[#names + 1] = k end
    table.sort(names)
  end
  for k in pairs(opts) do
    if not set[k] then
      noun = noun or "option"
      error(string.format("%s: unknown %s %s (the %ss: %s)", who, noun, describe(k), noun, table.concat(names, ", ")),
        level or 3)
    end
  end
end

return M
