--- ALBERT (Lan et al., 2019): factorized embeddings (width embedding_size,
-- projected to the hidden size by encoder.embedding_hidden_mapping_in),
-- one group of layer weights applied at every depth (num_hidden_groups x
-- inner_group_num; gradients accumulate into the shared weights), tanh
-- GELU (gelu_new), a bare-Linear pooler, and SOP as the pretraining pair
-- head.  shared/reference/bert_family_spec.md §2.2.
local class = require("bert.nn.class")
local nn = require("bert.nn")
local blocks = require("bert.models.blocks")
local bert_family = require("bert.models.bert")

local F = {
  model_type = "albert", short_name = "albert", class_prefix = "Albert", prefix = "albert",
  default_vocab = 30000,   -- the SentencePiece vocabulary of the released models
  int_keys = {"num_hidden_groups", "inner_group_num"},
}

local function size(H, L, A, I) return {embedding_size = 128, hidden_size = H, num_hidden_layers = L,
  num_attention_heads = A, intermediate_size = I} end
F.sizes = {
  tiny = size(128, 2, 2, 512), mini = size(256, 4, 4, 1024), small = size(512, 4, 8, 2048),
  medium = size(512, 8, 8, 2048),
  -- the published ALBERT shapes (E = 128 throughout)
  base = size(768, 12, 12, 3072), large = size(1024, 24, 16, 4096),
  xlarge = size(2048, 24, 16, 8192), xxlarge = size(4096, 12, 64, 16384),
}

-- AlbertConfig's defaults (xxlarge's shape; v2 checkpoints have no dropout)
F.defaults = {
  embedding_size = 128, hidden_size = 4096, num_hidden_layers = 12, num_hidden_groups = 1, inner_group_num = 1,
  num_attention_heads = 64, intermediate_size = 16384, hidden_act = "gelu_new",
  hidden_dropout_prob = 0, attention_probs_dropout_prob = 0, max_position_embeddings = 512,
  type_vocab_size = 2, initializer_range = 0.02, layer_norm_eps = 1e-12, classifier_dropout_prob = 0.1,
  pad_token_id = 0, bos_token_id = 2, eos_token_id = 3, position_embedding_type = "absolute",
  tie_word_embeddings = true,
}

F.key_names = {classifier_dropout = "classifier_dropout_prob"}   -- Hugging Face's name -> ALBERT's

function F.arch(c)
  local a = bert_family.arch(c)
  a.classifier_dropout = c.classifier_dropout_prob
  a.key_names = F.key_names
  return a
end

function F.validate(c, a, where)
  bert_family.validate(c, a, where)
  for _, k in ipairs({"num_hidden_groups", "inner_group_num"}) do
    if math.type(c[k]) ~= "integer" or c[k] <= 0 then
      error(string.format("%s: '%s' must be a positive integer, got %s", where, k, tostring(c[k])), 0)
    end
  end
  if c.num_hidden_groups > c.num_hidden_layers then
    error(string.format("%s: num_hidden_groups %d exceeds num_hidden_layers %d", where,
      c.num_hidden_groups, c.num_hidden_layers), 0)
  end
end

-- {============================================================ the layer

--- a = LN_att(x + dropout(dense(MHA(x)))); y = full_layer_layer_norm(ffn_output(act(ffn(a))) + a)
-- (HF applies no dropout to the feed-forward output)
local Layer = class("AlbertLayer", blocks.MappedLayer)
Layer.names = {
  {"output_norm", "full_layer_layer_norm"}, {"attention", "attention"}, {"attention_out", "attention.dense"},
  {"attention_norm", "attention.LayerNorm"}, {"ffn_in", "ffn"}, {"ffn_out", "ffn_output"},
}
Layer.dropout_after = {attention = true}
-- }============================================================

function F.backbone(a, c, opts)
  local E, H = a.embedding_size, a.hidden_size
  local encoder = blocks.SharedEncoder({
    depth = a.num_hidden_layers, num_groups = c.num_hidden_groups, inner = c.inner_group_num,
    names = {"albert_layer_groups", "albert_layers"},
    project = {"embedding_hidden_mapping_in", nn.Linear(E, H, {std = a.initializer_range})},
    make_layer = function() return Layer(a) end,
  })
  return blocks.Backbone(a, {
    {"embeddings", blocks.Embeddings(a, {width = E}), "embeddings"},
    {"encoder", encoder, "encoder"},
    {"pooler", opts.pooler and nn.Linear(H, H, {std = a.initializer_range}), "pooler"},
  }, {token_types = true})
end

F.heads = {
  mlm = {bias = "predictions.bias", dense = "predictions.dense", norm = "predictions.LayerNorm",
         decoder = "predictions.decoder.weight", decoder_bias = "predictions.decoder.bias"},
  pair = {path = "sop_classifier.classifier", output = "sop_logits", dropout = true},
  classifier = {source = "pooled", out = "classifier"},
  multiple_choice = {source = "pooled", out = "classifier"},
}

F.architectures = {
  AlbertModel = "base", AlbertForPreTraining = "pretraining", AlbertForMaskedLM = "masked_lm",
  AlbertForSequenceClassification = "sequence_classification",
  AlbertForTokenClassification = "token_classification",
  AlbertForQuestionAnswering = "question_answering", AlbertForMultipleChoice = "multiple_choice",
}

F.aliases = {["predictions.decoder.bias"] = "predictions.bias"}

return F
