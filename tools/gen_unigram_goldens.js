// Generates the Unigram goldens in spec/fixtures/tokenizer_unigram/ from two
// references: SentencePiece itself (`spm_encode --output_format=id`, Debian
// package `sentencepiece`) for the .model files, and Hugging Face's Rust
// `tokenizers` (npm @anush008/tokenizers) for tokenizer.json files converted
// from those models the way transformers converts them (AlbertConverter,
// DebertaV2Converter).  Run once, after training the models (see
// docs/tokenizers.md, "Unigram goldens"):
//   make deps        # spm_encode, and @anush008/tokenizers into .deps/tok
//   NODE_PATH=.deps/tok/node_modules node tools/gen_unigram_goldens.js
// The specs read the JSON files; they need neither node nor spm.
if (process.argv.includes("--help") || process.argv.includes("-h")) {
  console.log("usage: NODE_PATH=.deps/tok/node_modules node tools/gen_unigram_goldens.js\n" +
    "Regenerates spec/fixtures/tokenizer_unigram/*goldens.json and *.tokenizer.json from the\n" +
    "committed .model files with spm_encode and Hugging Face's tokenizers (npm).");
  process.exit(0);
}
const fs = require("fs");
const os = require("os");
const path = require("path");
const { execFileSync } = require("child_process");
const hf = require("@anush008/tokenizers");

const root = path.join(__dirname, "..");
const fx = path.join(root, "spec/fixtures/tokenizer_unigram");

// ---- a minimal ModelProto reader (pieces, trainer and normalizer specs)
function readModel(buf) {
  let p = 0;
  const varint = (b, end) => {
    let x = 0n, sh = 0n;
    for (;;) {
      if (p >= end) throw new Error("truncated varint");
      const c = b[p++];
      x |= BigInt(c & 0x7f) << sh;
      if (!(c & 0x80)) return x;
      sh += 7n;
    }
  };
  const fields = (b, start, end, cb) => {
    p = start;
    while (p < end) {
      const tag = Number(varint(b, end)), f = tag >> 3, wt = tag & 7;
      if (wt === 0) cb(f, BigInt.asIntN(32, varint(b, end)));
      else if (wt === 2) { const n = Number(varint(b, end)); const s = p; p += n; const save = p; cb(f, b.subarray(s, s + n)); p = save; }
      else if (wt === 5) { const v = b.readFloatLE(p); p += 4; cb(f, v); }
      else if (wt === 1) p += 8;
      else throw new Error("wire type " + wt);
    }
  };
  const m = { pieces: [], trainer: {}, normalizer: { add_dummy_prefix: true } };
  fields(buf, 0, buf.length, (f, v) => {
    if (f === 1) {
      const piece = { type: 1, score: 0 };
      const save = p;
      fields(buf, v.byteOffset - buf.byteOffset, v.byteOffset - buf.byteOffset + v.length, (g, x) => {
        if (g === 1) piece.piece = x.toString("utf8");
        else if (g === 2) piece.score = x;
        else if (g === 3) piece.type = Number(x);
      });
      p = save;
      m.pieces.push(piece);
    } else if (f === 2) {
      const save = p;
      fields(buf, v.byteOffset - buf.byteOffset, v.byteOffset - buf.byteOffset + v.length, (g, x) => {
        if (g === 40) m.trainer.unk_id = Number(x);
        if (g === 35) m.trainer.byte_fallback = x !== 0n;
      });
      p = save;
    } else if (f === 3) {
      const save = p;
      fields(buf, v.byteOffset - buf.byteOffset, v.byteOffset - buf.byteOffset + v.length, (g, x) => {
        if (g === 2) m.normalizer.charsmap = Buffer.from(x);
        if (g === 3) m.normalizer.add_dummy_prefix = x !== 0n;
      });
      p = save;
    }
  });
  if (m.trainer.unk_id === undefined) m.trainer.unk_id = 0;
  return m;
}

// ---- conversions, as transformers' convert_slow_tokenizer.py does them
function addedFromSpm(m, specials, lstrip) {
  // SpmConverter: control (3) and user-defined (4) pieces become added
  // tokens (normalized false); the tokenizer's own special tokens too
  const out = new Map();
  m.pieces.forEach((p, id) => {
    if (p.type === 3 || p.type === 4 || p.type === 2 || specials.includes(p.piece)) {
      out.set(id, { id, content: p.piece, single_word: false, lstrip: lstrip.includes(p.piece),
        rstrip: false, normalized: false, special: p.type !== 4 });
    }
  });
  return [...out.values()].sort((a, b) => a.id - b.id);
}

