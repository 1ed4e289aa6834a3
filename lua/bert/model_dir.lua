--- bert.model_dir: what makes a model directory self-contained, as
-- Hugging Face writes one: config.json + model.safetensors (the model's
-- save_pretrained), and the tokenizer beside them: tokenizer.json, its
-- vocabulary files (vocab.txt, or vocab.json + merges.txt),
-- tokenizer_config.json and special_tokens_map.json.  Every checkpoint the
-- Trainer writes (checkpoint/, best/) goes through here when it knows the
-- tokenizer, so any of them loads with bert.pipeline(dir) or
-- transformers' AutoTokenizer / AutoModel.
--
--   require("bert.model_dir").save(dir, model, tok)
local fs = require("bert.fs")
local cjson = require("cjson")

local M = {}

local BERT_SPECIALS = {unk_token = "[UNK]", sep_token = "[SEP]", pad_token = "[PAD]", cls_token = "[CLS]",
                       mask_token = "[MASK]"}
local ROBERTA_SPECIALS = {bos_token = "<s>", eos_token = "</s>", unk_token = "<unk>", sep_token = "</s>",
                          pad_token = "<pad>", cls_token = "<s>", mask_token = "<mask>"}

-- JSON with sorted keys (stable files, readable diffs).
local function encode_sorted(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = "  " .. cjson.encode(k) .. ": " .. cjson.encode(t[k]) end
  return "{\n" .. table.concat(parts, ",\n") .. "\n}\n"
end

--- The special tokens of a tokenizer that it actually holds:
-- {cls_token = "[CLS]", ...}, and its kind ("wordpiece" | "bpe").
function M.special_tokens(tok)
  local c = tok:config()
  local map = c.model == "wordpiece" and BERT_SPECIALS or ROBERTA_SPECIALS
  local out = {}
  for k, v in pairs(map) do if tok:token_to_id(v) then out[k] = v end end
  return out, c.model
end

--- Writes the tokenizer files into dir (which must exist).  opts:
-- model_max_length (default 512).  true or nil, message.
function M.save_tokenizer(dir, tok, opts)
  opts = opts or {}
  local ok, err = tok:save(dir)            -- a directory: tokenizer.json + vocabulary files
  if not ok then return nil, err end
  local specials, kind = M.special_tokens(tok)
  local c = tok:config()
  local config = {
    tokenizer_class = kind == "wordpiece" and "BertTokenizer" or "RobertaTokenizer",
    model_max_length = opts.model_max_length or 512,
    clean_up_tokenization_spaces = true,
  }
  if kind == "wordpiece" then
    local norm = c.normalizer or {}
    config.do_lower_case = norm.lowercase ~= false
    config.tokenize_chinese_chars = norm.handle_chinese_chars ~= false
    config.strip_accents = norm.strip_accents == nil and cjson.null or norm.strip_accents
  else
    config.add_prefix_space = c.add_prefix_space == true
    config.trim_offsets = c.trim_offsets ~= false
    config.errors = "replace"
  end
  for k, v in pairs(specials) do config[k] = v end
  ok, err = fs.write_atomic(dir .. "/tokenizer_config.json", encode_sorted(config))
  if not ok then return nil, err end
  return fs.write_atomic(dir .. "/special_tokens_map.json", encode_sorted(specials))
end

--- model:save_pretrained(dir), then the tokenizer files when tok is given.
function M.save(dir, model, tok, opts)
  local ok, err = model:save_pretrained(dir)
  if not ok then return nil, err end
  if tok then
    opts = opts or {}
    opts.model_max_length = opts.model_max_length or (model.config and model.config.max_position_embeddings)
    return M.save_tokenizer(dir, tok, opts)
  end
  return true
end

return M
