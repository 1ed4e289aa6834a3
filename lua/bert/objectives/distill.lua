--- Knowledge distillation: a student learns from a pretrained teacher as
-- DistilBERT does (Sanh et al., 2019), with TinyBERT's intermediate-layer
-- losses (Jiao et al., 2020) as an option.  Internal name distill (see
-- init.lua).
--
--   lua5.4 experiments/pretrain.lua --objective distill --teacher runs/mini/checkpoint --model distilbert-mini
--
-- DistilBERT's triple loss (HF distiller.py; shared/reference/bert_family_spec.md §2.5):
--   L = α_ce·T²·KL(softmax(t/T) ‖ softmax(s/T)) + α_mlm·CE_mlm + α_cos·(1 − cos(h_s, h_t))
-- with α_ce 5, α_mlm 2, α_cos 1, T 2 (--alpha-ce, --alpha-mlm, --alpha-cos,
-- --distill-temperature).  The soft-target term is the KL divergence, as
-- distiller.py computes it: the soft cross-entropy minus the teacher's
-- entropy, which does not depend on the student (the same gradient, and
-- zero when the student matches).  It averages over every non-pad token
-- (--distill-positions masked: the masked ones only, distiller.py's
-- restrict_ce_to_mask); the cosine term over the non-pad tokens of the
-- last hidden states.
--
-- TinyBERT (--tinybert, or --distill-layers for a map of one's own) adds
--   α_hidden·Σ_m MSE(H_s^m W_h, H_t^g(m)) + α_attention·Σ_m MSE(A_s^m, A_t^g(m))
-- over the student's layers m = 0..M (0: the embeddings' output) with the
-- uniform map g(m) = m·N/M; A is a layer's attention scores q·kᵀ/√d before
-- the softmax, per head (the head counts must match).  The fused attention
-- never builds the [B, A, T, T] scores, so they are computed here, from the
-- layer's input through SelfAttention:qkv, only for these losses.  Both
-- MSEs average over real tokens (and real query-key pairs), not padding.
--
-- The teacher (--teacher DIR, any family's model directory) runs in eval
-- mode under no_grad: no dropout, no gradient, not in the optimizer, the
-- flat buffers or the checkpoint.  The run uses its tokenizer.  A student
-- (--model) as wide as the teacher starts from the teacher's embeddings,
-- MLM head and evenly spaced layers (DistilBERT's 0, 2, 4, 7, 9, 11 of 12;
-- --init-layers); a narrower or wider one starts from scratch and a learned
-- projection W_h (student width -> teacher width) serves the cosine and
-- hidden-state losses.  The checkpoint is the student, a masked-LM model
-- directory fine-tuning loads (the projection, when there is one, is
-- saved beside it as distill.hidden_projection.*, which loading ignores,
-- so that a killed run resumes exactly).
local bert = require("bert")
local class = require("bert.nn.class")
local nn = require("bert.nn")
local blocks = require("bert.models.blocks")
local heads = require("bert.models.heads")
local configs = require("bert.models.config")
local registry = require("bert.models.registry")
local mlm = require("bert.objectives.mlm")

local F = bert.F

local M = {}

M.metrics = {"mlm_accuracy", "perplexity", "teacher_mlm_accuracy", "teacher_agreement"}

-- {============================================================ options

local function number_at_least(name, min, strict)
  return function(v)
    local n = tonumber(v)
    if n == nil or n ~= n or n == math.huge then
      return nil, string.format("option %s: expected a number, got '%s'", name, v)
    end
    if (strict and n <= min) or n < min then
      return nil, string.format("option %s: expected a number %s %g, got '%s'", name, strict and ">" or ">=", min, v)
    end
    return n + 0.0
  end
end

-- "2,4" -> {2, 4}: integers >= min; "none" where allowed -> false
local function layer_list(name, min, allow_none)
  return function(v)
    if allow_none and v == "none" then return false end
    local list = {}
    for part in (v .. ","):gmatch("([^,]*),") do
      local n = math.tointeger(tonumber(part))
      if n == nil or n < min then
        return nil, string.format("option %s: expected a comma-separated list of layer numbers >= %d%s, got '%s'",
          name, min, allow_none and " (or none)" or "", v)
      end
      list[#list + 1] = n
    end
    return list
  end
end

function M.add_options(parser)
  parser:option("--teacher", "distill: the teacher, a model directory (config.json, model.safetensors and its " ..
    "tokenizer: e.g. a pretraining run's checkpoint/); the run uses its tokenizer")
  parser:option("--distill-temperature", "distill: temperature T of the soft targets (DistilBERT: 2)", "2")
    :convert(number_at_least("--distill-temperature", 0, true))
  parser:option("--alpha-ce", "distill: weight of the soft-target loss, scaled by T^2 (DistilBERT: 5)", "5")
    :convert(number_at_least("--alpha-ce", 0))
  parser:option("--alpha-mlm", "distill: weight of the student's own MLM loss (DistilBERT: 2)", "2")
    :convert(number_at_least("--alpha-mlm", 0))
  parser:option("--alpha-cos", "distill: weight of the cosine loss on the last hidden states (DistilBERT: 1)", "1")
    :convert(number_at_least("--alpha-cos", 0))
  parser:option("--distill-positions", "distill: tokens the soft targets cover: all (non-pad, DistilBERT) or masked",
    "all"):choices({"all", "masked"})
  parser:option("--init-layers", "distill: teacher layers (from 0) copied into the student's, one per student " ..
    "layer, e.g. 0,3, or none (default: evenly spaced, first and last included: DistilBERT's 0,2,4,7,9,11 of 12); " ..
    "only for a student as wide as the teacher")
    :convert(layer_list("--init-layers", 0, true))
  parser:flag("--tinybert", "distill: add TinyBERT's hidden-state and attention-score losses over the layer map " ..
    "g(m) = m*N/M (embeddings included); needs equal head counts")
  parser:option("--distill-layers", "distill: TinyBERT's layer map given by hand: the teacher layer (1..N) for each " ..
    "student layer, e.g. 2,4 (implies --tinybert)")
    :convert(layer_list("--distill-layers", 1, false))
  parser:option("--alpha-hidden", "distill: weight of TinyBERT's hidden-state MSE", "1")
    :convert(number_at_least("--alpha-hidden", 0))
  parser:option("--alpha-attention", "distill: weight of TinyBERT's attention-score MSE", "1")
    :convert(number_at_least("--alpha-attention", 0))
end

M.own_flags = {"teacher", "init_layers", "tinybert", "distill_layers"}

local function tinybert(args) return args.tinybert or args.distill_layers ~= nil end

--- The settings alone (the teacher's files are read by M.prepare, when the run starts).
function M.check(args)
  if type(args.teacher) ~= "string" or args.teacher == "" then
    return "--objective distill needs --teacher DIR (the teacher: a model directory such as a pretraining run's checkpoint/)"
  end
  if args.alpha_ce + args.alpha_mlm + args.alpha_cos == 0 and not tinybert(args) then
    return "--objective distill: --alpha-ce, --alpha-mlm and --alpha-cos are all 0: nothing to train"
  end
  local resolved = args.model and registry.resolve(args.model)
  if resolved and resolved.family then
    local ok, why = pcall(registry.architecture_for, resolved.family, "masked_lm")
    if not ok then return string.format("--model %s with --objective distill: %s", args.model, tostring(why)) end
  end
  return nil
end
-- }============================================================

-- {============================================================ the teacher's files

local function shape(t) return "[" .. table.concat(t:shape(), " x ") .. "]" end

-- {family, c, a} of a --model value (a size name, FAMILY-SIZE or a config.json)
local function student_config(args, vocab_size)
  local resolved = registry.resolve(args.model)
  local family_name = resolved and resolved.family
    or (configs.read_json(args.model) or {}).model_type or registry.default_model_type
  local family = registry.family(family_name)
  local c, a = configs.make(family, resolved and resolved.size or args.model,
    {vocab_size = vocab_size, max_position_embeddings = math.max(512, args.seq_len)})
  return {family = family, c = c, a = a}
end

local function teacher_config(dir)
  local ok, raw = pcall(configs.read, dir .. "/config.json")
  if not ok then return nil, tostring(raw) end
  local fok, family = pcall(registry.family_of, raw)
  if not fok then return nil, dir .. "/config.json: " .. tostring(family) end
  local mok, c, a = pcall(configs.make, family, dir .. "/config.json")
  if not mok then return nil, tostring(c) end
  return {family = family, c = c, a = a}
end

-- two tokenizers are the same when their kind and their vocabularies agree
local function same_tokenizer(x, y)
  if x:config().model ~= y:config().model or x:vocab_size() ~= y:vocab_size() then return false end
  local a, b = x:vocab_list(), y:vocab_list()
  for i = 1, math.max(#a, #b) do if a[i] ~= b[i] then return false end end
  return true
end

local function tokenizer_kind(tok)
  local kind = tok:config().model
  return kind == "wordpiece" and "wordpiece" or kind == "unigram" and "unigram" or "bpe"
end

--- At the start of a run, before the tokenizer: reads the teacher's
-- config and tokenizer, refuses a --tokenizer that is not the teacher's,
-- and makes the run use the teacher's (args.tokenizer becomes the teacher
-- directory, so args.json and a resumed run say so).  --tokenizer may be
-- left out, name the teacher's kind (its vocabulary is used instead of
-- training one) or be a path to the same vocabulary.  With TinyBERT's
-- losses the head counts and the layer map are checked here too.
function M.prepare(args)
  local dir = args.teacher
  local function fail(fmt, ...) return string.format("--teacher %s: " .. fmt, dir, ...) end
  local exists = require("bert.fs").exists
  if not bert.isdir(dir) then
    return fail(exists(dir) and "not a directory (a model directory holds config.json, model.safetensors and the " ..
      "tokenizer files)" or "no such directory")
  end
  local teacher, terr = teacher_config(dir)
  if not teacher then return fail("not a model directory (%s)", terr) end
  if teacher.a.is_decoder then
    return fail("a left-to-right model (config.json: is_decoder, %s): DistilBERT's soft targets are a masked LM's " ..
      "predictions; give a masked-LM teacher", teacher.family.model_type)
  end
  if not (exists(dir .. "/model.safetensors") or exists(dir .. "/model.safetensors.index.json")) then
    return fail("no model.safetensors: not a model directory")
  end
  local tok, tok_err = bert.tokenizer.load(dir)
  if not tok then
    return fail("no tokenizer beside the weights (%s); the student must read the teacher's vocabulary", tostring(tok_err))
  end
  local kind = tokenizer_kind(tok)
  local given = args.tokenizer
  if given ~= nil and given ~= dir then
    if given == "wordpiece" or given == "bpe" or given == "unigram" then
      -- wordpiece is also --tokenizer's default, so it cannot conflict
      if given ~= kind and given ~= "wordpiece" then
        return string.format("--tokenizer %s conflicts with --teacher %s, whose tokenizer is a %s vocabulary of %d: " ..
          "distillation uses the teacher's tokenizer (leave --tokenizer out)", given, dir, kind, tok:vocab_size())
      end
    else
      local other, oerr = bert.tokenizer.load(given)
      if not other then return string.format("--tokenizer %s: %s", given, tostring(oerr)) end
      if not same_tokenizer(tok, other) then
        return string.format("--tokenizer %s (a %s vocabulary of %d) is not the tokenizer of --teacher %s (a %s vocabulary " ..
          "of %d): distillation needs the teacher's tokenizer (leave --tokenizer out)", given, tokenizer_kind(other),
          other:vocab_size(), dir, kind, tok:vocab_size())
      end
    end
  end
  args.tokenizer = dir
  if teacher.a.vocab_size ~= tok:vocab_size() then
    return fail("its config.json has vocab_size %d but its tokenizer %d tokens", teacher.a.vocab_size, tok:vocab_size())
  end
  local ok, student = pcall(student_config, args, tok:vocab_size())
  if not ok then return string.format("--model %s: %s", tostring(args.model), tostring(student)) end
  if student.a.is_decoder then
    return string.format("--model %s: a left-to-right model (is_decoder) cannot be a DistilBERT student, which " ..
      "predicts masked tokens", tostring(args.model))
  end
  if args.seq_len > teacher.a.max_position_embeddings then
    return fail("the teacher reads at most %d positions (max_position_embeddings), --seq-len is %d",
      teacher.a.max_position_embeddings, args.seq_len)
  end
  if tinybert(args) then
    local sh, th = student.a.num_attention_heads, teacher.a.num_attention_heads
    if sh ~= th then
      return string.format("--tinybert: the attention-score loss compares head by head, but --model %s has %d attention " ..
        "heads and --teacher %s has %d: use a student with %d heads", args.model, sh, dir, th, th)
    end
    local layers = args.distill_layers
    if layers then
      local n_student, n_teacher = student.a.num_hidden_layers, teacher.a.num_hidden_layers
      if #layers ~= n_student then
        return string.format("--distill-layers %s: %d teacher layers for a student of %d layers (--model %s)",
          table.concat(layers, ","), #layers, n_student, args.model)
      end
      for _, l in ipairs(layers) do
        if l > n_teacher then
          return string.format("--distill-layers %s: layer %d, but --teacher %s has %d layers (1..%d)",
            table.concat(layers, ","), l, dir, n_teacher, n_teacher)
        end
      end
    end
  end
  if require("bert.distributed").is_main() then
    io.stderr:write(string.format("pretrain: distill: the teacher %s (%s, %d layers of %d) and its tokenizer (%s, %d tokens)\n",
      dir, teacher.family.model_type, teacher.a.num_hidden_layers, teacher.a.hidden_size, kind, tok:vocab_size()))
  end
  return nil
end
-- }============================================================

-- {============================================================ the losses

-- t on like's device (the batch's masks stay on the CPU; a model may run on Vulkan)
local function beside(t, like)
  if t:device() ~= like:device() then return t:to(like:device()) end
  return t
end

-- the mean of per-row values over the rows whose weight is 1 (all rows without weights)
local function weighted_mean(values, weights)
  if not weights then return values:mean() end
  weights = beside(weights, values)
  return (values * weights):sum() / math.max(weights:sum():item(), 1)
end

--- DistilBERT's soft-target loss: T² · the mean over rows of
-- KL(softmax(teacher/T) ‖ softmax(student/T)); logits [N, V]; weights [N]
-- (1 for the rows that count, 0 for padding) or nil for every row.  The
-- teacher's side carries no gradient.
function M.soft_target_loss(student_logits, teacher_logits, temperature, weights)
  local T = temperature
  local log_q = (student_logits / T):log_softmax(-1)
  -- KL = Σ p log p − Σ p log q: the first sum (minus the teacher's entropy) is a constant
  local p, p_log_p = bert.no_grad(function()
    local log_p = (teacher_logits / T):log_softmax(-1)
    local probs = log_p:exp()
    return probs, (probs * log_p):sum(2)
  end)
  local per_row = p_log_p - (p * log_q):sum(2)
  return weighted_mean(per_row, weights) * (T * T)
end

-- [B, T] attention mask -> [B*T] float weights, or nil (no mask: every row counts)
local function row_weights(mask, n)
  if not mask then return nil end
  return mask:reshape(n):float()
end

--- DistilBERT's cosine loss: the mean of 1 − cos(s, t) over the rows
-- (the last dimension is the vector) whose mask is 1; s and t [B, T, H]
-- (or [N, H] with mask [N]); mask nil counts every row.  As
-- torch's CosineEmbeddingLoss: cos = s·t / sqrt((|s|² + ε)(|t|² + ε)).
function M.cosine_loss(s, t, mask)
  local d = s:dim()
  local dot = (s * t):sum(d)
  local norms = (((s * s):sum(d) + 1e-12) * ((t * t):sum(d) + 1e-12)):sqrt()
  local per_row = 1 - dot / norms
  local n = per_row:numel()
  return weighted_mean(per_row:reshape(n), row_weights(mask, n))
end

--- TinyBERT's hidden-state loss for one layer pair: the mean squared
-- difference over the rows whose mask is 1 and every hidden unit; s and t
-- [B, T, H] (s already mapped to the teacher's width).
function M.hidden_mse(s, t, mask)
  local d = s:dim()
  local diff = s - t
  local per_row = (diff * diff):sum(d)
  local n = per_row:numel()
  return weighted_mean(per_row:reshape(n), row_weights(mask, n)) / s:size(d)
end

--- The attention scores of a self-attention module on its input x
-- [B, T, H]: q·kᵀ/√d per head, before the mask and the softmax, [B, A, T, T].
-- The fused attention never builds them; this is for TinyBERT's loss only.
function M.attention_scores(attention, x)
  local q, k = attention:qkv(x)
  return q:matmul(k:transpose(3, 4)) / math.sqrt(attention.head_dim)
end

--- TinyBERT's attention loss for one layer pair: the mean squared
-- difference of the scores [B, A, T, T] over every head and the query-key
-- pairs of real tokens (mask [B, T]; nil: every pair).
function M.attention_mse(s, t, mask)
  local diff = s - t
  local sq = diff * diff
  if not mask then return sq:mean() end
  local B, T = mask:size(1), mask:size(2)
  local m = mask:float()
  local pairs_mask = beside(m:view(B, 1, T, 1) * m:view(B, 1, 1, T), sq)     -- [B, 1, T, T]
  return (sq * pairs_mask):sum() / math.max(pairs_mask:sum():item() * s:size(2), 1)
end

--- TinyBERT's uniform layer map: student layer m (0 = the embeddings, 1..M)
-- reads teacher layer g(m) = m·N/M (rounded down); `given` (the teacher
-- layer for each student layer 1..M) replaces it.  Returns {[0] = 0, g(1), ..., g(M)}.
function M.layer_map(n_student, n_teacher, given)
  local map = {[0] = 0}
  for m = 1, n_student do map[m] = given and given[m] or (m * n_teacher) // n_student end
  return map
end

--- The teacher layers (from 0) a student of n_student layers starts from:
-- evenly spaced, the first and the last included (12 -> 6: 0, 2, 4, 7, 9,
-- 11, the layers DistilBERT took); nil when the student is the deeper.
function M.init_layers(n_student, n_teacher)
  if n_student > n_teacher then return nil end
  if n_student == 1 then return {0} end
  local out = {}
  for m = 0, n_student - 1 do out[m + 1] = math.floor(m * (n_teacher - 1) / (n_student - 1) + 0.5) end
  return out
end
-- }============================================================

-- {============================================================ the student's start

-- the encoder's layers as a list, or nil and why
local function encoder_layers(model)
  local encoder = model.base.roles.encoder
  if not encoder.layers then return nil, "its layers are shared (ALBERT's groups)" end
  return encoder:layers()
end

-- a layer's self-attention, when it is the plain one (scores q·kᵀ/√d)
local function plain_attention(layer)
  local attention = layer.m.attention
  if attention and attention.m.self then attention = attention.m.self end
  if attention and attention.qkv == blocks.SelfAttention.qkv and attention.attend == blocks.SelfAttention.attend then
    return attention
  end
  return nil
end

-- copies src's parameters into dst's, in registration order, which is the
-- same for every family's layer (Q, K, V, attention output, LayerNorm,
-- feed-forward in, out, LayerNorm); any difference in count or shape is an error
local function copy_parameters(dst, src, what)
  local d, s = dst:named_parameters(), src:named_parameters()
  if #d ~= #s then
    error(string.format("%s: the teacher's has %d parameters, the student's %d", what, #s, #d), 0)
  end
  for i = 1, #d do
    if shape(d[i].param) ~= shape(s[i].param) then
      error(string.format("%s: the teacher's %s is %s, the student's %s is %s", what, s[i].name, shape(s[i].param),
        d[i].name, shape(d[i].param)), 0)
    end
  end
  bert.no_grad(function() for i = 1, #d do d[i].param:copy_(s[i].param) end end)
end

local function copy_tensor(dst, src, what)
  if shape(dst) ~= shape(src) then
    error(string.format("%s: the teacher's is %s, the student's %s", what, shape(src), shape(dst)), 0)
  end
  bert.no_grad(function() dst:copy_(src) end)
end

--- Starts a student from its teacher (of the same width): the embeddings,
-- the teacher layers `layers` (from 0, one per student layer) and the MLM
-- head.  Returns the lines that say what was copied.  A teacher with
-- token types and a student without (BERT -> DistilBERT) has its type-0
-- row added to the position embeddings, so that the student's embeddings
-- equal the teacher's on one-segment input; the other way round the
-- student's token-type rows are zeroed.
function M.initialise_student(student, teacher, layers)
  local said = {}
  local se, te = student.base.roles.embeddings, teacher.base.roles.embeddings
  if student.base.roles.project or teacher.base.roles.project then
    error("an embedding projection (ELECTRA's embeddings_project) in the student or the teacher", 0)
  end
  local sm, tm = se.m, te.m
  copy_tensor(sm.word_embeddings.p.weight, tm.word_embeddings.p.weight, "word embeddings")
  local parts = {"word"}
  if sm.position_embeddings and tm.position_embeddings then
    if se.positions ~= te.positions then
      error(string.format("position embeddings: the teacher's are %s, the student's %s", te.positions, se.positions), 0)
    end
    local sp, tp = sm.position_embeddings.p.weight, tm.position_embeddings.p.weight
    local rows = math.min(sp:size(1), tp:size(1))
    copy_tensor(sp:narrow(1, 1, rows), tp:narrow(1, 1, rows), "position embeddings")
    parts[#parts + 1] = rows == sp:size(1) and "position" or string.format("position (the first %d rows)", rows)
    if tm.token_type_embeddings and not sm.token_type_embeddings then
      bert.no_grad(function()
        sp:copy_(sp + tm.token_type_embeddings.p.weight:select(1, 1):view(1, -1))
      end)
      parts[#parts] = parts[#parts] .. " (plus the teacher's token-type-0 row: the student has no token types)"
    end
  elseif sm.position_embeddings or tm.position_embeddings then
    error("position embeddings: only one of the teacher and the student has them", 0)
  end
  if sm.token_type_embeddings then
    local st = sm.token_type_embeddings.p.weight
    if tm.token_type_embeddings then
      local tt = tm.token_type_embeddings.p.weight
      local rows = math.min(st:size(1), tt:size(1))
      bert.no_grad(function() st:zero_() end)
      copy_tensor(st:narrow(1, 1, rows), tt:narrow(1, 1, rows), "token-type embeddings")
      parts[#parts + 1] = "token-type"
    else
      bert.no_grad(function() st:zero_() end)
      parts[#parts + 1] = "token-type (zeroed: the teacher has none)"
    end
  end
  copy_parameters(sm.LayerNorm, tm.LayerNorm, "the embeddings' LayerNorm")
  parts[#parts + 1] = "LayerNorm"
  said[#said + 1] = "embeddings: " .. table.concat(parts, ", ")

  local s_layers, serr = encoder_layers(student)
  if not s_layers then error("the student: " .. serr, 0) end
  local t_layers, terr = encoder_layers(teacher)
  if not t_layers then error("the teacher: " .. terr, 0) end
  for m, l in ipairs(layers) do
    if l >= #t_layers then error(string.format("teacher layer %d: the teacher has layers 0..%d", l, #t_layers - 1), 0) end
    copy_parameters(s_layers[m], t_layers[l + 1], string.format("teacher layer %d -> student layer %d", l, m - 1))
  end
  said[#said + 1] = string.format("layers: teacher %s -> student %s", table.concat(layers, ", "),
    (function() local t = {} for m = 1, #layers do t[m] = m - 1 end return table.concat(t, ", ") end)())

  local sh, th = student.mlm, teacher.mlm
  copy_parameters(sh.dense, th.dense, "the MLM head's transform")
  copy_parameters(sh.norm, th.norm, "the MLM head's LayerNorm")
  copy_tensor(sh.bias_owner.p[sh.bias_key], th.bias_owner.p[th.bias_key], "the MLM head's bias")
  local untied = sh.decoder_owner ~= sm.word_embeddings
  if untied then
    copy_tensor(sh.decoder_owner.p[sh.decoder_key], th.decoder_owner.p[th.decoder_key], "the MLM decoder")
  end
  said[#said + 1] = "MLM head: transform, LayerNorm, bias" .. (untied and ", decoder" or " (decoder tied to the word embeddings)")
  return said
end
-- }============================================================

-- {============================================================ the module trained

local Distiller = class("Distiller", nn.Module)
M.Distiller = Distiller

--- Distiller(student, teacher, opts): what the Trainer trains.  The
-- student's children are the distiller's own, so that named_parameters()
-- (the optimizer's list, the flat buffers, the checkpoint's names) are the
-- student's, plus distill.hidden_projection.* when there is a projection;
-- the teacher is a plain field, outside all of them.  opts: temperature,
-- alpha_ce, alpha_mlm, alpha_cos, positions ("all" | "masked"),
-- projection (a Linear, student width -> teacher width, or nil),
-- tinybert = {map, alpha_hidden, alpha_attention, student_attention,
-- teacher_attention} or nil.
function Distiller:__init(student, teacher, opts)
  nn.Module.__init(self)
  if #student.p_order > 0 then error("Distiller: the student holds parameters at its root", 2) end
  for _, name in ipairs(student.m_order) do self:add_module(name, student.m[name]) end
  for _, u in ipairs(student.unnamed or {}) do self:add_module_unnamed(u) end
  if opts.projection then self:add_module("distill", blocks.Container({{"hidden_projection", opts.projection}})) end
  self.student, self.teacher, self.opts, self.projection = student, teacher, opts, opts.projection
  self.config, self.architecture, self.family, self.class_name =
    student.config, student.architecture, student.family, student.class_name
  teacher:evaluate()
  self:flatten_parameters()
  student.flat_params, student.flat_grad = nil, nil   -- stale: the distiller's buffers hold the weights now
end

function Distiller:training(flag)
  nn.Module.training(self, flag)
  self.student.is_training = self.is_training
  return self   -- the teacher stays in eval mode
end

--- The student's parameter count: the model the run keeps (a projection
-- is training-only).
function Distiller:num_parameters() return self.student:num_parameters() end

function Distiller:to(device)
  nn.Module.to(self, device)
  self.teacher:to(device)
  return self
end

local function model_inputs(batch, hidden_states)
  return {input_ids = batch.input_ids, token_type_ids = batch.token_type_ids, attention_mask = batch.attention_mask,
          output_hidden_states = hidden_states or nil}
end

local function labels_of(batch, ids)
  if batch.labels == nil then error("Distiller:forward: the batch has no labels (-100 where not masked)", 3) end
  return blocks.check_ids("Distiller:forward", batch.labels, "labels", ids)
end

--- forward(batch) -> {loss, loss_ce, loss_mlm, loss_cos, loss_hidden,
-- loss_attention (the terms before their weights; nil when weighted 0),
-- logits (the student's, masked tokens), masked_labels, masked_positions}
function Distiller:forward(batch)
  local o, student, teacher = self.opts, self.student, self.teacher
  local tiny = o.tinybert
  local inputs = model_inputs(batch, tiny ~= nil)
  local sbase, ids, mask = student.base:forward(inputs)
  local B, T = ids:size(1), ids:size(2)
  local flat_labels = labels_of(batch, ids):reshape(B * T)
  local masked = flat_labels:ne(-100):nonzero()
  local targets = flat_labels:index_select(1, masked)
  -- the soft targets' rows: every token (weighted by the mask) or the masked ones
  local rows = o.positions == "masked" and masked or nil
  local weights = not rows and row_weights(mask, B * T) or nil
  local function select(h)
    local flat = h:reshape(B * T, h:size(3))
    return rows and flat:index_select(1, rows) or flat
  end

  local t = bert.no_grad(function()
    local tbase = teacher.base:forward(inputs)
    local r = {last = tbase.last_hidden_state, states = tbase.hidden_states}
    if o.alpha_ce > 0 then r.logits = heads.mlm_logits(teacher.mlm, select(teacher:decoder_input(tbase, inputs))) end
    if tiny and tiny.alpha_attention > 0 then
      r.scores = {}
      for m = 1, #tiny.student_attention do
        local g = tiny.map[m]
        r.scores[m] = M.attention_scores(tiny.teacher_attention[g], r.states[g])
      end
    end
    return r
  end)

  local out = {masked_positions = masked, masked_labels = targets}
  local loss
  local function add(name, alpha, value)
    out[name] = value
    loss = loss and (loss + value * alpha) or value * alpha
  end
  local sh = student:decoder_input(sbase, inputs)
  if o.alpha_ce > 0 then
    local logits = heads.mlm_logits(student.mlm, select(sh))
    add("loss_ce", o.alpha_ce, M.soft_target_loss(logits, t.logits, o.temperature, weights))
    out.logits = rows and logits or logits:index_select(1, masked)
  else
    out.logits = heads.mlm_logits(student.mlm, sh:reshape(B * T, sh:size(3)):index_select(1, masked))
  end
  if o.alpha_mlm > 0 then add("loss_mlm", o.alpha_mlm, F.cross_entropy(out.logits, targets)) end
  local project = self.projection and function(h) return self.projection(h) end or function(h) return h end
  if o.alpha_cos > 0 then add("loss_cos", o.alpha_cos, M.cosine_loss(project(sbase.last_hidden_state), t.last, mask)) end
  if tiny then
    local states = sbase.hidden_states
    if tiny.alpha_hidden > 0 then
      local sum
      for m = 0, #states - 1 do
        local term = M.hidden_mse(project(states[m + 1]), t.states[tiny.map[m] + 1], mask)
        sum = sum and sum + term or term
      end
      add("loss_hidden", tiny.alpha_hidden, sum)
    end
    if tiny.alpha_attention > 0 then
      local sum
      for m = 1, #tiny.student_attention do
        local term = M.attention_mse(M.attention_scores(tiny.student_attention[m], states[m]), t.scores[m], mask)
        sum = sum and sum + term or term
      end
      add("loss_attention", tiny.alpha_attention, sum)
    end
  end
  out.loss = loss
  return out
end

--- The student's and the teacher's MLM logits on the masked tokens, and
-- their labels (held-out evaluation).
function Distiller:predict(batch)
  local student, teacher = self.student, self.teacher
  local inputs = model_inputs(batch)
  local sbase, ids = student.base:forward(inputs)
  local labels = labels_of(batch, ids)
  local s_logits, _, targets = heads.masked_lm(student.mlm, student:decoder_input(sbase, inputs), labels)
  local t_logits = bert.no_grad(function()
    local tbase = teacher.base:forward(inputs)
    return (heads.masked_lm(teacher.mlm, teacher:decoder_input(tbase, inputs), labels))
  end)
  return s_logits, t_logits, targets
end
-- }============================================================

-- {============================================================ the objective

-- DistilBERT trains on full sentences with MLM alone (RoBERTa's data)
function M.data() return "none" end

local function say(fmt, ...)
  if require("bert.distributed").is_main() then io.stderr:write("pretrain: distill: ", string.format(fmt, ...), "\n") end
end

--- The teacher from its directory, as a masked-LM model in eval mode.
function M.load_teacher(dir)
  local teacher_cfg, err = teacher_config(dir)
  if not teacher_cfg then error("--teacher " .. dir .. ": " .. tostring(err), 0) end
  local arch = registry.architecture_for(teacher_cfg.family, "masked_lm")
  local ok, teacher, info = pcall(bert.from_pretrained, dir, {architecture = arch, verbose = false})
  if not ok then error("--teacher " .. dir .. ": " .. tostring(teacher):gsub("^from_pretrained: ", ""), 0) end
  if #info.missing > 0 then
    error(string.format("--teacher %s: the checkpoint lacks %s (%s...): distillation needs the teacher's MLM head",
      dir, #info.missing == 1 and "a weight" or (#info.missing .. " weights"), info.missing[1]), 0)
  end
  teacher:evaluate()
  return teacher, arch
end

function M.build(ctx)
  local args = ctx.args
  local teacher, teacher_arch = M.load_teacher(args.teacher)
  local arch = registry.architecture_for(ctx.family, "masked_lm")
  local ok, student = pcall(bert.model, arch, ctx.size, ctx.config_overrides)
  if not ok then error(tostring(student), 0) end
  local sa, ta = student.arch, teacher.arch
  if ta.vocab_size ~= sa.vocab_size then
    error(string.format("--teacher %s: vocab_size %d, but the run's tokenizer has %d tokens", args.teacher,
      ta.vocab_size, sa.vocab_size), 0)
  end
  say("teacher %s (%s, %d parameters, frozen, eval mode), student %s (%s)", args.teacher, teacher_arch,
    teacher:num_parameters(), arch, args.model)

  local projection
  if sa.hidden_size == ta.hidden_size then
    local layers = args.init_layers
    if layers == nil then
      layers = M.init_layers(sa.num_hidden_layers, ta.num_hidden_layers)
      if not layers then
        error(string.format("--model %s has %d layers, the teacher %d: give --init-layers (a teacher layer for each " ..
          "student layer) or --init-layers none", args.model, sa.num_hidden_layers, ta.num_hidden_layers), 0)
      end
    elseif layers and #layers ~= sa.num_hidden_layers then
      error(string.format("--init-layers %s: %d teacher layers for a student of %d layers (--model %s)",
        table.concat(layers, ","), #layers, sa.num_hidden_layers, args.model), 0)
    end
    if layers then
      local iok, said = pcall(M.initialise_student, student, teacher, layers)
      if not iok then
        error(string.format("--teacher %s: cannot start the student from it: %s (--init-layers none starts it from scratch)",
          args.teacher, tostring(said)), 0)
      end
      say("the student starts from the teacher (both %d wide): %s", sa.hidden_size, table.concat(said, "; "))
    else
      say("the student starts from scratch (--init-layers none)")
    end
  else
    if args.init_layers then
      error(string.format("--init-layers: the student is %d wide, the teacher %d: only a student as wide as its " ..
        "teacher can start from its layers", sa.hidden_size, ta.hidden_size), 0)
    end
    local needs = args.alpha_cos > 0 or (tinybert(args) and args.alpha_hidden > 0)
    if needs then projection = nn.Linear(sa.hidden_size, ta.hidden_size, {std = sa.initializer_range}) end
    say("the student starts from scratch (%d wide, the teacher %d)%s", sa.hidden_size, ta.hidden_size,
      needs and string.format("; a learned projection %d -> %d maps its hidden states for the cosine%s loss " ..
        "(saved as distill.hidden_projection.*)", sa.hidden_size, ta.hidden_size,
        tinybert(args) and " and hidden-state" or "") or "")
  end

  local tiny
  if tinybert(args) then
    local where = "--tinybert"
    local s_layers, serr = encoder_layers(student)
    if not s_layers then error(where .. ": the student: " .. serr, 0) end
    local t_layers, terr = encoder_layers(teacher)
    if not t_layers then error(where .. ": the teacher: " .. terr, 0) end
    if sa.num_attention_heads ~= ta.num_attention_heads then
      error(string.format("%s: the attention-score loss compares head by head, but --model %s has %d attention heads " ..
        "and --teacher %s has %d", where, args.model, sa.num_attention_heads, args.teacher, ta.num_attention_heads), 0)
    end
    tiny = {map = M.layer_map(#s_layers, #t_layers, args.distill_layers), alpha_hidden = args.alpha_hidden,
            alpha_attention = args.alpha_attention, student_attention = {}, teacher_attention = {}}
    for m, layer in ipairs(s_layers) do
      tiny.student_attention[m] = plain_attention(layer)
      if not tiny.student_attention[m] then
        error(string.format("%s: the student's (%s) attention adds terms of its own to q·k: its scores are not TinyBERT's",
          where, arch), 0)
      end
      local g = tiny.map[m]
      tiny.teacher_attention[g] = plain_attention(t_layers[g])
      if not tiny.teacher_attention[g] then
        error(string.format("%s: the teacher's (%s) attention adds terms of its own to q·k: its scores are not TinyBERT's",
          where, teacher_arch), 0)
      end
    end
    -- the hidden states must be every layer's (DeBERTa's encoder keeps its own)
    local probe = {input_ids = bert.tensor({{1, 2}}, "int32"), output_hidden_states = true}
    local n_s = #bert.no_grad(function() return student.base:forward(probe) end).hidden_states
    local n_t = #bert.no_grad(function() return teacher.base:forward(probe) end).hidden_states
    if n_s ~= #s_layers + 1 or n_t ~= #t_layers + 1 then
      error(where .. ": the hidden states of every layer are not available for " .. (n_s ~= #s_layers + 1 and arch or teacher_arch), 0)
    end
    local pairs_said = {}
    for m = 0, #s_layers do pairs_said[#pairs_said + 1] = string.format("%d->%d", m, tiny.map[m]) end
    say("TinyBERT losses over student -> teacher layers %s (0: embeddings)", table.concat(pairs_said, ", "))
  end

  local model = Distiller(student, teacher, {
    temperature = args.distill_temperature, alpha_ce = args.alpha_ce, alpha_mlm = args.alpha_mlm,
    alpha_cos = args.alpha_cos, positions = args.distill_positions, projection = projection, tinybert = tiny,
  })
  return model, arch
end

local LOSS_TERMS = {"loss_ce", "loss_mlm", "loss_cos", "loss_hidden", "loss_attention"}

function M.step_metrics(ctx, out)
  local m = {mlm_accuracy = bert.train.accuracy(out.logits, out.masked_labels)}
  for _, k in ipairs(LOSS_TERMS) do if out[k] then m[k] = out[k]:item() end end
  return m
end

function M.eval_init()
  return {right = 0, total = 0, nll = 0, unigram = 0, teacher_right = 0, agree = 0}
end

function M.eval_batch(ctx, model, batch, s)
  local s_logits, t_logits, targets = model:predict(batch)
  local n = targets:numel()
  if n == 0 then return end
  local s_pred, t_pred = s_logits:argmax(-1), t_logits:argmax(-1)
  s.right = s.right + s_pred:eq(targets):sum():item()
  s.teacher_right = s.teacher_right + t_pred:eq(targets):sum():item()
  s.agree = s.agree + s_pred:eq(t_pred):sum():item()
  s.nll = s.nll + F.cross_entropy(s_logits, targets, {reduction = "sum"}):item()
  s.unigram = s.unigram + targets:eq(ctx.unigram_id()):sum():item()
  s.total = s.total + n
end

--- The student's held-out MLM metrics, the teacher's accuracy on the same
-- tokens and how often the two predict the same token.
function M.eval_finish(ctx, s)
  local result = mlm.mlm_results(s)
  local total = math.max(s.total, 1)
  result.teacher_mlm_accuracy = s.teacher_right / total
  result.teacher_agreement = s.agree / total
  return result
end

function M.describe(ctx, final)
  return string.format("held-out MLM accuracy %.4f (the teacher's %.4f; the same prediction as the teacher %.1f%%), " ..
    "perplexity %.1f (unigram baseline accuracy %.4f)", final.mlm_accuracy, final.teacher_mlm_accuracy,
    100 * final.teacher_agreement, final.perplexity, final.unigram_baseline_accuracy)
end
-- }============================================================

return M
