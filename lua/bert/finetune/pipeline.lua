--- bert.finetune.pipeline: predictions from a fine-tuned model.
--
--   local p = require("bert.finetune").pipeline("runs/ft-spam")   -- run dir, best/ or a model dir
--   p:predict{text = "...", text_pair = "..."}
--     -> {label = "spam", score = 0.98, probabilities = {{label = "spam", p = 0.98}, ...}}
--   p:predict{text = "The jury said it ."}          -- or words = {...}
--     -> {words = {...}, tags = {...}, scores = {...}}
--   p:predict{question = "...", context = "..."}
--     -> {answer = "...", start = 17, stop = 29, score = 0.93, nbest = {...}}
--        (start/stop: 0-based characters of the context, stop exclusive;
--         score: the n-best probability of the span; answer "" and
--         no_answer = true when a SQuAD v2.0 model abstains)
--
-- The task kind comes from config.json's architecture, the labels from its
-- id2label, and the settings used in training (max_length, doc_stride,
-- max_answer_length, version_2, null_threshold) from its "finetune" key.
-- The tokenizer: opts.tokenizer, else one next to the model (see
-- finetune.find_tokenizer).  Batches run packed (the model's set_varlen;
-- opts.varlen = false pads them).
local bert = require("bert")
local finetune = require("bert.finetune")
local util = require("bert.finetune.util")
local class = require("bert.nn.class")

local M = {}

local Pipeline = class("Pipeline")

function M.new(dir, opts)
  opts = opts or {}
  if type(dir) ~= "string" then error("pipeline: expected a model directory", 2) end
  local mdir = finetune.model_dir(dir)
  if not mdir then error("pipeline: " .. dir .. " holds no config.json (nor best/ or checkpoint/)", 2) end
  local config = assert(require("bert.models.config").read_json(mdir .. "/config.json"))
  local arch
  for _, a in ipairs(config.architectures or {}) do if finetune.kinds[a] then arch = a break end end
  if not arch then
    error("pipeline: " .. mdir .. " is not a fine-tuned model (architectures: " ..
      table.concat(config.architectures or {}, ", ") .. ")", 2)
  end
  local model = bert.from_pretrained(mdir, {architecture = arch, verbose = false})
  model:evaluate()
  model:set_varlen(opts.varlen ~= false)   -- packed batches: padding is never computed
  local tok = opts.tokenizer
  if type(tok) ~= "userdata" and type(tok) ~= "table" then tok = finetune.find_tokenizer(mdir, tok) end
  local labels
  if type(config.id2label) == "table" then
    labels = {}
    for k, v in pairs(config.id2label) do labels[(math.tointeger(tonumber(k)) or 0) + 1] = v end
  end
  local settings = type(config.finetune) == "table" and config.finetune or {}
  local self = setmetatable({
    dir = mdir, model = model, tokenizer = tok, kind = finetune.kinds[arch], labels = labels,
    settings = settings, max_length = opts.max_length or settings.max_length or 128,
    batch_size = opts.batch_size or 32,
  }, Pipeline)
  self.max_length = math.min(self.max_length, model.config.max_position_embeddings or self.max_length)
  return self
end

function Pipeline:predict(input)
  if type(input) == "string" then input = {text = input} end
  if type(input) ~= "table" then error("predict: expected a table {text = ...} or {question, context}", 2) end
  return self:predict_batch({input}, 3)[1]
end

--- Predictions for a list of inputs, encoded together and run in batches
-- of opts.batch_size (default 32): a list of results as predict gives them.
function Pipeline:predict_batch(inputs, level)
  local list = {}
  for i, input in ipairs(inputs) do
    if type(input) == "string" then input = {text = input} end
    if type(input) ~= "table" then error("predict: expected a table {text = ...} or {question, context}", level or 2) end
    list[i] = input
  end
  return bert.no_grad(function()
    if self.kind == "classification" then return self:classify(list, (level or 2) + 2) end
    if self.kind == "tagging" then return self:tag(list, (level or 2) + 2) end
    return self:answer(list, (level or 2) + 2)
  end)
