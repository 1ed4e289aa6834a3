--- bert.pipeline(task, dir_or_model[, opts]): a model and its tokenizer
-- behind one call, as Hugging Face's pipelines.
--
--   local fill = bert.pipeline("fill-mask", "runs/demo/checkpoint")
--   fill("The [MASK] sat on the mat.")           -- {{{token_str = "cat", token = 1234, score = 0.31, sequence = "..."}, ...}}
--   fill({"a [MASK] b", "[MASK] and [MASK]"}, {top_k = 3})   -- batched; one list per mask
--
--   local fe = bert.pipeline("feature-extraction", dir)
--   fe:embed({"first sentence", "second"}, {pooling = "mean", normalize = true})  -- [2, hidden] tensor
--   fe("a sentence")                             -- {hidden = [1, T, hidden], attention_mask = [1, T]}
--
--   bert.pipeline("text-classification", "runs/ft-spam")("WIN a FREE cruise")   -- {label, score, probabilities}
--   bert.pipeline("token-classification", dir)("The jury said it .")          -- {words, tags, scores}
--   bert.pipeline("question-answering", dir)({question = "...", context = "..."})
--
-- dir_or_model: a model directory (a run directory's best/ or checkpoint/
-- is used) or a model object, then with opts.tokenizer.  Lists of inputs
-- are run in batches of opts.batch_size (default 32) and give lists of
-- results; a single input gives a single result.  opts.int8: every linear
-- layer runs int8 (model:quantize("int8"), bert.quantize; a model object
-- given is quantised in place).
local bert = require("bert")
local class = require("bert.nn.class")

local M = {}

M.tasks = {"fill-mask", "feature-extraction", "text-classification", "token-classification", "question-answering"}

local FINETUNED = {["text-classification"] = "classification", ["token-classification"] = "tagging",
                   ["question-answering"] = "qa"}

local Pipeline = class("Pipeline")
Pipeline.__call = function(self, ...) return self:run(...) end

local function is_list(x) return type(x) == "table" and x[1] ~= nil end

-- the head kinds whose outputs fill-mask reads: the MLM head's logits at every position
local MLM_KINDS = {pretraining = true, masked_lm = true, emd_pretraining = true}

-- Loads the model for a task from a directory: fill-mask needs the MLM head
-- (a pretraining or masked-LM class of any family), feature extraction takes
-- the base model of any checkpoint.
local function load(task, src, opts)
  local finetune = require("bert.finetune")
  if type(src) ~= "string" then
    if not opts.tokenizer then error("pipeline: a model object needs opts.tokenizer", 3) end
    return src, opts.tokenizer, nil
  end
  local dir = finetune.model_dir(src)
  if not dir then error("pipeline: " .. src .. " holds no config.json (nor best/ or checkpoint/)", 3) end
  local config = assert(require("bert.models.config").read_json(dir .. "/config.json"))
  local registry = require("bert.models.registry")
  local archs = config.architectures or {}
  local arch
  if task == "fill-mask" then
    for _, a in ipairs(archs) do
      local _, kind = registry.architecture(a)
      if MLM_KINDS[kind] then arch = a end
    end
    if not arch then
      error("pipeline: fill-mask needs a model with its masked-language-model head " ..
        "(a masked-LM or MLM-pretraining class); " .. dir .. " holds " .. table.concat(archs, ", "), 3)
    end
  else
    local ok, family = pcall(registry.family_of, config)
    if not ok then error(string.format("pipeline: %s/config.json: %s", dir, family), 3) end
    arch = registry.architecture_for(family, "base")
  end
  local model = bert.from_pretrained(dir, {architecture = arch, verbose = false})
  local tok = opts.tokenizer
  if type(tok) ~= "userdata" and type(tok) ~= "table" then tok = finetune.find_tokenizer(dir, tok) end
  return model, tok, dir
end

--- Builds a pipeline; see the module comment.
function M.new(task, src, opts)
  opts = opts or {}
  if FINETUNED[task] then
    local p = require("bert.finetune").pipeline(src, opts)
    if p.kind ~= FINETUNED[task] then
      error(string.format("pipeline: %s is a %s model, not one for %s", p.dir, p.kind, task), 2)
    end
    if opts.int8 then p.model:quantize("int8") end
    return setmetatable({task = task, inner = p, model = p.model, tokenizer = p.tokenizer, dir = p.dir,
      batch_size = opts.batch_size or 32}, Pipeline)   -- p encodes a chunk together, runs it in batches
  end
  if task ~= "fill-mask" and task ~= "feature-extraction" then
    error("pipeline: unknown task '" .. tostring(task) .. "' (one of " .. table.concat(M.tasks, ", ") .. ")", 2)
  end
  local model, tok, dir = load(task, src, opts)
  model:evaluate()
  if opts.int8 then model:quantize("int8") end
  local self = setmetatable({task = task, model = model, tokenizer = tok, dir = dir,
    batch_size = opts.batch_size or 32,
    max_length = math.min(opts.max_length or 512, model.config.max_position_embeddings or 512)}, Pipeline)
  if task == "fill-mask" then
    self.mask_token = tok:token_to_id("[MASK]") and "[MASK]" or (tok:token_to_id("<mask>") and "<mask>")
    if not self.mask_token then error("pipeline: the tokenizer has no [MASK] or <mask> token", 2) end
    self.mask_id = tok:token_to_id(self.mask_token)
  end
  return self
end

