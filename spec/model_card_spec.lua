-- Every saved model directory gets README.md, a model card in Hugging
-- Face's style, from what is known at save time: the model, its tokenizer,
-- and the run that saved it (args.json, metrics.jsonl, config.finetune).
local bert = require("bert")
local model_dir = require("bert.model_dir")
local cjson = require("cjson")

local function read(path) return assert(io.open(path)):read("a") end

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

describe("model card", function()
  local tmp, tok
  before_each(function()
    tmp = os.tmpname()
    os.remove(tmp)
    assert(bert.mkdir(tmp))
    tok = bert.tokenizer.load("spec/fixtures/finetune/vocab.txt")
  end)
  after_each(function() os.execute("rm -rf '" .. tmp .. "'") end)

  it("describes a pretraining checkpoint: model, tokenizer, data, steps, evaluation, command, data license", function()
    local run = tmp .. "/run"
    assert(bert.mkdir(run))
    write(run .. "/args.json", cjson.encode({corpus = "brown", objective = "mlm-nsp", lr = 0.001, batch_size = 32,
      seq_len = 128, seed = 42}))
    write(run .. "/metrics.jsonl", '{"step":10,"loss":9.1}\n{"eval":{"mlm_accuracy":0.125,"perplexity":431.5,' ..
      '"tokens_per_s":3000},"step":20}\n{"step":30,"loss":8.5}\n')
    local model = bert.model("BertForMaskedLM", "tiny", {vocab_size = tok:vocab_size()})
    -- the Trainer writes checkpoint.tmp, then renames it into place
    assert(model_dir.save(run .. "/checkpoint.tmp", model, tok))
    local card = read(run .. "/checkpoint.tmp/README.md")
    local n = 0
    for _, np in ipairs(model:named_parameters()) do n = n + np.param:numel() end
    assert.truthy(card:find("^%-%-%-\n"))
    assert.truthy(card:find("pipeline_tag: fill-mask", 1, true))
    assert.truthy(card:find("datasets: [brown]", 1, true))
    assert.truthy(card:find("| architecture | BertForMaskedLM |", 1, true))
    assert.truthy(card:find(string.format("| size | 2 layers, hidden 128, 2 heads, feed-forward 512; %.2fM parameters |",
      n / 1e6), 1, true), card)
    assert.truthy(card:find(string.format("| vocabulary | %d tokens, 512 positions |", tok:vocab_size()), 1, true))
    assert.truthy(card:find(string.format("WordPiece, %d tokens, lowercased", tok:vocab_size()), 1, true))
    assert.truthy(card:find("| data | brown |", 1, true))
    assert.truthy(card:find("| objective | mlm-nsp |", 1, true))
    assert.truthy(card:find("| steps | 30 |", 1, true))
    assert.truthy(card:find("| lr | 0.001 |", 1, true))
    assert.truthy(card:find("latest evaluation (step 20)", 1, true))
    assert.truthy(card:find("| mlm_accuracy | 0.125 |", 1, true))
    assert.truthy(card:find("| perplexity | 431.5 |", 1, true))
    assert.falsy(card:find("tokens_per_s", 1, true))
    assert.truthy(card:find("## How it was made\n\n```sh\n", 1, true))
    assert.truthy(card:find("Brown Corpus", 1, true))
    assert.is_nil(io.open(run .. "/checkpoint.tmp/README.md.tmp"))   -- written atomically
  end)

  it("describes a fine-tuned best/: labels, the task, the base model and the run's tokenizer", function()
    local run = tmp .. "/ft"
    assert(bert.mkdir(run .. "/tokenizer"))
    assert(model_dir.save_tokenizer(run .. "/tokenizer", tok))
    write(run .. "/args.json", cjson.encode({task = "spam", model = "runs/demo/checkpoint", lr = 0.001}))
    write(run .. "/metrics.jsonl", '{"eval":{"accuracy":0.9375,"macro_f1":0.91},"step":64}\n')
    local model = bert.model("BertForSequenceClassification", "tiny", {vocab_size = tok:vocab_size(), num_labels = 2})
    model.config.id2label = {["0"] = "ham", ["1"] = "spam"}
    model.config.label2id = {ham = 0, spam = 1}
    model.config.finetune = {task = "spam", kind = "classification"}
    assert(model:save_pretrained(run .. "/best"))
    local card = read(run .. "/best/README.md")
    assert.truthy(card:find("pipeline_tag: text-classification", 1, true))
    assert.truthy(card:find("| labels | ham, spam |", 1, true))
    assert.truthy(card:find("| data | spam |", 1, true))
    assert.truthy(card:find("| objective | fine-tuning for classification |", 1, true))
    assert.truthy(card:find("| initialised from | runs/demo/checkpoint |", 1, true))
    assert.truthy(card:find("`../tokenizer/`", 1, true))
    assert.truthy(card:find("| accuracy | 0.9375 |", 1, true))
    assert.truthy(card:find("SpamAssassin", 1, true))
  end)

  it("says what it does not know for a model saved outside a run", function()
    local model = bert.model("BertForMaskedLM", "tiny", {vocab_size = tok:vocab_size()})
    write(tmp .. "/args.json", cjson.encode({corpus = "kjv"}))   -- not this model's run: mine/ is no run's directory
    assert(model:save_pretrained(tmp .. "/mine"))
    local card = read(tmp .. "/mine/README.md")
    assert.truthy(card:find("# mine\n", 1, true))
    assert.truthy(card:find("| data | not recorded |", 1, true))
    assert.truthy(card:find("Not evaluated when this was saved.", 1, true))
    assert.truthy(card:find("not saved with the model.", 1, true))
    assert.falsy(card:find("kjv", 1, true))
  end)

  it("says that an ELMo or a bilm model is no Hugging Face model type, and gives ELMo's own shape", function()
    local elmo = bert.model("ElmoLMHeadModel", "tiny", {vocab_size = tok:vocab_size()})
    assert(elmo:save_pretrained(tmp .. "/elmo"))
    local card = read(tmp .. "/elmo/README.md")
    assert.truthy(card:find("library_name: bert-lua", 1, true), card)
    assert.truthy(card:find("not a Hugging Face model type: transformers cannot load it", 1, true), card)
    assert.truthy(card:find("| size | character CNN of 64 filters, 1 highway layer; 2 directions x 2 LSTM layers " ..
      "of 256 cells projected to 64;", 1, true), card)
    assert.falsy(card:find("nil", 1, true), card)
    local bilm = bert.model("BiLMLMHeadModel", "tiny", {vocab_size = tok:vocab_size()})
    assert(bilm:save_pretrained(tmp .. "/bilm"))
    assert.truthy(read(tmp .. "/bilm/README.md"):find("transformers cannot load it", 1, true))
    local bert_card = read((function()
      assert(bert.model("BertForMaskedLM", "tiny", {vocab_size = tok:vocab_size()}):save_pretrained(tmp .. "/b"))
      return tmp .. "/b/README.md" end)())
    assert.truthy(bert_card:find("library_name: transformers", 1, true))
    assert.truthy(bert_card:find("in Hugging Face transformers.", 1, true))
  end)

  it("takes what the caller knows from opts.card", function()
    local model = bert.model("BertForMaskedLM", "tiny", {vocab_size = tok:vocab_size()})
    assert(model_dir.save(tmp .. "/m", model, tok, {card = {data = "squad", steps = 7, evaluation = {f1 = 0.5},
      command = "bert finetune qa --task squad"}}))
    local card = read(tmp .. "/m/README.md")
    assert.truthy(card:find("| steps | 7 |", 1, true))
    assert.truthy(card:find("| f1 | 0.5 |", 1, true))
    assert.truthy(card:find("```sh\nbert finetune qa --task squad\n```", 1, true))
    assert.truthy(card:find("CC BY-SA 4.0", 1, true))
  end)
end)
