--- Replaced-token detection (ELECTRA, Clark et al. 2020): a small masked-LM
-- generator fills the masked positions with tokens sampled from its
-- softmax, and the discriminator labels every token "original" (0) or
-- "replaced" (1).  A sampled token equal to the original counts as
-- original, as in the paper.  loss = MLM(generator) + λ·RTD(discriminator),
-- λ = 50 (--disc-weight).  The two share their embedding tables:
--
--   shared (ELECTRA): one set of embedding tensors (word, position, token
--     type and the embeddings' LayerNorm, as Google's code shares the whole
--     embeddings scope), trained by both losses;
--   gdes (DeBERTa-v3, He et al. 2021): gradient-disentangled embedding
--     sharing: the discriminator reads stopgrad(E_G) + E_Δ, E_Δ starting at
--     zero, so the generator's tables learn from the MLM loss only.
--
-- What the Trainer saves (checkpoint/) is the discriminator as a model
-- directory of its own (ElectraForPreTraining, or DebertaV2 with E_G + E_Δ
-- written as its embeddings), the generator beside it in
-- checkpoint/generator/ (ElectraForMaskedLM / DebertaV2ForMaskedLM), and
-- under gdes the deltas (gdes_deltas.safetensors) that make resume exact.
-- shared/reference/bert_family_spec.md §2.3 (GDES), §2.4 (ELECTRA).
local bert = require("bert")
local class = require("bert.nn.class")
local Module = require("bert.nn.Module")
local registry = require("bert.models.registry")
local cli = require("bert.cli")

local F = bert.F
local M = {}

M.metrics = {"rtd_accuracy", "rtd_precision", "rtd_recall", "replaced_fraction", "mlm_accuracy", "perplexity"}

-- The families whose discriminator and generator are real classes, and
-- each one's defaults: ELECTRA's generator has the discriminator's depth and
-- a quarter of its width (HF's electra-small-generator: 64 of 256; the paper
-- used 1/3 for base), DeBERTa-v3's the same width and half the depth.
M.families = {
  electra = {generator_size = 0.25, depth = 1, sharing = "shared"},
  ["deberta-v2"] = {generator_size = 1.0, depth = 0.5, sharing = "gdes"},
}

-- the family an --model value names (a config.json: its model_type), or nil
local function family_of(model)
  local r = model and registry.resolve(model)
  if r and r.family then return r.family end
  if model then
    local c = require("bert.models.config").read_json(bert.isdir(model) and model .. "/config.json" or model)
    if c then return c.model_type or require("bert.models.registry").default_model_type end
  end
  return nil
end

function M.add_options(parser)
  parser:option("--generator-size", "electra: the generator's hidden size (and heads, intermediate size) as a " ..
    "fraction of the discriminator's (default 0.25 for ELECTRA, as HF's small generators; 1.0 for DeBERTa-v3)")
    :convert(function(v)
      local f = tonumber(v)
      if not f or not (f > 0 and f <= 1) then
        return nil, "option --generator-size: expected a fraction in (0, 1], got '" .. v .. "'"
      end
      return f + 0.0
    end)
  parser:option("--generator-layers", "electra: the generator's depth (default: the discriminator's for ELECTRA, " ..
    "half of it for DeBERTa-v3)"):convert(cli.integer("--generator-layers", 1))
  parser:option("--disc-weight", "electra: λ, the weight of the discriminator's loss (ELECTRA: 50)", "50")
    :convert(cli.number("--disc-weight", 0))
  parser:option("--embedding-sharing", "electra: shared (ELECTRA: one set of embeddings) or gdes (DeBERTa-v3's " ..
    "gradient-disentangled sharing; default for deberta models)"):choices({"shared", "gdes"})
end

M.own_flags = {"generator_size", "generator_layers", "embedding_sharing"}

