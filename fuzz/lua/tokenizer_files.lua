-- Fuzz target: every tokenizer file format through bert.tokenizer.load.
-- Byte 0 picks the format, byte 1 where a two-file input splits; a loaded
-- tokenizer then encodes and decodes a few texts, which must give ids
-- inside its vocabulary.
local F = require("fuzzlib")
local bert = require("bert")

local formats = {
  {"vocab.txt"},
  {"vocab.json", "merges.txt"},
  {"tokenizer.json"},
  {"tokenizer.model"},   -- SentencePiece, where the library reads it
}
local texts = {"Hello, world!", "  unaffable déjà-vu \t 42\n", "[CLS] <s> </s> <mask> x", ""}

local function check(tok, where)
  local n = tok:vocab_size()
  for _, t in ipairs(texts) do
    local enc = F.try(tok.encode, tok, t, "and a pair", {max_length = 16, truncation = true, padding = "max_length"})
    if enc then
      for i, id in ipairs(enc.ids) do
        if math.type(id) ~= "integer" then F.finding("%s: id %s is not an integer", where, tostring(id)) end
        -- an id a model can embed: below vocab_size() and naming a token
        F.contract(id >= 0 and id < n and tok:id_to_token(id) ~= nil,
                   "%s: encode(%q) gave id %s at %d, vocab_size %d", where, t, tostring(id), i, n)
      end
      if #enc.attention_mask ~= #enc.ids then F.finding("%s: attention_mask length differs", where) end
      F.try(tok.decode, tok, enc.ids)
    end
  end
end

return function(data)
  local r = F.reader(data)
  local kind = formats[r.byte() % #formats + 1]
  local cut = r.byte()
  local body = r.rest()
  local files = {}
  for _, name in ipairs({"vocab.txt", "vocab.json", "merges.txt", "tokenizer.json", "tokenizer.model"}) do
    F.remove(name)
  end
  if #kind == 2 then
    local at = (#body * cut) // 255
    files[1] = F.write(kind[1], body:sub(1, at))
    files[2] = F.write(kind[2], body:sub(at + 1))
  else
    files[1] = F.write(kind[1], body)
  end
  local tok = F.try(bert.tokenizer.load, files[1])
  if tok then check(tok, files[1]) end
end
