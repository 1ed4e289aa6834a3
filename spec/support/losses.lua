-- The training loss per step of a run directory, read from its
-- metrics.jsonl: {[step] = loss}; evaluation records carry no loss.
local cjson = require("cjson")

return function(dir)
  local out = {}
  for line in io.lines(dir .. "/metrics.jsonl") do
    local rec = cjson.decode(line)
    if rec.loss then out[rec.step] = rec.loss end
  end
  return out
end
