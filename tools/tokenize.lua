-- Command-line tokenizer tool.
--   lua5.4 tools/tokenize.lua train --kind bpe|wordpiece|unigram --vocab-size 30000 --out DIR FILE...
--   lua5.4 tools/tokenize.lua encode --tokenizer PATH [--max-length N] FILE
-- encode prints one line of space-separated ids per input line.
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath

local cli = require("bert.cli")
local T = require("bert.tokenizer")

local p = cli.parser("tokenize.lua", "Train tokenizers and encode files (bert.tokenizer)")
p:command_target("command")
local tr = p:command("train", "Train a vocabulary from text files")
tr:argument("files", "Training text files"):args("+")
tr:option("--kind", "wordpiece, bpe or unigram (SentencePiece's algorithm)", "wordpiece")
  :choices({"wordpiece", "bpe", "unigram"})
tr:option("--vocab-size", "Vocabulary size", "30000"):convert(cli.integer("--vocab-size", 1))
tr:option("--min-frequency", "Minimum pair frequency"):convert(cli.integer("--min-frequency", 1))
tr:option("--limit-alphabet", "Maximum alphabet size"):convert(cli.integer("--limit-alphabet", 1))
tr:option("--special", "Special tokens (repeatable)"):count("*")
tr:flag("--cased", "Keep case (WordPiece, Unigram)")
tr:option("--max-piece-length", "Unigram: longest piece in characters", "16"):convert(cli.integer("--max-piece-length", 1))
tr:option("--seed-size", "Unigram: seed pieces before EM", "1000000"):convert(cli.integer("--seed-size", 1))
tr:option("--out", "Output directory (or tokenizer .json file)"):args(1):count(1)
local en = p:command("encode", "Encode a text file, one line per sequence")
en:argument("file", "Input text file ('-' for stdin)")
en:option("--tokenizer", "vocab.txt, tokenizer.json, a SentencePiece .model or a directory"):count(1)
en:option("--max-length", "Truncate to this many tokens"):convert(cli.integer("--max-length", 2))
en:flag("--no-special", "Do not add [CLS]/[SEP] or <s>/</s>")
en:flag("--tokens", "Print tokens instead of ids")
en:option("--batch", "Lines per batch", "4096"):convert(cli.integer("--batch", 1))

local a = p:parse()

local function train()
  local specials = #a.special > 0 and a.special or nil
  local t0 = os.clock()
  local tok, err = T.train{kind = a.kind, files = a.files, vocab_size = a.vocab_size,
    min_frequency = a.min_frequency, limit_alphabet = a.limit_alphabet,
    special_tokens = specials, lowercase = not a.cased,
    max_piece_length = a.kind == "unigram" and a.max_piece_length or nil,
    seed_size = a.kind == "unigram" and a.seed_size or nil}
  if not tok then error(err, 0) end
  local ok, serr = tok:save(a.out)
  if not ok then error(serr, 0) end
  io.stderr:write(string.format("trained %s, %d tokens, in %.2f s CPU -> %s\n", a.kind,
    tok:vocab_size(), os.clock() - t0, a.out))
end

local function encode()
  local tok, err = T.load(a.tokenizer)
  if not tok then error(err, 0) end
  local fh, ferr = io.stdin, nil
  if a.file ~= "-" then fh, ferr = io.open(a.file, "rb") end
  if not fh then error(ferr, 0) end
  local opts = {add_special_tokens = not a.no_special}
  if a.max_length then opts.truncation = true; opts.max_length = a.max_length end
  local batch = {}
  local function flush()
    if #batch == 0 then return end
    for _, e in ipairs(tok:encode_batch(batch, opts)) do
      io.write(table.concat(a.tokens and e.tokens or e.ids, " "), "\n")
    end
    batch = {}
  end
  for line in fh:lines() do
    batch[#batch + 1] = line
    if #batch >= a.batch then flush() end
  end
  flush()
  if fh ~= io.stdin then fh:close() end
end

cli.main("tokenize.lua", a.command == "train" and train or encode)
