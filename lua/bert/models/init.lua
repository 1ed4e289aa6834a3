--- bert.models: every family of the BERT story through one registry.
--   bert.models.new("RobertaForMaskedLM", "base")     -- = bert.model(...)
--   bert.models.resolve("albert-tiny")                 -- {family = "albert", size = "tiny"}
--   bert.models.architecture_for("albert", "sequence_classification")
-- Families: bert.models.registry.families; blocks and heads: bert.models.blocks, bert.models.heads.
local registry = require("bert.models.registry")

local M = {
  registry = registry,
  new = registry.build,
  resolve = registry.resolve,
  family = registry.family,
  architecture = registry.architecture,
  architecture_for = registry.architecture_for,
}

return M
