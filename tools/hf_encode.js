// Encodes texts with Hugging Face's tokenizers (npm @anush008/tokenizers)
// for spec/tokenizer_hf_spec.lua:  node tools/hf_encode.js IN.json OUT.json
// IN: {"files": [tokenizer.json paths], "texts": [...], "pairs": [[a, b], ...]}
// OUT: {"results": {file: {"load_error": msg} | {"single": [...], "pair": [...]}}}
if (process.argv.length < 4 || process.argv.includes("--help") || process.argv.includes("-h")) {
  console.log("usage: node tools/hf_encode.js IN.json OUT.json\n" +
    "Encodes IN's texts with every tokenizer.json IN lists, through Hugging Face's tokenizers.");
  process.exit(process.argv.includes("--help") || process.argv.includes("-h") ? 0 : 1);
}
const fs = require("fs");
const hf = require("@anush008/tokenizers");

(async () => {
  const inp = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
  const results = {};
  for (const file of inp.files) {
    let tok;
    try { tok = hf.Tokenizer.fromFile(file); } catch (e) { results[file] = { load_error: String(e) }; continue; }
    const flat = (e) => ({ ids: e.getIds(), offsets: e.getOffsets(), type_ids: e.getTypeIds() });
    const single = [], pair = [];
    for (const t of inp.texts) single.push(flat(await tok.encode(t, null, { addSpecialTokens: true })));
    for (const p of inp.pairs) pair.push(flat(await tok.encode(p[0], p[1], { addSpecialTokens: true })));
    results[file] = { single, pair };
  }
  fs.writeFileSync(process.argv[3], JSON.stringify({ results }));
})().catch((e) => { console.error(e); process.exit(1); });
