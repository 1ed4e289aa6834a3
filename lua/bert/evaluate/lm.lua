--- bert.evaluate.lm: zero-shot language-model scores of sentences, for any
-- pretrained checkpoint: the measure BLiMP's minimal pairs and bits per
-- byte are built on (bert.evaluate.blimp, M.bits_per_byte).
--
--   local lm = require("bert.evaluate.lm")
--   local model, tok, info = lm.load("runs/mini-brown")    -- a run, its checkpoint/ or a model directory
--   local score = lm.scorer(model, tok)                      -- info.kind: "masked" | "causal" | "bilm"
--   score({"The cat sat.", "The cat sit."})                  -- {-23.1, -27.4}: natural logs; stats second
--   lm.bits_per_byte(model, tok, "heldout.txt", {max_sentences = 2000})
--     -- {bits_per_byte, bytes, sentences, tokens, nll, seconds, kind, ...}
--
-- What a sentence's score is, by kind of model (M.kind_of):
--   masked  (*ForMaskedLM, *ForPreTraining, DeBERTa's EMD, an ELECTRA run's
--           generator/): the pseudo-log-likelihood of Salazar et al. 2020,
--           sum over the sentence's tokens of log P(token | the sentence with
--           that one token masked).  One row per masked copy; the copies of
--           many sentences run as the rows of one batch, packed without
--           padding where the family can (model:set_varlen's path, passed as
--           inputs.varlen), and the MLM head runs on the masked rows only (the
--           heads' labels path: heads.masked_lm), so the vocabulary projection
--           costs one row per scored token.
--   causal  (BertLMHeadModel / RobertaForCausalLM, is_decoder: an --objective
--           clm run): sum over the tokens of log P(token_t | [CLS] token_<t).
--   bilm    (BiLMLMHeadModel: --objective bilm; ElmoLMHeadModel: --objective
--           elmo): the left-to-right LL plus the right-to-left LL
--           (log P(token_t | token_>t [SEP])), the sum.
-- The tokens are the sentence's own: the template's specials ([CLS] ... [SEP],
-- <s> ... </s>) are context, never scored, so every kind is charged for the
-- same tokens and none for where the sentence ends.  An [UNK] is scored as
-- any token.  An empty sentence scores 0.
--
-- Sentences longer than max_length (default min(128, the model's position
-- limit): our pretraining runs train 128 positions) are scored in windows of
-- W = max_length - specials tokens, each wrapped in the template's specials:
--   masked: blocks of K = stride (default W // 2) scored tokens, each in the
--           W-token window centred on it (clipped to the sentence), so a
--           scored token has about (W - K) / 2 tokens of context either side;
--   causal (and bilm's left-to-right stack): the first window scores its W
--           tokens, every later one the K tokens after the previous, with the
--           W - K tokens before them as context (the usual sliding window);
--   bilm's right-to-left stack: the same from the sentence's end.
--
-- Bits per byte (M.bits_per_byte): the summed negative log2-likelihood of
-- the file's sentences divided by their UTF-8 bytes, each sentence's bytes
-- as corpus.read gives it (outer whitespace trimmed), with no byte counted
-- for line breaks or document breaks (the models score no sentence end, so
-- the boundaries are not charged for, nor credited).  masked: the PLL, which
-- is not a normalised likelihood (each token sees all the others), so its
-- bits per byte compare between masked models only, as Salazar et al.'s
-- pseudo-perplexities do; causal: the LL; bilm: the MEAN of its two directions'
-- LLs, i.e. the log of the geometric mean of two normalised distributions,
-- which by concavity is at most the log-likelihood of their 50/50 mixture:
-- the number is an upper bound on the bits per byte of a proper model, and
-- on the same scale as a causal model's (the sum would count every token
-- twice).  Each direction's own bits per byte is reported beside it.
--
-- Functions:
--   M.kind_of(model) -> kind | nil, why
--   M.load(dir, opts) -> model, tok, info {dir, kind, architecture, generator, objective}
--   M.scorer(model, tok, opts) -> score(sentences) -> log-probs, stats
--   M.bits_per_byte(model_or_scorer, tok, path, opts) -> result
-- opts of M.scorer (and M.load's kind): kind (override), max_length, stride,
-- batch_tokens (rows x longest row per forward, default 8192), varlen
-- (default true: packed where the family can).
local bert = require("bert")
local registry = require("bert.models.registry")
local heads = require("bert.models.heads")

local M = {}

M.kinds = {"masked", "causal", "bilm"}
local KIND_SET = {masked = true, causal = true, bilm = true}

local HEAD_KIND = {masked_lm = "masked", pretraining = "masked", emd_pretraining = "masked", causal_lm = "causal"}

-- {============================================================ what a model is

--- The kind of an architecture name ("BertForMaskedLM" -> "masked"), or nil
-- and why it has none.
function M.kind_of_architecture(name)
  local family, head = registry.architecture(tostring(name))
  if not family then return nil, string.format("'%s' is not an architecture this library knows", tostring(name)) end
  if head == "causal_lm" and (family.model_type == "bilm" or family.model_type == "elmo") then return "bilm" end
  local kind = HEAD_KIND[head]
  if kind then return kind end
  if head == "replaced_token_detection" then
    return nil, string.format("%s is a replaced-token-detection discriminator: it has no language-model head " ..
      "(an ELECTRA run saves its generator in checkpoint/generator/: score that)", name)
  end
  return nil, string.format("%s (a %s head) has no language-model head", name, head)
end

--- The kind of a model object (its class name), or nil and why.
function M.kind_of(model)
  if type(model) ~= "table" or type(model.forward) ~= "function" then
    return nil, "not a model (no forward method)"
  end
  return M.kind_of_architecture(model.class_name or "?")
end

-- the run's objective (args.json beside checkpoint/), or nil
local function run_objective(dir)
  local parent = dir:match("^(.*)/[^/]+$") or "."
  for _, p in ipairs({parent .. "/args.json", dir .. "/args.json"}) do
    local args = require("bert.models.config").read_json(p)
    if type(args) == "table" and args.objective then return args.objective end
  end
  return nil
end

--- Loads a checkpoint for scoring.  dir: a model directory, or a run
-- directory (its best/ or checkpoint/).  An ELECTRA discriminator is
-- replaced by the generator saved beside it (info.generator = true).
-- opts: kind (override the detected kind: "masked" builds the family's MLM
-- head, "causal" its left-to-right head with is_decoder), tokenizer (a path;
-- default: the one beside the checkpoint, as fine-tuning finds it).
-- Returns model (in evaluation mode), tok, info {dir, kind, architecture,
-- generator, objective (the run's --objective when args.json is there),
-- missing (weights the checkpoint lacked)}.
function M.load(dir, opts)
  opts = opts or {}
  if type(dir) ~= "string" then error("lm.load: argument #1 (dir) expected a string, got " .. type(dir), 2) end
  if opts.kind ~= nil and not KIND_SET[opts.kind] then
    error(string.format("lm.load: opts.kind must be masked, causal or bilm, got '%s'", tostring(opts.kind)), 2)
  end
  local finetune = require("bert.finetune")
  local resolved = finetune.model_dir(dir)
  if not resolved then error("lm.load: " .. dir .. " holds no config.json (nor best/ or checkpoint/)", 2) end
  local config, err = require("bert.models.config").read_json(resolved .. "/config.json")
  if not config then error("lm.load: " .. tostring(err), 2) end
  local archs = type(config.architectures) == "table" and config.architectures or {}
  local arch, kind, why
  for _, a in ipairs(archs) do
    local k, w = M.kind_of_architecture(a)
    if k then arch, kind = a, k break end
    why = why or w
  end
  local info = {dir = resolved, objective = run_objective(resolved), generator = false}
  if not arch then
    local gen = resolved .. "/generator"
    if require("bert.fs").exists(gen .. "/config.json") then
      local model, tok, ginfo = M.load(gen, {kind = opts.kind, tokenizer = opts.tokenizer})
      ginfo.generator, ginfo.objective = true, info.objective
      return model, tok, ginfo
    end
    error(string.format("lm.load: %s/config.json: %s", resolved,
      why or ("no architecture with a language-model head (architectures: " .. table.concat(archs, ", ") .. ")")), 2)
  end
  local overrides
  if opts.kind and opts.kind ~= kind then
    local family = registry.architecture(arch)
    if opts.kind == "bilm" or family.model_type == "bilm" then
      error(string.format("lm.load: %s is a %s model (%s); kind '%s' needs the bilm family's checkpoint",
        resolved, kind, arch, opts.kind), 2)
    end
    local ok, a = pcall(registry.architecture_for, family, opts.kind == "masked" and "masked_lm" or "causal_lm")
    if not ok then error(string.format("lm.load: kind '%s': %s", opts.kind, tostring(a)), 2) end
    arch, kind = a, opts.kind
    overrides = {is_decoder = kind == "causal"}   -- a masked LM reads both sides
  end
  local model, loaded = bert.from_pretrained(resolved, {architecture = arch, verbose = false, config = overrides})
  model:evaluate()
  local tok = finetune.find_tokenizer(resolved, opts.tokenizer)
  info.kind, info.architecture, info.missing = kind, arch, loaded and loaded.missing or {}
  return model, tok, info
end
-- }============================================================

-- {============================================================ windows

-- A sentence's scoring is a list of windows: {sent = i, ids = row token ids
-- (with the template's specials), pos = 0-based row positions scored, dir =
-- "f" (left to right, also causal), "b" (right to left), "fb" (the whole
-- sentence: left to right, and for bilm right to left too, in one row) or
-- "m" (one masked copy per position)}.

-- prefix, content, suffix of an encoding (the specials before and after)
local function split_template(e)
  local ids, sm = e.ids, e.special_tokens_mask
  local a, b = 1, #ids
  while a <= b and sm[a] == 1 do a = a + 1 end
  while b >= a and sm[b] == 1 do b = b - 1 end
  return table.move(ids, 1, a - 1, 1, {}), table.move(ids, a, b, 1, {}), table.move(ids, b + 1, #ids, 1, {})
end

local function make_window(i, prefix, content, suffix, lo, hi, s, e, dir)
  local ids = table.move(prefix, 1, #prefix, 1, {})
  table.move(content, lo, hi, #ids + 1, ids)
  table.move(suffix, 1, #suffix, #ids + 1, ids)
  local pos = {}
  for j = s, e do pos[#pos + 1] = #prefix + (j - lo) end
  return {sent = i, ids = ids, pos = pos, dir = dir}
end

-- windows of sentence i (content n tokens, W per window, K per later block)
local function windows_of(st, i, e, out)
  local prefix, content, suffix = split_template(e)
  local n = #content
  if n == 0 then return 0 end
  local W = st.max_length - #prefix - #suffix
  if W < 1 then
    error(string.format("lm.scorer: max_length %d leaves no room for a token beside the template's %d specials",
      st.max_length, #prefix + #suffix), 0)
  end
  if n <= W then   -- one row (one per masked copy) holds the whole sentence
    local pos = {}
    for j = 1, n do pos[j] = #prefix + j - 1 end
    out[#out + 1] = {sent = i, ids = e.ids, pos = pos, dir = st.kind == "masked" and "m" or "fb"}
    return n
  end
  local K = math.max(1, math.min(st.stride or W // 2, W))
  if st.kind == "masked" then
    for s = 1, n, K do
      local e2 = math.min(n, s + K - 1)
      local lo = math.max(1, math.min(s - (W - K) // 2, n - W + 1))
      out[#out + 1] = make_window(i, prefix, content, suffix, lo, lo + W - 1, s, e2, "m")
    end
    return n
  end
  -- left to right: [1, W], then blocks of K with W - K tokens before them
  local s = 1
  while s <= n do
    local e2 = s == 1 and W or math.min(n, s + K - 1)
    local lo = math.max(1, e2 - W + 1)
    out[#out + 1] = make_window(i, prefix, content, suffix, lo, e2, s, e2, "f")
    s = e2 + 1
  end
  if st.kind == "bilm" then   -- right to left, mirrored
    local e2 = n
    while e2 >= 1 do
      local s2 = e2 == n and n - W + 1 or math.max(1, e2 - K + 1)
      local hi = math.min(n, s2 + W - 1)
      out[#out + 1] = make_window(i, prefix, content, suffix, s2, hi, s2, e2, "b")
      e2 = s2 - 1
    end
  end
  return n
end
-- }============================================================

-- {============================================================ batches

-- Builds the [B, T] grids of a batch of rows {ids, labels = {[pos] = id},
-- masked = pos or nil}: input_ids, attention_mask, labels (-100 unless
-- scored), and for bilm the backward labels.
local function grids(st, rows)
  local T = 0
  for _, r in ipairs(rows) do if #r.ids > T then T = #r.ids end end
  local ids, mask, labels, blabels = {}, {}, {}, {}
  for b, r in ipairs(rows) do
    local row, m, l, bl = {}, {}, {}, {}
    local rids, n = r.ids, #r.ids
    for t = 1, T do
      if t <= n then row[t], m[t] = rids[t], 1 else row[t], m[t] = st.pad_id, 0 end
      l[t], bl[t] = -100, -100
    end
    if r.masked then row[r.masked + 1] = st.mask_id end
    if r.dir ~= "b" then for _, p in ipairs(r.pos) do l[p + 1] = rids[p + 1] end end
    if r.dir == "b" or (r.dir == "fb" and st.kind == "bilm") then
      for _, p in ipairs(r.pos) do bl[p + 1] = rids[p + 1] end
    end
    ids[b], mask[b], labels[b], blabels[b] = row, m, l, bl
  end
  return T, bert.tensor(ids, "int32"), bert.tensor(mask, "int32"), bert.tensor(labels, "int32"),
    bert.tensor(blabels, "int32")
end

-- adds -CE (natural log-probs) of logits/targets to the rows' sentences
local function accumulate(st, rows, T, logits, targets, positions, scores, part)
  if targets:numel() == 0 then return 0 end
  local lp = bert.F.cross_entropy(logits, targets, {reduction = "none"}):totable()
  local pos = positions:totable()
  for k, v in ipairs(lp) do
    local r = rows[pos[k] // T + 1]
    scores[r.sent] = scores[r.sent] - v
    if part then part[r.sent] = part[r.sent] - v end
  end
  return #lp
end

local function run_batch(st, rows, scores, parts)
  local T, ids, mask, labels, blabels = grids(st, rows)
  local model = st.model
  local n
  if st.kind == "bilm" and model.directions then   -- ELMo: both LMs in original order
    local lf, pf, tf, lb, pb, tb = model:directions({input_ids = ids, attention_mask = mask}, labels, blabels)
    n = accumulate(st, rows, T, lf, tf, pf, scores, parts and parts.forward)
      + accumulate(st, rows, T, lb, tb, pb, scores, parts and parts.backward)
  elseif st.kind == "bilm" then
    local bilm = require("bert.models.bilm")
    local base = model.base:forward{input_ids = ids, attention_mask = mask}
    local ft = heads.next_token_targets(labels)
    local bt = heads.next_token_targets(bilm.permute_rows(blabels, base.reversal))
    local lf, pf, tf = heads.masked_lm(model.mlm, base.forward_hidden, ft)
    local lb, pb, tb = heads.masked_lm(model.mlm, base.backward_reversed, bt)
    n = accumulate(st, rows, T, lf, tf, pf, scores, parts and parts.forward)
      + accumulate(st, rows, T, lb, tb, pb, scores, parts and parts.backward)
  else
    local out = model:forward{input_ids = ids, attention_mask = mask, labels = labels, varlen = st.varlen}
    if st.kind == "causal" then
      n = accumulate(st, rows, T, out.logits, out.targets, out.target_positions, scores)
    else
      n = accumulate(st, rows, T, out.logits or out.prediction_logits, out.masked_labels, out.masked_positions, scores)
    end
  end
  local tokens = 0
  for _, r in ipairs(rows) do tokens = tokens + #r.ids end
  return n, tokens
end
-- }============================================================

-- {============================================================ the scorer

local function first_id(tok, names)
  for _, n in ipairs(names) do
    local id = tok:token_to_id(n)
    if id then return id end
  end
  return nil
end

local function model_limit(model)
  local base = model.base
  if base and base.max_length then return base.max_length end
  return (model.config or {}).max_position_embeddings or 512
end

--- A scoring function for a model and its tokenizer: score(sentences) ->
-- list of natural-log scores (see the module comment for each kind), and
-- stats {kind, sentences, scored_tokens (tokens whose probability was read, both
-- directions for bilm), encoder_tokens (tokens run through the encoder,
-- padding excluded), rows (sequences), batches, seconds, forward, backward
-- (bilm: each direction's scores)}.  The model runs in evaluation mode under
-- bert.no_grad; its training flag is restored after each call.
-- opts: kind (default M.kind_of(model)), max_length (default min(128, the
-- model's limit)), stride (default W // 2, see the module comment),
-- batch_tokens (default 8192: rows x longest row per forward), varlen
-- (default true), mask_token (default [MASK] or <mask>).  Second value:
-- {kind, max_length}.
function M.scorer(model, tok, opts)
  opts = opts or {}
  if type(model) ~= "table" or type(model.forward) ~= "function" then
    error("lm.scorer: argument #1 (model) expected a model, got " .. type(model), 2)
  end
  if tok == nil or type(tok.encode_batch) ~= "function" then
    error("lm.scorer: argument #2 (tok) expected a tokenizer, got " .. type(tok), 2)
  end
  local kind, why = opts.kind, nil
  if kind == nil then kind, why = M.kind_of(model) end
  if not kind then error("lm.scorer: " .. tostring(why), 2) end
  if not KIND_SET[kind] then
    error(string.format("lm.scorer: opts.kind must be masked, causal or bilm, got '%s'", tostring(kind)), 2)
  end
  local limit = model_limit(model)
  local st = {
    model = model, tok = tok, kind = kind, varlen = opts.varlen ~= false,
    max_length = math.min(opts.max_length or 128, limit),
    stride = opts.stride, batch_tokens = opts.batch_tokens or 8192,
    pad_id = first_id(tok, {"[PAD]", "<pad>"}) or (model.config or {}).pad_token_id or 0,
  }
  if opts.max_length and opts.max_length > limit then
    error(string.format("lm.scorer: opts.max_length %d exceeds the model's %d positions", opts.max_length, limit), 2)
  end
  if kind == "masked" then
    st.mask_id = first_id(tok, opts.mask_token and {opts.mask_token} or {"[MASK]", "<mask>"})
    if not st.mask_id then
      error("lm.scorer: the tokenizer has no " .. (opts.mask_token or "[MASK] or <mask>") .. " token", 2)
    end
  end
  if kind == "bilm" and not (model.directions or (model.base and model.base.roles and model.mlm)) then
    error("lm.scorer: kind bilm needs a BiLMLMHeadModel or ElmoLMHeadModel, got " .. tostring(model.class_name), 2)
  end

  return function(sentences)
    if type(sentences) ~= "table" then
      error("lm.scorer: score(sentences) expected a list of strings, got " .. type(sentences), 2)
    end
    for i, s in ipairs(sentences) do
      if type(s) ~= "string" then
        error(string.format("lm.scorer: sentence %d is a %s, not a string", i, type(s)), 2)
      end
    end
    local t0 = bert.wall_time()
    local n = #sentences
    local scores, parts = {}, nil
    for i = 1, n do scores[i] = 0.0 end
    if kind == "bilm" then
      parts = {forward = {}, backward = {}}
      for i = 1, n do parts.forward[i], parts.backward[i] = 0.0, 0.0 end
    end
    local stats = {sentences = n, scored_tokens = 0, encoder_tokens = 0, rows = 0, batches = 0, kind = kind}
    if n > 0 then
      local wins = {}
      for i, e in ipairs(tok:encode_batch(sentences)) do windows_of(st, i, e, wins) end
      -- shortest first: a batch's rows are about as long as each other
      for k, w in ipairs(wins) do w.order = k end
      table.sort(wins, function(a, b)
        if #a.ids ~= #b.ids then return #a.ids < #b.ids end
        return a.order < b.order
      end)
      local was_training = model.is_training
      model:evaluate()
      local ok, err = pcall(bert.no_grad, function()
        local rows, longest = {}, 0
        local function flush()
          if #rows == 0 then return end
          local m, tokens = run_batch(st, rows, scores, parts)
          stats.scored_tokens = stats.scored_tokens + m
          stats.encoder_tokens = stats.encoder_tokens + tokens
          stats.rows, stats.batches = stats.rows + #rows, stats.batches + 1
          rows, longest = {}, 0
        end
        local function add(row)
          local len = #row.ids
          if #rows > 0 and (#rows + 1) * math.max(longest, len) > st.batch_tokens then flush() end
          rows[#rows + 1] = row
          if len > longest then longest = len end
        end
        for _, w in ipairs(wins) do
          if w.dir == "m" then
            for _, p in ipairs(w.pos) do add({sent = w.sent, ids = w.ids, pos = {p}, masked = p, dir = "m"}) end
          else
            add(w)
          end
        end
        flush()
      end)
      if was_training then model:training(true) end
      if not ok then error(err, 0) end
    end
    stats.seconds = bert.wall_time() - t0
    if parts then stats.forward, stats.backward = parts.forward, parts.backward end
    return scores, stats
  end, {kind = kind, max_length = st.max_length}
end
-- }============================================================

-- {============================================================ bits per byte

--- Bits per byte of a text file in BERT's plain format (one sentence per
-- line, blank lines between documents): see the module comment for what is
-- counted.  model_or_scorer: a model (with tok) or a scoring function
-- (M.scorer's reports its kind in its stats; for another, opts.kind, default
-- "causal": "bilm" halves the sum).
-- opts: the scorer's, and max_sentences, max_bytes (the first sentences
-- until their bytes reach it), chunk (sentences per scorer call, 4096).
-- Returns {bits_per_byte, bytes, sentences, documents, tokens (scored), nll
-- (nats), seconds, kind, path, encoder_tokens, tokens_per_second (through the
-- encoder), and for bilm forward_bits_per_byte, backward_bits_per_byte}.
function M.bits_per_byte(model_or_scorer, tok, path, opts)
  opts = opts or {}
  if type(path) ~= "string" then error("lm.bits_per_byte: argument #3 (path) expected a string, got " .. type(path), 2) end
  local score, kind
  if type(model_or_scorer) == "function" then
    score, kind = model_or_scorer, opts.kind   -- else the kind its stats report (M.scorer's do)
  else
    local info
    score, info = M.scorer(model_or_scorer, tok, opts)
    kind = info.kind
  end
  local docs, err = require("bert.data.corpus").read(path)
  if not docs then error("lm.bits_per_byte: cannot read " .. path .. ": " .. tostring(err), 2) end
  local sentences, bytes, ndocs = {}, 0, 0
  local max_s, max_b = opts.max_sentences or math.huge, opts.max_bytes or math.huge
  for _, d in ipairs(docs) do
    if #sentences >= max_s or bytes >= max_b then break end
    ndocs = ndocs + 1
    for _, s in ipairs(d) do
      if #sentences >= max_s or bytes >= max_b then break end
      sentences[#sentences + 1] = s
      bytes = bytes + #s
    end
  end
  if bytes == 0 then error("lm.bits_per_byte: " .. path .. " holds no text to score", 2) end
  local t0 = bert.wall_time()
  local chunk = opts.chunk or 4096
  local nll, f_nll, b_nll, tokens, enc_tokens = 0, 0, 0, 0, 0
  for s = 1, #sentences, chunk do
    local part = table.move(sentences, s, math.min(#sentences, s + chunk - 1), 1, {})
    local lp, stats = score(part)
    if type(lp) ~= "table" or #lp ~= #part then
      error(string.format("lm.bits_per_byte: the scorer returned %s values for %d sentences",
        type(lp) == "table" and tostring(#lp) or type(lp), #part), 0)
    end
    kind = kind or (type(stats) == "table" and stats.kind) or nil
    for i, v in ipairs(lp) do
      nll = nll - v
      if stats and stats.forward then f_nll, b_nll = f_nll - stats.forward[i], b_nll - stats.backward[i] end
    end
    tokens = tokens + (stats and stats.scored_tokens or 0)
    enc_tokens = enc_tokens + (stats and stats.encoder_tokens or 0)
  end
  local seconds = bert.wall_time() - t0
  kind = kind or "causal"   -- a bare function's scores: taken as log-likelihoods
  if kind == "bilm" then nll = nll / 2 end
  local LN2 = math.log(2)
  local r = {bits_per_byte = nll / LN2 / bytes, bytes = bytes, sentences = #sentences, documents = ndocs,
             tokens = tokens, nll = nll, seconds = seconds, kind = kind, path = path, encoder_tokens = enc_tokens,
             tokens_per_second = seconds > 0 and enc_tokens / seconds or nil}
  if kind == "bilm" then
    r.forward_bits_per_byte, r.backward_bits_per_byte = f_nll / LN2 / bytes, b_nll / LN2 / bytes
  end
  return r
end
-- }============================================================

return M
