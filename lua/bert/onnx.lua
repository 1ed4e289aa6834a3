--- bert.onnx: a model of any family (BERT, RoBERTa, ALBERT, ELECTRA,
-- DistilBERT, DeBERTa-v2/v3) and most heads as an ONNX file, for ONNX
-- Runtime and the other deployment tools.  Opset 17, standard ops only
-- (Gather, MatMul, Softmax, Erf, LayerNormalization, CumSum,
-- GatherElements...), dynamic batch and sequence axes, int64 inputs
-- input_ids, attention_mask and token_type_ids (the last only where the
-- model reads token types), outputs named as the model's forward names them
-- (last_hidden_state, pooler_output, logits, prediction_logits,
-- seq_relationship_logits, sop_logits, start_logits, end_logits).
--
--   require("bert.onnx").export(model, "model.onnx")
--
-- There is no second model definition here: the export walks the model's
-- own module tree and lowers each module by its class (bert.onnx.lower;
-- the blocks every family is built from in bert.onnx.blocks, the heads in
-- bert.onnx.heads, DeBERTa's attention in bert.onnx.deberta_v2).  The
-- protobuf is written by hand (bert.onnx.graph): no onnx package is needed.
local bert = require("bert")
local cjson = require("cjson")
local graph = require("bert.onnx.graph")
local lower = require("bert.onnx.lower")
require("bert.onnx.blocks")
require("bert.onnx.heads")
require("bert.onnx.deberta_v2")

local M = {}

M.OPSET = graph.OPSET

--- Writes model to path as ONNX.  Returns the list of output names, or
-- raises a one-line error naming the model (class, family, head) and what
-- is not supported (a family with no ONNX form: bilm).
function M.export(model, path)
  local ex = lower.exporter(model)
  local f = lower.lowering(lower.models, model)
  if not f then ex:unsupported("no ONNX form for its " .. tostring(getmetatable(model).__name) .. " model") end
  f(ex, model)
  local ok, err = require("bert.fs").write_atomic(path, ex.g:bytes("bert", tostring(bert.version or "")))
  if not ok then error("onnx.export: " .. tostring(err), 0) end
  local names = {}
  for i, o in ipairs(ex.g.outputs) do names[i] = o[1] end
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

-- tools/onnx_run.js: the clone's from its root, else the one beside the
-- running script (an installed `bert export` keeps both in share/bert/tools)
local function runner()
  local fs = require("bert.fs")
  local script_dir = arg and arg[0] and arg[0]:match("^(.*)/[^/]*$")
  for _, path in ipairs({"tools/onnx_run.js", script_dir and script_dir .. "/onnx_run.js"}) do
    if fs.exists(path) then return path end
  end
  error("onnx.check: tools/onnx_run.js is not found (run from the repository root)", 3)
end

--- Runs the ONNX file in ONNX Runtime through node (tools/onnx_run.js) and
-- the model here on the same padded batch (by default two rows, the second
-- padded with the model's pad_token_id; token types of both kinds where it
-- has two; for multiple choice, both rows as two choices of two examples),
-- or on each batch of a list of them (inputs[1], inputs[2]...); returns
-- {output name = max abs difference}.
-- Raises an error when node or onnxruntime-node is missing.
function M.check(model, path, inputs)
  local modules = M.node_modules()
  if not modules then
    error("onnx.check: onnxruntime-node is not installed (sh tools/deps.sh onnxruntime-node puts it in " ..
      ".deps/node; make deps installs everything)", 2)
  end
  if not inputs then
    local a = model.arch
    local V, pad, second = a.vocab_size, a.pad_token_id or 0, (a.type_vocab_size or 0) > 1 and 1 or 0
    inputs = {
      input_ids = {{2 % V, 5 % V, 7 % V, 9 % V, 3 % V, 11 % V}, {2 % V, 8 % V, 3 % V, pad, pad, pad}},
      attention_mask = {{1, 1, 1, 1, 1, 1}, {1, 1, 1, 0, 0, 0}},
      token_type_ids = {{0, 0, 0, second, second, second}, {0, 0, 0, 0, 0, 0}},
    }
    if model.family and model.family.architectures[model.architecture] == "multiple_choice" then
      for k, rows in pairs(inputs) do inputs[k] = {{rows[1], rows[2]}, {rows[2], rows[1]}} end
    end
  end
  local ipath = os.tmpname()
  assert(require("bert.fs").write_atomic(ipath, cjson.encode(inputs)))
  local q = function(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
  local cmd = string.format("NODE_PATH=%s node %s %s %s 2>&1", q(modules), q(runner()), q(path), q(ipath))
  local pipe = io.popen(cmd)
  local text = pipe:read("a")
  local ok = pipe:close()
  os.remove(ipath)
  if not ok then error("onnx.check: onnxruntime failed: " .. text, 2) end
  local batches, results = inputs, cjson.decode(text)
  if not inputs[1] then batches, results = {inputs}, {results} end
  local diffs = {}
  for b, batch in ipairs(batches) do
    local ours = bert.no_grad(function()
      local t = {}
      for k, v in pairs(batch) do t[k] = bert.tensor(v, "int32") end
      return model:forward(t)
    end)
    for name, v in pairs(results[b]) do
      local mine = ours[name] or error("onnx.check: the model has no output " .. name, 2)
      local flat = mine:contiguous():view(-1):totable()
      if #flat ~= #v.data then
        error(string.format("onnx.check: %s has %d values here, %d in ONNX Runtime", name, #flat, #v.data), 2)
      end
      local worst = diffs[name] or 0
      for i = 1, #flat do
        local d = math.abs(flat[i] - v.data[i])
        if d ~= d then d = math.huge end
        if d > worst then worst = d end
      end
      diffs[name] = worst
    end
  end
  return diffs
end

return M