function M.check(args)
  if args.objective ~= "electra" then return nil end
  local family = family_of(args.model) or "bert"
  if not M.families[family] then
    local names = {}
    for k in pairs(M.families) do names[#names + 1] = k end
    table.sort(names)
    return string.format("--objective electra: the %s family has no replaced-token-detection discriminator " ..
      "(families with one: %s; e.g. --model electra-tiny or deberta-v3-tiny)", family, table.concat(names, ", "))
  end
  return nil
end

function M.data() return "none" end   -- full sentences packed to --seq-len, as ELECTRA's data

-- {============================================================ the pair

--- The generator's config (Hugging Face keys) from the discriminator's:
-- hidden, heads and intermediate sizes scaled by `fraction`, `layers`
-- deep, its embedding width the discriminator's (so the tables can be
-- shared; an embeddings projection maps it to the generator's hidden size).
function M.generator_config(c, fraction, layers)
  local g = {}
  for k, v in pairs(c) do g[k] = v end
  g.architectures, g.id2label, g.label2id = nil, nil, nil
  local H = math.max(1, math.floor(c.hidden_size * fraction + 0.5))
  local heads = math.max(1, math.floor(c.num_attention_heads * fraction + 0.5))
  while H % heads ~= 0 do heads = heads - 1 end
  g.embedding_size = c.embedding_size or c.hidden_size
  g.hidden_size, g.num_attention_heads = H, heads
  g.intermediate_size = math.max(1, math.floor(c.intermediate_size * fraction + 0.5))
  g.num_hidden_layers = layers
  return g
end

local Pair = class("ReplacedTokenDetectionPair", Module)
M.Pair = Pair

local TABLES = {"word_embeddings", "position_embeddings", "token_type_embeddings"}

--- Pair(generator, discriminator, {sharing = "shared" | "gdes", disc_weight = 50, tokenizer = tok,
-- mask_id = id}): both models built and flattened; the pair shares (or,
-- under gdes, disentangles) their embedding tables and flattens all of it
-- once.  With mask_id the generator's input is masked as ELECTRA's code
-- does it (M.electra_mask); without, the batch's input_ids are used as they are.
function Pair:__init(generator, discriminator, opts)
  Module.__init(self)
  self.sharing, self.disc_weight, self.tokenizer = opts.sharing, opts.disc_weight, opts.tokenizer
  self.mask_id = opts.mask_id
  -- the discriminator first: a shared tensor is named (and decayed) as the discriminator's
  self:add_module("discriminator", discriminator)
  self:add_module("generator", generator)
  self.config, self.architecture = discriminator.config, discriminator.architecture
  local gen_emb, disc_emb = generator.base.roles.embeddings, discriminator.base.roles.embeddings
  self.gdes = {}
  for _, name in ipairs(TABLES) do
    local g, d = gen_emb.m[name], disc_emb.m[name]
    if g and d then
      if g.num ~= d.num or g.dim ~= d.dim then
        error(string.format("electra: the generator's %s [%d x %d] and the discriminator's [%d x %d] differ",
          name, g.num, g.dim, d.num, d.dim), 0)
      end
      if self.sharing == "shared" then
        g.p.weight = d.p.weight
      else
        -- the discriminator's own table becomes E_Δ; its forward reads stopgrad(E_G) + E_Δ, row by
        -- row (the rows of the sum are the sums of the rows: no [V x E] temporary per step)
        self.gdes[#self.gdes + 1] = {name = name, gen = g, disc = d}
        d.forward = function(emb, ids) return F.embedding(ids, g.p.weight:detach()) + F.embedding(ids, emb.p.weight) end
      end
    end
  end
  if self.sharing == "shared" then
    local gn, dn = gen_emb.m.LayerNorm, disc_emb.m.LayerNorm
    if gn.p.weight:numel() == dn.p.weight:numel() then gn.p.weight, gn.p.bias = dn.p.weight, dn.p.bias end
  end
  self:flatten_parameters()
  -- the children's own buffers are stale now: every parameter is a view of the pair's
  for _, m in ipairs({generator, discriminator}) do m.flat_params, m.flat_grad = nil, nil end
  bert.no_grad(function() for _, t in ipairs(self.gdes) do t.disc.p.weight:zero_() end end)
end

--- The discriminator's input and labels from a masked batch and the
-- generator's samples: original = input_ids with the masked positions
-- restored from labels; corrupted = original with the samples put at the
-- masked positions; label 1 exactly where corrupted differs from original.
-- positions: flat 0-based indices [M]; samples: token ids [M].  CPU tensors out.
function M.corrupt(input_ids, labels, positions, samples)
  local B, T = input_ids:size(1), input_ids:size(2)
  -- token ids are few and small: on the CPU, whatever device the models run on (as the batches are)
  local function here(t) return t:device() ~= "cpu" and t:to("cpu") or t end
  input_ids, labels, positions, samples = here(input_ids), here(labels), here(positions), here(samples)
  local original = bert.where(labels:ne(-100), labels, input_ids)
  local flat = original:reshape(B * T)
  local corrupted = flat
  if positions:numel() > 0 then
    local delta = samples - flat:index_select(1, positions)
    corrupted = flat + bert.zeros({B * T}, "int32"):scatter_add(1, positions, delta)
  end
  corrupted = corrupted:reshape(B, T)
  return corrupted, corrupted:ne(original):int(), original
end

--- ELECTRA's masking of the generator's input: each masked position
-- (labels ~= -100) becomes mask_id with probability p (0.85), else keeps its
-- original token; never a random token (BERT's 80/10/10, which the shard
-- writer applies, is undone here).  Positions and originals come from labels.
function M.electra_mask(input_ids, labels, mask_id, p)
  local masked = labels:ne(-100)
  local original = bert.where(masked, labels, input_ids)
  local to_mask = masked * bert.rand(labels:shape()):lt(p or 0.85):int()
  return bert.where(to_mask, bert.full(labels:shape(), mask_id):int(), original)
end

--- One sample per row of logits [M, V] from softmax(logits): the Gumbel-max
-- trick, argmax(logits + G) with G = -log(-log(U)), U from bert's seeded
-- generator (so runs are deterministic under --seed and resume exactly).
function M.sample(logits)
  return bert.no_grad(function()
    local u = bert.rand(logits:shape()):maximum(1e-20)   -- drawn on the CPU: the same stream on every device
    if logits:device() ~= "cpu" then u = u:to(logits:device()) end
    return (logits:detach() - (-u:log()):log()):argmax(-1)
  end)
end

--- forward{input_ids, token_type_ids, attention_mask, labels}: the
-- generator's MLM on the masked positions, samples at them, the
-- discriminator on the corrupted sequence.  Returns loss (gen + λ·disc),
-- generator_loss, discriminator_loss, logits (the generator's [M, V]),
-- masked_labels, rtd_logits [B, T], rtd_labels [B, T] (-100 on padding).
function Pair:forward(batch)
  local gen_ids = batch.input_ids
  if self.mask_id then gen_ids = M.electra_mask(batch.input_ids, batch.labels, self.mask_id) end
  local gen_out = self.m.generator:forward({input_ids = gen_ids, token_type_ids = batch.token_type_ids,
    attention_mask = batch.attention_mask, labels = batch.labels})
  local samples = M.sample(gen_out.logits)
  local corrupted, rtd_labels = M.corrupt(batch.input_ids, batch.labels, gen_out.masked_positions, samples)
  local disc_out = self.m.discriminator:forward({input_ids = corrupted, token_type_ids = batch.token_type_ids,
    attention_mask = batch.attention_mask, labels = rtd_labels})
  if batch.attention_mask then rtd_labels = rtd_labels:masked_fill(batch.attention_mask:eq(0), -100) end
  return {
    loss = gen_out.loss + disc_out.loss * self.disc_weight,
    generator_loss = gen_out.loss, discriminator_loss = disc_out.loss,
    logits = gen_out.logits, masked_labels = gen_out.masked_labels, masked_positions = gen_out.masked_positions,
    samples = samples, corrupted_ids = corrupted,
    rtd_logits = disc_out.logits, rtd_labels = rtd_labels,
  }
end

-- runs fn with each GDES table of the discriminator holding E_G + E_Δ (what
-- a discriminator loaded on its own must read), then puts E_Δ back
local function with_summed_tables(self, fn)
  local saved = {}
  bert.no_grad(function()
    for i, t in ipairs(self.gdes) do
      saved[i] = t.disc.p.weight
      t.disc.p.weight = t.gen.p.weight + saved[i]
    end
  end)
  local ok, a, b = pcall(fn)
  for i, t in ipairs(self.gdes) do t.disc.p.weight = saved[i] end
  if not ok then error(a, 0) end
  return a, b
end

local DELTAS = "gdes_deltas.safetensors"

--- dir: the discriminator's model directory; dir/generator: the
-- generator's (with the tokenizer, so it loads on its own); under gdes
-- dir/gdes_deltas.safetensors (E_Δ, for exact resume).
function Pair:save_pretrained(dir, opts)
  local ok, err = with_summed_tables(self, function() return self.m.discriminator:save_pretrained(dir, opts) end)
  if not ok then return nil, err end
  ok, err = require("bert.model_dir").save(dir .. "/generator", self.m.generator, self.tokenizer)
  if not ok then return nil, err end
  if #self.gdes > 0 then
    local deltas = {}
    for _, t in ipairs(self.gdes) do deltas[t.name] = t.disc.p.weight end
    ok, err = bert.save_safetensors(dir .. "/" .. DELTAS, deltas, {metadata = {format = "pt"}})
    if not ok then return nil, "save_pretrained: " .. tostring(err) end
  end
  return true
end

--- The pair's own names (discriminator.*, generator.*) as any module; or,
-- with opts.checkpoint_dir (the Trainer's resume), the discriminator's
-- weights in sd and the rest read from that directory (generator/, deltas).
function Pair:load_state_dict(sd, opts)
  if not (opts and opts.checkpoint_dir) then return Module.load_state_dict(self, sd, opts) end
  local dir = opts.checkpoint_dir
  local function load(model, weights, what)
    local missing = model:load_state_dict(weights)
    -- the tied decoder is not written (HF's convention): it is the word embeddings
    local real = {}
    for _, n in ipairs(missing) do if not n:find("lm_head%.weight$") and not n:find("decoder%.weight$") then real[#real + 1] = n end end
    if #real > 0 then error(string.format("load_state_dict: %s: missing %s", what, table.concat(real, ", ")), 0) end
  end
  load(self.m.discriminator, sd, dir .. "/model.safetensors")
  local gen, err = bert.load_safetensors(dir .. "/generator/model.safetensors")
  if not gen then error("load_state_dict: the generator: " .. tostring(err), 0) end
  load(self.m.generator, gen, dir .. "/generator/model.safetensors")
  if #self.gdes > 0 then
    local deltas, derr = bert.load_safetensors(dir .. "/" .. DELTAS)
    if not deltas then error("load_state_dict: " .. tostring(derr), 0) end
    bert.no_grad(function()
      for _, t in ipairs(self.gdes) do
        if not deltas[t.name] then error("load_state_dict: " .. dir .. "/" .. DELTAS .. " has no " .. t.name, 0) end
        t.disc.p.weight:copy_(deltas[t.name])
      end
    end)
  end
  return {}, {}
end

function Pair:set_recompute(flag)
  self.m.generator:set_recompute(flag)
  self.m.discriminator:set_recompute(flag)
  self.recompute = flag ~= false
  return self
end
-- }============================================================

--- The settings the pair is built with: sharing, generator fraction and
-- depth, λ (the family's defaults where not given).
function M.settings(args, family, disc_layers)
  local d = M.families[family]
  local fraction = args.generator_size or d.generator_size
  local layers = args.generator_layers or math.max(1, math.floor(disc_layers * d.depth + 0.5))
  return {sharing = args.embedding_sharing or d.sharing, generator_size = fraction, generator_layers = layers,
          disc_weight = args.disc_weight or 50}
end

function M.build(ctx)
  if not M.families[ctx.family] then error(M.check({objective = "electra", model = ctx.args.model}), 0) end
  local disc_arch = registry.architecture_for(ctx.family, "replaced_token_detection")
  local gen_arch = registry.architecture_for(ctx.family, "masked_lm")
  local ok, disc = pcall(bert.model, disc_arch, ctx.size, ctx.config_overrides)
  if not ok then error(tostring(disc), 0) end
  local s = M.settings(ctx.args, ctx.family, disc.config.num_hidden_layers)
  local gen
  ok, gen = pcall(bert.model, gen_arch, M.generator_config(disc.config, s.generator_size, s.generator_layers))
  if not ok then error("the generator: " .. tostring(gen), 0) end
  local mask_id
  if ctx.tokenizer then
    -- the mask token as the shard writer finds it (bert.data.pretraining)
    mask_id = ctx.tokenizer:token_to_id("[MASK]") or ctx.tokenizer:token_to_id("<mask>")
    if not mask_id then error("--objective electra: the tokenizer has neither [MASK] nor <mask>", 0) end
  end
  local pair = Pair(gen, disc, {sharing = s.sharing, disc_weight = s.disc_weight, tokenizer = ctx.tokenizer,
                                mask_id = mask_id})
  ctx.electra = s
  return pair, string.format("%s + generator %s (hidden %d, %d layers, %s embeddings, λ %g)", disc_arch, gen_arch,
    gen.config.hidden_size, gen.config.num_hidden_layers, s.sharing, s.disc_weight)
end

-- {============================================================ metrics

-- replaced-token detection counts over the real tokens of one output
local function rtd_counts(out)
  local labels = out.rtd_labels
  local real = labels:ne(-100)
  local predicted = out.rtd_logits:gt(0):int()
  local replaced = labels:eq(1)
  local hit = predicted:eq(labels)
  return {
    tokens = real:sum():item(),
    right = (hit * real):sum():item(),
    true_pos = (predicted:eq(1) * replaced):sum():item(),
    predicted_pos = (predicted:eq(1) * real):sum():item(),
    replaced = replaced:sum():item(),
  }
end

function M.step_metrics(ctx, out)
  local m = {generator_loss = out.generator_loss:item(), discriminator_loss = out.discriminator_loss:item()}
  if out.masked_labels:numel() > 0 then m.mlm_accuracy = bert.train.accuracy(out.logits, out.masked_labels) end
  local c = rtd_counts(out)
  if c.tokens > 0 then m.rtd_accuracy = c.right / c.tokens end
  return m
end

function M.eval_init(ctx)
  -- the held-out replacements come from a generator of their own, the same
  -- at every evaluation; training's stream is put back in eval_finish
  local seed, offset = bert.rng_state()
  ctx.electra_rng = {seed, offset}
  bert.manual_seed(ctx.args.seed + 2000)
  local s = require("bert.objectives.mlm").eval_init(ctx)
  s.tokens, s.rtd_right, s.true_pos, s.predicted_pos, s.replaced = 0, 0, 0, 0, 0
  return s
end

function M.eval_batch(ctx, model, batch, s)
  local out = model:forward(batch)
  local logits, targets = out.logits, out.masked_labels
  local n = targets:numel()
  if n > 0 then
    s.right = s.right + logits:argmax(-1):eq(targets):sum():item()
    s.nll = s.nll + F.cross_entropy(logits, targets, {reduction = "sum"}):item()
    s.unigram = s.unigram + targets:eq(ctx.unigram_id()):sum():item()
    s.total = s.total + n
  end
  local c = rtd_counts(out)
  s.tokens, s.rtd_right = s.tokens + c.tokens, s.rtd_right + c.right
  s.true_pos, s.predicted_pos, s.replaced = s.true_pos + c.true_pos, s.predicted_pos + c.predicted_pos, s.replaced + c.replaced
end

function M.eval_finish(ctx, s)
  if ctx.electra_rng then bert.set_rng_state(ctx.electra_rng[1], ctx.electra_rng[2]) end
  ctx.electra_rng = nil
  local result = require("bert.objectives.mlm").mlm_results(s)
  local tokens = math.max(s.tokens, 1)
  result.rtd_accuracy = s.rtd_right / tokens
  result.rtd_precision = s.predicted_pos > 0 and s.true_pos / s.predicted_pos or 0
  result.rtd_recall = s.replaced > 0 and s.true_pos / s.replaced or 0
  result.replaced_fraction = s.replaced / tokens
  result.rtd_tokens = math.tointeger(s.tokens) or s.tokens
  result.mlm_accuracy_of = "generator"   -- mlm_accuracy and perplexity are the generator's
  return result
end

function M.describe(ctx, final)
  return string.format("held-out replaced-token detection accuracy %.4f (precision %.4f, recall %.4f of " ..
    "\"replaced\"; %.1f%% of the tokens replaced); the generator's MLM accuracy %.4f (unigram baseline %.4f), " ..
    "perplexity %.1f (mlm_accuracy in the summary is the generator's)",
    final.rtd_accuracy, final.rtd_precision, final.rtd_recall, 100 * final.replaced_fraction,
    final.mlm_accuracy, final.unigram_baseline_accuracy, final.perplexity)
end
-- }============================================================

return M
