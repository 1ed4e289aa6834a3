-- Fuzz target: encoding random text (and pairs) with random options
-- through three real tokenizers (WordPiece vocab.txt, WordPiece and
-- byte-level BPE tokenizer.json).  Checks the shape of the result.
local F = require("fuzzlib")
local bert = require("bert")

local FIX = "spec/fixtures/tokenizer/"
local toks = {
  assert(bert.tokenizer.load(FIX .. "bert-base-uncased-vocab.txt")),
  assert(bert.tokenizer.load(FIX .. "bert-small-tokenizer.json")),
  assert(bert.tokenizer.load(FIX .. "roberta-tiny-tokenizer.json")),
}
local paddings = {false, "longest", "max_length", "do_not_pad"}
local truncations = {false, true, "longest_first", "only_first", "only_second"}

return function(data)
  local r = F.reader(data)
  local tok = toks[r.byte() % #toks + 1]
  local flags = r.byte()
  local opts = {
    max_length = 1 + r.byte() % 64,
    stride = r.byte() % 16,
    padding = paddings[flags % 4 + 1],
    truncation = truncations[(flags >> 2) % 5 + 1],
    return_overflowing_tokens = flags & 32 ~= 0,
    add_special_tokens = flags & 64 == 0,
  }
  local cut = r.byte()
  local text = r.rest()
  local pair
  if flags & 128 ~= 0 then
    local at = (#text * cut) // 255
    text, pair = text:sub(1, at), text:sub(at + 1)
  end
  local enc = F.try(tok.encode, tok, text, pair, opts)
  if not enc then return end
  local n = tok:vocab_size()
  local function check(e)
    for _, field in ipairs({"type_ids", "attention_mask", "tokens", "offsets"}) do
      if e[field] and #e[field] ~= #e.ids then
        F.finding("%s has %d entries for %d ids", field, #e[field], #e.ids)
      end
    end
    for i, id in ipairs(e.ids) do
      if math.type(id) ~= "integer" or id < 0 or id >= n then F.finding("id %s at %d outside [0, %d)", tostring(id), i, n) end
    end
    -- truncation cannot go below the special tokens (Hugging Face raises there)
    local specials = opts.add_special_tokens and tok:num_special_tokens_to_add(pair ~= nil) or 0
    F.contract(not (opts.truncation and opts.max_length > specials + opts.stride and #e.ids > opts.max_length),
               "%d ids with truncation to max_length %d", #e.ids, opts.max_length)
    F.try(tok.decode, tok, e.ids)
  end
  check(enc)
  for _, o in ipairs(enc.overflowing or {}) do check(o) end
  -- a batch of one (threads, padding to the longest) agrees with encode
  local batch = F.try(tok.encode_batch, tok, {pair and {text, pair} or text}, opts)
  if batch and batch[1] then
    local same = #batch[1].ids == #enc.ids
    for i = 1, same and #enc.ids or 0 do same = same and batch[1].ids[i] == enc.ids[i] end
    F.contract(same, "encode_batch gave %d ids where encode gave %d", #batch[1].ids, #enc.ids)
  end
end
