--- bert.onnx: a BERT model as an ONNX file, for ONNX Runtime and the other
-- deployment tools.  Opset 17 (LayerNormalization is one op there),
-- dynamic batch and sequence axes, int64 inputs input_ids,
-- attention_mask and token_type_ids, outputs named as the model's forward
-- names them (last_hidden_state, pooler_output, prediction_logits,
-- seq_relationship_logits, logits, start_logits, end_logits).
--
--   require("bert.onnx").export(model, "model.onnx")
--
-- The graph is built from the Hugging Face parameter names with standard
-- ops only (Gather, MatMul, Add, Softmax, Erf, LayerNormalization, ...), and
-- the protobuf is written here by hand: no onnx package is needed.
-- Weights are float32 raw data, taken from a safetensors file of the
-- model's state (linear weights stored transposed for MatMul).
local bert = require("bert")
local cjson = require("cjson")

local M = {}

M.OPSET = 17
local IR_VERSION = 8
local FLOAT, INT64 = 1, 7

-- {============================================================ protobuf
local function varint(n)
  local out = {}
  n = math.tointeger(n) or error("onnx: varint of a non-integer " .. tostring(n))
  -- a negative int64 is its two's complement: >> is a logical shift, 10 bytes
  repeat
    local b = n & 0x7f
    n = n >> 7
    if n ~= 0 then b = b | 0x80 end
    out[#out + 1] = string.char(b)
  until n == 0
  return table.concat(out)
end
local function key(field, wire) return varint(field << 3 | wire) end
local function f_varint(field, n) return key(field, 0) .. varint(n) end
local function f_bytes(field, s) return key(field, 2) .. varint(#s) .. s end
local function f_float(field, x) return key(field, 5) .. string.pack("<f", x) end
-- }============================================================

-- {============================================================ graph builder
local Graph = {}
Graph.__index = Graph

local function new_graph()
  return setmetatable({nodes = {}, inits = {}, n = 0, consts = {}}, Graph)
end

function Graph:name(base)
  self.n = self.n + 1
  return string.format("%s_%d", base, self.n)
end

-- attrs: {name = value}: integer -> INT, float -> FLOAT, table of integers -> INTS
local function attribute(name, v)
  local body = f_bytes(1, name)
  if math.type(v) == "integer" then
    body = body .. f_varint(3, v) .. f_varint(20, 2)
  elseif type(v) == "number" then
    body = body .. f_float(2, v) .. f_varint(20, 1)
  elseif type(v) == "table" then
    for _, x in ipairs(v) do body = body .. f_varint(8, x) end
    body = body .. f_varint(20, 7)
  else
    error("onnx: unsupported attribute " .. name)
  end
  return body
end

--- Adds a node; returns its (first) output name.
function Graph:op(op_type, inputs, attrs, noutputs)
  local outs = {}
  for i = 1, noutputs or 1 do outs[i] = self:name(op_type:lower()) end
  local body = {}
  for _, x in ipairs(inputs) do body[#body + 1] = f_bytes(1, x) end
  for _, o in ipairs(outs) do body[#body + 1] = f_bytes(2, o) end
  body[#body + 1] = f_bytes(3, outs[1] .. "_node")
  body[#body + 1] = f_bytes(4, op_type)
  local names = {}
  for k in pairs(attrs or {}) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do body[#body + 1] = f_bytes(5, attribute(k, attrs[k])) end
  self.nodes[#self.nodes + 1] = table.concat(body)
  return table.unpack(outs)
end

-- A tensor initializer from raw little-endian bytes.
function Graph:init(name, dtype, dims, raw)
  local body = {}
  for _, d in ipairs(dims) do body[#body + 1] = f_varint(1, d) end
  body[#body + 1] = f_varint(2, dtype)
  body[#body + 1] = f_bytes(8, name)
  body[#body + 1] = f_bytes(9, raw)
  self.inits[#self.inits + 1] = table.concat(body)
  return name
end

--- A constant int64 vector or float scalar, shared by value.
function Graph:int64s(values)
  local k = "i:" .. table.concat(values, ",")
  if not self.consts[k] then
    local raw = {}
    for i, v in ipairs(values) do raw[i] = string.pack("<i8", v) end
    self.consts[k] = self:init(self:name("const"), INT64, {#values}, table.concat(raw))
  end
  return self.consts[k]
end

function Graph:int64(value)
  local k = "s:" .. value
  if not self.consts[k] then self.consts[k] = self:init(self:name("const"), INT64, {}, string.pack("<i8", value)) end
  return self.consts[k]
end

function Graph:float(value)
  local k = "f:" .. string.format("%.9g", value)
  if not self.consts[k] then self.consts[k] = self:init(self:name("const"), FLOAT, {}, string.pack("<f", value)) end
  return self.consts[k]
end

local function value_info(name, elem, dims)
  local shape = {}
  for _, d in ipairs(dims) do
    shape[#shape + 1] = f_bytes(1, type(d) == "string" and f_bytes(2, d) or f_varint(1, d))
  end
  local tensor_type = f_varint(1, elem) .. f_bytes(2, table.concat(shape))
  return f_bytes(1, name) .. f_bytes(2, f_bytes(1, tensor_type))
end
-- }============================================================

-- Raw float32 bytes of every tensor of a state dict, through a safetensors
-- file (the data are stored contiguous and little-endian there).
local function raw_tensors(tensors)
  local path = os.tmpname()
  local ok, err = bert.save_safetensors(path, tensors)
  if not ok then os.remove(path) error("onnx: " .. tostring(err), 3) end
  local f = assert(io.open(path, "rb"))
  local data = f:read("a")
  f:close()
  os.remove(path)
  local n = string.unpack("<I8", data)
  local header = cjson.decode(data:sub(9, 8 + n))
  local out = {}
  for name, info in pairs(header) do
    if name ~= "__metadata__" then
      out[name] = {shape = info.shape, raw = data:sub(9 + n + info.data_offsets[1], 8 + n + info.data_offsets[2])}
    end
  end
  return out
end

local HEADS = {
  BertModel = true, BertForPreTraining = true, BertForMaskedLM = true, BertForSequenceClassification = true,
  BertForTokenClassification = true, BertForQuestionAnswering = true,
}

--- Writes model (a BERT of any head) to path as ONNX.  Returns the list of
-- output names, or raises an error naming what is not supported.
function M.export(model, path)
  local arch = model.architecture or (model.config.architectures or {})[1] or getmetatable(model).__name
  if not HEADS[arch] then
    error("onnx.export: " .. tostring(arch) .. " is not supported (BERT architectures: BertModel, BertFor*)", 2)
  end
  local c = model.config
  if c.hidden_act ~= "gelu" and c.hidden_act ~= "gelu_new" then
    error("onnx.export: hidden_act " .. tostring(c.hidden_act) .. " is not supported (gelu, gelu_new)", 2)
  end
  if (c.position_embedding_type or "absolute") ~= "absolute" then
    error("onnx.export: position_embedding_type " .. tostring(c.position_embedding_type) .. " is not supported", 2)
  end
  -- the weights, with "bert." dropped and linear weights transposed for MatMul
  local sd, wanted = model:state_dict(), {}
  for name, t in pairs(sd) do
    local short = name:gsub("^bert%.", "")
    if t:dim() == 2 and not short:find("embeddings") then
      wanted[short .. ".T"] = t:t():contiguous()
    else
      wanted[short] = t
    end
  end
  if wanted["cls.predictions.transform.dense.weight.T"] and not wanted["cls.predictions.decoder.weight.T"] then
    wanted["cls.predictions.decoder.weight.T"] = sd["bert.embeddings.word_embeddings.weight"]:t():contiguous()
  end
  local raw = raw_tensors(wanted)
  local g = new_graph()
  local function W(name)
    local r = raw[name] or error("onnx.export: the model has no parameter " .. name, 3)
    if not r.added then
      g:init(name, FLOAT, r.shape, r.raw)
      r.added = true
    end
    return name
  end
  local function linear(x, prefix) return g:op("Add", {g:op("MatMul", {x, W(prefix .. ".weight.T")}), W(prefix .. ".bias")}) end
  local function layer_norm(x, prefix)
    return g:op("LayerNormalization", {x, W(prefix .. ".weight"), W(prefix .. ".bias")},
      {axis = -1, epsilon = c.layer_norm_eps or 1e-12})
  end
  local function gelu(x)
    if c.hidden_act == "gelu_new" then   -- 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
      local x3 = g:op("Mul", {g:op("Mul", {x, x}), x})
      local inner = g:op("Mul", {g:op("Add", {x, g:op("Mul", {x3, g:float(0.044715)})}), g:float(math.sqrt(2 / math.pi))})
      return g:op("Mul", {g:op("Mul", {x, g:float(0.5)}), g:op("Add", {g:op("Tanh", {inner}), g:float(1)})})
    end
    -- 0.5 x (1 + erf(x / sqrt 2))
    local e = g:op("Erf", {g:op("Div", {x, g:float(math.sqrt(2))})})
    return g:op("Mul", {g:op("Mul", {x, g:float(0.5)}), g:op("Add", {e, g:float(1)})})
  end

  -- embeddings: words + positions 0..T-1 + token types, then LayerNorm
  local seq_len = g:op("Slice", {g:op("Shape", {"input_ids"}), g:int64s({1}), g:int64s({2})})
  local pos = g:op("Slice", {W("embeddings.position_embeddings.weight"), g:int64s({0}), seq_len, g:int64s({0})})
  local x = g:op("Add", {g:op("Add", {g:op("Gather", {W("embeddings.word_embeddings.weight"), "input_ids"}), pos}),
    g:op("Gather", {W("embeddings.token_type_embeddings.weight"), "token_type_ids"})})
  x = layer_norm(x, "embeddings.LayerNorm")

  -- the key mask as an additive bias [B, 1, 1, T]: 0 for tokens, -1e9 for padding
  local m = g:op("Cast", {"attention_mask"}, {to = FLOAT})
  local bias = g:op("Mul", {g:op("Sub", {g:float(1), m}), g:float(-1e9)})
  bias = g:op("Unsqueeze", {bias, g:int64s({1, 2})})

  local H, heads = c.hidden_size, c.num_attention_heads
  local dh = H // heads
  local split_heads = g:int64s({0, 0, heads, dh})
  for l = 0, c.num_hidden_layers - 1 do
    local p = string.format("encoder.layer.%d.", l)
    local function heads_of(t, perm) return g:op("Transpose", {g:op("Reshape", {t, split_heads})}, {perm = perm}) end
    local q = heads_of(linear(x, p .. "attention.self.query"), {0, 2, 1, 3})      -- [B, h, T, d]
    local k = heads_of(linear(x, p .. "attention.self.key"), {0, 2, 3, 1})        -- [B, h, d, T]
    local v = heads_of(linear(x, p .. "attention.self.value"), {0, 2, 1, 3})
    local scores = g:op("Add", {g:op("Mul", {g:op("MatMul", {q, k}), g:float(1 / math.sqrt(dh))}), bias})
    local ctx = g:op("MatMul", {g:op("Softmax", {scores}, {axis = -1}), v})
    ctx = g:op("Reshape", {g:op("Transpose", {ctx}, {perm = {0, 2, 1, 3}}), g:int64s({0, 0, H})})
    local a = layer_norm(g:op("Add", {linear(ctx, p .. "attention.output.dense"), x}), p .. "attention.output.LayerNorm")
    local inter = gelu(linear(a, p .. "intermediate.dense"))
    x = layer_norm(g:op("Add", {linear(inter, p .. "output.dense"), a}), p .. "output.LayerNorm")
  end

  local outputs = {}
  local function output(name, value, dims)
    g.nodes[#g.nodes + 1] = f_bytes(1, value) .. f_bytes(2, name) .. f_bytes(3, name .. "_node") .. f_bytes(4, "Identity")
    outputs[#outputs + 1] = {name, dims}
  end
  local B, T = "batch", "sequence"
  local function pooled()
    local first = g:op("Gather", {x, g:int64(0)}, {axis = 1})                     -- [B, H]: the first token
    return g:op("Tanh", {linear(first, "pooler.dense")})
  end
  if arch == "BertModel" then
    output("last_hidden_state", x, {B, T, H})
    if raw["pooler.dense.weight.T"] then output("pooler_output", pooled(), {B, H}) end
  elseif arch == "BertForPreTraining" or arch == "BertForMaskedLM" then
    local h = layer_norm(gelu(linear(x, "cls.predictions.transform.dense")), "cls.predictions.transform.LayerNorm")
    local logits = g:op("Add", {g:op("MatMul", {h, W("cls.predictions.decoder.weight.T")}), W("cls.predictions.bias")})
    output(arch == "BertForMaskedLM" and "logits" or "prediction_logits", logits, {B, T, c.vocab_size})
    if arch == "BertForPreTraining" then
      output("seq_relationship_logits", linear(pooled(), "cls.seq_relationship"), {B, 2})
    end
  elseif arch == "BertForSequenceClassification" then
    output("logits", linear(pooled(), "classifier"), {B, raw["classifier.bias"].shape[1]})
  elseif arch == "BertForTokenClassification" then
    output("logits", linear(x, "classifier"), {B, T, raw["classifier.bias"].shape[1]})
  else
    local both = linear(x, "qa_outputs")                                           -- [B, T, 2]
    -- padding at heads.PAD_LOGIT, as the model's forward: logit * m + (1 - m) * PAD_LOGIT
    local pad = g:op("Mul", {g:op("Sub", {g:float(1), m}), g:float(require("bert.models.heads").PAD_LOGIT)})
    local function masked(t) return g:op("Add", {g:op("Mul", {t, m}), pad}) end
    output("start_logits", masked(g:op("Gather", {both, g:int64(0)}, {axis = 2})), {B, T})
    output("end_logits", masked(g:op("Gather", {both, g:int64(1)}, {axis = 2})), {B, T})
  end

  local graph = {}
  for _, n in ipairs(g.nodes) do graph[#graph + 1] = f_bytes(1, n) end
  graph[#graph + 1] = f_bytes(2, "bert")
  for _, i in ipairs(g.inits) do graph[#graph + 1] = f_bytes(5, i) end
  for _, name in ipairs({"input_ids", "attention_mask", "token_type_ids"}) do
    graph[#graph + 1] = f_bytes(11, value_info(name, INT64, {B, T}))
  end
  for _, o in ipairs(outputs) do graph[#graph + 1] = f_bytes(12, value_info(o[1], FLOAT, o[2])) end
  local model_bytes = f_varint(1, IR_VERSION) .. f_bytes(2, "bert (Lua)") .. f_bytes(3, tostring(bert.version or "")) ..
    f_bytes(7, table.concat(graph)) .. f_bytes(8, f_bytes(1, "") .. f_varint(2, M.OPSET))
  local ok, err = require("bert.fs").write_atomic(path, model_bytes)
  if not ok then error("onnx.export: " .. tostring(err), 2) end
  local names = {}
  for i, o in ipairs(outputs) do names[i] = o[1] end
  return names
end

--- Where the Node modules with onnxruntime-node are: $BERT_NODE_MODULES,
-- else .deps/node/node_modules (make deps), else nil.
function M.node_modules()
  local fs = require("bert.fs")
  local env = os.getenv("BERT_NODE_MODULES")
  if env and fs.exists(env .. "/onnxruntime-node") then return env end
  if fs.exists(".deps/node/node_modules/onnxruntime-node") then return ".deps/node/node_modules" end
  return nil
end

--- Runs the ONNX file in ONNX Runtime through node (tools/onnx_run.js) and
-- the model here on the same padded batch (two rows, the second padded;
-- token types of both kinds); returns {output name = max abs difference}.
-- Raises an error when node or onnxruntime-node is missing.
function M.check(model, path, inputs)
  local modules = M.node_modules()
  if not modules then
    error("onnx.check: onnxruntime-node is not installed (make deps puts it in .deps/node)", 2)
  end
  local V = model.config.vocab_size
  inputs = inputs or {
    input_ids = {{2 % V, 5 % V, 7 % V, 9 % V, 3 % V, 11 % V}, {2 % V, 8 % V, 3 % V, 0, 0, 0}},
    attention_mask = {{1, 1, 1, 1, 1, 1}, {1, 1, 1, 0, 0, 0}},
    token_type_ids = {{0, 0, 0, 1, 1, 1}, {0, 0, 0, 0, 0, 0}},
  }
  local ipath = os.tmpname()
  assert(require("bert.fs").write_atomic(ipath, cjson.encode(inputs)))
  local q = function(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
  local cmd = string.format("NODE_PATH=%s node %s %s %s 2>&1", q(modules), q("tools/onnx_run.js"), q(path), q(ipath))
  local pipe = io.popen(cmd)
  local text = pipe:read("a")
  local ok = pipe:close()
  os.remove(ipath)
  if not ok then error("onnx.check: onnxruntime failed: " .. text, 2) end
  local theirs = cjson.decode(text)
  local ours = bert.no_grad(function()
    local t = {}
    for k, v in pairs(inputs) do t[k] = bert.tensor(v, "int32") end
    return model:forward(t)
  end)
  local diffs = {}
  for name, v in pairs(theirs) do
    local mine = ours[name] or error("onnx.check: the model has no output " .. name, 2)
    local flat = mine:contiguous():view(-1):totable()
    if #flat ~= #v.data then error(string.format("onnx.check: %s has %d values here, %d in ONNX Runtime", name, #flat, #v.data), 2) end
    local worst = 0
    for i = 1, #flat do
      local d = math.abs(flat[i] - v.data[i])
      if d ~= d then d = math.huge end
      if d > worst then worst = d end
    end
    diffs[name] = worst
  end
  return diffs
end

return M
