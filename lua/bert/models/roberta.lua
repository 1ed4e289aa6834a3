--- RoBERTa (Liu et al., 2019): BERT's architecture with position ids that
-- skip padding (padding_idx + 1 + count of real tokens), one token type,
-- LayerNorm eps 1e-5, its own LM head (lm_head, erf GELU whatever
-- hidden_act says) and a classifier with a dense + tanh of its own on <s>.
-- shared/reference/bert_family_spec.md §2.1.
local bert_family = require("bert.models.bert")
local configs = require("bert.models.config")

local F = {
  model_type = "roberta", short_name = "roberta", class_prefix = "Roberta", prefix = "roberta",
  default_vocab = 50265,   -- the GPT-2 byte-level BPE of roberta-base
  sizes = configs.sizes,
}

F.defaults = configs.extend(bert_family.defaults, {
  max_position_embeddings = 514, type_vocab_size = 1, layer_norm_eps = 1e-5,
  pad_token_id = 1, bos_token_id = 0, eos_token_id = 2,
})

F.arch = bert_family.arch
F.optional_keys = {"classifier_dropout"}

function F.validate(c, a, where)
  bert_family.validate(c, a, where)
  if c.max_position_embeddings <= c.pad_token_id + 1 then
    error(string.format("%s: max_position_embeddings %d leaves no position after padding_idx %d",
      where, c.max_position_embeddings, c.pad_token_id), 0)
  end
end

function F.backbone(a, c, opts)
  return bert_family.bert_backbone(a, {
    embeddings = {positions = "roberta"}, pooler = opts.pooler,
    max_length = a.max_position_embeddings - a.pad_token_id - 1,
  })
end

F.heads = {
  mlm = {bias = "lm_head.bias", dense = "lm_head.dense", norm = "lm_head.layer_norm",
         decoder = "lm_head.decoder.weight", decoder_bias = "lm_head.decoder.bias", act = "gelu"},
  classifier = {source = "first", pre = {path = "classifier.dense", act = "tanh", dropout_before = true},
                out = "classifier.out_proj"},
  multiple_choice = {source = "pooled", out = "classifier"},
}

F.architectures = {
  RobertaModel = "base", RobertaForMaskedLM = "masked_lm",
  RobertaForCausalLM = "causal_lm",   -- a left-to-right LM: config is_decoder = true
  RobertaForSequenceClassification = "sequence_classification",
  RobertaForTokenClassification = "token_classification",
  RobertaForQuestionAnswering = "question_answering", RobertaForMultipleChoice = "multiple_choice",
}

F.aliases = {["lm_head.decoder.bias"] = "lm_head.bias"}

return F
