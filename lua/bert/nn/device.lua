--- Module:to(device): moves a model's flat parameter and gradient buffers
-- (Module:flatten_parameters) to "vulkan" or back to "cpu" and rebuilds
-- every parameter as a view of the moved buffers, in the same order and at
-- the same offsets as flatten_parameters, then reruns the modules'
-- on_flatten hooks (fused views such as the QKV weight).
-- Module.lua installs it with:
--   function Module:to(device) return require("bert.nn.device").to(self, device) end
local M = {}

function M.to(self, device)
  local bert = require("bert")   -- lazily: Module.lua loads before bert is complete
  assert(device == "cpu" or device == "vulkan", "to: device must be 'cpu' or 'vulkan'")
  if not self.flat_params then self:flatten_parameters() end
  if self.flat_params:device() == device then return self end
  local flat, gflat = self.flat_params:to(device), self.flat_grad:to(device)
  local replaced, offsets, off = {}, {}, 0
  bert.no_grad(function()
    for _, np in ipairs(self:named_parameters()) do
      local n = np.param:numel()
      local view = flat:narrow(1, off + 1, n):view(np.param:shape())
      view:requires_grad(true)
      view:set_grad(gflat:narrow(1, off + 1, n):view(np.param:shape()))
      replaced[np.param] = view
      offsets[view] = off
      off = off + n
    end
  end)
  local function visit(module)
    for _, key in ipairs(module.p_order) do module.p[key] = replaced[module.p[key]] or module.p[key] end
    for _, name in ipairs(module.m_order) do visit(module.m[name]) end
  end
  visit(self)
  self.flat_params, self.flat_grad = flat, gflat
  local function hook(module)
    if module.on_flatten then module:on_flatten(flat, gflat, offsets) end
    for _, name in ipairs(module.m_order) do hook(module.m[name]) end
  end
  hook(self)
  self.device = device
  collectgarbage()
  return self
end

return M
