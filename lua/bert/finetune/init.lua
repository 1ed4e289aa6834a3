--- bert.finetune: fine-tuning BERT for sequence classification, token
-- classification and extractive QA, with their data readers, metrics and
-- a prediction pipeline.
--
--   local finetune = require("bert.finetune")     -- or bert.finetune
--   local task = finetune.tasks.load("spam")      -- or a TSV/JSONL/CoNLL/SQuAD path
--   local tok = finetune.find_tokenizer("runs/demo/checkpoint")
--   local model = finetune.load_model("runs/demo/checkpoint", {task = task, tokenizer = tok})
--   local feats = finetune.classify.encode(tok, task.train, {max_length = 128, labels = task.labels})
--   -- ... bert.train.Trainer over finetune.batch.Loader(feats, {batch_size = 32}) ...
--   local p = finetune.pipeline("runs/ft-spam")   -- a fine-tuned run directory
--   p:predict{text = "WIN A FREE CRUISE"}         -- {label = "spam", score = 0.99, probabilities = {...}}
--
-- Submodules (loaded on use): metrics, readers, tasks, batch, classify,
-- tagging, qa, synthetic_qa, experiment (one fine-tuning run from settings);
-- finetune.pipeline(dir) builds a predictor (bert.finetune.pipeline).
local bert = require("bert")
local util = require("bert.finetune.util")

local M = {}

local submodules = {
  metrics = true, readers = true, tasks = true, batch = true, classify = true, tagging = true,
  qa = true, synthetic_qa = true, experiment = true, util = true,
}

setmetatable(M, {
  __index = function(self, key)
    if not submodules[key] then return nil end
    local mod = require("bert.finetune." .. key)
    rawset(self, key, mod)
    return mod
  end,
})

--- The task module (classify, tagging or qa) of a task kind.
function M.kind_module(kind)
  local name = ({classification = "classify", tagging = "tagging", qa = "qa"})[kind]
  if not name then error("unknown task kind '" .. tostring(kind) .. "'", 2) end
  return M[name]
end

M.architectures = {
  classification = "BertForSequenceClassification",
  tagging = "BertForTokenClassification",
  qa = "BertForQuestionAnswering",
}
-- task kind <-> the registry's head kind; every family's head classes map to a task kind
M.heads = {classification = "sequence_classification", tagging = "token_classification", qa = "question_answering"}
M.kinds = {}
do
  local registry = require("bert.models.registry")
  local task_of = {}
  for k, v in pairs(M.heads) do task_of[v] = k end
  for _, mt in ipairs(registry.order) do
    for arch, head in pairs(registry.family(mt).architectures) do
      if task_of[head] then M.kinds[arch] = task_of[head] end
    end
  end
end

local function has_config(dir) return util.exists(dir .. "/config.json") end

--- The directory holding a model's config.json: dir itself, or a run
-- directory's best/ (the kept best checkpoint), else its checkpoint/.
function M.model_dir(dir)
  dir = dir:gsub("/+$", "")
  if has_config(dir .. "/best") then return dir .. "/best" end
  if has_config(dir) then return dir end
  if has_config(dir .. "/checkpoint") then return dir .. "/checkpoint" end
  return nil
end

