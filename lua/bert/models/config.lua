--- Model configurations for every family: by size name, from a table, or
-- from a config.json file, with Hugging Face's key names and each
-- family's defaults (bert.models.registry holds the families).  Every
-- config is checked before anything is built: integer keys must be
-- integers (JSON numbers arrive as floats), sizes positive and within sane
-- bounds, so a config cannot make the library allocate for minutes.
local cjson = require("cjson.safe")

local M = {}

local size_names = {"tiny", "mini", "small", "medium", "base", "large"}
M.size_names = size_names

-- Google's released BERT sizes (intermediate = 4H, heads = H/64); kept here
-- for callers that ask for BERT's sizes by name.
M.sizes = {
  tiny   = {hidden_size = 128,  num_hidden_layers = 2,  num_attention_heads = 2,  intermediate_size = 512},
  mini   = {hidden_size = 256,  num_hidden_layers = 4,  num_attention_heads = 4,  intermediate_size = 1024},
  small  = {hidden_size = 512,  num_hidden_layers = 4,  num_attention_heads = 8,  intermediate_size = 2048},
  medium = {hidden_size = 512,  num_hidden_layers = 8,  num_attention_heads = 8,  intermediate_size = 2048},
  base   = {hidden_size = 768,  num_hidden_layers = 12, num_attention_heads = 12, intermediate_size = 3072},
  large  = {hidden_size = 1024, num_hidden_layers = 24, num_attention_heads = 16, intermediate_size = 4096},
}

--- A family's defaults as another's with some changed (a copy: neither
-- table is modified), so that a family states only its differences.
function M.extend(defaults, changes)
  local out = {}
  for k, v in pairs(defaults) do out[k] = v end
  for k, v in pairs(changes) do out[k] = v end
  return out
end

--- Upper bounds on size keys (far above any released model; they stop a
-- typo or a hostile file, e.g. num_hidden_layers 1e9, before anything is built).
M.bounds = {
  num_hidden_layers = 1024, n_layers = 1024, num_hidden_groups = 1024, inner_group_num = 64,
  hidden_size = 65536, dim = 65536, embedding_size = 65536,
  num_attention_heads = 4096, n_heads = 4096,
  intermediate_size = 1048576, hidden_dim = 1048576,
  vocab_size = 16777216, max_position_embeddings = 1048576, type_vocab_size = 65536,
  num_labels = 1048576, position_buckets = 65536, max_relative_positions = 1048576,
  pad_token_id = 16777216,
}

-- Keys whose value must be an integer in every family (others: family.int_keys).
M.int_keys = {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
  "max_position_embeddings", "type_vocab_size", "pad_token_id", "num_labels", "embedding_size",
  "bos_token_id", "eos_token_id"}

local read_json = require("bert.fs").read_json
M.read_json = read_json

local function fail(where, fmt, ...)
  error(string.format("%s: " .. fmt, where, ...), 0)
end

-- JSON numbers decode as floats: integral ones become integers; anything
-- else under an integer key is an error naming the key and the value.
local function integers(c, keys, where)
  for _, k in ipairs(keys) do
    local v = c[k]
    if v ~= nil then
      if type(v) ~= "number" then fail(where, "'%s' must be an integer, got %s", k, tostring(v)) end
      local bound = M.bounds[k]
      if bound and (v > bound or v < -1) then
        fail(where, "'%s' = %s is outside the supported range [0, %d]", k,
          math.tointeger(v) and string.format("%d", math.tointeger(v)) or string.format("%.17g", v), bound)
      end
      if math.type(v) == "float" then
        if v ~= math.floor(v) then fail(where, "'%s' must be an integer, got %.17g", k, v) end
        c[k] = math.tointeger(v)
      end
    end
  end
end

