-- A small corpus in BERT's plain format for the end-to-end specs that run
-- experiments/pretrain.lua: `documents` documents of 6-12 sentences of 5-12
-- words from a 22-word vocabulary, blank lines between documents.  The text
-- comes from a fixed linear congruential sequence started at `seed`, so a
-- spec sees the same corpus on every run.
local M = {}

M.words = {"the", "cat", "sat", "on", "a", "mat", "dog", "ran", "to", "big", "red", "house",
           "river", "by", "old", "man", "saw", "bird", "fly", "over", "green", "hill"}

--- Writes the corpus to path and returns path.
function M.write(path, documents, seed)
  local state = seed
  local function rnd(n) state = (state * 1103515245 + 12345) % 2147483648 return state % n + 1 end
  local f = assert(io.open(path, "w"))
  for _ = 1, documents do
    for _ = 1, 5 + rnd(7) do
      local s = {}
      for _ = 1, 4 + rnd(8) do s[#s + 1] = M.words[rnd(#M.words)] end
      f:write(table.concat(s, " "), " .\n")
    end
    f:write("\n")
  end
  f:close()
  return path
end

return M
