--- The family registry, keyed by Hugging Face's `model_type`: which file
-- holds a family's differences, its architectures (class names) and what
-- head each one is.  bert.model, from_pretrained, save_pretrained and the
-- experiments' --model all go through here.
--
-- A family file (bert.lua, roberta.lua, ...) returns a table with:
--   model_type, short_name ("albert" in albert-base), class_prefix ("Albert"),
--   prefix (the base model's name in checkpoints: "albert"),
--   defaults, sizes, int_keys, arch(c) (the config in BERT's key names),
--   validate(c, a, where)?, backbone(a, c, {pooler}), heads (per-head
--   placement, see heads.lua), architectures (class name -> head kind,
--   "base" for the bare model), aliases (checkpoint name -> ours: tied
--   copies, older names), classes (kind -> a class of its own, optional).
local bert = require("bert.core")
local class = require("bert.nn.class")
local Module = require("bert.nn.Module")
local configs = require("bert.models.config")
local heads = require("bert.models.heads")

local M = {}

M.families = {
  bert = "bert.models.bert",
  roberta = "bert.models.roberta",
  albert = "bert.models.albert",
  electra = "bert.models.electra",
  distilbert = "bert.models.distilbert",
  ["deberta-v2"] = "bert.models.deberta_v2",
}
M.families.bilm = "bert.models.bilm"   -- ELMo-style two causal stacks (objective bilm); not an HF model_type
M.order = {"bert", "roberta", "albert", "electra", "distilbert", "deberta-v2"}
M.order[#M.order + 1] = "bilm"

-- names accepted in --model FAMILY-SIZE
M.short_names = {bert = "bert", roberta = "roberta", albert = "albert", electra = "electra",
  distilbert = "distilbert", deberta = "deberta-v2", ["deberta-v2"] = "deberta-v2", ["deberta-v3"] = "deberta-v2"}
M.short_names.bilm = "bilm"

local loaded = {}

--- The family of a model_type; an unknown one is an error listing the known.
function M.family(model_type)
  local path = M.families[model_type]
  if not path then
    error(string.format("unknown model_type '%s' (known: %s)", tostring(model_type), table.concat(M.order, ", ")), 0)
  end
  if not loaded[model_type] then loaded[model_type] = require(path) end
  return loaded[model_type]
end

--- family, kind of a class name ("RobertaForMaskedLM"), or nil.
function M.architecture(name)
  for _, mt in ipairs(M.order) do
    local f = M.family(mt)
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

--- The model_type a config spec names: a config.json's model_type (bert
-- when absent, as in old Google conversions), a table's, or nil.
local function spec_model_type(spec)
  if type(spec) == "table" then return spec.model_type end
  if type(spec) == "string" and not configs.sizes[spec] then
    local path = spec
    if bert.isdir(path) then path = path .. "/config.json" end
    local obj = configs.read_json(path)
    if obj then return obj.model_type or "bert" end
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
  local mt = spec_model_type(spec)
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
-- -> {family = model_type, size = "tiny"}; a bare size name -> BERT's;
-- a directory -> {dir = spec}; else nil, message.
function M.resolve(spec)
  if type(spec) ~= "string" then return nil, "expected a string, got " .. type(spec) end
  if configs.sizes[spec] then return {family = "bert", size = spec} end
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

return M
