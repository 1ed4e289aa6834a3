--- Module:to(device): moves a model's flat parameter and gradient buffers
-- (Module:flatten_parameters) to "vulkan" or back to "cpu" and rebuilds
-- every parameter as a view of the moved buffers (Module:bind_flat, the
-- same layout and on_flatten hooks as flatten_parameters).
-- Module.lua installs it with:
--   function Module:to(device) return require("bert.nn.device").to(self, device) end
local M = {}

function M.to(self, device)
  assert(device == "cpu" or device == "vulkan", "to: device must be 'cpu' or 'vulkan'")
  if not self.flat_params then self:flatten_parameters() end
  if self.flat_params:device() == device then return self end
  self:bind_flat(self.flat_params:to(device), self.flat_grad:to(device))
  self.device = device
  collectgarbage()
  return self
end

return M
