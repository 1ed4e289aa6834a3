--- BERT configurations: by name, from a table, or from a config.json file,
-- with Hugging Face's key names and defaults (BertConfig).
local cjson = require("cjson.safe")

local M = {}

-- Google's released sizes (intermediate = 4H, heads = H/64).
M.sizes = {
  tiny   = {hidden_size = 128,  num_hidden_layers = 2,  num_attention_heads = 2,  intermediate_size = 512},
  mini   = {hidden_size = 256,  num_hidden_layers = 4,  num_attention_heads = 4,  intermediate_size = 1024},
  small  = {hidden_size = 512,  num_hidden_layers = 4,  num_attention_heads = 8,  intermediate_size = 2048},
  medium = {hidden_size = 512,  num_hidden_layers = 8,  num_attention_heads = 8,  intermediate_size = 2048},
  base   = {hidden_size = 768,  num_hidden_layers = 12, num_attention_heads = 12, intermediate_size = 3072},
  large  = {hidden_size = 1024, num_hidden_layers = 24, num_attention_heads = 16, intermediate_size = 4096},
}

M.defaults = {
  max_position_embeddings = 512, type_vocab_size = 2,
  hidden_act = "gelu", hidden_dropout_prob = 0.1, attention_probs_dropout_prob = 0.1,
  initializer_range = 0.02, layer_norm_eps = 1e-12, pad_token_id = 0,
  position_embedding_type = "absolute", model_type = "bert",
}

-- Keys a config file must state: there is no sensible guess for them.
M.required = {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"}

M.activations = {gelu = true, gelu_new = true, gelu_fast = true, relu = true, tanh = true}

local function validate(c, where)
  for _, k in ipairs(M.required) do
    if c[k] == nil then error(string.format("%s: missing required key '%s'", where, k), 3) end
    if math.type(c[k]) ~= "integer" or c[k] <= 0 then
      error(string.format("%s: '%s' must be a positive integer, got %s", where, k, tostring(c[k])), 3)
    end
  end
  if c.hidden_size % c.num_attention_heads ~= 0 then
    error(string.format("%s: hidden_size %d is not a multiple of num_attention_heads %d",
      where, c.hidden_size, c.num_attention_heads), 3)
  end
  if not M.activations[c.hidden_act] then
    error(string.format("%s: unsupported hidden_act '%s'", where, tostring(c.hidden_act)), 3)
  end
  if c.position_embedding_type ~= "absolute" then
    error(string.format("%s: position_embedding_type '%s' is not supported (only 'absolute')",
      where, tostring(c.position_embedding_type)), 3)
  end
  for _, k in ipairs({"hidden_dropout_prob", "attention_probs_dropout_prob"}) do
    if type(c[k]) ~= "number" or c[k] < 0 or c[k] >= 1 then
      error(string.format("%s: '%s' must be in [0, 1), got %s", where, k, tostring(c[k])), 3)
    end
  end
  return c
end

local function read_json(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local text = f:read("a")
  f:close()
  local obj, jerr = cjson.decode(text)
  if obj == nil then return nil, string.format("%s: invalid JSON (%s)", path, jerr) end
  if type(obj) ~= "table" then return nil, path .. ": expected a JSON object" end
  return obj
end
M.read_json = read_json

--- config(spec[, overrides]): spec is a size name ("base"), a table of
-- keys, or a path to a config.json.  Returns a full config table.
function M.make(spec, overrides)
  local c, where = {}, "config"
  if type(spec) == "string" and M.sizes[spec] then
    for k, v in pairs(M.sizes[spec]) do c[k] = v end
    c.vocab_size = 30522   -- bert-base-uncased's WordPiece vocabulary
    where = "config '" .. spec .. "'"
  elseif type(spec) == "string" then
    local path = spec
    if require("bert.core").isdir(path) then path = path .. "/config.json" end
    local obj, err = read_json(path)
    if not obj then
      error(string.format("config: '%s' is neither a size name (tiny, mini, small, medium, base, large) " ..
        "nor a readable config.json (%s)", spec, tostring(err)), 2)
    end
    for k, v in pairs(obj) do if v ~= cjson.null then c[k] = v end end
    where = path
  elseif type(spec) == "table" then
    for k, v in pairs(spec) do c[k] = v end
  else
    error("config: expected a size name (" .. table.concat({"tiny", "mini", "small", "medium", "base", "large"}, ", ") ..
      "), a config.json path or a table, got " .. tostring(spec), 2)
  end
  for k, v in pairs(overrides or {}) do c[k] = v end
  for k, v in pairs(M.defaults) do if c[k] == nil then c[k] = v end end
  -- JSON numbers decode as floats; sizes must be integers
  for _, k in ipairs({"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                      "intermediate_size", "max_position_embeddings", "type_vocab_size", "pad_token_id"}) do
    if type(c[k]) == "number" and math.type(c[k]) == "float" and c[k] == math.floor(c[k]) then
      c[k] = math.tointeger(c[k])
    end
  end
  if c.num_labels == nil then
    local n = 0
    if type(c.id2label) == "table" then for _ in pairs(c.id2label) do n = n + 1 end end
    c.num_labels = n > 0 and n or 2
  end
  return validate(c, where)
end

--- The JSON text of a config, with the keys Hugging Face expects.
function M.to_json(c, architecture)
  local out = {}
  for k, v in pairs(c) do out[k] = v end
  out.model_type = "bert"
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