--- Checks `a` (a config in BERT's key names, see blocks.lua) and returns it.
function M.validate(a, where)
  for _, k in ipairs({"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                      "max_position_embeddings"}) do
    local v = a[k]
    if v == nil then fail(where, "missing required key '%s'", a.key_names and a.key_names[k] or k) end
    if math.type(v) ~= "integer" or v <= 0 then
      fail(where, "'%s' must be a positive integer, got %s", a.key_names and a.key_names[k] or k, tostring(v))
    end
  end
  if a.hidden_size % a.num_attention_heads ~= 0 then
    fail(where, "hidden_size %d is not a multiple of num_attention_heads %d", a.hidden_size, a.num_attention_heads)
  end
  if a.embedding_size ~= nil and (math.type(a.embedding_size) ~= "integer" or a.embedding_size <= 0) then
    fail(where, "'embedding_size' must be a positive integer, got %s", tostring(a.embedding_size))
  end
  if a.type_vocab_size ~= nil and (math.type(a.type_vocab_size) ~= "integer" or a.type_vocab_size < 0) then
    fail(where, "'type_vocab_size' must be a non-negative integer, got %s", tostring(a.type_vocab_size))
  end
  if a.pad_token_id ~= nil and (math.type(a.pad_token_id) ~= "integer" or a.pad_token_id < 0 or a.pad_token_id >= a.vocab_size) then
    fail(where, "'pad_token_id' must be an id in [0, vocab_size %d), got %s", a.vocab_size, tostring(a.pad_token_id))
  end
  if math.type(a.num_labels) ~= "integer" or a.num_labels <= 0 then
    fail(where, "'num_labels' must be a positive integer, got %s", tostring(a.num_labels))
  end
  if not require("bert.models.blocks").activation_names[a.hidden_act] then
    fail(where, "unsupported hidden_act '%s'", tostring(a.hidden_act))
  end
  for _, k in ipairs({"hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"}) do
    if type(a[k]) ~= "number" or a[k] < 0 or a[k] >= 1 then
      fail(where, "'%s' must be in [0, 1), got %s", a.key_names and a.key_names[k] or k, tostring(a[k]))
    end
  end
  if type(a.layer_norm_eps) ~= "number" or not (a.layer_norm_eps > 0 and a.layer_norm_eps < 1) then
    fail(where, "'layer_norm_eps' must be in (0, 1), got %s", tostring(a.layer_norm_eps))
  end
  if type(a.initializer_range) ~= "number" or not (a.initializer_range >= 0 and a.initializer_range < 10) then
    fail(where, "'initializer_range' must be in [0, 10), got %s", tostring(a.initializer_range))
  end
  return a
end

--- The raw keys of spec: a size name of `family`, a table, or a
-- config.json path (or its directory).  Returns keys, where (the file's
-- path, when read from one).
function M.read(spec, family)
  local c, where = {}, "config"
  local file
  if type(spec) == "string" and family and family.sizes[spec] then
    for k, v in pairs(family.sizes[spec]) do c[k] = v end
    c.vocab_size = family.default_vocab
    where = string.format("config '%s-%s'", family.short_name, spec)
  elseif type(spec) == "string" then
    local path = spec
    if require("bert.core").isdir(path) then path = path .. "/config.json" end
    local obj, err = read_json(path)
    if not obj then
      error(string.format("config: '%s' is neither a size name (%s) nor a readable config.json (%s)",
        spec, table.concat(size_names, ", "), tostring(err)), 0)
    end
    for k, v in pairs(obj) do if v ~= cjson.null then c[k] = v end end
    where, file = path, path
  elseif type(spec) == "table" then
    for k, v in pairs(spec) do c[k] = v end
  else
    error("config: expected a size name (" .. table.concat(size_names, ", ") ..
      "), a config.json path or a table, got " .. tostring(spec), 0)
  end
  return c, where, file
end

--- make(family, spec[, overrides]) -> c (HF keys, the family's defaults
-- filled in, integers converted), a (the same in BERT's key names, checked).
function M.make(family, spec, overrides)
  local c, where, file = M.read(spec, family)
  if type(c.id2label) == "table" and c.num_labels ~= nil then
    -- both in the file and at odds: id2label wins, as Hugging Face's PretrainedConfig decides, said once
    local n = 0
    for _ in pairs(c.id2label) do n = n + 1 end
    if n > 0 and n ~= c.num_labels then
      io.stderr:write(string.format("warning: %s: num_labels %s disagrees with id2label's %d labels: id2label wins " ..
        "(as Hugging Face)\n", tostring(where), tostring(math.tointeger(c.num_labels) or c.num_labels), n))
      c.num_labels = n
    end
  end
  for k, v in pairs(overrides or {}) do c[k] = v end
  for k, v in pairs(family.defaults) do if c[k] == nil then c[k] = v end end
  c.model_type = family.model_type
  integers(c, M.int_keys, where)
  integers(c, family.int_keys or {}, where)
  if c.num_labels == nil then
    local n = 0
    if type(c.id2label) == "table" then for _ in pairs(c.id2label) do n = n + 1 end end
    c.num_labels = n > 0 and n or 2
  end
  local a = family.arch and family.arch(c, where) or M.bert_arch(c)
  a.tie_word_embeddings = c.tie_word_embeddings
  a.config_file = file   -- the weights beside it are named in messages about them
  a.num_labels = c.num_labels
  if a.classifier_dropout == nil then a.classifier_dropout = a.hidden_dropout_prob end
  M.validate(a, where)
  if c.pre_layer_norm ~= nil and type(c.pre_layer_norm) ~= "boolean" then
    fail(where, "'pre_layer_norm' must be true or false, got %s", tostring(c.pre_layer_norm))
  end
  if c.pre_layer_norm and not family.pre_layer_norm then   -- never built silently as post-LN
    fail(where, "'pre_layer_norm' is supported by the bert family only, not %s", tostring(family.model_type))
  end
  if family.validate then family.validate(c, a, where) end
  if a.key_names then
    -- like HF's attribute_map: c.hidden_size reads DistilBERT's dim (JSON keeps only the family's keys)
    local names = a.key_names
    setmetatable(c, {__index = function(t, k) local own = names[k]; return own and rawget(t, own) or nil end})
  end
  return c, a
end

-- The keys a family's config has: its defaults, sizes and optional_keys, and every family's
-- vocabulary, labels and is_decoder (the shared attention's causal mask).
local function known_keys(family)
  local known = {}
  for k in pairs(family.defaults) do known[k] = true end
  for _, size in pairs(family.sizes) do for k in pairs(size) do known[k] = true end end
  for _, k in ipairs(family.optional_keys or {}) do known[k] = true end
  for _, k in ipairs({"vocab_size", "num_labels", "id2label", "label2id", "is_decoder"}) do known[k] = true end
  return known
end

-- keys in the family's own names (Hugging Face's aliases translated: family.key_names), the
-- sorted list of those `known` lacks, the known ones as text, and a message when a key is
-- given under both its names.
local function own_names(family, keys, known)
  local out, bad, clash = {}, {}, nil
  for k, v in pairs(keys) do
    local own = family.key_names and family.key_names[k] or k
    if not known[own] then bad[#bad + 1] = tostring(k) end
    if own ~= k and keys[own] ~= nil then
      clash = string.format("config keys '%s' and '%s' are one key of the %s family: give one", k, own, family.model_type)
    end
    out[own] = v
  end
  table.sort(bad)
  local list = {}
  for n in pairs(known) do list[#list + 1] = n end
  table.sort(list)
  return out, bad, table.concat(list, ", "), clash
end

--- A user's config overrides (--config-overrides, from_pretrained's config) in the family's own
-- key names: Hugging Face's aliases translated (DistilBERT's hidden_dropout_prob is its dropout,
-- as HF's attribute_map), each key checked against the family's keys.  nil, why naming the first
-- other key: a mistyped one (hiden_dropout_prob) would otherwise be kept in config.json and read
-- by nothing.
function M.family_keys(family, keys)
  local out, bad, list, clash = own_names(family, keys, known_keys(family))
  if #bad > 0 then
    return nil, string.format("'%s' is not a key of the %s config (its keys: %s)", bad[1], family.model_type, list)
  end
  if clash then return nil, clash end
  return out
end

-- Keys the library reads in every family's config beside the family's own: the
-- fine-tuning record and model_type (written into config.json, read back by the code
-- that wrote them), and pre_layer_norm, which make() refuses with its own message
-- in the families that do not implement it.
M.library_keys = {"model_type", "finetune", "pre_layer_norm"}

--- checked_overrides(family, overrides, who): the overrides bert.model was given in the
-- family's own key names, or an error naming the keys that neither the family nor the
-- library (library_keys) knows: bert.model("BertModel", "mini", {hiden_size = 64}) would
-- build a hidden size of 256.
function M.checked_overrides(family, overrides, who)
  local known = known_keys(family)
  for _, k in ipairs(M.library_keys) do known[k] = true end
  local out, bad, list, clash = own_names(family, overrides, known)
  if clash then error(who .. ": " .. clash, 0) end
  if #bad == 0 then return out end
  error(string.format("%s: unknown config key%s '%s' for the %s family (its keys: %s)", who, #bad > 1 and "s" or "",
    table.concat(bad, "', '"), family.model_type, list), 0)
end

--- BERT's own keys as the architecture view (a copy, so that derived keys
-- never reach config.json).
function M.bert_arch(c)
  local a = {}
  for k, v in pairs(c) do a[k] = v end
  return a
end

--- The JSON text of a config, with the keys Hugging Face expects.
function M.to_json(c, architecture)
  local out = {}
  for k, v in pairs(c) do out[k] = v end
  out.architectures = {architecture}
  if out.id2label == nil and out.num_labels then
    out.id2label, out.label2id = {}, {}
    for i = 0, out.num_labels - 1 do
      out.id2label[tostring(i)] = "LABEL_" .. i
      out.label2id["LABEL_" .. i] = i
    end
  end
  out.num_labels = nil   -- HF derives it from id2label
  local enc = require("cjson").new()
  enc.encode_number_precision(14)
  return enc.encode(out)
end

return M