--- Loads a tokenizer: `explicit` when given, else the first of
-- DIR/tokenizer.json, DIR/vocab.txt, DIR/tokenizer/, DIR/../tokenizer/
-- (where pretraining and fine-tuning runs keep theirs).  Returns tok, path;
-- raises an error listing the places looked at.
function M.find_tokenizer(dir, explicit)
  local load = require("bert.tokenizer").load
  if explicit then
    local tok, err = load(explicit)
    if not tok then error("cannot load tokenizer " .. explicit .. ": " .. tostring(err), 0) end
    return tok, explicit
  end
  local tried = {}
  if dir then
    dir = dir:gsub("/+$", "")
    local parent = dir:match("^(.*)/[^/]+$") or "."
    for _, p in ipairs({dir .. "/tokenizer.json", dir .. "/vocab.txt", dir .. "/tokenizer", parent .. "/tokenizer",
                        parent .. "/tokenizer.json", parent .. "/vocab.txt"}) do
      tried[#tried + 1] = p
      if util.exists(p) then
        local tok, err = load(p)
        if not tok then error("cannot load tokenizer " .. p .. ": " .. tostring(err), 0) end
        return tok, p
      end
    end
  end
  error("no tokenizer found (looked at " .. (#tried > 0 and table.concat(tried, ", ") or "nothing") ..
    "): pass --tokenizer PATH (a vocab.txt, tokenizer.json or directory)", 0)
end

--- Builds or loads the model for a task.
-- spec: a checkpoint directory (ours or Hugging Face's) or a size name
-- (tiny, mini, small, medium, base, large; always randomly initialised).
-- opts: kind ("classification" | "tagging" | "qa"), labels (list),
-- regression (one output scored by MSE: STS-B), or task
-- (a task from finetune.tasks: its kind and labels),
-- from_scratch (a directory's config with fresh weights), tokenizer (its
-- vocabulary size sets a size name's vocab_size), config (config keys over
-- the model's, e.g. {hidden_dropout_prob = 0}: checked against the family's
-- keys, Hugging Face's aliases translated; config_source names them in an
-- error, e.g. "--config-overrides"), finetune (settings stored in
-- config.json for the pipeline).
-- Returns model, info {from_scratch, source, missing, unexpected}.
function M.load_model(spec, opts)
  opts = opts or {}
  if opts.task then   -- a task table: its kind and labels
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    o.kind, o.labels, o.task = o.kind or opts.task.kind, o.labels or opts.task.labels, nil
    if o.regression == nil then o.regression = opts.task.regression end
    opts = o
  end
  local arch = M.architectures[opts.kind]
  if not arch then error("load_model: opts.kind must be classification, tagging or qa", 2) end
  local overrides = {}
  -- opts.config in the family's own key names, checked, before the task's keys
  local function add_config(model_type)
    if not opts.config then return end
    local registry = require("bert.models.registry")
    local family = registry.families[model_type or registry.default_model_type]
    if not family then return end   -- an unknown model_type: bert.model names it
    local keys, why = require("bert.models.config").family_keys(family, opts.config)
    if not keys then error((opts.config_source or "load_model: opts.config") .. ": " .. why, 0) end
    for k, v in pairs(keys) do if overrides[k] == nil then overrides[k] = v end end   -- the task's labels win
  end
  if opts.regression then   -- one output trained with MSE (HF's num_labels = 1)
    overrides.num_labels, overrides.id2label, overrides.label2id = 1, {["0"] = "LABEL_0"}, {LABEL_0 = 0}
  elseif opts.labels then
    local id2label, label2id = {}, {}
    for i, l in ipairs(opts.labels) do
      id2label[tostring(i - 1)] = l
      label2id[l] = i - 1
    end
    overrides.num_labels, overrides.id2label, overrides.label2id = #opts.labels, id2label, label2id
  end
  if opts.finetune then overrides.finetune = opts.finetune end
  -- FAMILY-SIZE (albert-tiny) or a bare size (BERT's): the family's head for this task
  local resolved = bert.models.resolve(spec)
  if resolved and resolved.size then
    add_config(resolved.family)
    arch = bert.models.architecture_for(resolved.family, M.heads[opts.kind])
    if opts.tokenizer then
      overrides.vocab_size = opts.tokenizer:vocab_size()
      overrides.pad_token_id = opts.tokenizer:token_to_id("[PAD]") or opts.tokenizer:token_to_id("<pad>")
    end
    local model = bert.model(arch, resolved.size, overrides)
    -- ELMo's character encoder reads the vocabulary's tokens
    if opts.tokenizer and model.base and model.base.set_vocabulary then model.base:set_vocabulary(opts.tokenizer) end
    return model, {from_scratch = true, source = spec}
  end
  local dir = M.model_dir(spec)
  if not dir then
    error(string.format("--model '%s' is neither FAMILY-SIZE (bert-, roberta-, albert-, electra-, distilbert-, " ..
      "deberta- with tiny, mini, small, medium, base, large) nor a directory with config.json (or best/ or checkpoint/)",
      spec), 0)
  end
  local model, info
  local raw = require("bert.models.config").read(dir .. "/config.json")
  add_config(raw.model_type)
  if opts.from_scratch then
    arch = bert.models.architecture_for(raw.model_type or require("bert.models.registry").default_model_type, M.heads[opts.kind])
    model = bert.model(arch, dir .. "/config.json", overrides)
    info = {from_scratch = true, source = dir}
  else
    model, info = bert.from_pretrained(dir, {architecture = arch, config = overrides, verbose = false})
    info.from_scratch, info.source = false, dir
  end
  if opts.tokenizer and opts.tokenizer:vocab_size() > model.config.vocab_size then
    error(string.format("the tokenizer has %d tokens but the model's vocabulary only %d: pass the tokenizer " ..
      "the model was trained with (--tokenizer)", opts.tokenizer:vocab_size(), model.config.vocab_size), 0)
  end
  -- ELMo's character encoder reads the spellings of the tokenizer that makes the ids: a trained
  -- one refuses a vocabulary other than its training's, a fresh one takes the tokenizer's
  if opts.tokenizer and model.base and model.base.set_vocabulary then
    if info.from_scratch then model.base.config.character_vocabulary_fingerprint = nil end
    model.base:set_vocabulary(opts.tokenizer, "--tokenizer")
  end
  return model, info
end

--- A prediction pipeline over a fine-tuned model: see bert.finetune.pipeline.
function M.pipeline(dir, opts) return require("bert.finetune.pipeline").new(dir, opts) end

return M
