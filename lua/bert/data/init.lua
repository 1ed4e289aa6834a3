--- bert.data: corpora and pretraining instances (submodules load on use).
return setmetatable({}, {
  __index = function(self, key)
    local ok, mod = pcall(require, "bert.data." .. key)
    if not ok then return nil end
    rawset(self, key, mod)
    return mod
  end,
})
