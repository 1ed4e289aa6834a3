-- Zero-shot LM scoring (issue 26): bert.evaluate.lm's batched scores against
-- plain loops (one forward per masked copy / per sentence, a full
-- log_softmax at every position): masked pseudo-log-likelihood packed and
-- padded, the causal log-likelihood (with the sliding windows of long
-- sentences), the biLM's two directions; bits per byte against a hand
-- computation; loading checkpoints by kind (ELECTRA's generator); BLiMP's
-- reading, aggregation (ties wrong) and errors on tiny fixtures made here.
local bert = require("bert")
local lm = require("bert.evaluate.lm")
local blimp = require("bert.evaluate.blimp")

bert.set_num_threads(1)

local VOCAB = "spec/fixtures/finetune/vocab.txt"
local tok = bert.tokenizer.load(VOCAB)

local function config(extra)
  local c = {vocab_size = tok:vocab_size(), hidden_size = 16, num_hidden_layers = 2, num_attention_heads = 2,
             intermediate_size = 32, max_position_embeddings = 32, hidden_dropout_prob = 0.1,
             attention_probs_dropout_prob = 0.1}
  for k, v in pairs(extra or {}) do c[k] = v end
  return c
end

local tmpdir = require("spec.support.tmpdir").dir

local function rm(p) os.execute("rm -rf '" .. p .. "'") end

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local SENTENCES = {
  "the food was good .",
  "she won the nobel prize in physics and chemistry .",
  "we think so",
  "marie curie discovered polonium and radium in paris in 1903 when she was at the sorbonne .",
  "",
  "it xq was really bad",   -- xq: word pieces
}

-- content positions (1-based in the encoding) and ids of a sentence
local function encoding(s)
  local e = tok:encode(s)
  local pos = {}
  for t, special in ipairs(e.special_tokens_mask) do if special == 0 then pos[#pos + 1] = t end end
  return e.ids, pos
end

local function log_probs(logits) return logits:log_softmax(-1) end   -- [1, T, V]

-- {============================================================ plain loops

local function plain_pll(model, s)
  local ids, pos = encoding(s)
  local total = 0
  for _, p in ipairs(pos) do
    local copy = table.move(ids, 1, #ids, 1, {})
    copy[p] = tok:token_to_id("[MASK]")
    local out = model:forward{input_ids = bert.tensor({copy}, "int32")}
    total = total + log_probs(out.logits):get(1, p, ids[p] + 1)
  end
  return total
end

local function plain_causal(model, s)
  local ids, pos = encoding(s)
  local lp = log_probs(model:forward{input_ids = bert.tensor({ids}, "int32")}.logits)
  local total = 0
  for _, p in ipairs(pos) do total = total + lp:get(1, p - 1, ids[p] + 1) end
  return total
end

local function plain_bilm(model, s)
  local ids, pos = encoding(s)
  local out = model:forward{input_ids = bert.tensor({ids}, "int32")}
  local f, b = log_probs(out.logits), log_probs(out.backward_logits)
  local tf, tb = 0, 0
  for _, p in ipairs(pos) do
    tf = tf + f:get(1, p - 1, ids[p] + 1)   -- predicted at the token before
    tb = tb + b:get(1, p + 1, ids[p] + 1)   -- and at the token after
  end
  return tf + tb, tf, tb
end
-- }============================================================

local function near(expected, actual, tol)
  for i = 1, #expected do
    assert(math.abs(expected[i] - actual[i]) <= (tol or 1e-4) * (1 + math.abs(expected[i])),
      string.format("sentence %d: expected %.6f, got %.6f", i, expected[i], actual[i]))
  end
end

describe("evaluate.lm masked pseudo-log-likelihood", function()
  bert.manual_seed(1)
  local model = bert.model("BertForMaskedLM", config())
  model:training(true)   -- the scorer turns dropout off and restores the flag

  local expected
  setup(function()
    model:evaluate()
    expected = bert.no_grad(function()
      local e = {}
      for i, s in ipairs(SENTENCES) do e[i] = plain_pll(model, s) end
      return e
    end)
    model:training(true)
  end)

  it("matches one forward per masked copy, packed and padded, in one batch or many", function()
    for _, o in ipairs({{}, {varlen = false}, {batch_tokens = 40}}) do
      local scores, stats = lm.scorer(model, tok, o)(SENTENCES)
      near(expected, scores)
      assert.equals(0, scores[5])
      local n = 0
      for _, s in ipairs(SENTENCES) do n = n + #select(2, encoding(s)) end
      assert.equals(n, stats.scored_tokens)
      assert.equals(n, stats.rows)
      if o.batch_tokens then assert.is_true(stats.batches > 3) end
    end
    assert.is_true(model.is_training)
  end)

  it("scores a sentence longer than max_length in windows, each token once", function()
    local s = SENTENCES[4]
    local n = #select(2, encoding(s))
    assert.is_true(n > 14)
    local W, K = 6, 3
    local ids, pos = encoding(s)
    local content = {}
    for i, p in ipairs(pos) do content[i] = ids[p] end
    -- token j: in the block of K holding it, the W-token window centred on the block
    local plain = bert.no_grad(function()
      model:evaluate()
      local total = 0
      for j = 1, n do
        local b = ((j - 1) // K) * K + 1
        local lo = math.max(1, math.min(b - (W - K) // 2, n - W + 1))
        local row = {ids[1]}
        for i = lo, lo + W - 1 do row[#row + 1] = i == j and tok:token_to_id("[MASK]") or content[i] end
        row[#row + 1] = ids[#ids]
        local lp = log_probs(model:forward{input_ids = bert.tensor({row}, "int32")}.logits)
        total = total + lp:get(1, j - lo + 2, content[j] + 1)
      end
      model:training(true)
      return total
    end)
    local scores, stats = lm.scorer(model, tok, {max_length = 8, stride = K})({s})
    assert.equals(n, stats.scored_tokens)
    near({plain}, scores)
    -- a window as long as the sentence is no window at all
    near({expected[4]}, (lm.scorer(model, tok, {max_length = n + 2})({s})))
  end)

  it("refuses what it cannot score", function()
    assert.has_error(function() lm.scorer(model, tok, {max_length = 2})({"the food"}) end,
      "lm.scorer: max_length 2 leaves no room for a token beside the template's 2 specials")
    assert.has_error(function() lm.scorer(model, tok, {max_length = 64}) end,
      "lm.scorer: opts.max_length 64 exceeds the model's 32 positions")
    assert.has_error(function() lm.scorer(model, tok, {kind = "clm"}) end,
      "lm.scorer: opts.kind must be masked, causal or bilm, got 'clm'")
    local cls = bert.model("BertForSequenceClassification", config({num_labels = 2}))
    assert.has_error(function() lm.scorer(cls, tok) end,
      "lm.scorer: BertForSequenceClassification (a sequence_classification head) has no language-model head")
    assert.has_error(function() lm.scorer(model, tok)({"a", 3}) end, "lm.scorer: sentence 2 is a number, not a string")
  end)
end)

describe("evaluate.lm causal log-likelihood", function()
  bert.manual_seed(2)
  local model = bert.model("BertLMHeadModel", config({is_decoder = true}))
  model:evaluate()

  it("matches a full forward per sentence", function()
    local expected = bert.no_grad(function()
      local e = {}
      for i, s in ipairs(SENTENCES) do e[i] = plain_causal(model, s) end
      return e
    end)
    local scorer, info = lm.scorer(model, tok)
    assert.equals("causal", info.kind)
    local scores, stats = scorer(SENTENCES)
    near(expected, scores)
    assert.equals(#SENTENCES - 1, stats.rows)   -- the empty sentence runs nothing
  end)

  it("slides a window over a long sentence: token j sees the W - K tokens before its block", function()
    local s = SENTENCES[4]
    local ids, pos = encoding(s)
    local n, W, K = #pos, 6, 2                  -- max_length 8: 6 tokens between [CLS] and [SEP]
    local content = {}
    for i, p in ipairs(pos) do content[i] = ids[p] end
    local CLS, SEP = ids[1], ids[#ids]
    local expected = bert.no_grad(function()
      local total = 0
      for j = 1, n do
        local e = j <= W and W or math.min(n, W + ((j - W - 1) // K + 1) * K)
        local lo = math.max(1, e - W + 1)
        local row = {CLS}
        for i = lo, e do row[#row + 1] = content[i] end
        row[#row + 1] = SEP
        local lp = log_probs(model:forward{input_ids = bert.tensor({row}, "int32")}.logits)
        total = total + lp:get(1, j - lo + 1, content[j] + 1)   -- row position of j is j - lo + 2
      end
      return total
    end)
    local scores, stats = lm.scorer(model, tok, {max_length = 8, stride = K})({s})
    near({expected}, scores)
    assert.equals(n, stats.scored_tokens)
  end)
end)

describe("evaluate.lm biLM", function()
  bert.manual_seed(3)
  local model = bert.model("BiLMLMHeadModel", config({model_type = "bilm", is_decoder = true}))
  model:evaluate()

  it("sums the two directions' log-likelihoods", function()
    local sum, fwd, bwd = {}, {}, {}
    bert.no_grad(function()
      for i, s in ipairs(SENTENCES) do sum[i], fwd[i], bwd[i] = plain_bilm(model, s) end
    end)
    local scorer, info = lm.scorer(model, tok)
    assert.equals("bilm", info.kind)
    local scores, stats = scorer(SENTENCES)
    near(sum, scores)
    near(fwd, stats.forward)
    near(bwd, stats.backward)
  end)

  it("windows each direction over a long sentence, every token once per direction", function()
    local s = SENTENCES[4]
    local n = #select(2, encoding(s))
    local W, K = 6, 2
    local ids, pos = encoding(s)
    local content = {}
    for i, p in ipairs(pos) do content[i] = ids[p] end
    local CLS, SEP = ids[1], ids[#ids]
    local function run(lo, hi)
      local row = {CLS}
      for i = lo, hi do row[#row + 1] = content[i] end
      row[#row + 1] = SEP
      local out = model:forward{input_ids = bert.tensor({row}, "int32")}
      return log_probs(out.logits), log_probs(out.backward_logits)
    end
    local fwd, bwd = bert.no_grad(function()
      local tf, tb = 0, 0
      for j = 1, n do
        -- left to right: as the causal window; right to left: its mirror from the end
        local e = j <= W and W or math.min(n, W + ((j - W - 1) // K + 1) * K)
        local lo = math.max(1, e - W + 1)
        tf = tf + run(lo, e):get(1, j - lo + 1, content[j] + 1)
        local s2 = n - W + 1
        if j < s2 then s2 = math.max(1, n - W - ((n - W - j) // K + 1) * K + 1) end
        local hi = math.min(n, s2 + W - 1)
        local _, b = run(s2, hi)
        tb = tb + b:get(1, j - s2 + 3, content[j] + 1)   -- row position of j is j - s2 + 2
      end
      return tf, tb
    end)
    local scores, stats = lm.scorer(model, tok, {max_length = 8, stride = K})({s})
    assert.equals(2 * n, stats.scored_tokens)
    near({fwd}, stats.forward)
    near({bwd}, stats.backward)
    near({fwd + bwd}, scores)
  end)

  it("gives bits per byte as the mean of the directions", function()
    local dir = tmpdir()
    local path = dir .. "/text.txt"
    write(path, SENTENCES[1] .. "\n" .. SENTENCES[3] .. "\n")
    local _, f1, b1 = bert.no_grad(plain_bilm, model, SENTENCES[1])
    local _, f3, b3 = bert.no_grad(plain_bilm, model, SENTENCES[3])
    local bytes = #SENTENCES[1] + #SENTENCES[3]
    local r = lm.bits_per_byte(model, tok, path)
    assert.near(-(f1 + b1 + f3 + b3) / 2 / math.log(2) / bytes, r.bits_per_byte, 1e-4)
    -- a scorer function reports its kind: the same halving
    assert.near(r.bits_per_byte, lm.bits_per_byte(lm.scorer(model, tok), nil, path).bits_per_byte, 1e-9)
    assert.near(-(f1 + f3) / math.log(2) / bytes, r.forward_bits_per_byte, 1e-4)
    assert.near(-(b1 + b3) / math.log(2) / bytes, r.backward_bits_per_byte, 1e-4)
    rm(dir)
  end)
end)

describe("evaluate.lm bits per byte", function()
  bert.manual_seed(4)
  local model = bert.model("BertLMHeadModel", config({is_decoder = true}))
  model:evaluate()
  local dir
  setup(function() dir = tmpdir() end)
  teardown(function() rm(dir) end)

  it("divides the summed -log2 P by the sentences' UTF-8 bytes (no separators)", function()
    local path = dir .. "/two.txt"
    -- two documents of one sentence each; outer spaces are not text
    write(path, "  " .. SENTENCES[1] .. "  \n\n" .. SENTENCES[2] .. "\n")
    local l1 = bert.no_grad(plain_causal, model, SENTENCES[1])
    local l2 = bert.no_grad(plain_causal, model, SENTENCES[2])
    local bytes = #SENTENCES[1] + #SENTENCES[2]
    local r = lm.bits_per_byte(model, tok, path)
    assert.equals(bytes, r.bytes)
    assert.equals(2, r.sentences)
    assert.equals(2, r.documents)
    assert.equals("causal", r.kind)
    assert.near(-(l1 + l2) / math.log(2) / bytes, r.bits_per_byte, 1e-5)
    assert.near(-(l1 + l2), r.nll, 1e-4)
    -- capped: the first sentence only, by count or by bytes
    for _, o in ipairs({{max_sentences = 1}, {max_bytes = 5}}) do
      local one = lm.bits_per_byte(model, tok, path, o)
      assert.equals(#SENTENCES[1], one.bytes)
      assert.near(-l1 / math.log(2) / #SENTENCES[1], one.bits_per_byte, 1e-5)
    end
    -- a scoring function in place of the model
    local fake = function(list)
      local out = {}
      for i, s in ipairs(list) do out[i] = -#s * math.log(2) end   -- one bit per byte
      return out
    end
    assert.near(1, lm.bits_per_byte(fake, nil, path).bits_per_byte, 1e-12)
  end)

  it("names a missing or empty file", function()
    assert.has_error(function() lm.bits_per_byte(model, tok, dir .. "/none.txt") end)
    local ok, err = pcall(lm.bits_per_byte, model, tok, dir .. "/none.txt")
    assert.is_false(ok)
    assert.truthy(err:find("lm.bits_per_byte: cannot read " .. dir .. "/none.txt", 1, true))
    write(dir .. "/empty.txt", "\n\n")
    assert.has_error(function() lm.bits_per_byte(model, tok, dir .. "/empty.txt") end,
      "lm.bits_per_byte: " .. dir .. "/empty.txt holds no text to score")
  end)
end)

describe("evaluate.lm load", function()
  local dir
  setup(function() dir = tmpdir() end)
  teardown(function() rm(dir) end)
  local model_dir = require("bert.model_dir")

  it("detects the kind from the checkpoint and loads its tokenizer", function()
    bert.manual_seed(5)
    local m = bert.model("BertForPreTraining", config())
    assert(model_dir.save(dir .. "/pre", m, tok))
    local model, t, info = lm.load(dir .. "/pre")
    assert.equals("masked", info.kind)
    assert.equals("BertForPreTraining", info.architecture)
    assert.equals(tok:vocab_size(), t:vocab_size())
    assert.is_false(model.is_training)
    -- the pretraining head's logits: the same PLL as the plain loop on its MLM
    local s = SENTENCES[1]
    local ids, pos = encoding(s)
    local expected = bert.no_grad(function()
      local total = 0
      for _, p in ipairs(pos) do
        local copy = table.move(ids, 1, #ids, 1, {})
        copy[p] = tok:token_to_id("[MASK]")
        local out = model:forward{input_ids = bert.tensor({copy}, "int32")}
        total = total + log_probs(out.prediction_logits):get(1, p, ids[p] + 1)
      end
      return total
    end)
    near({expected}, (lm.scorer(model, t)({s})))
  end)

  it("scores an ELECTRA run with its generator, and refuses a discriminator alone", function()
    local c = config({model_type = "electra", embedding_size = 16})
    local disc = bert.model("ElectraForPreTraining", c)
    assert(model_dir.save(dir .. "/electra", disc, tok))
    local ok, err = pcall(lm.load, dir .. "/electra")
    assert.is_false(ok)
    assert.truthy(err:find("ElectraForPreTraining is a replaced-token-detection discriminator", 1, true))
    local gen = bert.model("ElectraForMaskedLM", config({model_type = "electra", embedding_size = 16, hidden_size = 8,
                                                          num_attention_heads = 1, intermediate_size = 16}))
    assert(model_dir.save(dir .. "/electra/generator", gen, tok))
    local model, _, info = lm.load(dir .. "/electra")
    assert.is_true(info.generator)
    assert.equals("masked", info.kind)
    assert.equals("ElectraForMaskedLM", info.architecture)
    assert.equals("ElectraForMaskedLM", model.class_name)
  end)

  it("loads a left-to-right run as causal, or as a masked LM when told", function()
    local m = bert.model("BertLMHeadModel", config({is_decoder = true}))
    assert(model_dir.save(dir .. "/clm", m, tok))
    local model, _, info = lm.load(dir .. "/clm")
    assert.equals("causal", info.kind)
    assert.equals("BertLMHeadModel", model.class_name)
    model, _, info = lm.load(dir .. "/clm", {kind = "masked"})
    assert.equals("masked", info.kind)
    assert.equals("BertForMaskedLM", model.class_name)
    assert.is_false(model.config.is_decoder == true)
    assert.has_error(function() lm.load(dir .. "/clm", {kind = "bilm"}) end,
      "lm.load: " .. dir .. "/clm is a causal model (BertLMHeadModel); kind 'bilm' needs the bilm family's checkpoint")
  end)

  it("names what is missing", function()
    assert.has_error(function() lm.load(dir .. "/nothing") end,
      "lm.load: " .. dir .. "/nothing holds no config.json (nor best/ or checkpoint/)")
    assert.has_error(function() lm.load(dir, {kind = "gpt"}) end,
      "lm.load: opts.kind must be masked, causal or bilm, got 'gpt'")
  end)
end)

describe("evaluate.blimp", function()
  local dir
  -- paradigm -> {term, pairs {good, bad}}; the fake scorer's score is -#sentence
  -- (shorter is better), so each pair's verdict is known
  local PARADIGMS = {
    p_one = {"agreement", {{"a b", "a b c"}, {"x", "xy"}, {"same", "samf"}, {"long one", "short"}}},
    p_two = {"agreement", {{"ok", "not ok"}, {"no good", "fine"}}},
    p_three = {"s-selection", {{"q", "qq"}, {"q", "qqq"}, {"r r r", "r"}}},   -- "islands" in the summary
  }
  setup(function()
    dir = tmpdir()
    assert(bert.mkdir(dir .. "/data"))
    local cjson = require("cjson")
    for uid, p in pairs(PARADIGMS) do
      local lines = {}
      for i, pair in ipairs(p[2]) do
        lines[i] = cjson.encode({sentence_good = pair[1], sentence_bad = pair[2], field = "syntax",
                                 linguistics_term = p[1], UID = uid, pairID = tostring(i - 1)})
      end
      write(dir .. "/data/" .. uid .. ".jsonl", table.concat(lines, "\n") .. "\n")
    end
    write(dir .. "/data/README.txt", "not a paradigm\n")
    write(dir .. "/models_summary.jsonl", table.concat({
      '{"UID":"p_one","linguistics_term":"agreement","ngram":0.5,"lstm":0.6,"txl":0.7,"gpt2":0.8}',
      '{"UID":"p_two","linguistics_term":"agreement","ngram":0.4,"lstm":0.5,"txl":0.6,"gpt2":0.9}',
      '{"UID":"p_three","linguistics_term":"islands","ngram":0.3,"lstm":0.3,"txl":0.3,"gpt2":0.3}',
      '{"UID":"overall","linguistics_term":"agreement","ngram":0.45,"lstm":0.55,"txl":0.65,"gpt2":0.85}',
      '{"UID":"overall","linguistics_term":"islands","ngram":0.3,"lstm":0.3,"txl":0.3,"gpt2":0.3}',
      '{"UID":"overall","linguistics_term":"overall","ngram":0.4,"lstm":0.47,"txl":0.53,"gpt2":0.67}',
    }, "\n") .. "\n")
  end)
  teardown(function() rm(dir) end)

  local calls
  local function fake(list)
    calls[#calls + 1] = list
    local out = {}
    for i, s in ipairs(list) do out[i] = -#s end
    return out, {encoder_tokens = #list}
  end

  it("counts a pair right only when good scores strictly higher (ties wrong), and aggregates as the paper", function()
    calls = {}
    local r = blimp.run(fake, nil, {dir = dir})
    -- p_one: right, right, tie (wrong), wrong -> 2/4; p_two: right, wrong -> 1/2; p_three: 2/3
    local by = {}
    for _, p in ipairs(r.paradigms) do by[p.uid] = p end
    assert.same({"p_one", "p_three", "p_two"}, {r.paradigms[1].uid, r.paradigms[2].uid, r.paradigms[3].uid})
    assert.equals(2, by.p_one.right)
    assert.equals(0.5, by.p_one.accuracy)
    assert.equals(0.5, by.p_two.accuracy)
    assert.near(2 / 3, by.p_three.accuracy, 1e-12)
    assert.equals(9, r.n_pairs)
    assert.equals(3, r.n_paradigms)
    assert.near((0.5 + 0.5 + 2 / 3) / 3, r.overall, 1e-12)   -- mean over paradigms
    assert.near(5 / 9, r.pooled, 1e-12)                       -- over pairs
    assert.equals("agreement", r.phenomena[1].term)
    assert.equals(0.5, r.phenomena[1].accuracy)              -- mean of its paradigms' accuracies
    assert.equals(6, r.phenomena[1].pairs)
    assert.equals(2, r.phenomena[1].paradigms)
    assert.equals(0.9, by.p_two.paper.gpt2)
    assert.equals(0.85, r.phenomena[1].paper.gpt2)
    assert.equals(0.67, r.paper.overall.gpt2)
    -- grouped as the paper's summary groups it, not as its file says
    assert.same({"agreement", "islands"}, {r.phenomena[1].term, r.phenomena[2].term})
    assert.equals("s-selection", by.p_three.file_term)
    assert.near(2 / 3, r.phenomena[2].accuracy, 1e-12)
    assert.equals("s-selection", blimp.run(fake, nil, {dir = dir, summary = false}).phenomena[2].term)
    -- "q" appears in two pairs and is scored once
    assert.equals(17, #calls[1])
    assert.equals(17, r.sentences)
    local md = blimp.markdown(r)
    assert.truthy(md:find("| overall | 9 | 55.6 | 40.0 | 47.0 | 53.0 | 67.0 |", 1, true))
    assert.truthy(md:find("| agreement | 6 | 50.0 | 45.0 | 55.0 | 65.0 | 85.0 |", 1, true))
    assert.truthy(md:find("| p_three | 3 | 66.7 | 30.0 | 30.0 | 30.0 | 30.0 |", 1, true))
  end)

  it("takes the first N pairs of each paradigm, a list of paradigms, in chunks, without the paper", function()
    calls = {}
    local seen = {}
    local r = blimp.run(fake, nil, {dir = dir, pairs = 1, paradigms = {"p_two", "p_one"}, summary = false, chunk = 3,
                                    progress = function(done, total) seen[#seen + 1] = done .. "/" .. total end})
    assert.equals(2, r.n_pairs)
    assert.equals(1, r.overall)
    assert.is_nil(r.paper.overall)
    assert.same({"3/4", "4/4"}, seen)
    assert.truthy(blimp.markdown(r):find("| p_two | 1 | 100.0 | – | – | – | – |", 1, true))
  end)

  it("scores with a model and its tokenizer", function()
    bert.manual_seed(6)
    local model = bert.model("BertLMHeadModel", config({is_decoder = true}))
    local r = blimp.run(model, tok, {dir = dir, pairs = 2})
    assert.equals("causal", r.kind)
    assert.equals(6, r.n_pairs)
    assert.is_true(r.overall >= 0 and r.overall <= 1)
  end)

  it("names the file and the line of a bad or missing file", function()
    local function fails(fn, msg)
      local ok, err = pcall(fn)
      assert.is_false(ok)
      assert.truthy(tostring(err):find(msg, 1, true), tostring(err))
    end
    fails(function() blimp.run(fake, nil, {dir = dir .. "/none", summary = false}) end,
      "blimp.read: cannot list " .. dir .. "/none/data")
    fails(function() blimp.run(fake, nil, {dir = dir .. "/none"}) end,
      "blimp.read_summary: cannot read " .. dir .. "/none/models_summary.jsonl")
    fails(function() blimp.run(fake, nil, {dir = dir, paradigms = {"p_four"}}) end,
      "blimp.read: no file " .. dir .. "/data/p_four.jsonl for paradigm 'p_four'")
    local bad = dir .. "/bad.jsonl"
    write(bad, '{"sentence_good": "a", "sentence_bad": "b", "UID": "u", "linguistics_term": "t"}\n{"sentence_good": "a"\n')
    fails(function() blimp.read_paradigm(bad) end, "blimp.read_paradigm: " .. bad .. ":2: invalid JSON")
    write(bad, '{"sentence_good": "a", "sentence_bad": "b", "UID": "u", "linguistics_term": "t"}\n\n' ..
      '{"sentence_good": "a", "UID": "u", "linguistics_term": "t"}\n')
    fails(function() blimp.read_paradigm(bad) end,
      "blimp.read_paradigm: " .. bad .. ":3: field 'sentence_bad' must be a string, got nothing")
    write(bad, '{"sentence_good": "a", "sentence_bad": "b", "UID": "u", "linguistics_term": "t"}\n' ..
      '{"sentence_good": "a", "sentence_bad": "b", "UID": "v", "linguistics_term": "t"}\n')
    fails(function() blimp.read_paradigm(bad) end, "blimp.read_paradigm: " .. bad .. ":2: UID/linguistics_term")
    write(bad, "\n")
    fails(function() blimp.read_paradigm(bad) end, "blimp.read_paradigm: " .. bad .. " holds no pairs")
    write(bad, '{"UID":"u","linguistics_term":"t","ngram":0.5,"lstm":"x","txl":0.7,"gpt2":0.8}\n')
    fails(function() blimp.read_summary(bad) end, "blimp.read_summary: " .. bad .. ":1: field 'lstm' must be a number")
    fails(function() blimp.evaluate(function() return {1} end, blimp.read(dir)) end,
      "blimp.evaluate: the scorer returned 1 values for 17 sentences")
  end)
end)
