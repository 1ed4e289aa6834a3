-- A family added as the docs (docs/families.md, "Adding a family") show it:
-- spec/model_loading_spec.lua registers it and builds every class.
local bert_family = require("bert.models.bert")
local F = {model_type = "mybert", short_name = "mybert", class_prefix = "MyBert", prefix = "mybert",
           default_vocab = 32000, sizes = require("bert.models.config").sizes}
F.defaults = require("bert.models.config").extend(bert_family.defaults, {layer_norm_eps = 1e-5})   -- its own differences
F.arch, F.validate = bert_family.arch, bert_family.validate
function F.backbone(a, c, opts)       -- embeddings, encoder.layer.i, pooler: BERT's blocks with options
  return bert_family.bert_backbone(a, {embeddings = {positions = "roberta"}, pooler = opts.pooler})
end
F.heads = {                           -- where each head's pieces live in the checkpoint
  mlm = {bias = "lm_head.bias", dense = "lm_head.dense", norm = "lm_head.layer_norm",
         decoder = "lm_head.decoder.weight", decoder_bias = "lm_head.decoder.bias"},
  classifier = {source = "first", pre = {path = "classifier.dense", act = "tanh", dropout_before = true},
                out = "classifier.out_proj"},
  multiple_choice = {source = "pooled", out = "classifier"},
}
F.architectures = {MyBertModel = "base", MyBertForMaskedLM = "masked_lm",
  MyBertForSequenceClassification = "sequence_classification",
  MyBertForTokenClassification = "token_classification", MyBertForQuestionAnswering = "question_answering"}
F.aliases = {["lm_head.decoder.bias"] = "lm_head.bias"}
return F
