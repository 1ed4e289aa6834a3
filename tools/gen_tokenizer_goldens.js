// Generates the tokenizer goldens in spec/fixtures/tokenizer/ from Hugging
// Face's own Rust `tokenizers` (npm @anush008/tokenizers).  Run once:
//   mkdir -p /tmp/hf && (cd /tmp/hf && npm install @anush008/tokenizers)
//   sh tools/fetch_bert_vocab.sh && sh tools/fetch_brown.sh
//   NODE_PATH=/tmp/hf/node_modules node tools/gen_tokenizer_goldens.js
// The specs read the JSON files; they do not need node.
//   NODE_PATH=.deps/tok/node_modules node tools/gen_tokenizer_goldens.js --contracts
// writes only spec/fixtures/tokenizer_contracts/ (issue 30: normalized added
// tokens, HF's NFC/NFKC/Nmt/Sequence normalizers and Whitespace/Sequence
// pre-tokenizers, and spm_encode (Debian package sentencepiece) on special
// tokens' text in .model files).
if (process.argv.includes("--help") || process.argv.includes("-h")) {
  console.log("usage: NODE_PATH=/tmp/hf/node_modules node tools/gen_tokenizer_goldens.js [--contracts]\n" +
    "Writes the tokenizer goldens in spec/fixtures/tokenizer/ from Hugging Face's tokenizers (see the top of this file);\n" +
    "--contracts: only those in spec/fixtures/tokenizer_contracts/ (needs spm_encode too).");
  process.exit(0);
}
const fs = require("fs");
const path = require("path");
const hf = require("@anush008/tokenizers");

const root = path.join(__dirname, "..");
const fx = path.join(root, "spec/fixtures/tokenizer");
const vocabTxt = path.join(fx, "bert-base-uncased-vocab.txt");
const brown = process.argv.includes("--contracts") ? []
  : fs.readFileSync(path.join(root, "data/brown.txt"), "utf8").split("\n");

