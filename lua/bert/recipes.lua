--- bert.recipes: each family's pretraining recipe as its paper ran it,
-- for experiments/pretrain.lua --recipe NAME: the family (at the --model
-- size given, else tiny), the tokenizer kind, the objective, the masking,
-- the optimizer and its betas/eps, the warmup share of the linear
-- schedule, clipping and weight decay.  A recipe is a list of command-line
-- flags put before the user's, so every flag given explicitly wins, and
-- the parser converts and checks a recipe's values as it does the user's.
-- The peak learning rate is left to --lr (or the size's default): the
-- papers' rates are for batches of 256 to 8K sequences.
--
--   local recipes = require("bert.recipes")
--   local argv, applied = recipes.argv("roberta", {"--model", "mini", "--clip", "1"})
--   -- applied = "--model roberta-mini --tokenizer bpe ... (given: --clip 1)"
local configs = require("bert.models.config")

local M = {}

M.order = {"bert", "roberta", "albert", "deberta", "deberta-v3", "electra", "distilbert"}

-- flags as {name, value} (value true: a flag without a value), in the order printed
M.recipes = {
  bert = {family = "bert", paper = "BERT (Devlin et al. 2018)", flags = {
    {"tokenizer", "wordpiece"}, {"objective", "mlm-nsp"}, {"masking", "static"}, {"dupe-factor", "10"},
    {"optimizer", "adamw"}, {"beta2", "0.999"}, {"eps", "1e-6"}, {"warmup", "0.01"}, {"clip", "1"},
    {"weight-decay", "0.01"}},
    why = "sentence pairs with NSP, masks made once (10 copies), Adam eps 1e-6, warmup 10k of 1M steps"},
  roberta = {family = "roberta", paper = "RoBERTa (Liu et al. 2019)", flags = {
    {"tokenizer", "bpe"}, {"objective", "mlm"}, {"masking", "dynamic"},
    {"optimizer", "adamw"}, {"beta2", "0.98"}, {"eps", "1e-6"}, {"warmup", "0.05"}, {"clip", "0"},
    {"weight-decay", "0.01"}},
    why = "byte-level BPE, FULL-SENTENCES packing without NSP, dynamic masking, beta2 0.98, no clipping, " ..
      "warmup 24k of 500k steps"},
  albert = {family = "albert", paper = "ALBERT (Lan et al. 2019)", flags = {
    {"tokenizer", "unigram"}, {"objective", "mlm-sop"}, {"ngram-mask", "3"}, {"whole-word-mask", true},
    {"masking", "static"}, {"dupe-factor", "10"},
    {"optimizer", "lamb"}, {"beta2", "0.999"}, {"eps", "1e-6"}, {"warmup", "0.025"}, {"clip", "1"},
    {"weight-decay", "0.01"}},
    why = "SentencePiece (Unigram), SOP, n-gram masking up to 3 whole words made once (ALBERT made 40 copies; " ..
      "10 here), LAMB, warmup 3,125 of 125k steps"},
  deberta = {family = "deberta", paper = "DeBERTa (He et al. 2020)", flags = {
    {"tokenizer", "bpe"}, {"objective", "mlm"}, {"masking", "dynamic"},
    {"optimizer", "adamw"}, {"beta2", "0.999"}, {"eps", "1e-6"}, {"warmup", "0.01"}, {"clip", "1"},
    {"weight-decay", "0.01"}},
    why = "RoBERTa's BPE, MLM on full sentences through the enhanced mask decoder, warmup 10k of 1M steps"},
  ["deberta-v3"] = {family = "deberta-v3", paper = "DeBERTa-v3 (He et al. 2021)", flags = {
    {"tokenizer", "unigram"}, {"objective", "electra"}, {"embedding-sharing", "gdes"}, {"masking", "dynamic"},
    {"optimizer", "adamw"}, {"beta2", "0.999"}, {"eps", "1e-6"}, {"warmup", "0.01"}, {"clip", "1"},
    {"weight-decay", "0.01"}},
    why = "SentencePiece (Unigram), replaced-token detection with gradient-disentangled embedding sharing, a " ..
      "generator of the same width and half the depth, DeBERTa's optimizer settings"},
  electra = {family = "electra", paper = "ELECTRA (Clark et al. 2020)", flags = {
    {"tokenizer", "wordpiece"}, {"objective", "electra"}, {"embedding-sharing", "shared"}, {"generator-size", "0.25"},
    {"disc-weight", "50"}, {"masking", "dynamic"},
    {"optimizer", "adamw"}, {"beta2", "0.999"}, {"eps", "1e-6"}, {"warmup", "0.01"}, {"clip", "1"},
    {"weight-decay", "0.01"}},
    why = "replaced-token detection, a generator 1/4 the discriminator's width sharing its embeddings, λ 50, " ..
      "masks drawn per batch, warmup 10k of 1M steps"},
  distilbert = {family = "distilbert", paper = "DistilBERT (Sanh et al. 2019)", needs = {objective = "distill",
    flag = "teacher"}, flags = {
    {"tokenizer", "wordpiece"}, {"objective", "distill"}, {"masking", "dynamic"},
    {"optimizer", "adamw"}, {"beta2", "0.98"}, {"eps", "1e-6"}, {"warmup", "0.05"}, {"clip", "5"},
    {"weight-decay", "0"}},
    why = "distillation from --teacher DIR (soft targets, MLM, cosine), Hugging Face distiller.py's AdamW " ..
      "(betas 0.9/0.98, eps 1e-6, no weight decay), warmup 5%, clipping at 5"},
}

--- The option names (without --) given in argv, as a set; "--name=value" counts.
function M.explicit(argv)
  local given = {}
  for _, a in ipairs(argv) do
    local name = type(a) == "string" and a:match("^%-%-([%w%-]+)")
    if name then given[name] = true end
  end
  return given
end

-- the value of --name in argv (the last one given), or nil
local function value_of(argv, name)
  local v
  for i, a in ipairs(argv) do
    if a == "--" .. name then v = argv[i + 1]
    elseif a:sub(1, #name + 3) == "--" .. name .. "=" then v = a:sub(#name + 4) end
  end
  return v
end

--- The text --help shows: one paragraph per recipe.
function M.help()
  local lines = {"Recipes (--recipe NAME sets these flags; a flag given explicitly overrides it; --model SIZE " ..
    "picks the family's size, default tiny; the peak learning rate stays --lr's):"}
  for _, name in ipairs(M.order) do
    local r = M.recipes[name]
    local flags = {"--model " .. r.family .. "-SIZE"}
    for _, f in ipairs(r.flags) do flags[#flags + 1] = f[2] == true and ("--" .. f[1]) or ("--" .. f[1] .. " " .. f[2]) end
    lines[#lines + 1] = string.format("  %s: %s. %s.", name, r.paper, table.concat(flags, " "))
    lines[#lines + 1] = "    (" .. r.why .. ")"
  end
  return table.concat(lines, "\n")
end

--- The recipe's flags to put before the user's argv: argv_out (the
-- recipe's flags not given explicitly, then argv), and a line saying what
-- the recipe set and what was given instead.  opts.has_objective(name)
-- says whether this build has an objective (a recipe that needs a missing
-- one is refused, naming it).  Errors: nil, message.
function M.argv(name, argv, opts)
  opts = opts or {}
  local r = M.recipes[name]
  if not r then
    return nil, string.format("option --recipe: '%s' is not one of %s", tostring(name), table.concat(M.order, ", "))
  end
  local given = M.explicit(argv)
  if r.needs then
    if opts.has_objective and not opts.has_objective(r.needs.objective) then
      return nil, string.format("--recipe %s needs --objective %s (knowledge distillation), which this build " ..
        "does not have yet", name, r.needs.objective)
    end
    if not given[r.needs.flag] then
      return nil, string.format("--recipe %s needs --%s DIR (the teacher model directory)", name, r.needs.flag)
    end
  end
  local out, set, kept = {}, {}, {}
  -- the family at the size asked for: --model SIZE becomes FAMILY-SIZE; FAMILY-SIZE or a config.json stays
  local model = value_of(argv, "model")
  local extra_model
  if model == nil then
    out[#out + 1], out[#out + 2] = "--model", r.family .. "-tiny"
    set[#set + 1] = "--model " .. r.family .. "-tiny"
  elseif configs.sizes[model] then
    extra_model = r.family .. "-" .. model
    set[#set + 1] = "--model " .. extra_model
  else
    kept[#kept + 1] = "--model " .. model
  end
  -- an --objective given instead of the recipe's drops the recipe's settings of that objective
  -- (--recipe electra --objective mlm: no --generator-size)
  local objective, recipe_objective = value_of(argv, "objective"), nil
  for _, f in ipairs(r.flags) do if f[1] == "objective" then recipe_objective = f[2] end end
  local dropped = {}
  local function other_objectives(f)
    local owner = opts.flag_owners and opts.flag_owners[f:gsub("%-", "_")]
    return objective and objective ~= recipe_objective and owner ~= nil and owner ~= objective
  end
  for _, f in ipairs(r.flags) do
    local flag = "--" .. f[1]
    if not given[f[1]] and other_objectives(f[1]) then
      dropped[#dropped + 1] = flag .. (f[2] ~= true and (" " .. f[2]) or "")
    elseif given[f[1]] then
      local v = value_of(argv, f[1])
      kept[#kept + 1] = flag .. (v and f[2] ~= true and (" " .. v) or "")
    else
      out[#out + 1] = flag
      if f[2] ~= true then out[#out + 1] = f[2] end
      set[#set + 1] = f[2] == true and flag or (flag .. " " .. f[2])
    end
  end
  for _, a in ipairs(argv) do out[#out + 1] = a end
  if extra_model then out[#out + 1], out[#out + 2] = "--model", extra_model end
  local line = string.format("recipe %s: %s", name, table.concat(set, " "))
  if #kept > 0 then line = line .. " (given: " .. table.concat(kept, " ") .. ")" end
  if #dropped > 0 then
    line = line .. string.format(" (not set, --objective %s given: %s)", objective, table.concat(dropped, " "))
  end
  return out, line
end

return M
