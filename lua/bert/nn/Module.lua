--- Module: the base of every layer and model, torch-like.
-- A module owns parameters (`self.p[name]`, float32 leaves that require
-- grad) and children (`self.m[name]`), both in registration order so that
-- names come out as Hugging Face spells them ("encoder.layer.0.output.dense.weight").
local bert = require("bert.core")
local class = require("bert.nn.class")

local Module = class("Module")

function Module:__init()
  self.p, self.p_order = {}, {}
  self.m, self.m_order = {}, {}
  self.is_training = true
end

function Module:__call(...) return self:forward(...) end

-- 1234567 -> "1,234,567"
local function thousands(n)
  local s = tostring(math.tointeger(n) or n)
  local out = s:reverse():gsub("(%d%d%d)", "%1,"):reverse()
  return (out:gsub("^,", ""))
end

-- The lines of a module's tree, without its own name: the class, its
-- parameters with their shapes, and its children indented; runs of equal
-- children (the layers of an encoder) print once as "(0-11): 12 x ...".
local function tree_lines(m, indent)
  local name = getmetatable(m).__name or "Module"
  local own = {}
  for _, key in ipairs(m.p_order) do
    local t = m.p[key]
    own[#own + 1] = string.format("%s [%s]", key, table.concat(t:shape(), " x "))
  end
  local n = m:num_parameters()
  local head = name
  if #m.m_order == 0 then
    head = head .. (#own > 0 and ("(" .. table.concat(own, ", ") .. ")") or "()")
      .. (n > 0 and ("  " .. thousands(n)) or "")
    return {head}
  end
  local lines = {head .. "(  -- " .. thousands(n) .. " parameters"}
  for _, p in ipairs(own) do lines[#lines + 1] = indent .. "  " .. p end
  local kids = {}
  for _, cname in ipairs(m.m_order) do kids[#kids + 1] = {name = cname, lines = tree_lines(m.m[cname], indent .. "  ")} end
  local i = 1
  while i <= #kids do
    local j = i
    local same = function(a, b) return table.concat(a.lines, "\n") == table.concat(b.lines, "\n") end
    while j < #kids and same(kids[j + 1], kids[i]) do j = j + 1 end
    local label = j > i and string.format("(%s-%s): %d x ", kids[i].name, kids[j].name, j - i + 1)
      or ("(" .. kids[i].name .. "): ")
    lines[#lines + 1] = indent .. "  " .. label .. kids[i].lines[1]
    for k = 2, #kids[i].lines do lines[#lines + 1] = kids[i].lines[k] end
    i = j + 1
  end
  lines[#lines + 1] = indent .. ")"
  return lines
end

--- print(model): the module tree with each module's parameter shapes and
-- counts (as torch7 and PyTorch print it); equal layers are folded.
function Module:__tostring()
  return table.concat(tree_lines(self, ""), "\n")
end

-- A parameter not yet materialised: its shape and how to initialise it.
-- While a model is built under Module.deferred, layers record these and
-- flatten_parameters initialises each one in place inside the flat buffer,
-- so a model's weights are allocated once, not twice.
local Spec = class("Spec")
function Spec:shape() return self.dims end
function Spec:numel() local n = 1 for _, d in ipairs(self.dims) do n = n * d end return n end

-- The element count of a shape; Lua integers wrap, so each product is
-- checked and a shape too large for memory is refused by name.
local function checked_numel(name, dims)
  local n = 1
  for _, d in ipairs(dims) do
    if math.type(d) ~= "integer" or d < 0 then
      error(string.format("add_parameter: '%s' has a dimension %s that is not a non-negative integer", name, tostring(d)), 4)
    end
    if d ~= 0 and n > math.maxinteger // d then
      error(string.format("add_parameter: '%s' of shape [%s] has more elements than an integer holds",
        name, table.concat(dims, " x ")), 4)
    end
    n = n * d
  end
  return n
end

-- Fills t (a fresh tensor or a flat-buffer view) as init says:
-- {normal = std[, zero_row = i]}, "zeros" or "ones".
local function initialise(t, init)
  bert.no_grad(function()
    if init == "zeros" then t:zero_()
    elseif init == "ones" then t:fill_(1)
    elseif type(init) == "table" and init.normal then
      t:normal_(0, init.normal)
      if init.zero_row then t:select(1, init.zero_row + 1):zero_() end
    else error("add_parameter: unknown initialisation " .. tostring(init), 3) end
  end)
  return t
end

local deferring = false

--- Module.deferred(fn): runs fn (which builds modules) with parameter
-- allocation deferred to flatten_parameters; returns fn's result.
function Module.deferred(fn)
  local was = deferring
  deferring = true
  local ok, result = pcall(fn)
  deferring = was
  if not ok then error(result, 0) end
  return result
end

--- add_parameter(name, tensor) registers an existing tensor;
-- add_parameter(name, shape, init) creates one initialised by init
-- ({normal = std[, zero_row = i]}, "zeros" or "ones").
function Module:add_parameter(name, tensor, init)
  if self.p[name] == nil then self.p_order[#self.p_order + 1] = name end
  if type(tensor) == "table" then
    checked_numel(name, tensor)
    local spec = setmetatable({dims = tensor, init = init}, Spec)
    if deferring then
      self.p[name] = spec
      return spec
    end
    tensor = initialise(bert.empty(tensor), init)
  end
  tensor:requires_grad(true)
  self.p[name] = tensor
  return tensor
end

function Module:add_module(name, module)
  if self.m[name] == nil then self.m_order[#self.m_order + 1] = name end
  self.m[name] = module
  return module
end

--- A child with no parameters and no name in checkpoints (Dropout), still
-- switched by training() / evaluate().
function Module:add_module_unnamed(module)
  self.unnamed = self.unnamed or {}
  self.unnamed[#self.unnamed + 1] = module
  return module
end

function Module:forward()
  error(getmetatable(self).__name .. ":forward is not implemented", 2)
end

-- Visits (prefix .. name, owner, key) for every parameter slot, depth first.
local function each_slot(module, prefix, fn)
  for _, key in ipairs(module.p_order) do fn(prefix .. key, module, key) end
  for _, name in ipairs(module.m_order) do each_slot(module.m[name], prefix .. name .. ".", fn) end
end

--- List of {name, param} with HF names; a tied parameter appears once, under
-- its first name.
function Module:named_parameters(prefix)
  local out, seen = {}, {}
  each_slot(self, prefix or "", function(name, owner, key)
    local t = owner.p[key]
    if not seen[t] then
      seen[t] = true
      out[#out + 1] = {name = name, param = t}
    end
  end)
  return out
end

function Module:parameters()
  local out = {}
  for i, np in ipairs(self:named_parameters()) do out[i] = np.param end
  return out
end

function Module:num_parameters()
  local n = 0
  for _, np in ipairs(self:named_parameters()) do n = n + np.param:numel() end
  return n
end

function Module:training(flag)
  if flag == nil then flag = true end
  self.is_training = flag
  for _, name in ipairs(self.m_order) do self.m[name]:training(flag) end
  for _, child in ipairs(self.unnamed or {}) do child:training(flag) end
  return self
end

function Module:evaluate() return self:training(false) end

function Module:zero_grad()
  if self.flat_grad then
    bert.optim_kernels.zero_grad_(self.flat_grad)   -- one pass, streaming stores
  else
    for _, np in ipairs(self:named_parameters()) do np.param:zero_grad() end
  end
  return self
end

--- name -> tensor for every parameter slot (tied ones under every name).
function Module:state_dict()
  local sd = {}
  each_slot(self, "", function(name, owner, key) sd[name] = owner.p[key] end)
  return sd
end

--- Copies values from sd (name -> tensor) into the parameters.  Returns
-- the lists of missing and unexpected keys; shape mismatches are errors.
function Module:load_state_dict(sd, opts)
  opts = opts or {}
  local missing, used = {}, {}
  bert.no_grad(function()
    each_slot(self, "", function(name, owner, key)
      local src = sd[name]
      if src == nil then
        missing[#missing + 1] = name
        return
      end
      used[name] = true
      local dst = owner.p[key]
      local a, b = dst:shape(), src:shape()
      if #a ~= #b or table.concat(a, "x") ~= table.concat(b, "x") then
        error(string.format("load_state_dict: '%s' has shape [%s] in the checkpoint but [%s] in the model",
          name, table.concat(b, " x "), table.concat(a, " x ")), 3)
      end
      dst:copy_(src)
    end)
  end)
  local unexpected = {}
  for name in pairs(sd) do if not used[name] then unexpected[#unexpected + 1] = name end end
  table.sort(missing)
  table.sort(unexpected)
  if opts.strict and (#missing > 0 or #unexpected > 0) then
    error(string.format("load_state_dict: missing keys: %s; unexpected keys: %s",
      table.concat(missing, ", "), table.concat(unexpected, ", ")), 2)
  end
  return missing, unexpected
end

--- model:set_recompute(flag) -> model: with flag, every encoder layer keeps
-- only its input and recomputes its activations in backward (bert.recompute).
function Module:set_recompute(flag)
  local n = require("bert.recompute").set(self, flag ~= false)
  if n == 0 then
    error(getmetatable(self).__name .. ":set_recompute: the model has no encoder layer to recompute", 2)
  end
  self.recompute = flag ~= false
  return self
end

--- Moves the model's flat buffers to a device ("vulkan" or "cpu").
function Module:to(device) return require("bert.nn.device").to(self, device) end

--- model:quantize("int8" | nil) -> model: every weight an F.linear call reads
-- runs int8 for inference, or float32 again (bert.quantize; quantise after :to).
function Module:quantize(kind) return require("bert.quantize").quantize(self, kind) end

--- Writes config.json + model.safetensors in the Hugging Face layout
-- (models built by bert.model / from_pretrained).
function Module:save_pretrained(dir, opts)
  return require("bert.checkpoint").save_pretrained(self, dir, opts)
end

--- Makes every parameter a view of `flat` (in named_parameters order, the
-- layout flatten_parameters chose) with its gradient a view of `gflat`,
-- replacing it in every module that holds it, then reruns the modules'
-- on_flatten hooks.  fill(view, old), when given, fills each new view.
-- flatten_parameters and Module:to (moving the buffers to a device) share it.
function Module:bind_flat(flat, gflat, fill)
  local replaced, offsets, off = {}, {}, 0
  bert.no_grad(function()
    for _, np in ipairs(self:named_parameters()) do
      local n = np.param:numel()
      local view = flat:narrow(1, off + 1, n):view(np.param:shape())
      if fill then fill(view, np.param) end
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
  return self
end

--- Moves every parameter into one flat buffer (self.flat_params) and every
-- gradient into another (self.flat_grad), llm.c style: one zeroing, one
-- optimizer sweep, one checkpoint write.  Parameters become views; tied
-- slots keep sharing.  Modules may then build fused views (on_flatten).
function Module:flatten_parameters()
  local named = self:named_parameters()
  local total = 0
  for _, np in ipairs(named) do total = total + np.param:numel() end
  self:bind_flat(bert.zeros({total}), bert.zeros({total}), function(view, old)
    if getmetatable(old) == Spec then initialise(view, old.init) else view:copy_(old) end
  end)
  -- the per-parameter tensors are garbage now: free them and return their
  -- memory rather than keep it in the allocator's cache
  collectgarbage()
  bert.empty_cache()
  return self
end

return Module
