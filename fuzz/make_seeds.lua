-- Writes the committed seed corpora under fuzz/corpus/<target>/ (small
-- valid inputs of every format; libFuzzer mutates from there).
--   lua5.4 fuzz/make_seeds.lua      (from the repository root, after make)
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./build/?.so;" .. package.cpath
local bert = require("bert")
local core = require("bert.core")

local function write(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
end
local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end
local tmp = os.tmpname()
os.remove(tmp)
assert(os.execute("mkdir -p " .. tmp))

-- safetensors: every dtype, metadata, an empty tensor, a strided save
local S = "fuzz/corpus/safetensors/"
core.save_safetensors(tmp .. "/a", {w = bert.tensor({{1, 2}, {3, 4}}), b = bert.tensor({5, 6, 7}, "int32")},
  {metadata = {format = "pt"}})
write(S .. "f32_i32_meta", read(tmp .. "/a"))
core.save_safetensors(tmp .. "/b", {h = bert.tensor({0.5, -2, 65504}), g = bert.tensor({1, 2})},
  {dtypes = {h = "F16", g = "BF16"}})
write(S .. "f16_bf16", read(tmp .. "/b"))
core.save_safetensors(tmp .. "/c", {i = bert.tensor({1, -1}, "int32"), e = bert.zeros(0, 3)}, {dtypes = {i = "I64"}})
write(S .. "i64_empty", read(tmp .. "/c"))
write(S .. "mixed", read("spec/fixtures/safetensors/mixed.safetensors"))

-- shards: a tiny corpus through create_shards, static masks and not
local pt = require("bert.data.pretraining")
local vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
for _, w in ipairs({"the", "cat", "sat", "on", "mat", "a", "dog", "ran", "far", "away", "."}) do vocab[#vocab + 1] = w end
write(tmp .. "/vocab.txt", table.concat(vocab, "\n") .. "\n")
write(tmp .. "/corpus.txt", "the cat sat on the mat .\na dog ran far away .\nthe dog sat .\n\n" ..
      "a cat ran .\nthe mat sat far away .\n\nthe cat .\na dog .\n")
for _, o in ipairs({{"nsp", "static"}, {"sop", "dynamic"}, {"none", "dynamic"}}) do
  local docs = {{"the cat sat on the mat .", "a dog ran far away .", "the dog sat ."},
                {"a cat ran .", "the mat sat far away ."}, {"the cat .", "a dog ."}}
  local info = assert(pt.create_shards{documents = docs, tokenizer = assert(bert.tokenizer.load(tmp .. "/vocab.txt")),
    output = tmp .. "/sh-" .. o[1], max_seq_length = 16, objective = o[1], masking = o[2],
    dupe_factor = 1, seed = 1, max_predictions_per_seq = 3})
  write("fuzz/corpus/shard/" .. o[1] .. "_" .. o[2], read(info.dir .. "/shard-00000.bin"))
end

-- tokenizer files: byte 0 picks the format (0 vocab.txt, 1 vocab.json +
-- merges.txt, 2 tokenizer.json, 3 SentencePiece), byte 1 splits two files
local T = "fuzz/corpus/tokenizer_files/"
local function seed(name, kind, cut, body) write(T .. name, string.char(kind, cut) .. body) end
seed("vocab_txt", 0, 0, table.concat(vocab, "\n") .. "\n##s\n##ing\nrun\n")
local bpe = assert(bert.tokenizer.train{kind = "bpe", iterator = coroutine.wrap(function()
  coroutine.yield(read(tmp .. "/corpus.txt")) end), vocab_size = 300, special_tokens = {"<s>", "<pad>", "</s>", "<unk>", "<mask>"}})
assert(bpe:save(tmp .. "/bpe"))
local vj, mt = read(tmp .. "/bpe/vocab.json"), read(tmp .. "/bpe/merges.txt")
seed("bpe_files", 1, (#vj * 255 + #vj + #mt - 1) // (#vj + #mt), vj .. mt)
seed("bpe_tokenizer_json", 2, 0, read(tmp .. "/bpe/tokenizer.json"))
local wp = assert(bert.tokenizer.train{kind = "wordpiece", iterator = coroutine.wrap(function()
  coroutine.yield(read(tmp .. "/corpus.txt")) end), vocab_size = 120})
assert(wp:save(tmp .. "/wp"))
seed("wordpiece_tokenizer_json", 2, 0, read(tmp .. "/wp/tokenizer.json"))

-- SentencePiece .model: the fixture's first pieces only, and no
-- precompiled normalisation map (most of its 270 KB), walking the protobuf
local function varint(b, i)
  local v, shift = 0, 0
  repeat
    local c = b:byte(i)
    v = v | ((c & 0x7f) << shift)
    shift, i = shift + 7, i + 1
  until c < 0x80
  return v, i
end
local function put_varint(v)
  local out = {}
  repeat
    local c = v & 0x7f
    v = v >> 7
    out[#out + 1] = string.char(v > 0 and c | 0x80 or c)
  until v == 0
  return table.concat(out)
end
-- keep(field, count) -> keep this field?; nested[field] rewrites a message field
local function rewrite(b, keep, nested)
  local out, counts, i = {}, {}, 1
  while i <= #b do
    local start = i
    local key
    key, i = varint(b, i)
    local field, wire = key >> 3, key & 7
    local value_start = i
    local payload
    if wire == 0 then _, i = varint(b, i)
    elseif wire == 1 then i = i + 8
    elseif wire == 5 then i = i + 4
    elseif wire == 2 then
      local len
      len, value_start = varint(b, i)
      i = value_start + len
      payload = b:sub(value_start, i - 1)
    else error("unexpected wire type " .. wire) end
    counts[field] = (counts[field] or 0) + 1
    if keep(field, counts[field]) then
      if payload and nested and nested[field] then
        local inner = nested[field](payload)
        out[#out + 1] = put_varint(key) .. put_varint(#inner) .. inner
      else
        out[#out + 1] = b:sub(start, i - 1)
      end
    end
  end
  return table.concat(out)
end
local spm = rewrite(read("spec/fixtures/tokenizer_unigram/albert_like.model"),
  function(field, n) return field ~= 1 or n <= 150 end,
  {[3] = function(p) return rewrite(p, function(field) return field ~= 2 end) end})
seed("spm_model", 3, 0, spm)

-- encode: byte 0 tokenizer, 1 flags, 2 max_length, 3 stride, 4 pair cut
local E = "fuzz/corpus/encode/"
write(E .. "plain", string.char(0, 0, 20, 0, 0) .. "Hello, world! Unaffable déjà-vu.")
write(E .. "pair_overflow", string.char(1, 128 + 32 + 4 + 2, 12, 3, 128) .. "the first text is here and the second one there")
write(E .. "bpe_specials", string.char(2, 1, 40, 0, 0) .. "<s> hi </s><mask>  spaced \t\n 42")
write(E .. "cjk_controls", string.char(0, 2 + 64, 8, 1, 0) .. "中文字 \0\1 e\u{301} ﬁ")

-- config.json
local C = "fuzz/corpus/config/"
write(C .. "bert_tiny", read("spec/fixtures/bert_tiny/config.json"))
write(C .. "small_cls", '{"architectures":["BertForSequenceClassification"],"vocab_size":50,"hidden_size":16,' ..
  '"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":32,"max_position_embeddings":16,' ..
  '"id2label":{"0":"a","1":"b","2":"c"},"hidden_act":"relu","layer_norm_eps":1e-5}')
write(C .. "mlm", '{"architectures":["BertForMaskedLM"],"vocab_size":30,"hidden_size":8,"num_hidden_layers":2,' ..
  '"num_attention_heads":1,"intermediate_size":8,"type_vocab_size":1,"hidden_dropout_prob":0.0}')
os.execute("rm -rf " .. tmp)
print("seeds written")
