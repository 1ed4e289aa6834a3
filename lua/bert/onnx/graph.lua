--- bert.onnx.graph: an ONNX graph under construction and its protobuf,
-- written here by hand (no onnx package is needed).  Values are names
-- (strings); g:op adds a node and returns its outputs' names; parameters
-- enter as initializers through g:param, their bytes taken in one pass
-- through a safetensors file when the graph is serialized.
local bert = require("bert.core")
local cjson = require("cjson")

local M = {}

M.OPSET = 17          -- LayerNormalization is one op from 17 on
local IR_VERSION = 8
M.FLOAT, M.INT64 = 1, 7

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

local function tensor_proto(name, dtype, dims, raw)
  local body = {}
  for _, d in ipairs(dims) do body[#body + 1] = f_varint(1, d) end
  body[#body + 1] = f_varint(2, dtype)
  body[#body + 1] = f_bytes(8, name)
  body[#body + 1] = f_bytes(9, raw)
  return table.concat(body)
end

-- dims: integers, or strings for dynamic axes ("batch", "sequence")
local function value_info(name, elem, dims)
  local shape = {}
  for _, d in ipairs(dims) do
    shape[#shape + 1] = f_bytes(1, type(d) == "string" and f_bytes(2, d) or f_varint(1, d))
  end
  local tensor_type = f_varint(1, elem) .. f_bytes(2, table.concat(shape))
  return f_bytes(1, name) .. f_bytes(2, f_bytes(1, tensor_type))
end
-- }============================================================

local Graph = {}
Graph.__index = Graph

function M.new()
  return setmetatable({nodes = {}, inits = {}, n = 0, consts = {}, params = {}, param_list = {},
                       inputs = {}, input_dims = {"batch", "sequence"}, outputs = {}}, Graph)
end

function Graph:name(base)
  self.n = self.n + 1
  return string.format("%s_%d", base, self.n)
end

--- Adds a node; returns its output names (noutputs, default 1).
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

--- The graph inputs, int64 [batch, sequence] each (g.input_dims), in this order.
M.INPUTS = {"input_ids", "attention_mask", "token_type_ids"}

--- A graph input, declared on first use: a model that never reads
-- token_type_ids (DistilBERT, DeBERTa-v3) has no such input.
function Graph:input(name)
  self.inputs[name] = true
  return name
end

--- Makes value a graph output under name, with dims (integers or axis names).
function Graph:output(name, value, dims)
  self.nodes[#self.nodes + 1] = f_bytes(1, value) .. f_bytes(2, name) .. f_bytes(3, name .. "_node") ..
    f_bytes(4, "Identity")
  self.outputs[#self.outputs + 1] = {name, dims}
end

--- A parameter tensor as an initializer, once however often it is read
-- (ALBERT's shared layers, a tied decoder); transposed: stored as its
-- transpose (a Linear's weight [out, in] for MatMul as [in, out]).
function Graph:param(t, transposed)
  local cache = self.params[transposed and "t" or "n"]
  if not cache then
    cache = setmetatable({}, {__mode = "k"})
    self.params[transposed and "t" or "n"] = cache
  end
  if not cache[t] then
    local name = self:name(transposed and "weight_t" or "param")
    cache[t] = name
    self.param_list[#self.param_list + 1] = {name, transposed and t:t():contiguous() or t}
  end
  return cache[t]
end

--- Constants, shared by value: an int64 vector, an int64 scalar, a float scalar.
function Graph:int64s(values)
  local k = "i:" .. table.concat(values, ",")
  if not self.consts[k] then
    local raw = {}
    for i, v in ipairs(values) do raw[i] = string.pack("<i8", v) end
    local name = self:name("const")
    self.inits[#self.inits + 1] = tensor_proto(name, M.INT64, {#values}, table.concat(raw))
    self.consts[k] = name
  end
  return self.consts[k]
end

function Graph:int64(value)
  local k = "s:" .. value
  if not self.consts[k] then
    local name = self:name("const")
    self.inits[#self.inits + 1] = tensor_proto(name, M.INT64, {}, string.pack("<i8", value))
    self.consts[k] = name
  end
  return self.consts[k]
end

function Graph:float(value)
  local k = "f:" .. string.format("%.9g", value)
  if not self.consts[k] then
    local name = self:name("const")
    self.inits[#self.inits + 1] = tensor_proto(name, M.FLOAT, {}, string.pack("<f", value))
    self.consts[k] = name
  end
  return self.consts[k]
end

-- Raw float32 bytes of the parameters, through one safetensors file (the
-- data are stored contiguous and little-endian there).
local function param_protos(list)
  if #list == 0 then return {} end
  local named = {}
  for _, np in ipairs(list) do named[np[1]] = np[2] end
  local path = os.tmpname()
  local ok, err = bert.save_safetensors(path, named)
  if not ok then os.remove(path) error("onnx.export: " .. tostring(err), 0) end
  local f = assert(io.open(path, "rb"))
  local data = f:read("a")
  f:close()
  os.remove(path)
  local n = string.unpack("<I8", data)
  local header = cjson.decode(data:sub(9, 8 + n))
  local out = {}
  for _, np in ipairs(list) do
    local info = header[np[1]]
    out[#out + 1] = tensor_proto(np[1], M.FLOAT, info.shape,
      data:sub(9 + n + info.data_offsets[1], 8 + n + info.data_offsets[2]))
  end
  return out
end

--- The serialized ModelProto.
function Graph:bytes(graph_name, version)
  local graph = {}
  for _, n in ipairs(self.nodes) do graph[#graph + 1] = f_bytes(1, n) end
  graph[#graph + 1] = f_bytes(2, graph_name)
  for _, i in ipairs(self.inits) do graph[#graph + 1] = f_bytes(5, i) end
  for _, i in ipairs(param_protos(self.param_list)) do graph[#graph + 1] = f_bytes(5, i) end
  for _, name in ipairs(M.INPUTS) do
    if self.inputs[name] then graph[#graph + 1] = f_bytes(11, value_info(name, M.INT64, self.input_dims)) end
  end
  for _, o in ipairs(self.outputs) do graph[#graph + 1] = f_bytes(12, value_info(o[1], M.FLOAT, o[2])) end
  return f_varint(1, IR_VERSION) .. f_bytes(2, "bert (Lua)") .. f_bytes(3, version) ..
    f_bytes(7, table.concat(graph)) .. f_bytes(8, f_bytes(1, "") .. f_varint(2, M.OPSET))
end

return M
