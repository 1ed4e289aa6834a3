-- Tokenizer benchmark on the Brown corpus (data/brown/brown.txt, from
-- tools/fetch_data.sh): training a 30k byte-level BPE and WordPiece, and
-- encoding throughput (single thread, with offsets); then Unigram side by
-- side in the same run: ours (the .model path with spm's semantics, and
-- the tokenizer.json path with HF's) against SentencePiece's command line
-- (spm_encode, Debian package sentencepiece) and Hugging Face's Unigram
-- through node (@anush008/tokenizers, found in .deps/tok/node_modules, as
-- make deps installs it, or --hf DIR).
-- Figures are CPU seconds of each process, so that a loaded machine slows
-- every side alike, and wall seconds beside them.
--   lua5.4 tools/bench_tokenizer.lua [--hf node_modules] [--skip-train]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath

local cli = require("bert.cli")
local T = require("bert.tokenizer")

local p = cli.parser("bench_tokenizer.lua", "Tokenizer speed vs Hugging Face")
p:option("--corpus", "Text file (default: data/brown/brown.txt, else data/brown.txt)")
p:option("--vocab", "bert-base-uncased vocab.txt", "spec/fixtures/tokenizer/bert-base-uncased-vocab.txt")
p:option("--hf", "node_modules dir with @anush008/tokenizers")
p:option("--vocab-size", "Vocabulary size to train", "30000"):convert(cli.integer("--vocab-size", 1))
p:option("--unigram-model", "SentencePiece .model for the Unigram comparison",
         "spec/fixtures/tokenizer_unigram/albert_like.model")
p:option("--unigram-json", "The same model as HF's tokenizer.json",
         "spec/fixtures/tokenizer_unigram/albert_like.tokenizer.json")
p:flag("--skip-train", "Skip the training benchmarks")
local a = p:parse()
local function file_exists(x) local fh = io.open(x, "rb"); if fh then fh:close() end return fh ~= nil end
if not a.corpus then
  a.corpus = file_exists("data/brown/brown.txt") and "data/brown/brown.txt" or "data/brown.txt"
end
if not a.hf and file_exists(".deps/tok/node_modules/@anush008/tokenizers/package.json") then
  a.hf = ".deps/tok/node_modules"                     -- where make deps puts it
end

local f = io.open(a.corpus, "rb")
if not f then
  io.stderr:write(a.corpus .. " missing: run sh tools/fetch_data.sh\n")
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
local over_bound = false        -- a figure past its bound: exit 1 at the end
local function timeit(name, fn)
  local t0 = now(); local r = fn(); local dt = now() - t0
  res[name] = dt
  return dt, r
end

local vs = tonumber(a.vocab_size)
local bpe
if not a.skip_train then
  local dt
  dt, bpe = timeit("train_bpe", function()
    return assert(T.train{kind = "bpe", files = {a.corpus}, vocab_size = vs, min_frequency = 0,
                          special_tokens = {}, initial_alphabet = false})
  end)
  print(string.format("train byte-level BPE %d: %.2f s (vocab %d)", vs, dt, bpe:vocab_size()))
  local dtw, wp = timeit("train_wp", function()
    return assert(T.train{kind = "wordpiece", files = {a.corpus}, vocab_size = vs})
  end)
  print(string.format("train WordPiece %d:    %.2f s (vocab %d)", vs, dtw, wp:vocab_size()))
  local dtu, uni = timeit("train_uni", function()
    return assert(T.train{kind = "unigram", files = {a.corpus}, vocab_size = 8000})
  end)
  print(string.format("train Unigram 8000:     %.2f s (vocab %d)", dtu, uni:vocab_size()))
else
  bpe = assert(T.load("spec/fixtures/tokenizer/roberta-tiny-tokenizer.json"))
end

local bert = assert(T.load(a.vocab))
-- best of three, wall and CPU (os.clock: this process only)
local function thr(name, tok, threads)
  local bw, bc, n = math.huge, math.huge, 0
  for _ = 1, 3 do
    local t0, c0 = now(), os.clock()
    n = tok:count_tokens(lines, threads)
    local dw, dc = now() - t0, os.clock() - c0
    bw = math.min(bw, dw); bc = math.min(bc, dc)
  end
  res[name] = bw
  print(string.format("%-40s %7.2f MB/s wall, %7.2f MB/s CPU  (%d tokens)", name, mb / bw, mb / bc, n))
  return mb / bw, mb / bc
end
local wp1 = thr("encode WordPiece, 1 thread", bert, 1)
thr("encode WordPiece, all threads", bert, 0)
local bp1 = thr("encode BPE" .. (a.skip_train and " (RoBERTa fixture)" or " (trained)") .. ", 1 thread", bpe, 1)
thr("encode BPE, all threads", bpe, 0)
local d2 = timeit("lua_batch", function() return bert:encode_batch(lines) end)
print(string.format("%-40s %7.2f MB/s wall (Lua tables built)", "encode_batch WordPiece, Lua tables", mb / d2))
local d3 = timeit("tensor_batch", function()
  local r = {}
  for i = 1, #lines, 4096 do
    local chunk = table.move(lines, i, math.min(i + 4095, #lines), 1, {})
    r[#r + 1] = bert:encode_batch(chunk, {return_tensors = true, truncation = true, max_length = 512})
  end
  return r
end)
print(string.format("%-40s %7.2f MB/s wall (int32 tensors, 4096 lines a call)",
  "encode_batch WordPiece, return_tensors", mb / d3))

-- Unigram, side by side: ours, spm_encode, HF through node
print("\nUnigram (" .. a.unigram_model .. ")")
local uspm = assert(T.load(a.unigram_model))
local ujson = assert(T.load(a.unigram_json))
local _, us_cpu = thr("encode Unigram .model (spm), 1 thread", uspm, 1)
local _, uh_cpu = thr("encode Unigram tokenizer.json (HF), 1 thread", ujson, 1)
thr("encode Unigram .model (spm), all threads", uspm, 0)
local function cpu_of(cmd)
  -- user + system seconds of the child, from /usr/bin/time
  local tf = os.tmpname()
  local t0 = now()
  local ok = os.execute("/usr/bin/time -f '%U %S' -o " .. tf .. " " .. cmd .. " > /dev/null 2>/dev/null")
  local wall = now() - t0
  local fh = io.open(tf, "rb"); local txt = fh and fh:read("a") or ""; if fh then fh:close() end
  os.remove(tf)
  local u, sy = txt:match("([%d%.]+) ([%d%.]+)")
  if not ok or not u then return nil end
  return tonumber(u) + tonumber(sy), wall
end
local spm_cpu, spm_wall
if os.execute("command -v spm_encode > /dev/null 2>&1") and file_exists("/usr/bin/time") then
  local best_c, best_w = math.huge, math.huge
  for _ = 1, 3 do
    local c, w = cpu_of(string.format("spm_encode --model=%q --output_format=id < %q", a.unigram_model, a.corpus))
    if c then best_c = math.min(best_c, c); best_w = math.min(best_w, w) end
  end
  if best_c < math.huge then
    spm_cpu, spm_wall = best_c, best_w
    print(string.format("%-40s %7.2f MB/s wall, %7.2f MB/s CPU", "spm_encode --output_format=id", mb / best_w, mb / best_c))
  end
else
  print("spm_encode not found (Debian package sentencepiece): no SentencePiece figure")
end
local hf_cpu
if a.hf then
  local js = os.tmpname() .. ".js"
  local jf = assert(io.open(js, "wb"))
  jf:write([[
const hf = require("@anush008/tokenizers");
const fs = require("fs");
const [corpus, file] = process.argv.slice(2);
const lines = fs.readFileSync(corpus, "utf8").split("\n").filter((l) => l.length > 0);
(async () => {
  const tok = hf.Tokenizer.fromFile(file);
  for (let r = 0; r < 2; r++) await tok.encodeBatch(lines);
})();
]])
  jf:close()
  local best_c, best_w = math.huge, math.huge
  -- one rayon thread, so that CPU time compares with our single thread
  local c, w = cpu_of(string.format("env RAYON_NUM_THREADS=1 NODE_PATH=%q node %q %q %q",
                                    a.hf, js, a.corpus, a.unigram_json))
  if c then
    c, w = c / 2, w / 2                       -- two passes in the script
    print(string.format("%-40s %7.2f MB/s wall, %7.2f MB/s CPU",
                        "HF Unigram (node encodeBatch, 1 thread)", mb / w, mb / c))
    best_c, best_w = c, w
  else
    print("HF run failed (is node and @anush008/tokenizers in " .. a.hf .. "?)")
  end
  os.remove(js)
  if best_c < math.huge then hf_cpu = best_c end
end
print("\nUnigram ratios (CPU time, single thread each, same run; includes process start for the tools):")
if spm_cpu then
  print(string.format("  ours .model / spm_encode:          %.1fx", us_cpu / (mb / spm_cpu)))
  print(string.format("  ours tokenizer.json / spm_encode:  %.1fx", uh_cpu / (mb / spm_cpu)))
end
if hf_cpu then
  print(string.format("  ours tokenizer.json / HF (node):   %.1fx", uh_cpu / (mb / hf_cpu)))
  print(string.format("  ours .model / HF (node):           %.1fx", us_cpu / (mb / hf_cpu)))
end
local _, wp1c = 0, nil
print(string.format("WordPiece single thread: %.2f MB/s wall (target >= 20; CPU-time rate above)", wp1))

-- 100k added tokens (what transformers' add_tokens makes of a domain
-- vocabulary): loading and encoding 1 MB that holds them must stay about
-- linear; they took 63-70 s and 22-59 s CPU while every lookup scanned
-- the list (HF: under 1 s and 0.6-1.5 s).  The bound is CPU seconds.
local ADDED, ADDED_BOUND = 100000, 10
do
  local parts = {}
  for i = 1, ADDED do
    parts[i] = string.format('{"id":%d,"content":"zq%dx","single_word":false,"lstrip":false,' ..
      '"rstrip":false,"normalized":false,"special":%s}', 7999 + i, i, tostring(i % 2 == 0))
  end
  local fh = assert(io.open("spec/fixtures/tokenizer/bert-small-tokenizer.json", "rb"))
  local j = fh:read("a"):gsub('"added_tokens":%[',
    function() return '"added_tokens":[' .. table.concat(parts, ",") .. "," end, 1)
  fh:close()
  local path = os.tmpname() .. ".json"
  fh = assert(io.open(path, "wb")); fh:write(j); fh:close()
  local words, size = {}, 0
  while size < 1e6 do
    local w = string.format("zq%dx word", (#words * 7919) % ADDED + 1)
    words[#words + 1] = w; size = size + #w + 1
  end
  local text = table.concat(words, " ")
  local c0 = os.clock()
  local tok = assert(T.load(path))
  local c1 = os.clock()
  local n = #tok:encode(text).ids
  local c2 = os.clock()
  os.remove(path)
  print(string.format("\n%d added tokens: load %.2f s CPU, encode %.2f MB %.2f s CPU (%d tokens)",
                      ADDED, c1 - c0, #text / 1e6, c2 - c1, n))
  for _, x in ipairs({{"load", c1 - c0}, {"encode", c2 - c1}}) do
    if x[2] > ADDED_BOUND then
      print(string.format("  OVER BOUND: %s took %.1f s CPU, more than %d s", x[1], x[2], ADDED_BOUND))
      over_bound = true
    end
  end
end

if a.hf and not a.skip_train then
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
if over_bound then os.exit(1) end
