--- bert.nn: layers as torch-like modules.
return {
  class = require("bert.nn.class"),
  Module = require("bert.nn.Module"),
  Linear = require("bert.nn.Linear"),
  LayerNorm = require("bert.nn.LayerNorm"),
  Embedding = require("bert.nn.Embedding"),
  Dropout = require("bert.nn.Dropout"),
  LSTM = require("bert.nn.LSTM"),
}