function template(m, cls, sep) {
  const id = (t) => m.pieces.findIndex((p) => p.piece === t);
  return { type: "TemplateProcessing",
    single: [{ SpecialToken: { id: cls, type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
             { SpecialToken: { id: sep, type_id: 0 } }],
    pair: [{ SpecialToken: { id: cls, type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
           { SpecialToken: { id: sep, type_id: 0 } }, { Sequence: { id: "B", type_id: 1 } },
           { SpecialToken: { id: sep, type_id: 1 } }],
    special_tokens: { [cls]: { id: cls, ids: [id(cls)], tokens: [cls] },
                      [sep]: { id: sep, ids: [id(sep)], tokens: [sep] } } };
}

const metaspace = { type: "Metaspace", replacement: "\u2581", prepend_scheme: "always", split: true };

function albertJson(m) {
  const isDigitComma = (s) => s.length >= 2 && s[s.length - 1] === "," && /[0-9]/.test(s[s.length - 2]);
  const norms = [
    { type: "Replace", pattern: { String: "``" }, content: "\"" },
    { type: "Replace", pattern: { String: "''" }, content: "\"" },
    { type: "NFKD" }, { type: "StripAccents" }, { type: "Lowercase" },
    { type: "Precompiled", precompiled_charsmap: m.normalizer.charsmap.toString("base64") },
    { type: "Replace", pattern: { Regex: " {2,}" }, content: " " },
  ];
  return { version: "1.0", truncation: null, padding: null,
    added_tokens: addedFromSpm(m, ["[CLS]", "[SEP]", "<unk>", "<pad>", "[MASK]"], ["[MASK]"]),
    normalizer: { type: "Sequence", normalizers: norms }, pre_tokenizer: metaspace,
    post_processor: template(m, "[CLS]", "[SEP]"), decoder: metaspace,
    model: { type: "Unigram", unk_id: m.trainer.unk_id,
      vocab: m.pieces.map((p) => [p.piece, isDigitComma(p.piece) ? p.score - 100 : p.score]),
      byte_fallback: false } };
}

function debertaJson(m) {
  const norms = [{ type: "Strip", strip_left: true, strip_right: true },
    { type: "Precompiled", precompiled_charsmap: m.normalizer.charsmap.toString("base64") },
    { type: "Replace", pattern: { Regex: " {2,}" }, content: " " }];
  return { version: "1.0", truncation: null, padding: null,
    added_tokens: addedFromSpm(m, ["[CLS]", "[SEP]", "[UNK]", "[PAD]", "[MASK]"], []),
    normalizer: { type: "Sequence", normalizers: norms },
    pre_tokenizer: { type: "Sequence", pretokenizers: [metaspace] },
    post_processor: template(m, "[CLS]", "[SEP]"), decoder: metaspace,
    model: { type: "Unigram", unk_id: m.trainer.unk_id,
      vocab: m.pieces.map((p) => [p.piece, p.score]), byte_fallback: !!m.trainer.byte_fallback } };
}

// ---- cases
function lines(file, n, step) {
  const all = fs.readFileSync(path.join(root, file), "utf8").split("\n");
  const out = [];
  for (let i = 7; out.length < n && i < all.length; i += step) if (all[i].length > 0) out.push(all[i]);
  return out;
}
const EDGE = [
  "", " ", "   ", "\t", "Hello, world!", "Hello World (test) €5 naïve",
  "  leading spaces", "trailing spaces   ", "multiple    inner     spaces", "tab\tseparated\twords",
  "Café naïve résumé Ångström façade", "cafe\u0301 a\u0301 n\u0303o e\u0300\u0301",
  "Ünïcödé ÀÉÎÕÜ ñ ç ø å æ œ ß", "北京大学 東京 中文字符 한국어 텍스트", "ひらがな カタカナ が ぱ",
  "hi😀 🤣 🥱 ok 👍🏽 ❤️ 👩‍💻 coder", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ ﬁ ﬂ Ⅻ ①",
  "ctrl\u0001chars\u0007and\u001fmore\u007fdel\u0085nel", "zw\u200bsp zw\u200cnj \ufeffbom soft\u00adhyphen",
  "digits 2024 3.14 1,000,000 12345678901234567890", "year 1999, 2000, and 42,",
  "x".repeat(300), "antidisestablishmentarianism".repeat(8),
  "``quoted'' and \"straight\" quotes", "(parenthesised) - dash – en-dash £5 €6",
  "Привет, мир! Καλημέρα κόσμε", "مرحبا بالعالم שלום עולם", "नमस्ते दुनिया",
  "ΟΔΟΣ İstanbul", "the the the the", "a", "▁already▁escaped", "\u00a0nbsp\u3000ideo",
  "In the beginning God created the heaven and the earth.",
];

function hex(buf) { return Buffer.from(buf).toString("hex"); }

// invalid UTF-8 (spm replaces each bad byte with U+FFFD; so do we)
const INVALID = [Buffer.from([0x61, 0xff, 0x62]), Buffer.from([0xc3, 0x28, 0x20, 0xe2, 0x82]),
  Buffer.from("ok \xed\xa0\x80 surrogate", "latin1")];

function spmIds(model, bufs) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spmgold-"));
  const inp = path.join(dir, "in.txt");
  fs.writeFileSync(inp, Buffer.concat(bufs.flatMap((b) => [b, Buffer.from("\n")])));
  const out = execFileSync("spm_encode", ["--model=" + model, "--output_format=id", inp],
    { maxBuffer: 1 << 28 }).toString("utf8").split("\n");
  fs.rmSync(dir, { recursive: true });
  return bufs.map((_, i) => (out[i] === "" ? [] : out[i].split(" ").map(Number)));
}

async function hfEnc(tok, c) {
  const o = c.opts || {};
  if (o.truncation) tok.setTruncation(o.max_length, { strategy: o.strategy || "LongestFirst", stride: o.stride || 0 });
  else tok.disableTruncation();
  tok.disablePadding();
  const e = await tok.encode(c.text, c.pair === undefined ? null : c.pair,
    { addSpecialTokens: o.add_special_tokens !== false });
  const flat = (x) => ({ ids: x.getIds(), tokens: x.getTokens(), offsets: x.getOffsets(), type_ids: x.getTypeIds(),
    special_tokens_mask: x.getSpecialTokensMask() });
  const r = flat(e);
  r.overflowing = e.getOverflowing().map(flat);
  return r;
}

(async () => {
  const version = JSON.parse(fs.readFileSync(require.resolve("@anush008/tokenizers/package.json"))).version;
  const spmVersion = execFileSync("dpkg-query", ["-W", "-f=${Version}", "sentencepiece"]).toString();
  const meta = { generator: "tools/gen_unigram_goldens.js", hf: "@anush008/tokenizers " + version,
    spm: "spm_encode (Debian sentencepiece " + spmVersion + ")" };
  const real = lines("data/brown/brown.txt", 60, 801).concat(lines("data/kjv/kjv.txt", 60, 523));
  const texts = EDGE.concat(real);
  const bufs = texts.map((t) => Buffer.from(t, "utf8")).concat(INVALID);
  const goldens = { meta, models: {} };
  for (const name of ["albert_like", "cased_bf"]) {
    const model = path.join(fx, name + ".model");
    const ids = spmIds(model, bufs);
    goldens.models[name] = bufs.map((b, i) => ({ hex: hex(b), ids: ids[i] }));
  }
  fs.writeFileSync(path.join(fx, "spm_goldens.json"), JSON.stringify(goldens) + "\n");
  console.log("wrote spm_goldens.json");
  // HF: tokenizer.json files converted from the models
  const long = real[3] + " " + real[4] + " " + real[5];
  const q = "What did the jury say about the election?";
  const structural = [
    { text: "Hello world", pair: "How are you?" }, { text: real[0], pair: real[1] },
    { text: "", pair: "" }, { text: "北京", pair: "Café" },
    { text: "Hello [MASK] there[MASK].", pair: "a [SEP] b" },
    { text: long, opts: { truncation: true, max_length: 16 } },
    { text: long, opts: { truncation: true, max_length: 16, stride: 4 } },
    { text: q, pair: long, opts: { truncation: true, max_length: 40, strategy: "OnlySecond", stride: 6 } },
    { text: long, pair: real[6], opts: { truncation: true, max_length: 17, stride: 2 } },
    { text: long, pair: q, opts: { truncation: true, max_length: 25 } },
    { text: q, pair: "and a pair", opts: { add_special_tokens: false } },
  ];
  for (const [name, conv] of [["albert_like", albertJson], ["cased_bf", debertaJson]]) {
    const m = readModel(fs.readFileSync(path.join(fx, name + ".model")));
    const j = conv(m);
    const file = path.join(fx, name + ".tokenizer.json");
    fs.writeFileSync(file, JSON.stringify(j));
    const tok = hf.Tokenizer.fromFile(file);
    const cases = [];
    for (const c of texts.map((t) => ({ text: t })).concat(structural)) {
      let r;
      try { r = await hfEnc(tok, c); } catch (err) { r = { error: String(err) }; }
      cases.push(Object.assign({ text: c.text, pair: c.pair === undefined ? null : c.pair, opts: c.opts || null }, r));
    }
    const decodes = [];
    for (const t of EDGE.slice(0, 20).concat(real.slice(0, 5))) {
      const e = await tok.encode(t, null, { addSpecialTokens: true });
      decodes.push({ ids: e.getIds(), skip: await tok.decode(e.getIds(), true) });
    }
    fs.writeFileSync(path.join(fx, name + ".hf_goldens.json"), JSON.stringify({ meta, cases, decodes }) + "\n");
    console.log("wrote", name + ".hf_goldens.json");
  }
})().catch((e) => { console.error(e); process.exit(1); });
