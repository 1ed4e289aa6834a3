--- bert.objectives: the pretraining objectives by name.  bert.pretrain
-- reads the corpus, makes the shards, runs the Trainer and writes the
-- summary; everything that differs between objectives is in one module
-- per objective here (lua/bert/objectives/NAME.lua).
--
-- An objective module is a table with:
--   add_options(parser)        -- optional: its own command-line flags
--                              -- (--generator-size, --teacher, ...)
--   check(args)                -- optional: nil, or why these settings cannot run
--   prepare(args)              -- optional, when a run starts (before the corpus
--                              -- and the tokenizer): nil, or why it cannot run;
--                              -- may settle settings that depend on files
--                              -- (distill: --tokenizer becomes the teacher's)
--   data(args)                 -- what the shard writer makes:
--                              -- "nsp" | "sop" (sentence pairs with labels) or
--                              -- "none" (full sentences packed to --seq-len)
--   build(ctx)                 -- the module the Trainer trains: forward(batch)
--                              -- returns a table with `loss`; save_pretrained,
--                              -- state_dict/load_state_dict as any bert.nn.Module
--                              -- (what it saves is what fine-tuning loads)
--   step_metrics(ctx, out, batch)      -- training-batch metrics for the log
--   eval_init(ctx)             -- held-out sums, every key set (all ranks alike)
--   eval_batch(ctx, model, batch, sums) -- adds one held-out batch to sums
--   eval_finish(ctx, sums)     -- held-out metrics (mlm_accuracy, perplexity, ...)
--   metrics                    -- names of the metrics eval_finish returns, for
--                              -- summaries and ablation tables
--   varlen                     -- optional: true when build's model runs packed
--                              -- batches (model:set_varlen; --no-varlen pads)
--   own_flags                  -- optional: settings (args keys) with no default
--                              -- that only this objective reads (distill's
--                              -- teacher); given with another objective they
--                              -- are refused rather than ignored
--   masks = false              -- optional: the objective masks no tokens (clm,
--                              -- bilm): --span-mask, --ngram-mask, --phrase-mask
--                              -- and --whole-word-mask are refused with it
-- ctx = {args = settings, tokenizer = tok, family = "bert", size = "tiny" or a
-- config.json, config_overrides = {vocab_size, max_position_embeddings},
-- unigram_id = function() -> most frequent training token id}.
local M = {}

-- command-line names (and the old ones) -> the internal name that run
-- directories, summaries and metric names use
M.names = {["mlm-nsp"] = "nsp", ["mlm-sop"] = "sop", mlm = "none", nsp = "nsp", sop = "sop", none = "none"}
M.names.clm = "clm"
M.names.bilm = "bilm"
M.names.electra = "electra"
M.names.distill = "distill"
M.names.elmo = "elmo"

-- internal name -> module
M.modules = {nsp = "bert.objectives.mlm", sop = "bert.objectives.mlm", none = "bert.objectives.mlm"}
M.modules.clm = "bert.objectives.clm"
M.modules.bilm = "bert.objectives.bilm"
M.modules.electra = "bert.objectives.electra"
M.modules.distill = "bert.objectives.distill"
M.modules.elmo = "bert.objectives.elmo"

-- objectives issue 13 asks for that are not written yet: refused by name
-- rather than run as something else (none left)
M.planned = {}

-- the command-line names in the order --help and messages list them (an
-- objective module adds its name here and in M.names and M.modules)
M.order = {"mlm-nsp", "mlm-sop", "mlm"}
M.order[#M.order + 1] = "clm"
M.order[#M.order + 1] = "bilm"
M.order[#M.order + 1] = "electra"
M.order[#M.order + 1] = "distill"
M.order[#M.order + 1] = "elmo"

--- The internal name of an --objective value, or nil and a message naming
-- the option and the valid values.
function M.resolve(v)
  local o = M.names[v]
  if o then return o end
  local valid = table.concat(M.order, ", ")
  if M.planned[v] then
    return nil, string.format("option --objective: '%s' is not implemented yet (implemented: %s)", v, valid)
  end
  return nil, string.format("option --objective: '%s' is not one of %s (or the old names nsp, sop, none)",
    tostring(v), valid)
end

--- The module of an internal (or command-line) objective name.
function M.get(name)
  local internal = M.names[name] or name
  local path = M.modules[internal]
  if not path then error("objectives.get: unknown objective '" .. tostring(name) .. "'", 2) end
  return require(path)
end

--- Every objective module once (for their command-line flags).
--- own_flags of every objective: args key -> the command-line name of the
-- objective that reads it.
function M.flag_owners()
  local owners = {}
  for _, name in ipairs(M.order) do
    for _, key in ipairs(M.get(name).own_flags or {}) do owners[key] = owners[key] or name end
  end
  return owners
end

function M.each_module()
  local seen, list = {}, {}
  local keys = {}
  for k in pairs(M.modules) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local path = M.modules[k]
    if not seen[path] then seen[path] = true; list[#list + 1] = require(path) end
  end
  return list
end

return M