end

function Pipeline:classify(inputs, level)
  local classify = finetune.classify
  local examples = {}
  for i, input in ipairs(inputs) do
    if type(input.text) ~= "string" then error("predict: classification needs text (and optionally text_pair)", level) end
    examples[i] = {text = input.text, text_pair = input.text_pair}
  end
  local feats = classify.encode(self.tokenizer, examples, {max_length = self.max_length})
  local preds, probs = classify.predict_features(self.model, feats, {batch_size = self.batch_size})
  local out = {}
  for i = 1, #inputs do
    local list = {}
    for c, p in ipairs(probs[i]) do list[c] = {label = self.labels and self.labels[c] or (c - 1), p = p} end
    table.sort(list, function(a, b) return a.p > b.p end)
    local label = self.labels and self.labels[preds[i] + 1] or preds[i]
    out[i] = {label = label, score = probs[i][preds[i] + 1], probabilities = list}
  end
  return out
end

function Pipeline:tag(inputs, level)
  local tagging = finetune.tagging
  local sentences = {}
  for i, input in ipairs(inputs) do
    local words = input.words
    if not words then
      if type(input.text) ~= "string" then error("predict: tagging needs text or words", level) end
      words = {}
      for w in input.text:gmatch("%S+") do words[#words + 1] = w end
    end
    sentences[i] = {words = words}
  end
  local feats = tagging.encode(self.tokenizer, sentences, {max_length = self.max_length})
  local fallback = self.settings.fallback or (self.labels and tagging.fallback(self.labels)) or 0
  local ids, scores = tagging.predict_features(self.model, feats, {fallback = fallback, batch_size = self.batch_size})
  local out = {}
  for i, s in ipairs(sentences) do
    local tags = {}
    for w, id in ipairs(ids[i]) do tags[w] = self.labels and self.labels[id + 1] or id end
    out[i] = {words = s.words, tags = tags, scores = scores[i]}
  end
  return out
end

function Pipeline:answer(inputs, level)
  local qa = finetune.qa
  local s = self.settings
  local examples, first = {}, inputs[1]
  for i, input in ipairs(inputs) do
    if type(input.question) ~= "string" or type(input.context) ~= "string" then
      error("predict: question answering needs question and context", level)
    end
    examples[i] = {id = "q" .. i, question = input.question, context = input.context}
  end
  -- settings per call come from the first input (they are the same for a batch)
  local opts = {
    max_length = self.max_length, doc_stride = first.doc_stride or s.doc_stride,
    max_query_length = s.max_query_length, n_best = first.n_best or s.n_best,
    max_answer_length = first.max_answer_length or s.max_answer_length,
    version_2 = s.version_2, null_threshold = first.null_threshold or s.null_threshold,
    batch_size = self.batch_size,
  }
  local feats = qa.encode(self.tokenizer, examples, opts)
  local sl, el = qa.logits(self.model, feats, opts)
  local preds, det = qa.postprocess(examples, feats, sl, el, opts)
  local windows = {}
  for _, f in ipairs(feats) do
    local id = examples[f.example].id   -- f.example: the example's index
    windows[id] = (windows[id] or 0) + 1
  end
  local out = {}
  for i, ex in ipairs(examples) do
    local d = det[ex.id]
    local best = d.nbest[1]
    local r = {answer = preds[ex.id], nbest = d.nbest, windows = windows[ex.id] or 0, null_score = d.null_score,
      no_answer = preds[ex.id] == "", null_diff = d.diff}
    if best and preds[ex.id] ~= "" then
      r.start, r.stop, r.score = best.start, best.stop, best.probability
    end
    out[i] = r
  end
  return out
end

M.Pipeline = Pipeline
return M
