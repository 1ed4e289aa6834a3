-- Exports a model directory of any family (BERT, RoBERTa, ALBERT, ELECTRA,
-- DistilBERT, DeBERTa-v2/v3; the encoder, pretraining, MLM, sequence /
-- token classification, QA, replaced-token detection) to ONNX through
-- bert.onnx: opset 17, dynamic batch and sequence axes, int64 inputs
-- input_ids, attention_mask and, where the model reads them,
-- token_type_ids (docs/onnx.md).  --check runs the file in ONNX Runtime
-- (npm onnxruntime-node: `sh tools/deps.sh onnxruntime-node` or `make deps`) on a
-- padded batch and compares every output with ours.
--
--   lua5.4 tools/export_onnx.lua --model runs/demo/checkpoint --output model.onnx --check
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cli = require("bert.cli")

local p = cli.parser("export_onnx.lua", "Export a model directory of any family to ONNX (opset 17, dynamic axes).")
p:option("--model", "Model directory (config.json + model.safetensors; a run directory's best/ or checkpoint/)"):count(1)
p:option("--output", "The .onnx file to write"):count(1)
p:flag("--check", "Run the exported model in ONNX Runtime (node) and compare its outputs with ours")
p:option("--tolerance", "Largest absolute difference --check accepts", "1e-4"):convert(cli.number("--tolerance", 0))
local args = p:parse()

cli.main("export_onnx.lua", function()
  local bert = require("bert")
  local onnx = require("bert.onnx")
  local dir = require("bert.finetune").model_dir(args.model)
  if not dir then error("--model: " .. args.model .. " holds no config.json (nor best/ or checkpoint/)", 0) end
  local model = bert.from_pretrained(dir, {verbose = false})
  model:evaluate()
  -- a model onnx.export cannot write (its refusal names the architecture): one line, no traceback
  local exported, names = pcall(onnx.export, model, args.output)
  if not exported then
    local refusal = type(names) == "string" and names:match("^[%w_/%.%-]+%.lua:%d+: (onnx%.export: .*)$")
    error(refusal or names, 0)
  end
  print(string.format("wrote %s: %s, outputs %s", args.output, model.architecture, table.concat(names, ", ")))
  if args.check then
    local r = onnx.check(model, args.output)
    for _, name in ipairs(names) do print(string.format("  %-24s max |ours - onnxruntime| = %.3g", name, r[name])) end
    for _, name in ipairs(names) do
      if not (r[name] <= args.tolerance) then error(string.format("%s differs by %.3g (> %g)", name, r[name], args.tolerance), 0) end
    end
    print("  within " .. args.tolerance)
  end
end)
