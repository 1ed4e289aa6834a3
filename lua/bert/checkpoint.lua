--- Hugging Face checkpoints: `config.json` + `model.safetensors` (or a
-- sharded `model.safetensors.index.json`), read into our models and
-- written so that transformers' from_pretrained loads them.
local bert = require("bert.core")
local fs = require("bert.fs")
local configs = require("bert.models.config")
local registry = require("bert.models.registry")

local M = {}

local exists = fs.exists

-- Reads every tensor of a checkpoint directory: name -> tensor.
local function read_weights(dir)
  local single = dir .. "/model.safetensors"
  if exists(single) then
    local t, err = bert.load_safetensors(single)
    if not t then return nil, err end
    return t
  end
  local index_path = dir .. "/model.safetensors.index.json"
  if exists(index_path) then
    local index, err = configs.read_json(index_path)
    if not index then return nil, err end
    if type(index.weight_map) ~= "table" then return nil, index_path .. ": no weight_map" end
    local all, shards = {}, {}
    for _, file in pairs(index.weight_map) do shards[file] = true end
    for file in pairs(shards) do
      local t, serr = bert.load_safetensors(dir .. "/" .. file)
      if not t then return nil, serr end
      for k, v in pairs(t) do all[k] = v end
    end
    return all
  end
  if exists(dir .. "/pytorch_model.bin") then
    return nil, dir .. ": only pytorch_model.bin found; convert it to model.safetensors " ..
                "(PyTorch pickles cannot be read safely outside Python)"
  end
  return nil, dir .. ": no model.safetensors or model.safetensors.index.json"
end

