--- BERT (Devlin et al., 2018) as Hugging Face lays it out: the blocks'
-- defaults are BERT's, so this file is only its names, sizes and heads.
-- Math per shared/reference/bert_family_spec.md §1: post-LN layers,
-- exact-erf GELU, LayerNorm eps 1e-12, absolute positions, two token types.
-- config pre_layer_norm = true: pre-LN layers and a final LayerNorm
-- (bert.LayerNorm), the layout of Cramming (Geiping & Goldstein, 2022).
local nn = require("bert.nn")
local blocks = require("bert.models.blocks")

local F = {
  model_type = "bert", short_name = "bert", class_prefix = "Bert", prefix = "bert",
  default_vocab = 30522,   -- bert-base-uncased's WordPiece vocabulary
  pre_layer_norm = true,   -- takes config pre_layer_norm (bert.models.config)
  -- keys read where present, beyond the defaults and sizes (Hugging Face's BertConfig has classifier_dropout)
  optional_keys = {"classifier_dropout", "pre_layer_norm"},
}

-- Google's released sizes (intermediate = 4H, heads = H/64).
F.sizes = require("bert.models.config").sizes

F.defaults = {
  max_position_embeddings = 512, type_vocab_size = 2,
  hidden_act = "gelu", hidden_dropout_prob = 0.1, attention_probs_dropout_prob = 0.1,
  initializer_range = 0.02, layer_norm_eps = 1e-12, pad_token_id = 0,
  position_embedding_type = "absolute", tie_word_embeddings = true,
}

function F.validate(c, a, where)
  if c.position_embedding_type ~= "absolute" then
    error(string.format("%s: position_embedding_type '%s' is not supported (only 'absolute')",
      where, tostring(c.position_embedding_type)), 0)
  end
end

function F.arch(c)
  local a = require("bert.models.config").bert_arch(c)
  a.classifier_dropout = c.classifier_dropout
  return a
end

--- The BERT-shaped backbone (also RoBERTa's and ELECTRA's with options):
-- embeddings, encoder.layer.i, a pooler.dense with tanh.  Pre-LN layers
-- (a.pre_layer_norm) end in a LayerNorm named LayerNorm, after the encoder
-- (Hugging Face's roberta-prelayernorm names it so).
function F.bert_backbone(a, opts)
  local H = a.hidden_size
  return blocks.Backbone(a, {
    {"embeddings", blocks.Embeddings(a, opts.embeddings), "embeddings"},
    {"embeddings_project", opts.project and nn.Linear(opts.project, H, {std = a.initializer_range}), "project"},
    {"encoder", blocks.Encoder(a, function() return blocks.Layer(a) end), "encoder"},
    {"LayerNorm", a.pre_layer_norm and nn.LayerNorm(H, a.layer_norm_eps), "final_norm"},
    {"pooler", opts.pooler and blocks.Container({{"dense", nn.Linear(H, H, {std = a.initializer_range})}}), "pooler"},
  }, {token_types = true, max_length = opts.max_length})
end

function F.backbone(a, c, opts) return F.bert_backbone(a, {pooler = opts.pooler}) end

F.heads = {
  mlm = {bias = "cls.predictions.bias", dense = "cls.predictions.transform.dense",
         norm = "cls.predictions.transform.LayerNorm", decoder = "cls.predictions.decoder.weight",
         decoder_bias = "cls.predictions.decoder.bias"},
  pair = {path = "cls.seq_relationship", output = "seq_relationship_logits"},
  classifier = {source = "pooled", out = "classifier"},
  multiple_choice = {source = "pooled", out = "classifier"},
}

F.architectures = {
  BertModel = "base", BertForPreTraining = "pretraining", BertForMaskedLM = "masked_lm",
  BertLMHeadModel = "causal_lm",   -- a left-to-right LM: config is_decoder = true
  BertForSequenceClassification = "sequence_classification",
  BertForTokenClassification = "token_classification",
  BertForQuestionAnswering = "question_answering", BertForMultipleChoice = "multiple_choice",
}

-- HF writes the decoder bias under both names (one tensor)
F.aliases = {["cls.predictions.decoder.bias"] = "cls.predictions.bias"}

return F