function bertJson(vocabLines) {
  const vocab = {};
  vocabLines.forEach((t, i) => { vocab[t] = i; });
  const id = (t) => vocab[t];
  const specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
  return {
    version: "1.0", truncation: null, padding: null,
    added_tokens: specials.map((t) => ({ id: id(t), content: t, single_word: false,
      lstrip: false, rstrip: false, normalized: false, special: true })),
    normalizer: { type: "BertNormalizer", clean_text: true, handle_chinese_chars: true,
      strip_accents: null, lowercase: true },
    pre_tokenizer: { type: "BertPreTokenizer" },
    post_processor: { type: "TemplateProcessing",
      single: [{ SpecialToken: { id: "[CLS]", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
               { SpecialToken: { id: "[SEP]", type_id: 0 } }],
      pair: [{ SpecialToken: { id: "[CLS]", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
             { SpecialToken: { id: "[SEP]", type_id: 0 } }, { Sequence: { id: "B", type_id: 1 } },
             { SpecialToken: { id: "[SEP]", type_id: 1 } }],
      special_tokens: {
        "[CLS]": { id: "[CLS]", ids: [id("[CLS]")], tokens: ["[CLS]"] },
        "[SEP]": { id: "[SEP]", ids: [id("[SEP]")], tokens: ["[SEP]"] } } },
    decoder: { type: "WordPiece", prefix: "##", cleanup: true },
    model: { type: "WordPiece", unk_token: "[UNK]", continuing_subword_prefix: "##",
      max_input_chars_per_word: 100, vocab },
  };
}

const EDGE = [
  "", " ", "   \t\n ", "Hello, world!", "Hello, world! How are you?",
  "a\x0bb", "a\x0cb c\x1cd e\x1fz f\u0085g h\x7fi", "tab\there\r\nnew\nline\u00a0nbsp\u3000ideo\u2028ls",
  "nul\x00byte", "rep\ufffdchar", "zw\u200bsp zw\u200cnj zw\u200dj \ufeffbom soft\u00adhyphen l\u200erm\u200f",
  "👩‍💻 coder", "hi😀 🤣 🥱 ok 👍🏽 ❤️", "Café naïve résumé Ångström", "cafe\u0301 a\u0301",
  "한국어 텍스트 입니다", "が ガ ぱ", "北京大学 東京 中文字符", "\u{2B820}\u{2B8FF} \u{2B920}",
  "ひらがな カタカナ", "$5+3<4=>^`|~ € © ° ½ ™", "– — “quoted” ‘single’ … ¿qué? ¡sí! ‧",
  "##ing #hash", "ΟΔΟΣ Σοφία", "İstanbul İİ", "x".repeat(100), "y".repeat(101),
  "[MASK] [mask] [CLS][SEP][SEP] [UNK]x", "don't DON'T she's we'll I'm they've you're",
  " 's !'s a   b a\n\nb trailing   ", "\tword 2024 x² 3.14 1,000,000",
  "e-mail: john.doe@example.com, http://example.org/path?q=1&r=2",
  "The quick brown fox jumps over the lazy dog.", "unaffable unbelievable antidisestablishmentarianism",
  "Ünïcödé ÀÉÎÕÜ ñ ç ø å æ œ ß", "Привет, мир! Καλημέρα κόσμε", "مرحبا بالعالم שלום עולם",
  "नमस्ते दुनिया", "ﬁ ﬂ Ⅻ ① ｆｕｌｌｗｉｄｔｈ", "\u{E000}private \u{10FFFD}",
];

function pick(n, from) {
  const out = [];
  for (let i = 0; out.length < n && i < brown.length; i += from) if (brown[i].length > 0) out.push(brown[i]);
  return out;
}
const REAL = pick(60, 900);

async function enc(tok, text, pair, opts) {
  opts = opts || {};
  if (opts.truncation) tok.setTruncation(opts.max_length, { strategy: opts.strategy || "LongestFirst",
    stride: opts.stride || 0 });
  else tok.disableTruncation();
  if (opts.padding) tok.setPadding(opts.padding === "max_length"
    ? { maxLength: opts.max_length, padId: opts.pad_id || 0, padToken: opts.pad_token || "[PAD]" }
    : { padId: opts.pad_id || 0, padToken: opts.pad_token || "[PAD]" });
  else tok.disablePadding();
  const e = await tok.encode(text, pair === undefined ? null : pair,
    { addSpecialTokens: opts.add_special_tokens !== false });
  const flat = (x) => ({ ids: x.getIds(), tokens: x.getTokens(), offsets: x.getOffsets(),
    word_ids: x.getWordIds().map((w) => (w === null || w === undefined ? false : w)),
    type_ids: x.getTypeIds(), special_tokens_mask: x.getSpecialTokensMask(),
    attention_mask: x.getAttentionMask() });
  const r = flat(e);
  r.overflowing = e.getOverflowing().map(flat);
  return r;
}

async function cases(tok, list) {
  const out = [];
  for (const c of list) {
    let r;
    try { r = await enc(tok, c.text, c.pair, c.opts); } catch (err) { r = { error: String(err) }; }
    out.push(Object.assign({ text: c.text, pair: c.pair === undefined ? null : c.pair,
      opts: c.opts || null }, r));
  }
  tok.disableTruncation(); tok.disablePadding();
  return out;
}

function structural(padTok, padId) {
  const long = brown[10] + " " + brown[11];
  const q = "What did the jury say about the election ?";
  return [
    { text: long, opts: { truncation: true, max_length: 16 } },
    { text: long, opts: { truncation: true, max_length: 16, stride: 4 } },
    { text: q, pair: long, opts: { truncation: true, max_length: 40, strategy: "OnlySecond", stride: 6 } },
    { text: long, pair: q, opts: { truncation: true, max_length: 24, strategy: "OnlyFirst", stride: 3 } },
    { text: long, pair: brown[12], opts: { truncation: true, max_length: 17 } },
    { text: long, pair: brown[12], opts: { truncation: true, max_length: 17, stride: 2 } },
    { text: "short one", pair: long, opts: { truncation: true, max_length: 20 } },
    { text: "a b c d e f g h i j", pair: "k l m n o p q r s t", opts: { truncation: true, max_length: 10 } },
    { text: "hello there", pair: "tiny", opts: { truncation: true, max_length: 6, strategy: "OnlySecond" } },
    { text: q, opts: { padding: "max_length", max_length: 20, pad_id: padId, pad_token: padTok } },
    { text: q, pair: "short", opts: { padding: "max_length", max_length: 24, pad_id: padId, pad_token: padTok } },
    { text: long, opts: { truncation: true, max_length: 12, stride: 3, padding: "max_length", pad_id: padId, pad_token: padTok } },
    { text: q, opts: { add_special_tokens: false } },
    { text: q, pair: "and a pair", opts: { add_special_tokens: false } },
    { text: q, pair: "Another sentence, here." },
  ];
}

async function decodes(tok, texts) {
  const out = [];
  for (const t of texts) {
    const e = await tok.encode(t, null, { addSpecialTokens: true });
    const ids = e.getIds();
    out.push({ ids, skip: await tok.decode(ids, true), keep: await tok.decode(ids, false) });
  }
  return out;
}

function save(name, obj) {
  fs.writeFileSync(path.join(fx, name), JSON.stringify(obj) + "\n");
  console.log("wrote", name);
}

// ---- issue 30's contracts: spec/fixtures/tokenizer_contracts/
const CONTRACT_TEXTS = [
  "QZFOO", "qzfoo", "xQZFOOy", "a QzFoO b", "QZBAR and qzbar", "[RAW] [raw] x[RAW]y", "Café CAFÉ cafe\u0301",
  "Hello, world! QZFOO.", "北京 QZFOO 中文", "  QZFOO  ", "qzfooqzfoo", "İstanbul QZFOO",
  "ﬁne ﬂour ① ② ⑩ Ⅻ ² ½ ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３", "한국어 텍스트 입니다 한글", "\u1112\u1161\u11ab\u1100\u1173\u11af",
  "Café naïve résumé Ångström", "cafe\u0301 a\u0323\u0301 e\u0301\u0323 \u1ec7 o\u0308\u0304",
  "Ünïcödé ÀÉÎÕÜ ñ ç ø å æ œ ß", "ΟΔΟΣ Σοφία Привет", "が ガ ぱ ｶﾞ ﾊﾟ", "ǅ ǆ Ǆ ﬀ ﬃ ㎏ ㍻ ℃ ™",
  "a\u0001b\u0008c\u000bd\u007fe\u008ff g\u200bh\u200di\ufeffj k\u2028l \u2581m \ufffdn",
  "tab\there\r\nnew\nline\u00a0nbsp\u3000ideo", "2024 12abc34 3.14 1,000,000 x² ٣٤",
  "e-mail: john.doe@example.com, http://example.org/path?q=1&r=2", "don't stop   believing!!! ...",
  "snake_case camelCase $5+3<4=>^`|~ € ©", "\u24b6\u24b7 \u{1f130}x y\u200cz", "The quick brown fox.",
];
const SPM_TEXTS = [
  "a [MASK] b", "<unk> x", "[CLS] hi [SEP]", "<pad> </s> <s>", "[MASK]", "x[MASK]y", "[PAD] [UNK] ok",
  "The [MASK] sat on the <mask>.", "<unk><unk>", "[SEP][SEP] [CLS]",
];

function bertVocabLines() {
  const lines = fs.readFileSync(vocabTxt, "utf8").split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return lines.slice(0, 8000);
}

async function contractCases(tok, texts) {
  const out = [];
  for (const t of texts) {
    const e = await tok.encode(t, null, { addSpecialTokens: true });
    out.push({ text: t, ids: e.getIds(), offsets: e.getOffsets(), tokens: e.getTokens() });
  }
  return out;
}

async function contracts() {
  const cx = path.join(root, "spec/fixtures/tokenizer_contracts");
  fs.mkdirSync(cx, { recursive: true });
  const version = JSON.parse(fs.readFileSync(require.resolve("@anush008/tokenizers/package.json"))).version;
  const meta = { generator: "tools/gen_tokenizer_goldens.js --contracts",
    package: "@anush008/tokenizers " + version };
  const added = (id, content, normalized) => ({ id, content, single_word: false,
    lstrip: false, rstrip: false, normalized, special: false });
  const seq = (...types) => ({ type: "Sequence", normalizers: types.map((t) => (typeof t === "string" ? { type: t } : t)) });
  // each case: a committed tokenizer.json (base), the normalizer and
  // pre-tokenizer put in its place when given, added tokens appended; the
  // spec builds the same file from the same recipe
  const BASES = { bert: path.join(fx, "bert-small-tokenizer.json"), roberta: path.join(fx, "roberta-tiny-tokenizer.json"),
    albert: path.join(root, "spec/fixtures/tokenizer_unigram/albert_like.tokenizer.json") };
  const recipes = {
    // item 17: added tokens with normalized: true, in each model's pipeline
    wp_added_normalized: { base: "bert", added: [added(8000, "qzfoo", true), added(8001, "QZBAR", true),
      added(8002, "[RAW]", false), added(8003, "Café", true)] },
    bpe_added_normalized: { base: "roberta", normalizer: { type: "Lowercase" },
      added: [added(1536, "qzfoo", true), added(1537, "[RAW]", false)] },
    unigram_added_normalized: { base: "albert", added: [added(2000, "qzfoo", true), added(2001, "[RAW]", false)] },
    // item 21: the normalizers and pre-tokenizers of HF's usual setups
    wp_nfd_lower_strip_whitespace: { base: "bert", normalizer: seq("NFD", "Lowercase", "StripAccents"),
      pre_tokenizer: { type: "Whitespace" } },
    wp_nfkc_lower_seq_punct_digits: { base: "bert", normalizer: seq("NFKC", "Lowercase"),
      pre_tokenizer: { type: "Sequence", pretokenizers: [{ type: "WhitespaceSplit" },
        { type: "Punctuation", behavior: "Isolated" }, { type: "Digits", individual_digits: true }] } },
    wp_nfc_lower_bert: { base: "bert", normalizer: seq("NFC", "Lowercase"), pre_tokenizer: { type: "BertPreTokenizer" } },
    wp_nmt_nfkc_whitespace_digits: { base: "bert", normalizer: seq("Nmt", "NFKC", "Lowercase"),
      pre_tokenizer: { type: "Sequence", pretokenizers: [{ type: "Whitespace" },
        { type: "Digits", individual_digits: false }] } },
    wp_nfkd_lower_whitespace_split: { base: "bert", normalizer: seq("NFKD", "Lowercase"),
      pre_tokenizer: { type: "WhitespaceSplit" } },
    wp_nfkc_alone_whitespace: { base: "bert", normalizer: { type: "NFKC" }, pre_tokenizer: { type: "Whitespace" } },
    // HF's SentencePieceUnigramTokenizer chain over the albert-like pieces
    unigram_nmt_nfkc: { base: "albert", normalizer: seq("Nmt", "NFKC",
      { type: "Replace", pattern: { Regex: " {2,}" }, content: " " }, "Lowercase") },
  };
  const cases = {};
  const tmp = path.join(require("os").tmpdir(), "contract.tokenizer.json");
  for (const [name, r] of Object.entries(recipes)) {
    const j = JSON.parse(fs.readFileSync(BASES[r.base], "utf8"));
    if (r.normalizer) j.normalizer = r.normalizer;
    if (r.pre_tokenizer) j.pre_tokenizer = r.pre_tokenizer;
    for (const a of r.added || []) j.added_tokens.push(a);
    fs.writeFileSync(tmp, JSON.stringify(j));
    cases[name] = Object.assign({}, r, { results: await contractCases(hf.Tokenizer.fromFile(tmp), CONTRACT_TEXTS) });
  }
  fs.writeFileSync(path.join(cx, "hf_goldens.json"), JSON.stringify({ meta, cases }) + "\n");
  console.log("wrote tokenizer_contracts/hf_goldens.json:", Object.keys(recipes).length, "tokenizers");
  // item 20: spm_encode never treats special tokens' text as special
  const { execFileSync } = require("child_process");
  const spm = {};
  for (const m of ["albert_like", "cased_bf"]) {
    const model = path.join(root, "spec/fixtures/tokenizer_unigram", m + ".model");
    const out = execFileSync("spm_encode", ["--model=" + model, "--output_format=id"],
      { input: SPM_TEXTS.join("\n") + "\n" }).toString().split("\n");
    spm[m] = SPM_TEXTS.map((t, i) => ({ text: t, ids: out[i] === "" ? [] : out[i].split(" ").map(Number) }));
  }
  fs.writeFileSync(path.join(cx, "spm_goldens.json"), JSON.stringify({
    meta: { generator: "tools/gen_tokenizer_goldens.js --contracts", tool: "spm_encode --output_format=id" },
    models: spm }) + "\n");
  console.log("wrote tokenizer_contracts/spm_goldens.json");
}

if (process.argv.includes("--contracts")) {
  contracts().catch((e) => { console.error(e); process.exit(1); });
} else (async () => {
  const version = JSON.parse(fs.readFileSync(require.resolve("@anush008/tokenizers/package.json"))).version;
  const meta = { generator: "tools/gen_tokenizer_goldens.js", package: "@anush008/tokenizers " + version,
    rust_tokenizers: "0.22.2" };
  // 1. bert-base-uncased (full vocab)
  const lines = fs.readFileSync(vocabTxt, "utf8").split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  const bert = hf.Tokenizer.fromString(JSON.stringify(bertJson(lines)));
  const texts = EDGE.concat(REAL).map((t) => ({ text: t }));
  const pairs = [{ text: "Hello, world!", pair: "How are you?" }, { text: REAL[0], pair: REAL[1] },
    { text: "", pair: "" }, { text: "北京", pair: "Café" }];
  save("bert_goldens.json", { meta, cases: await cases(bert, texts.concat(pairs, structural("[PAD]", 0))),
    decode: await decodes(bert, EDGE.concat(REAL.slice(0, 10))) });
  // 2. small BERT tokenizer.json (first 8000 ids) for the file-format test
  const small = bertJson(lines.slice(0, 8000));
  fs.writeFileSync(path.join(fx, "bert-small-tokenizer.json"), JSON.stringify(small));
  const bs = hf.Tokenizer.fromFile(path.join(fx, "bert-small-tokenizer.json"));
  save("bert_small_goldens.json", { meta, cases: await cases(bs, EDGE.slice(0, 20).map((t) => ({ text: t }))) });
  // 3. byte-level BPE trained by HF (default BpeTrainer: no specials, min_frequency 0)
  const corpus = path.join(fx, "bpe_corpus.txt");
  fs.writeFileSync(corpus, brown.slice(0, 60).join("\n") + "\n");
  const t = new hf.Tokenizer(hf.BPE.empty());
  t.setPreTokenizer(hf.byteLevelPreTokenizer(false, true));
  t.train([corpus]);
  const tmp = "/tmp/hf_bpe_trained.json";
  t.save(tmp, false);
  const trained = JSON.parse(fs.readFileSync(tmp, "utf8"));
  const vocab = trained.model.vocab;
  const ids = Object.entries(vocab).sort((a, b) => a[1] - b[1]);
  save("bpe_trained_hf.json", { meta, vocab_by_id: ids.map((x) => x[0]),
    merges: trained.model.merges.map((m) => (Array.isArray(m) ? m.join(" ") : m)) });
  // 4. RoBERTa-style tokenizer.json from that model + specials
  const rob = JSON.parse(JSON.stringify(trained));
  let next = ids.length;
  const sp = {};
  rob.added_tokens = [];
  for (const s of ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]) {
    sp[s] = next++;
    rob.model.vocab[s] = sp[s];
    rob.added_tokens.push({ id: sp[s], content: s, single_word: false, lstrip: s === "<mask>",
      rstrip: false, normalized: false, special: true });
  }
  rob.normalizer = null;
  rob.pre_tokenizer = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
  rob.post_processor = { type: "RobertaProcessing", sep: ["</s>", sp["</s>"]], cls: ["<s>", sp["<s>"]],
    trim_offsets: true, add_prefix_space: false };
  rob.decoder = { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true };
  const rjson = path.join(fx, "roberta-tiny-tokenizer.json");
  fs.writeFileSync(rjson, JSON.stringify(rob));
  const rt = hf.Tokenizer.fromFile(rjson);
  const btexts = EDGE.concat(REAL.slice(0, 20), ["Hello <mask> there<mask>.", " Hello world", "world",
    "a".repeat(3000)]).map((x) => ({ text: x }));
  save("roberta_goldens.json", { meta, cases: await cases(rt, btexts.concat(
    [{ text: "Hello world", pair: "Second part here" }], structural("<pad>", sp["<pad>"]))),
    decode: await decodes(rt, EDGE.concat(REAL.slice(0, 5))) });
  // 5. same model with add_prefix_space = true
  rob.pre_tokenizer.add_prefix_space = true;
  rob.post_processor.add_prefix_space = true;
  const rt2 = hf.Tokenizer.fromString(JSON.stringify(rob));
  save("roberta_aps_goldens.json", { meta, cases: await cases(rt2, EDGE.slice(0, 36).map((x) => ({ text: x }))
    .concat([{ text: "Hello world", pair: "again here" }])) });
})().catch((e) => { console.error(e); process.exit(1); });