-- Maps checkpoint names onto the model's: legacy gamma/beta, the base
-- prefix ("roberta.") present or absent, and the family's aliases (a tied
-- copy's second name, older head names).
local function normalise(weights, model_names, family)
  local out, renamed = {}, {}
  local prefix = family.prefix .. "."
  local plen = #prefix
  local wants_prefix = false
  for name in pairs(model_names) do if name:sub(1, plen) == prefix then wants_prefix = true break end end
  local aliases = family.aliases or {}
  for name, t in pairs(weights) do
    local n = name:gsub("%.gamma$", ".weight"):gsub("%.beta$", ".bias")
    for _, r in ipairs(family.renames or {}) do n = n:gsub(r[1], r[2]) end
    if n:sub(1, plen) == prefix and not wants_prefix then n = n:sub(plen + 1)
    elseif wants_prefix and not model_names[n] and model_names[prefix .. n] then n = prefix .. n end
    local alias = aliases[n]
    if alias and not model_names[n] then
      if weights[alias] == nil and out[alias] == nil then n = alias else n = nil end
    end
    if n then
      out[n] = t
      if n ~= name then renamed[#renamed + 1] = name .. " -> " .. n end
    end
  end
  return out, renamed
end

-- buffers some checkpoints carry, and the tied decoder HF may write
local function ignorable(name, tied)
  return name:find("position_ids$") or name:find("token_type_ids$") or tied[name]
end

--- The class to build for a checkpoint: opts.architecture (another
-- family's name is mapped to this family's class of the same head, so a
-- fine-tuning script's head follows the checkpoint's family), else the
-- first of config.json's architectures this family knows, else its base model.
local function choose_architecture(family, raw, wanted)
  if wanted then
    if family.architectures[wanted] then return wanted end
    local _, kind = registry.architecture(wanted)
    if not kind then
      error(string.format("unknown architecture '%s'", tostring(wanted)), 0)
    end
    return registry.architecture_for(family, kind)
  end
  if type(raw.architectures) == "table" then
    for _, a in ipairs(raw.architectures) do
      if family.architectures[a] then return a end
    end
  end
  return registry.architecture_for(family, "base")
end

--- from_pretrained(dir[, {architecture = "...", config = {overrides}, verbose = false, strict}])
-- -> model, info {missing = {...}, unexpected = {...}, unused = {...}, renamed = {...}}.
-- The family comes from config.json's model_type (bert when absent), the
-- class from `architectures`.  Missing head weights (a new classifier)
-- keep their fresh initialisation.  A checkpoint most of whose weights do
-- not match the model is refused (a RoBERTa file read as BERT would
-- otherwise be a random model); strict = false loads it anyway, strict =
-- true refuses any missing or unexpected key.
local FROM_PRETRAINED_OPTIONS = {"architecture", "config", "strict", "verbose"}

function M.from_pretrained(dir, opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("from_pretrained: argument #2 (options) expected table, got " .. type(opts), 2) end
  require("bert.options").check("from_pretrained", opts, FROM_PRETRAINED_OPTIONS)
  if type(dir) ~= "string" then error("from_pretrained: expected a directory path, got " .. type(dir), 2) end
  if not bert.isdir(dir) then error("from_pretrained: '" .. dir .. "' is not a directory", 2) end
  local ok, raw = pcall(configs.read, dir .. "/config.json")
  if not ok then error("from_pretrained: " .. tostring(raw), 2) end
  local family
  ok, family = pcall(registry.family_of, raw)
  if not ok then error(string.format("from_pretrained: %s/config.json: %s", dir, family), 2) end
  local arch
  ok, arch = pcall(choose_architecture, family, raw, opts.architecture)
  if not ok then error("from_pretrained: " .. tostring(arch), 2) end
  local model
  ok, model = pcall(registry.build, arch, dir .. "/config.json", opts.config)
  if not ok then error("from_pretrained: " .. tostring(model), 2) end
  local weights, err = read_weights(dir)
  if not weights then error("from_pretrained: " .. err, 2) end
  local model_names, n_names = {}, 0
  for name in pairs(model:state_dict()) do model_names[name] = true; n_names = n_names + 1 end
  local sd, renamed = normalise(weights, model_names, family)
  local loaded, missing, unexpected = pcall(model.load_state_dict, model, sd)
  if not loaded then
    -- a shape disagreement is a config that does not fit its weights: say which sizes it states
    local a = model.arch or {}
    local sizes = {}
    for _, k in ipairs({"vocab_size", "hidden_size", "embedding_size", "intermediate_size", "max_position_embeddings",
                        "type_vocab_size"}) do
      local own = a.key_names and a.key_names[k] or k
      if a[k] ~= nil then sizes[#sizes + 1] = string.format("%s %s", own, tostring(a[k])) end
    end
    error(string.format("from_pretrained: %s (config.json: %s)", tostring(missing):gsub("^load_state_dict: ", ""),
      table.concat(sizes, ", ")), 2)
  end
  -- the decoder tied to the word embeddings is not a slot of its own.  (An
  -- alias's name is not: normalise() reads a weight under its alias only
  -- where the model has no slot of that name, so one the model does have,
  -- DeBERTa's position table with position_biased_input, is a real slot and
  -- reported when missing.)
  local tied = {}
  if model.config.tie_word_embeddings ~= false and family.heads.mlm then tied[family.heads.mlm.decoder] = true end
  local info = {missing = {}, unexpected = {}, unused = {}, renamed = renamed, architecture = arch,
                model_type = family.model_type}
  for _, n in ipairs(missing) do if not ignorable(n, tied) then info.missing[#info.missing + 1] = n end end
  -- an unexpected key under a module the model has is wrong; one of another
  -- head (a pretraining checkpoint under a classifier, a pooler) is unused
  local prefix = family.prefix .. "."
  local base_only = registry.architecture_for(family, "base") == arch
  local other_prefix = {}
  for mt in pairs(registry.families) do
    local f = registry.family(mt)
    if f.prefix ~= family.prefix then other_prefix[f.prefix] = true end
  end
  local function wrong(n)
    if other_prefix[n:match("^[^%.]+")] then return true end   -- another family's base model
    local base = base_only and model or model.m[family.prefix]
    local rel = base_only and n or (n:sub(1, #prefix) == prefix and n:sub(#prefix + 1))
    if rel then
      local first = rel:match("^[^%.]+")
      return base.m[first] ~= nil and first ~= "pooler"
    end
    return model.m[n:match("^[^%.]+")] ~= nil
  end
  for _, n in ipairs(unexpected) do
    if not ignorable(n, tied) then
      local list = wrong(n) and info.unexpected or info.unused
      list[#list + 1] = n
    end
  end
  local matched = n_names - #missing
  if opts.strict ~= false and matched < n_names / 2 then
    error(string.format("from_pretrained: %s: only %d of the %s model's %d weights are in the checkpoint " ..
      "(%d missing, %d unexpected: %s...); is model_type '%s' right?  Pass strict = false to load it anyway",
      dir, matched, arch, n_names, #info.missing, #info.unexpected,
      table.concat({table.unpack(info.unexpected, 1, 3)}, ", "), family.model_type), 2)
  end
  if opts.strict == true and (#info.missing > 0 or #info.unexpected > 0) then
    error(string.format("from_pretrained: %s: missing keys: %s; unexpected keys: %s", dir,
      table.concat(info.missing, ", "), table.concat(info.unexpected, ", ")), 2)
  end
  if opts.verbose ~= false and (#info.missing > 0 or #info.unexpected > 0) then
    io.stderr:write(string.format("from_pretrained(%s): %d missing keys (newly initialised)%s; %d unexpected keys ignored%s\n",
      dir, #info.missing, #info.missing > 0 and (": " .. table.concat(info.missing, ", ")) or "",
      #info.unexpected, #info.unexpected > 0 and (": " .. table.concat(info.unexpected, ", ")) or ""))
  end
  return model, info
end

local write_atomic = fs.write_atomic

--- save_pretrained(model, dir): config.json (model_type, architectures) and
-- model.safetensors with HF names; a tied decoder is not written, as HF
-- does (tie_word_embeddings false: it is a weight of its own, and written).
-- README.md, the model card, says what the model is (opts.tokenizer and
-- opts.card: bert.model_dir.write_card).
function M.save_pretrained(model, dir, opts)
  opts = opts or {}
  local ok, err = bert.mkdir(dir)
  if not ok then return nil, "save_pretrained: " .. err end
  local tensors, parameters = {}, 0
  for _, np in ipairs(model:named_parameters()) do
    tensors[np.name] = np.param
    parameters = parameters + np.param:numel()
  end
  -- a weight's second names (Head:saved_copies: an untied decoder's bias), written, not counted
  for name, t in pairs(model.saved_copies and model:saved_copies() or {}) do tensors[name] = t end
  local saved, serr = bert.save_safetensors(dir .. "/model.safetensors", tensors,
    {metadata = {format = "pt"}, dtype = opts.dtype})
  if not saved then return nil, "save_pretrained: " .. serr end
  local arch = model.architecture or getmetatable(model).__name
  local config_json = configs.to_json(model.config, arch)
  local wrote, werr = write_atomic(dir .. "/config.json", config_json)
  if not wrote then return nil, "save_pretrained: " .. tostring(werr) end
  wrote, werr = require("bert.model_dir").write_card(dir, require("cjson").decode(config_json), parameters, opts)
  if not wrote then return nil, "save_pretrained: " .. tostring(werr) end
  return true
end

return M
