-- Fresh temporary locations for the specs:
--   local tmpdir = require("spec.support.tmpdir")
--   tmpdir.path()  a fresh name, not created: for tools that create their
--                  own output directory or file (and for "name .. '.txt'")
--   tmpdir.dir()   a fresh, empty directory
local M = {}

function M.path()
  local p = os.tmpname()
  os.remove(p)
  return p
end

function M.dir()
  local d = M.path()
  assert(os.execute("mkdir -p '" .. d .. "'"), "cannot create " .. d)
  return d
end

return M
