// Runs an ONNX model in ONNX Runtime (npm onnxruntime-node) on int64 inputs
// and prints the outputs as JSON {name: {dims, data}}:
//   NODE_PATH=.deps/node/node_modules node tools/onnx_run.js MODEL.onnx INPUTS.json
// INPUTS.json: {"input_ids": [[...], ...], "attention_mask": [...], "token_type_ids": [...]};
// the model is fed the inputs it declares (DistilBERT and DeBERTa-v3 have no token_type_ids).
// Used by tools/export_onnx.lua --check and spec/onnx_spec.lua.
if (process.argv.includes("--help") || process.argv.includes("-h") || process.argv.length < 4) {
  console.log("usage: NODE_PATH=.deps/node/node_modules node tools/onnx_run.js MODEL.onnx INPUTS.json\n" +
    "Runs an exported model in ONNX Runtime and prints its outputs as JSON.");
  process.exit(process.argv.length < 4 && !process.argv.includes("--help") && !process.argv.includes("-h") ? 2 : 0);
}
const fs = require("fs");
const ort = require("onnxruntime-node");
(async () => {
  const [model, inputsPath] = process.argv.slice(2);
  const inp = JSON.parse(fs.readFileSync(inputsPath, "utf8"));
  const session = await ort.InferenceSession.create(model);
  const feeds = {};
  for (const name of session.inputNames) {
    const rows = inp[name];
    if (!rows) throw new Error(inputsPath + ": no input " + name);
    const flat = rows.flat().map((v) => BigInt(v));
    feeds[name] = new ort.Tensor("int64", BigInt64Array.from(flat), [rows.length, rows[0].length]);
  }
  const out = await session.run(feeds);
  const res = {};
  for (const k of Object.keys(out)) res[k] = { dims: out[k].dims.map(Number), data: Array.from(out[k].data) };
  console.log(JSON.stringify(res));
})().catch((e) => { console.error("onnx_run: " + String(e)); process.exit(1); });
