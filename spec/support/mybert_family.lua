-- A family added as the docs (docs/families.md, "Adding a family") show it:
-- spec/model_loading_spec.lua registers it and builds every class.
local bert_family = require("bert.models.bert")
local F = {model_type = "mybert", short_name = "mybert", class_prefix = "MyBert", prefix = "mybert",
           default_vocab = 32000, sizes = require("bert.models.config").sizes}
F.defaults = {max_position_embeddings = 512, type_vocab_size = 2, hidden_act = "gelu",
  hidden_dropout_prob = 0.1, attention_probs_dropout_prob = 0.1, initializer_range = 0.02,
  layer_norm_eps = 1e-12, pad_token_id = 0, position_embedding_type = "absolute", tie_word_embeddings = true}
F.arch, F.validate = bert_family.arch, bert_family.validate
function F.backbone(a, c, opts)       -- embeddings, encoder.layer.i, pooler: BERT's blocks with options
  return bert_family.bert_backbone(a, {embeddings = {positions = "roberta"}, pooler = opts.pooler})
end
F.heads = {                           -- where each head's pieces live in the checkpoint
  mlm = {bias = "lm_head.bias", dense = "lm_head.dense", norm = "lm_head.layer_norm",
         decoder = "lm_head.decoder.weight"},
  classifier = {source = "first", pre = {path = "classifier.dense", act = "tanh", dropout_before = true},
                out = "classifier.out_proj"},
  multiple_choice = {source = "pooled", out = "classifier"},
}
F.architectures = {MyBertModel = "base", MyBertForMaskedLM = "masked_lm",
  MyBertForSequenceClassification = "sequence_classification",
  MyBertForTokenClassification = "token_classification", MyBertForQuestionAnswering = "question_answering"}
F.aliases = {["lm_head.decoder.bias"] = "lm_head.bias"}
return F
