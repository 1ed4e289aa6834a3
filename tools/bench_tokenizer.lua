-- Tokenizer benchmark on the Brown corpus (data/brown.txt, from
-- tools/fetch_brown.sh): training a 30k byte-level BPE and WordPiece, and
-- encoding throughput (single thread, with offsets), beside Hugging Face's
-- own tokenizers through node when --hf DIR (a node_modules folder holding
-- @anush008/tokenizers) is given.
--   lua5.4 tools/bench_tokenizer.lua [--hf /tmp/hf/node_modules]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath

local argparse = require("argparse")
local T = require("bert.tokenizer")

local p = argparse("bench_tokenizer", "Tokenizer speed vs Hugging Face")
p:option("--corpus", "Text file", "data/brown.txt")
p:option("--vocab", "bert-base-uncased vocab.txt", "spec/fixtures/tokenizer/bert-base-uncased-vocab.txt")
p:option("--hf", "node_modules dir with @anush008/tokenizers")
p:option("--vocab-size", "Vocabulary size to train", "30000")
local a = p:parse()

local f = io.open(a.corpus, "rb")
if not f then
  io.stderr:write(a.corpus .. " missing: run sh tools/fetch_brown.sh\n")
  os.exit(1)
end
local text = f:read("a"); f:close()
local lines = {}
for l in text:gmatch("[^\n]+") do lines[#lines + 1] = l end
local mb = #text / 1e6
local function now()
  local ok, socket = pcall(require, "socket")
  if ok then return socket.gettime() end
  local h = io.popen("date +%s.%N"); local t = tonumber(h:read("a")); h:close(); return t
end
print(string.format("corpus: %s, %.2f MB, %d lines", a.corpus, mb, #lines))

local res = {}
local function timeit(name, fn)
  local t0 = now(); local r = fn(); local dt = now() - t0
  res[name] = dt
  return dt, r
end

local vs = tonumber(a.vocab_size)
local dt, bpe = timeit("train_bpe", function()
  return assert(T.train{kind = "bpe", files = {a.corpus}, vocab_size = vs, min_frequency = 0,
                        special_tokens = {}, initial_alphabet = false})
end)
print(string.format("train byte-level BPE %d: %.2f s (vocab %d)", vs, dt, bpe:vocab_size()))
local dtw, wp = timeit("train_wp", function()
  return assert(T.train{kind = "wordpiece", files = {a.corpus}, vocab_size = vs})
end)
print(string.format("train WordPiece %d:    %.2f s (vocab %d)", vs, dtw, wp:vocab_size()))

local bert = assert(T.load(a.vocab))
local function thr(name, tok, threads)
  local d, n = timeit(name, function() return tok:count_tokens(lines, threads) end)
  print(string.format("%-34s %7.2f MB/s  (%d tokens, %.2f s)", name, mb / d, n, d))
  return mb / d
end
local wp1 = thr("encode WordPiece, 1 thread", bert, 1)
thr("encode WordPiece, all threads", bert, 0)
local bp1 = thr("encode BPE (trained), 1 thread", bpe, 1)
thr("encode BPE (trained), all threads", bpe, 0)
local d2 = timeit("lua_batch", function() return bert:encode_batch(lines) end)
print(string.format("%-34s %7.2f MB/s  (Lua tables built)", "encode_batch WordPiece, Lua tables", mb / d2))

if a.hf then
  local js = os.tmpname() .. ".js"
  local out = os.tmpname()
  local jf = assert(io.open(js, "wb"))
  jf:write([[
const hf = require("@anush008/tokenizers");
const fs = require("fs");
const [corpus, vocab, out] = process.argv.slice(2);
const lines = fs.readFileSync(corpus, "utf8").split("\n").filter((l) => l.length > 0);
const mb = fs.statSync(corpus).size / 1e6;
(async () => {
  const r = {};
  let t0 = Date.now();
  const bt = new hf.Tokenizer(hf.BPE.empty());
  bt.setPreTokenizer(hf.byteLevelPreTokenizer(false, true));
  bt.train([corpus]);
  r.train_bpe = (Date.now() - t0) / 1000;
  const lines_ = fs.readFileSync(vocab, "utf8").split("\n"); lines_.pop();
  const v = {}; lines_.forEach((x, i) => { v[x] = i; });
  const bert = hf.Tokenizer.fromString(JSON.stringify({version: "1.0", added_tokens: [],
    normalizer: {type: "BertNormalizer", clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true},
    pre_tokenizer: {type: "BertPreTokenizer"}, post_processor: null, decoder: null,
    model: {type: "WordPiece", unk_token: "[UNK]", continuing_subword_prefix: "##", max_input_chars_per_word: 100, vocab: v}}));
  t0 = Date.now(); await bert.encodeBatch(lines); r.enc_wp = (Date.now() - t0) / 1000;
  t0 = Date.now(); await bt.encodeBatch(lines); r.enc_bpe = (Date.now() - t0) / 1000;
  r.mb = mb;
  fs.writeFileSync(out, JSON.stringify(r));
})();
]])
  jf:close()
  local cmd = string.format("NODE_PATH=%q node %q %q %q %q", a.hf, js, a.corpus, a.vocab, out)
  local ok = os.execute(cmd)
  os.remove(js)
  local rf = ok and io.open(out, "rb")
  if rf then
    local r = require("cjson").decode(rf:read("a")); rf:close()
    print("\nHugging Face tokenizers (node, encodeBatch on all threads), same machine:")
    print(string.format("  train BPE %d:   %.2f s   -> ours %.2f s  (ratio HF/ours %.2fx)",
      30000, r.train_bpe, res.train_bpe, r.train_bpe / res.train_bpe))
    print(string.format("  encode WordPiece: %.2f MB/s -> ours 1 thread %.2f MB/s (%.1fx)",
      r.mb / r.enc_wp, wp1, wp1 / (r.mb / r.enc_wp)))
    print(string.format("  encode BPE:       %.2f MB/s -> ours 1 thread %.2f MB/s (%.1fx)",
      r.mb / r.enc_bpe, bp1, bp1 / (r.mb / r.enc_bpe)))
  else
    print("HF run failed (is node and @anush008/tokenizers in " .. a.hf .. "?)")
  end
  os.remove(out)
end