-- Encodes texts padded to the longest: input_ids, token_type_ids, attention_mask, and the encodings.
function Pipeline:encode(texts)
  local encs = self.tokenizer:encode_batch(texts, {max_length = self.max_length, truncation = true})
  local feats = {}
  for i, e in ipairs(encs) do feats[i] = {ids = e.ids, type_ids = e.type_ids} end
  local pad_id = self.tokenizer:token_to_id("[PAD]") or self.tokenizer:token_to_id("<pad>") or 0
  local b = require("bert.finetune.batch").collate(feats, {pad_id = pad_id, targets = false})
  return b, encs
end

-- fn(chunk) over the inputs (one or a list) in chunks of batch_size: the list of what it returned.
function Pipeline:each_batch(inputs, fn)
  local list = is_list(inputs) and inputs or {inputs}
  local out = {}
  for s = 1, #list, self.batch_size do
    out[#out + 1] = fn(table.move(list, s, math.min(s + self.batch_size - 1, #list), 1, {}))
  end
  return out
end

-- Runs fn(list) -> results over batches of inputs; a single input gives its result.
function Pipeline:batched(inputs, fn)
  local out = {}
  for _, results in ipairs(self:each_batch(inputs, fn)) do table.move(results, 1, #results, #out + 1, out) end
  return is_list(inputs) and out or out[1]
end

--- fill-mask: for each text, one list per [MASK] of the top_k (default 5)
-- tokens {token_str, token (id), score (probability), sequence (the text
-- with this token in place of the mask)}; a text with one mask gives that
-- list directly.
function Pipeline:fill(inputs, opts)
  opts = opts or {}
  local top_k = opts.top_k or 5
  return self:batched(inputs, function(texts)
    for _, t in ipairs(texts) do
      if type(t) ~= "string" then error("fill-mask: expected a string or a list of strings", 4) end
    end
    local b = self:encode(texts)
    local B, T = b.input_ids:size(1), b.input_ids:size(2)
    local ids = b.input_ids:totable()
    local rows, where = {}, {}
    for i = 1, B do
      for t = 1, T do
        if ids[i][t] == self.mask_id then rows[#rows + 1] = (i - 1) * T + (t - 1); where[#where + 1] = {i, t} end
      end
    end
    local results = {}
    for i = 1, B do results[i] = {} end
    if #rows == 0 then
      error("fill-mask: no " .. self.mask_token .. " in the input", 4)
    end
    bert.no_grad(function()
      local out = self.model:forward(b)
      local logits = out.prediction_logits or out.logits
      local V = logits:size(3)
      local picked = logits:view(B * T, V):index_select(1, bert.tensor(rows, "int32"))
      local probs, top = picked:softmax(-1):topk(math.min(top_k, V))
      probs, top = probs:totable(), top:totable()
      for m, pos in ipairs(where) do
        local i, t = pos[1], pos[2]
        local list = {}
        for j = 1, #top[m] do
          local seq = {}
          for k = 1, T do seq[k] = ids[i][k] end
          seq[t] = top[m][j]
          list[j] = {token = top[m][j], token_str = self.tokenizer:id_to_token(top[m][j]), score = probs[m][j],
            sequence = self.tokenizer:decode(seq, {skip_special_tokens = true})}
        end
        results[i][#results[i] + 1] = list
      end
    end)
    for i = 1, B do if #results[i] == 1 then results[i] = results[i][1] end end
    return results
  end)
end

-- The model's last hidden state [B, T, H] over texts, and their batch.
function Pipeline:hidden(texts)
  local b = self:encode(texts)
  return bert.no_grad(function() return self.model:forward(b).last_hidden_state end), b
end

--- feature-extraction: the encoder's last hidden state and the attention
-- mask of each batch: {hidden = [B, T, H], attention_mask = [B, T]} (a
-- list of those for more inputs than a batch).
function Pipeline:features(inputs)
  local outs = self:each_batch(inputs, function(chunk)
    local h, b = self:hidden(chunk)
    return {hidden = h, attention_mask = b.attention_mask}
  end)
  return #outs == 1 and outs[1] or outs
end

--- Sentence embeddings [N, H]: opts.pooling "mean" (over real tokens, the
-- default) or "cls" (the first token's vector); opts.normalize scales each
-- row to unit length (for cosine similarity by dot products).
function Pipeline:embed(inputs, opts)
  opts = opts or {}
  local pooling = opts.pooling or "mean"
  if pooling ~= "mean" and pooling ~= "cls" then
    error("embed: pooling must be \"mean\" or \"cls\", got " .. tostring(pooling), 2)
  end
  local parts = self:each_batch(inputs, function(chunk)
    local h, b = self:hidden(chunk)
    local e
    if pooling == "cls" then
      e = h:select(2, 1):contiguous()
    else
      local m = b.attention_mask:float():unsqueeze(3)        -- [B, T, 1]
      e = (h * m):sum(2) / m:sum(2)
    end
    if opts.normalize then e = e / (e * e):sum(2, true):sqrt():maximum(1e-12) end
    return e
  end)
  return #parts == 1 and parts[1] or bert.cat(parts, 1)
end

--- Runs the pipeline's task on inputs (also p(inputs)).
function Pipeline:run(inputs, opts)
  if self.task == "fill-mask" then return self:fill(inputs, opts) end
  if self.task == "feature-extraction" then
    if opts and opts.pooling then return self:embed(inputs, opts) end
    return self:features(inputs)
  end
  return self:batched(inputs, function(chunk) return self.inner:predict_batch(chunk, 5) end)
end

--- Saves the model and its tokenizer as a self-contained directory.
function Pipeline:save_pretrained(dir)
  assert(bert.mkdir(dir))
  return require("bert.model_dir").save(dir, self.model, self.tokenizer)
end

setmetatable(M, {__call = function(_, task, src, opts) return M.new(task, src, opts) end})
return M
