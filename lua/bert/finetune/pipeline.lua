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
-- finetune.find_tokenizer).
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
  }, Pipeline)
  self.max_length = math.min(self.max_length, model.config.max_position_embeddings or self.max_length)
  return self
end

function Pipeline:predict(input)
  if type(input) == "string" then input = {text = input} end
  if type(input) ~= "table" then error("predict: expected a table {text = ...} or {question, context}", 2) end
  return bert.no_grad(function()
    if self.kind == "classification" then return self:classify(input) end
    if self.kind == "tagging" then return self:tag(input) end
    return self:answer(input)
  end)
end

function Pipeline:classify(input)
  local text = input.text
  if type(text) ~= "string" then error("predict: classification needs text (and optionally text_pair)", 3) end
  local classify = finetune.classify
  local feats = classify.encode(self.tokenizer, {{text = text, text_pair = input.text_pair}},
    {max_length = self.max_length})
  local preds, probs = classify.predict_features(self.model, feats)
  local list = {}
  for c, p in ipairs(probs[1]) do list[c] = {label = self.labels and self.labels[c] or (c - 1), p = p} end
  table.sort(list, function(a, b) return a.p > b.p end)
  local label = self.labels and self.labels[preds[1] + 1] or preds[1]
  return {label = label, score = probs[1][preds[1] + 1], probabilities = list}
end

function Pipeline:tag(input)
  local words = input.words
  if not words then
    if type(input.text) ~= "string" then error("predict: tagging needs text or words", 3) end
    words = {}
    for w in input.text:gmatch("%S+") do words[#words + 1] = w end
  end
  local tagging = finetune.tagging
  local feats = tagging.encode(self.tokenizer, {{words = words}}, {max_length = self.max_length})
  local fallback = self.settings.fallback or (self.labels and tagging.fallback(self.labels)) or 0
  local ids, scores = tagging.predict_features(self.model, feats, {fallback = fallback})
  local tags = {}
  for w, id in ipairs(ids[1]) do tags[w] = self.labels and self.labels[id + 1] or id end
  return {words = words, tags = tags, scores = scores[1]}
end

function Pipeline:answer(input)
  if type(input.question) ~= "string" or type(input.context) ~= "string" then
    error("predict: question answering needs question and context", 3)
  end
  local qa = finetune.qa
  local s = self.settings
  local ex = {{id = "q", question = input.question, context = input.context}}
  local opts = {
    max_length = self.max_length, doc_stride = input.doc_stride or s.doc_stride,
    max_query_length = s.max_query_length, n_best = input.n_best or s.n_best,
    max_answer_length = input.max_answer_length or s.max_answer_length,
    version_2 = s.version_2, null_threshold = input.null_threshold or s.null_threshold,
  }
  local feats = qa.encode(self.tokenizer, ex, opts)
  local sl, el = qa.logits(self.model, feats)
  local preds, det = qa.postprocess(ex, feats, sl, el, opts)
  local d = det.q
  local best = d.nbest[1]
  local r = {answer = preds.q, nbest = d.nbest, windows = #feats, null_score = d.null_score,
    no_answer = preds.q == "", null_diff = d.diff}
  if best and preds.q ~= "" then
    r.start, r.stop, r.score = best.start, best.stop, best.probability
  end
  return r
end

M.Pipeline = Pipeline
return M
