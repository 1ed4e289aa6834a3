--- The family registry, keyed by Hugging Face's `model_type`: which
-- families there are, their architectures (class names) and what head each
-- one is.  bert.model, from_pretrained, save_pretrained and the
-- experiments' --model all go through here; a family enters it by one call,
-- M.register(F) (the built-in ones at the end of this file).
--
-- A family file (bert.lua, roberta.lua, ...) returns a table with:
--   model_type, short_name ("albert" in albert-base), short_aliases (more
--   names for --model, optional), class_prefix ("Albert"), prefix (the base
--   model's name in checkpoints: "albert"), default_vocab,
--   defaults, sizes, int_keys?, arch(c) (the config in BERT's key names),
--   validate(c, a, where)?, backbone(a, c, {pooler}), base_pooler?, heads
--   (per-head placement, see heads.lua), architectures (class name -> head
--   kind, "base" for the bare model), aliases (checkpoint name -> ours: tied
--   copies, older names), renames?, classes (kind -> a class of its own, optional).
local bert = require("bert.core")
local class = require("bert.nn.class")
local Module = require("bert.nn.Module")
local configs = require("bert.models.config")
local heads = require("bert.models.heads")

local M = {}

M.families = {}      -- model_type -> family
M.order = {}         -- model_types, in the order they were registered
M.short_names = {}   -- a name accepted in --model FAMILY-SIZE -> model_type
M.default_model_type = nil   -- register(F, {default = true}): what a bare size and a config without model_type mean

local required = {"model_type", "short_name", "class_prefix", "prefix", "default_vocab", "defaults", "sizes",
  "arch", "backbone", "heads", "architectures"}

--- register(F[, {default = true}]) -> F: adds family F (fields above) under
-- its model_type, and its short_name, model_type and short_aliases as
-- --model names.  The default family is what a bare size ("tiny") and a
-- config.json without model_type (Google's old conversions) mean.  A
-- model_type registered again is replaced.
function M.register(F, opts)
  for _, k in ipairs(required) do
    if F[k] == nil then
      error(string.format("register: the family '%s' has no '%s'", tostring(F.model_type), k), 2)
    end
  end
  local mt = F.model_type
  for name in pairs(F.architectures) do
    local other = M.architecture(name)
    if other and other.model_type ~= mt then
      error(string.format("register: %s's architecture %s is already the %s family's", mt, name, other.model_type), 2)
    end
  end
  if not M.families[mt] then M.order[#M.order + 1] = mt end
  M.families[mt] = F
  for _, name in ipairs({mt, F.short_name, table.unpack(F.short_aliases or {})}) do M.short_names[name] = mt end
  if opts and opts.default then M.default_model_type = mt end
  return F
end

--- unregister(model_type): removes a family and its --model names.
function M.unregister(model_type)
  M.families[model_type] = nil
  for i, mt in ipairs(M.order) do if mt == model_type then table.remove(M.order, i) break end end
  for name, mt in pairs(M.short_names) do if mt == model_type then M.short_names[name] = nil end end
  if M.default_model_type == model_type then M.default_model_type = nil end
end

--- The family of a model_type; an unknown one is an error listing the known.
function M.family(model_type)
  local f = M.families[model_type]
  if not f then
    error(string.format("unknown model_type '%s' (known: %s)", tostring(model_type), table.concat(M.order, ", ")), 0)
  end
  return f
end

--- The family of a config (config.json's keys): its model_type's, the
-- default family's when it has none.
function M.family_of(config) return M.family(config.model_type or M.default_model_type) end

--- family, kind of a class name ("RobertaForMaskedLM"), or nil.
function M.architecture(name)
  for _, mt in ipairs(M.order) do
    local f = M.families[mt]
    if f.architectures[name] then return f, f.architectures[name] end
  end
  return nil
end

--- The class name of a head kind in a family: ("roberta", "sequence_classification")
-- -> "RobertaForSequenceClassification".
function M.architecture_for(model_type, kind)
  local f = type(model_type) == "table" and model_type or M.family(model_type)
  local found
  for name, k in pairs(f.architectures) do
    if k == kind and (not found or #name < #found) then found = name end
  end
  if not found then
    error(string.format("the %s family has no %s head", f.model_type, tostring(kind)), 2)
  end
  return found
end

local function known_architectures()
  local names = {}
  for _, mt in ipairs(M.order) do
    for k in pairs(M.family(mt).architectures) do names[#names + 1] = k end
  end
  table.sort(names)
  return names
end

--- The model_type a config spec for `family` names: a config.json's
-- model_type (the default family's when absent), a table's, or nil (a
-- size name of the family).
local function spec_model_type(spec, family)
  if type(spec) == "table" then return spec.model_type end
  if type(spec) == "string" and not family.sizes[spec] then
    local path = spec
    if bert.isdir(path) then path = path .. "/config.json" end
    local obj = configs.read_json(path)
    if obj then return obj.model_type or M.default_model_type end
  end
  return nil
end

-- Lua integers wrap on overflow: every size product is checked.
local function checked_mul(a, b, what)
  if a ~= 0 and b > math.maxinteger // a then
    error(string.format("%s: size product %d x %d overflows", what, a, b), 0)
  end
  return a * b
end
M.checked_mul = checked_mul

--- Bytes free for new allocations (MemAvailable), or nil where unknown.
function M.available_memory()
  local f = io.open("/proc/meminfo")
  if not f then return nil end
  local kb = f:read("a"):match("MemAvailable:%s*(%d+)")
  f:close()
  return kb and tonumber(kb) * 1024
end

local function gib(n) return n / 2 ^ 30 end

--- build(arch, spec[, overrides]): a fresh model of class `arch` whose
-- parameters live in one flat buffer and gradients in another.  spec: a
-- size name of arch's family, a config table or a config.json path.
function M.build(arch, spec, overrides)
  local family, kind = M.architecture(arch)
  if not family then
    error(string.format("unknown architecture '%s' (known: %s)", tostring(arch),
      table.concat(known_architectures(), ", ")), 0)
  end
  if overrides ~= nil then
    if type(overrides) ~= "table" then
      error(string.format("%s: overrides must be a table of config keys, got %s", arch, type(overrides)), 0)
    end
    overrides = configs.checked_overrides(family, overrides, arch)
  end
  local mt = spec_model_type(spec, family)
  if overrides and overrides.model_type then mt = overrides.model_type end
  if mt and mt ~= family.model_type then
    M.family(mt)   -- an unknown model_type is its own error
    error(string.format("%s is a %s architecture but the config's model_type is '%s'", arch, family.model_type, mt), 0)
  end
  local c, a = configs.make(family, spec, overrides)
  local model = Module.deferred(function()
    if kind == "base" then
      local base = family.backbone(a, c, {pooler = family.base_pooler ~= false})
      base.config, base.class_name = c, arch
      return base
    end
    local cls = (family.classes and family.classes[kind]) or heads.kinds[kind]
    return class(arch, cls)(family, arch, c, a)
  end)
  model.architecture, model.family = arch, family
  -- the parameter bytes (and as many for gradients) must fit before
  -- anything is allocated
  local total = 0
  for _, np in ipairs(model:named_parameters()) do
    total = total + np.param:numel()
    if total > math.maxinteger // 8 then error(arch .. ": parameter count overflows", 0) end
  end
  local need, free = checked_mul(total, 8, arch), M.available_memory()
  if free and need > free then
    error(string.format("%s: %d parameters need %.1f GiB for weights and gradients, more than the %.1f GiB of memory available",
      arch, total, gib(need), gib(free)), 0)
  end
  return model:flatten_parameters()
end

--- resolve(spec): what --model names.  "albert-tiny" / "deberta-v3-base"
-- -> {family = model_type, size = "tiny"}; a bare size name -> the default
-- family's; a directory -> {dir = spec}; else nil, message.
function M.resolve(spec)
  if type(spec) ~= "string" then return nil, "expected a string, got " .. type(spec) end
  local default = M.default_model_type and M.families[M.default_model_type]
  if default and default.sizes[spec] then return {family = default.model_type, size = spec} end
  local fam, size = spec:match("^(.-)%-(%w+)$")
  if fam and M.short_names[fam] then
    local f = M.family(M.short_names[fam])
    if f.sizes[size] then return {family = f.model_type, size = size} end
    local names = {}
    for k in pairs(f.sizes) do names[#names + 1] = k end
    table.sort(names)
    return nil, string.format("the %s family has no size '%s' (sizes: %s)", fam, size, table.concat(names, ", "))
  end
  if bert.isdir(spec) then return {dir = spec} end
  local fams = {}
  for k in pairs(M.short_names) do fams[#fams + 1] = k end
  table.sort(fams)
  return nil, string.format("'%s' is neither FAMILY-SIZE (families: %s; sizes: %s) nor a directory", spec,
    table.concat(fams, ", "), table.concat(configs.size_names, ", "))
end

-- {============================================================ the families
M.register(require("bert.models.bert"), {default = true})
M.register(require("bert.models.roberta"))
M.register(require("bert.models.albert"))
M.register(require("bert.models.electra"))
M.register(require("bert.models.distilbert"))
M.register(require("bert.models.deberta_v2"))
M.register(require("bert.models.bilm"))   -- ELMo-style two causal stacks (objective bilm); not an HF model_type
M.register(require("bert.models.elmo"))   -- ELMo itself: character CNN and biLSTM (objective elmo); not an HF model_type
-- }============================================================

return M
