--- ELECTRA (Clark et al., 2020): BERT's encoder behind embeddings of width
-- embedding_size, projected to the hidden size (embeddings_project) when
-- they differ; no pooler.  Heads: the discriminator (ElectraForPreTraining,
-- a per-token replaced? logit), the generator (ElectraForMaskedLM, dense to
-- the embedding width, erf GELU, LayerNorm, tied decoder) and a classifier
-- with a dense + GELU of its own.  shared/reference/bert_family_spec.md §2.4.
local bert_family = require("bert.models.bert")

local F = {
  model_type = "electra", short_name = "electra", class_prefix = "Electra", prefix = "electra",
  default_vocab = 30522, base_pooler = false,
}

F.sizes = {
  tiny   = {embedding_size = 128, hidden_size = 128, num_hidden_layers = 2, num_attention_heads = 2, intermediate_size = 512},
  mini   = {embedding_size = 128, hidden_size = 256, num_hidden_layers = 4, num_attention_heads = 4, intermediate_size = 1024},
  -- the published ELECTRA-Small, Base and Large discriminators
  small  = {embedding_size = 128, hidden_size = 256, num_hidden_layers = 12, num_attention_heads = 4, intermediate_size = 1024},
  medium = {embedding_size = 128, hidden_size = 512, num_hidden_layers = 8, num_attention_heads = 8, intermediate_size = 2048},
  base   = {embedding_size = 768, hidden_size = 768, num_hidden_layers = 12, num_attention_heads = 12, intermediate_size = 3072},
  large  = {embedding_size = 1024, hidden_size = 1024, num_hidden_layers = 24, num_attention_heads = 16, intermediate_size = 4096},
}

F.defaults = require("bert.models.config").extend(bert_family.defaults, {embedding_size = 128})

F.arch = bert_family.arch
F.optional_keys = {"classifier_dropout"}
F.validate = bert_family.validate

function F.backbone(a, c, opts)
  local E = a.embedding_size
  return bert_family.bert_backbone(a, {
    embeddings = {width = E}, project = E ~= a.hidden_size and E or nil,
  })
end

F.heads = {
  mlm = {bias = "generator_lm_head.bias", dense = "generator_predictions.dense",
         norm = "generator_predictions.LayerNorm", decoder = "generator_lm_head.weight", act = "gelu"},
  discriminator = {dense = "discriminator_predictions.dense", prediction = "discriminator_predictions.dense_prediction"},
  classifier = {source = "first", pre = {path = "classifier.dense", act = "gelu", dropout_before = true},
                out = "classifier.out_proj"},
  -- HF's SequenceSummary with ELECTRA's settings: first token, Linear(H, H), GELU, dropout
  multiple_choice = {source = "first", pre = {path = "sequence_summary.summary", act = "gelu"}, out = "classifier"},
}

F.architectures = {
  ElectraModel = "base", ElectraForPreTraining = "replaced_token_detection", ElectraForMaskedLM = "masked_lm",
  ElectraForSequenceClassification = "sequence_classification",
  ElectraForTokenClassification = "token_classification",
  ElectraForQuestionAnswering = "question_answering", ElectraForMultipleChoice = "multiple_choice",
}

F.aliases = {}

return F
