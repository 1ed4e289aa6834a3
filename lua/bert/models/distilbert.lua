--- DistilBERT (Sanh et al., 2019): half of BERT's depth, its own config
-- keys (dim, n_layers, n_heads, hidden_dim, dropout, activation...) and
-- names (transformer.layer.i.attention.q_lin, sa_layer_norm, ffn.lin1,
-- output_layer_norm), no token types, no pooler, no dropout on the
-- attention output.  shared/reference/bert_family_spec.md §2.5.
local class = require("bert.nn.class")
local blocks = require("bert.models.blocks")

local F = {
  model_type = "distilbert", short_name = "distilbert", class_prefix = "DistilBert", prefix = "distilbert",
  default_vocab = 30522, base_pooler = false,
  int_keys = {"dim", "n_layers", "n_heads", "hidden_dim"},
}

-- the BERT shapes at half their depth (distilbert-base is 6 x 768);
-- there is no released large: it is BERT-large at half depth
F.sizes = {
  tiny   = {dim = 128,  n_layers = 2,  n_heads = 2,  hidden_dim = 512},
  mini   = {dim = 256,  n_layers = 2,  n_heads = 4,  hidden_dim = 1024},
  small  = {dim = 512,  n_layers = 2,  n_heads = 8,  hidden_dim = 2048},
  medium = {dim = 512,  n_layers = 4,  n_heads = 8,  hidden_dim = 2048},
  base   = {dim = 768,  n_layers = 6,  n_heads = 12, hidden_dim = 3072},
  large  = {dim = 1024, n_layers = 12, n_heads = 16, hidden_dim = 4096},
}

F.defaults = {
  max_position_embeddings = 512, sinusoidal_pos_embds = false, dropout = 0.1, attention_dropout = 0.1,
  activation = "gelu", initializer_range = 0.02, qa_dropout = 0.1, seq_classif_dropout = 0.2,
  pad_token_id = 0, tie_word_embeddings = true,
}

-- DistilBERT's keys -> the blocks' (BERT's) names
local key_names = {hidden_size = "dim", num_hidden_layers = "n_layers", num_attention_heads = "n_heads",
  intermediate_size = "hidden_dim", hidden_act = "activation", hidden_dropout_prob = "dropout",
  attention_probs_dropout_prob = "attention_dropout", classifier_dropout = "seq_classif_dropout"}

F.key_names = key_names

function F.arch(c)
  local a = {vocab_size = c.vocab_size, max_position_embeddings = c.max_position_embeddings, type_vocab_size = 0,
    initializer_range = c.initializer_range, layer_norm_eps = 1e-12, pad_token_id = c.pad_token_id,
    qa_dropout = c.qa_dropout, key_names = key_names}
  for ours, theirs in pairs(key_names) do a[ours] = c[theirs] end
  return a
end

function F.validate(c, a, where)
  if c.sinusoidal_pos_embds then
    error(where .. ": sinusoidal_pos_embds true is not supported (learned positions only)", 0)
  end
end

-- {============================================================ the block

--- sa = LN_sa(out_lin(MHA(x)) + x); y = LN_out(dropout(lin2(act(lin1(sa)))) + sa)
local Block = class("DistilBertBlock", blocks.MappedLayer)
Block.qkv = {"q_lin", "k_lin", "v_lin"}
Block.names = {
  {"attention", "attention"}, {"attention_out", "attention.out_lin"}, {"attention_norm", "sa_layer_norm"},
  {"ffn_in", "ffn.lin1"}, {"ffn_out", "ffn.lin2"}, {"output_norm", "output_layer_norm"},
}
Block.dropout_after = {ffn = true}
-- }============================================================

function F.backbone(a)
  return blocks.Backbone(a, {
    {"embeddings", blocks.Embeddings(a, {token_types = false}), "embeddings"},
    {"transformer", blocks.Encoder(a, function() return Block(a) end), "encoder"},
  }, {token_types = false})
end

F.heads = {
  mlm = {bias = "vocab_projector.bias", dense = "vocab_transform", norm = "vocab_layer_norm",
         decoder = "vocab_projector.weight"},
  classifier = {source = "first", pre = {path = "pre_classifier", act = "relu"}, out = "classifier"},
  multiple_choice = {source = "first", pre = {path = "pre_classifier", act = "relu"}, out = "classifier"},
  qa_dropout = true, token_dropout = "hidden_dropout_prob",
}

F.architectures = {
  DistilBertModel = "base", DistilBertForMaskedLM = "masked_lm",
  DistilBertForSequenceClassification = "sequence_classification",
  DistilBertForTokenClassification = "token_classification",
  DistilBertForQuestionAnswering = "question_answering", DistilBertForMultipleChoice = "multiple_choice",
}

F.aliases = {}

return F
