-- Fuzz target: config.json -> model construction -> a forward pass.  Sizes
-- are bounded by the library's config validation; a config that passes it
-- but would build a model of more than FUZZ_MAX_PARAMS parameters is
-- skipped here (the fuzzer is after crashes and wrong shapes, not memory).
local F = require("fuzzlib")
local bert = require("bert")
local cjson = require("cjson.safe")

local MAX_PARAMS = tonumber(os.getenv("FUZZ_MAX_PARAMS")) or 2e6
local archs = {"BertModel", "BertForPreTraining", "BertForMaskedLM", "BertForSequenceClassification",
               "BertForTokenClassification", "BertForQuestionAnswering"}

local function num(v) return type(v) == "number" and v or 0 end

return function(data)
  local obj = cjson.decode(data)
  if type(obj) == "table" then   -- bound the model before it is built
    local V, H, L, I = num(obj.vocab_size), num(obj.hidden_size), num(obj.num_hidden_layers), num(obj.intermediate_size)
    local P, E = num(obj.max_position_embeddings), num(obj.embedding_size)
    local params = (V + P + 2) * math.max(H, E) + L * (4 * H * H + 2 * H * I)
    if params > MAX_PARAMS or V > 1e5 or P > 4096 or L > 8 or H > 1024 or I > 4096 then return end
  end
  local path = F.write("config.json", data)
  local arch = type(obj) == "table" and type(obj.architectures) == "table" and
               archs[#archs] and obj.architectures[1] or archs[#data % #archs + 1]
  if type(arch) ~= "string" then arch = "BertModel" end
  local model = F.try(bert.model, arch, path)
  if not model then return end
  model:evaluate()
  local cfg = model.config or {}
  local V = cfg.vocab_size or 1
  local ids = bert.tensor({{0, 1 % V, 2 % V}}, "int32")
  local out = F.try(model.forward, model, {input_ids = ids, attention_mask = bert.ones({1, 3}, "int32")})
  if out and out.last_hidden_state then
    local s = out.last_hidden_state:shape()
    if s[1] ~= 1 or s[2] ~= 3 then F.finding("last_hidden_state shape [%s] for a [1 x 3] input", table.concat(s, " x ")) end
  end
end
