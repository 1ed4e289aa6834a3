// Runs an ONNX model in ONNX Runtime (npm onnxruntime-node) on int64 inputs
// and prints the outputs as JSON {name: {dims, data}}:
//   NODE_PATH=.deps/node/node_modules node tools/onnx_run.js MODEL.onnx INPUTS.json
// INPUTS.json: {"input_ids": [[...], ...], "attention_mask": [...], "token_type_ids": [...]}
// ([batch][sequence], or [batch][choices][sequence] for multiple choice),
// or a list of such batches (one session runs them all; a list of outputs);
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
  const run = async (batch) => {
    const feeds = {};
    for (const name of session.inputNames) {
      const rows = batch[name];
      if (!rows) throw new Error(inputsPath + ": no input " + name);
      const dims = [];   // [batch, sequence], or [batch, choices, sequence]
      for (let a = rows; Array.isArray(a); a = a[0]) dims.push(a.length);
      feeds[name] = new ort.Tensor("int64", BigInt64Array.from(rows.flat(Infinity).map((v) => BigInt(v))), dims);
    }
    const out = await session.run(feeds);
    const res = {};
    for (const k of Object.keys(out)) res[k] = { dims: out[k].dims.map(Number), data: Array.from(out[k].data) };
    return res;
  };
  const res = [];
  for (const batch of Array.isArray(inp) ? inp : [inp]) res.push(await run(batch));
  console.log(JSON.stringify(Array.isArray(inp) ? res : res[0]));
})().catch((e) => { console.error("onnx_run: " + String(e)); process.exit(1); });
