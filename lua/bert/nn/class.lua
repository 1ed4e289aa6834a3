--- A minimal class helper: `local Linear = class("Linear", Module)`.
-- Calling the class builds an instance through `__init`; metamethods
-- (`__call`, `__tostring`) are inherited, which plain __index would miss.
local function class(name, parent)
  local cls = {}
  cls.__index = cls
  cls.__name = name
  cls.super = parent
  if parent then
    for _, mm in ipairs({"__call", "__tostring"}) do cls[mm] = rawget(parent, mm) end
  end
  return setmetatable(cls, {
    __index = parent,
    __call = function(c, ...)
      local obj = setmetatable({}, c)
      obj:__init(...)
      return obj
    end,
  })
end

return class
