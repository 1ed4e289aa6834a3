-- A command's output (stdout and stderr together) and exit status, for the
-- specs that run scripts as a user would (one thread: the machine is shared):
--   local out, rc = require("spec.support.shell").run("lua5.4 experiments/pretrain.lua --help")
local M = {}

function M.run(cmd)
  local p = io.popen("OMP_NUM_THREADS=1 " .. cmd .. " 2>&1")
  local out = p:read("a")
  local _, _, rc = p:close()
  return out, rc
end

return M
