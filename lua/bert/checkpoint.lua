--- Hugging Face checkpoints: `config.json` + `model.safetensors` (or a
-- sharded `model.safetensors.index.json`), read into our models and
-- written so that transformers' from_pretrained loads them.
local bert = require("bert.core")
local fs = require("bert.fs")
local configs = require("bert.models.config")
local models = require("bert.models.bert")

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

-- Maps checkpoint names onto the model's: legacy gamma/beta, and the base
-- prefix present or absent ("bert.").
local function normalise(weights, model_names)
  local out, renamed = {}, {}
  local wants_prefix = false
  for name in pairs(model_names) do if name:find("^bert%.") then wants_prefix = true break end end
  for name, t in pairs(weights) do
    local n = name:gsub("%.gamma$", ".weight"):gsub("%.beta$", ".bias")
    if n:find("^bert%.") and not wants_prefix then n = n:sub(6)
    elseif wants_prefix and not model_names[n] and model_names["bert." .. n] then n = "bert." .. n end
    out[n] = t
    if n ~= name then renamed[#renamed + 1] = name .. " -> " .. n end
  end
  return out, renamed
end

local function ignorable(name)
  return name:find("position_ids$") or name:find("token_type_ids$") or models.tied[name] ~= nil
end

--- from_pretrained(dir[, {architecture = "...", config = {overrides}, verbose = false}])
-- -> model, info {missing = {...}, unexpected = {...}, renamed = {...}}.
-- The class comes from config.json's `architectures` (default BertModel).
-- Missing head weights (a new classifier) keep their fresh initialisation.
function M.from_pretrained(dir, opts)
  opts = opts or {}
  if type(dir) ~= "string" then error("from_pretrained: expected a directory path, got " .. type(dir), 2) end
  if not bert.isdir(dir) then error("from_pretrained: '" .. dir .. "' is not a directory", 2) end
  local config = configs.make(dir .. "/config.json", opts.config)
  local arch = opts.architecture
  if arch == nil and type(config.architectures) == "table" then
    for _, a in ipairs(config.architectures) do
      if models.architectures[a] then arch = a break end
    end
  end
  arch = arch or "BertModel"
  local weights, err = read_weights(dir)
  if not weights then error("from_pretrained: " .. err, 2) end
  local model = models.new(arch, config)
  local model_names = {}
  for name in pairs(model:state_dict()) do model_names[name] = true end
  local sd, renamed = normalise(weights, model_names)
  -- the decoder tie: absent is fine; present must equal the embeddings' shape
  local ok, missing, unexpected = pcall(model.load_state_dict, model, sd)
  if not ok then error("from_pretrained: " .. tostring(missing):gsub("^load_state_dict: ", ""), 2) end
  local info = {missing = {}, unexpected = {}, renamed = renamed, architecture = arch}
  for _, n in ipairs(missing) do if not ignorable(n) then info.missing[#info.missing + 1] = n end end
  for _, n in ipairs(unexpected) do
    local base_only = arch ~= "BertForPreTraining" and (n:find("^cls%.") or n:find("pooler"))
    if not ignorable(n) and not base_only then info.unexpected[#info.unexpected + 1] = n end
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
-- model.safetensors with HF names; the tied decoder is not written, as HF does.
function M.save_pretrained(model, dir, opts)
  opts = opts or {}
  local ok, err = bert.mkdir(dir)
  if not ok then return nil, "save_pretrained: " .. err end
  local tensors = {}
  for _, np in ipairs(model:named_parameters()) do tensors[np.name] = np.param end
  local saved, serr = bert.save_safetensors(dir .. "/model.safetensors", tensors,
    {metadata = {format = "pt"}, dtype = opts.dtype})
  if not saved then return nil, "save_pretrained: " .. serr end
  local arch = model.architecture or getmetatable(model).__name
  local wrote, werr = write_atomic(dir .. "/config.json", configs.to_json(model.config, arch))
  if not wrote then return nil, "save_pretrained: " .. tostring(werr) end
  return true
end

return M
