local bert = require("bert")
local finetune = require("bert.finetune")
local metrics = require("bert.finetune.metrics")
local readers = require("bert.finetune.readers")
local qa = require("bert.finetune.qa")
local tagging = require("bert.finetune.tagging")
local classify = require("bert.finetune.classify")
local util = require("bert.finetune.util")

local FIX = "spec/fixtures/finetune/"

local function near(a, b, tol) return math.abs(a - b) <= (tol or 1e-9) end

local function tokenizer()
  return assert(require("bert.tokenizer").load(FIX .. "vocab.txt"))
end

local function error_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

local tmpdir = require("spec.support.tmpdir").dir

describe("finetune.metrics: classification", function()
  it("accuracy, per-class and macro F1 match hand-computed values", function()
    local gold = {"a", "a", "b", "b", "c"}
    local pred = {"a", "b", "b", "b", "a"}
    assert.is_true(near(metrics.accuracy(pred, gold), 3 / 5))
    local macro, per = metrics.macro_f1(pred, gold)
    -- a: P 1/2 R 1/2 F 1/2; b: P 2/3 R 1 F 0.8; c: nothing right, F 0
    assert.is_true(near(per.a.f1, 0.5))
    assert.is_true(near(per.b.precision, 2 / 3))
    assert.is_true(near(per.b.f1, 0.8))
    assert.is_true(near(per.c.f1, 0))
    assert.is_true(near(macro, (0.5 + 0.8 + 0) / 3))
  end)

  it("builds and prints a confusion matrix (rows gold, columns predicted)", function()
    local cm = metrics.confusion({"ham", "spam", "spam", "ham"}, {"ham", "spam", "ham", "ham"}, {"ham", "spam"})
    assert.same({{2, 1}, {0, 1}}, cm.counts)
    local text = cm:format()
    assert.equals("gold\\pred  ham  spam\nham          2     1\nspam         0     1", text)
    assert.equals(text, tostring(cm))
  end)
end)

describe("finetune.metrics: entities the conlleval way", function()
  local function spans(tags, opts)
    local out = {}
    for _, c in ipairs(metrics.chunks(tags, opts)) do out[#out + 1] = table.concat(c, ":") end
    return out
  end

  it("reads IOB2 and IOB1 encodings of the same entities alike", function()
    local iob2 = {"B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC"}
    local iob1 = {"I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC"}
    assert.same({"PER:1:2", "LOC:4:4", "LOC:5:6"}, spans(iob2))
    assert.same({"PER:1:2", "LOC:4:4", "LOC:5:6"}, spans(iob1))
    assert.same(iob2, metrics.iob1_to_iob2(iob1))
  end)

  it("ends an entity at a type change, and opens one at a stray I- (not in strict IOB2)", function()
    assert.same({"PER:1:1", "LOC:2:2"}, spans({"B-PER", "I-LOC"}))
    assert.same({"ORG:2:3"}, spans({"O", "I-ORG", "I-ORG"}))
    assert.same({}, spans({"O", "I-ORG", "I-ORG"}, {strict = true}))
    assert.same({"ORG:2:3"}, spans({"O", "B-ORG", "I-ORG"}, {strict = true}))
    -- IOB1: consecutive I- of one type are one entity; B- splits them
    assert.same({"PER:1:2", "PER:3:3"}, spans({"I-PER", "I-PER", "B-PER"}))
    -- IOBES
    assert.same({"PER:1:3", "LOC:4:4"}, spans({"B-PER", "I-PER", "E-PER", "S-LOC"}))
  end)

  it("scores exact (type, start, end) matches, micro-averaged", function()
    local gold = {{"B-PER", "I-PER", "O", "B-LOC"}, {"B-ORG", "O"}}
    -- PER right, LOC with the wrong type, ORG too long, an extra MISC
    local pred = {{"B-PER", "I-PER", "O", "B-ORG"}, {"B-ORG", "I-ORG"}}
    local r = metrics.entity_scores(pred, gold)
    assert.equals(3, r.gold)
    assert.equals(3, r.found)
    assert.equals(1, r.correct)
    assert.is_true(near(r.precision, 1 / 3))
    assert.is_true(near(r.recall, 1 / 3))
    assert.is_true(near(r.f1, 1 / 3))
    assert.is_true(near(r.accuracy, 4 / 6))
    local r2 = metrics.entity_scores({{"B-PER", "I-PER", "O", "B-LOC", "B-MISC"}}, {{"B-PER", "I-PER", "O", "B-LOC", "O"}})
    -- 2 of 3 found are right, 2 of 2 gold found: P 2/3, R 1, F 0.8
    assert.is_true(near(r2.precision, 2 / 3))
    assert.is_true(near(r2.recall, 1))
    assert.is_true(near(r2.f1, 0.8))
    assert.is_true(near(r2.per_type.PER.f1, 1))
    assert.truthy(metrics.format_entity_scores(r2):find("found: 3 phrases; correct: 2", 1, true))
  end)
end)

describe("finetune.metrics: SQuAD", function()
  it("normalises answers as the official script does", function()
    assert.equals("eiffeltower", metrics.normalize_answer("The  Eiffel-Tower!"))
    assert.equals("apple day", metrics.normalize_answer("An apple a day."))
    assert.equals("theater", metrics.normalize_answer("Theater"))
    assert.equals("ab", metrics.normalize_answer("A.B."))
    assert.equals("ångström units", metrics.normalize_answer("ÅNGSTRÖM\tunits"))
    assert.equals("", metrics.normalize_answer("the a an ."))
    -- an article glued to a non-ASCII word character is not a whole word
    assert.equals("theé", metrics.normalize_answer("the\195\169"))
  end)

  it("computes exact match and token F1, the max over gold answers", function()
    assert.equals(1, metrics.exact_match("the Cat", "cat."))
    assert.is_true(near(metrics.squad_f1("the cat sat", "a cat sat down"), 0.8))
    assert.is_true(near(metrics.squad_f1("cat cat", "cat"), 2 * 0.5 * 1 / 1.5))
    assert.equals(0, metrics.squad_f1("dog", "cat"))
    local em, f1 = metrics.squad_scores("in Paris", {"Paris", "in Paris, France"})
    assert.equals(0, em)
    assert.is_true(near(f1, 0.8))   -- vs "in Paris, France": P 1, R 2/3
  end)

  it("handles v2.0 no-answer questions", function()
    assert.same({1, 1}, {metrics.squad_scores("", {})})
    assert.same({0, 0}, {metrics.squad_scores("Paris", {})})
    assert.same({0, 0}, {metrics.squad_scores("", {"Paris"})})
    local r = metrics.squad({a = "Paris", b = "", c = "x"},
      {{id = "a", answers = {{text = "Paris"}}}, {id = "b", answers = {}}, {id = "c", answers = {"y"}},
       {id = "d", answers = {"z"}}})
    assert.is_true(near(r.exact_match, 0.5))
    assert.is_true(near(r.f1, 0.5))
    assert.is_true(near(r.has_answer_exact, 1 / 3))
    assert.is_true(near(r.no_answer_exact, 1))
  end)
end)

describe("finetune.readers", function()
  it("reads GLUE-style TSV pairs, plain TSV and JSONL", function()
    local ex = readers.read_classification(FIX .. "classify/train.tsv")
    assert.equals(32, #ex)
    assert.is_string(ex[1].text)
    assert.is_string(ex[1].text_pair)
    assert.equals(2, ex[1].line)
    local plain = readers.read_classification(FIX .. "classify/plain.tsv")
    assert.same({text = "the food was bad .", label = "neg", line = 2}, plain[2])
    local j = readers.read_classification(FIX .. "classify/pairs.jsonl")
    assert.equals("it was late .", j[2].text_pair)
    assert.equals("1", j[3].label)
  end)

  it("names the file and line of a label outside the label set", function()
    local err = error_of(readers.read_classification, FIX .. "classify/bad_label.tsv", {labels = {"neg", "pos"}})
    assert.equals(FIX .. "classify/bad_label.tsv:3: label 'maybe' is not in the label set {neg, pos}", err)
  end)

  it("names the file and line of a broken JSON line", function()
    local err = error_of(readers.read_classification, FIX .. "classify/broken.jsonl")
    assert.truthy(err:find("^" .. (FIX .. "classify/broken.jsonl:3: invalid JSON"):gsub("%p", "%%%0")), err)
  end)

  it("reads CoNLL columns, skipping -DOCSTART-, and names a bad line", function()
    local s = readers.read_conll(FIX .. "ner_iob2.conll")
    assert.equals(3, #s)
    assert.same({"Marie", "Curie", "was", "born", "in", "Warsaw", "."}, s[1].words)
    assert.same({"B-PER", "I-PER", "O", "O", "O", "B-LOC", "O"}, s[1].tags)
    assert.equals(3, s[1].line)
    local err = error_of(readers.read_conll, FIX .. "bad.conll")
    assert.equals(FIX .. "bad.conll:5: expected 'word ... tag' (at least 2 columns), got 'born'", err)
    err = error_of(readers.read_conll, FIX .. "ner_iob2.conll", {labels = {"O", "B-PER", "I-PER", "B-LOC"}})
    assert.truthy(err:find("ner_iob2.conll:21: label 'B-MISC' is not in the label set", 1, true), err)
  end)

  it("reads SQuAD v2.0 and checks every answer_start against its context", function()
    local ex, version = readers.read_squad(FIX .. "squad_v2.json")
    assert.equals("v2.0", version)
    assert.equals(6, #ex)
    assert.equals("polonium and radium", ex[4].answers[1].text)
    assert.is_true(ex[6].is_impossible)
    local err = error_of(readers.read_squad, FIX .. "squad_bad_offset.json")
    assert.equals(FIX .. "squad_bad_offset.json:7: question 'bad-offset': answer 'Eiffel Tower' at answer_start 3 " ..
      "does not match its context (found ' Eiffel Towe')", err)
    err = error_of(readers.read_squad, FIX .. "squad_outside.json")
    assert.truthy(err:find("squad_outside.json:2: question 'far': answer 'text' at answer_start 40 lies outside its context", 1, true), err)
    err = error_of(readers.read_squad, FIX .. "squad_broken.json")
    assert.truthy(err:find("squad_broken.json:4: invalid JSON", 1, true), err)
  end)
end)

describe("finetune.tagging: labels on first sub-tokens", function()
  it("labels the first sub-token of each word and ignores the rest", function()
    local tok = tokenizer()
    local labels = {"O", "B-PER", "I-PER"}
    local f = tagging.encode(tok, {{words = {"Marie", "unbelievably", "won", "."}, tags = {"B-PER", "O", "O", "O"}}},
      {max_length = 16, labels = labels})[1]
    local toks = {}
    for i, id in ipairs(f.ids) do toks[i] = tok:id_to_token(id) end
    assert.same({"[CLS]", "marie", "un", "##bel", "##iev", "##ably", "won", ".", "[SEP]"}, toks)
    assert.same({-100, 1, 0, -100, -100, -100, 0, 0, -100}, f.labels)
    assert.same({2, 3, 7, 8}, f.first)
  end)

  it("aligns SentencePiece pieces whose offsets start at the space before their word", function()
    -- "hello world" as a Unigram tokenizer encodes it: [CLS] ▁hello ▁world ▁wor ld
    local starts, stops = tagging.word_spans({"hello", "world", "world"})
    local enc = {ids = {1, 2, 3, 4, 5}, offsets = {{0, 0}, {0, 5}, {5, 11}, {11, 15}, {15, 17}},
                 special_tokens_mask = {1, 0, 0, 0, 0}}
    local first, owner = tagging.align(enc, starts, stops)
    assert.same({2, 3, 4}, first)
    assert.same({[2] = 1, [3] = 2, [4] = 3, [5] = 3}, owner)
  end)

  it("gives words cut by max_length no position (the fallback tag at prediction)", function()
    local tok = tokenizer()
    local f = tagging.encode(tok, {{words = {"Marie", "unbelievably", "won", "."}, tags = {"B-PER", "O", "O", "O"}}},
      {max_length = 5, labels = {"O", "B-PER"}})[1]
    assert.same({2, 3}, {f.first[1], f.first[2]})
    assert.is_nil(f.first[3])
    assert.is_nil(f.first[4])
    assert.equals(0, tagging.fallback({"O", "B-PER"}))
    assert.equals(1, tagging.fallback({"nn", "vb"}, {nn = 1, vb = 5}))
  end)
end)

describe("finetune.qa: windows, offsets and post-processing", function()
  local tok, examples, feats
  local OPTS = {max_length = 24, doc_stride = 2}

  setup(function()
    tok = tokenizer()
    examples = readers.read_squad(FIX .. "squad_v2.json")
    feats = qa.encode(tok, examples, OPTS)
  end)

  local function windows_of(id)
    local out = {}
    for _, f in ipairs(feats) do if examples[f.example].id == id then out[#out + 1] = f end end
    return out
  end

  it("slides windows over a long context with the given overlap", function()
    local w = windows_of("curie-discovered")
    assert.equals(4, #w)
    local function context_tokens(f)
      local t = {}
      for i = f.context_first, f.context_last do t[#t + 1] = tok:id_to_token(f.ids[i]) end
      return t
    end
    -- 24 - 5 (question) - 3 = 16 context tokens per window, 2 shared with the next
    local w1, w2 = context_tokens(w[1]), context_tokens(w[2])
    assert.equals(16, #w1)
    assert.same({w1[15], w1[16]}, {w2[1], w2[2]})
    assert.equals("polonium", w2[16])
    assert.equals(2, #windows_of("eiffel-when"))
  end)

  it("labels the window holding the whole answer, [CLS] elsewhere (an answer across a window edge)", function()
    local w = windows_of("curie-discovered")
    -- window 2 ends inside "polonium and radium": both targets at [CLS]
    assert.same({0, 0}, {w[2].start_position, w[2].end_position})
    -- window 3: [CLS] what did she discover ? [SEP] discovered polonium and radium ...
    assert.same({8, 10}, {w[3].start_position, w[3].end_position})
    assert.same({0, 0}, {w[1].start_position, w[1].end_position})
    for _, f in ipairs(windows_of("curie-pierre-died")) do
      assert.same({0, 0}, {f.start_position, f.end_position})
    end
    local e = windows_of("eiffel-where")[1]
    assert.same({13, 13}, {e.start_position, e.end_position})
    -- offsets map the tokens back to characters of the context
    assert.same({23, 28}, {e.char_offsets[27], e.char_offsets[28]})
  end)

  it("keeps windows compact: flat character offsets, none in training windows", function()
    -- every garbage collection walks the features: no table per token
    for _, f in ipairs(feats) do
      for k, v in pairs(f) do
        if type(v) == "table" then
          for _, x in pairs(v) do assert.are_not.equal("table", type(x), k) end
        end
      end
      assert.equals(2 * #f.ids, #f.char_offsets)
    end
    local train = qa.encode(tok, examples, {max_length = 24, doc_stride = 2, training = true})
    assert.equals(#feats, #train)
    for k, f in ipairs(train) do
      assert.is_nil(f.char_offsets)
      assert.same({feats[k].ids, feats[k].start_position, feats[k].end_position, feats[k].context_first},
        {f.ids, f.start_position, f.end_position, f.context_first})
    end
  end)

  -- hand-made logits: zeros, with chosen start/end positions raised
  local function logits_for(plan)
    local S, E = {}, {}
    local count = {}
    for k, f in ipairs(feats) do
      local id = examples[f.example].id
      count[id] = (count[id] or 0) + 1
      local s, e = {}, {}
      for i = 1, #f.ids do s[i], e[i] = 0, 0 end
      for _, p in ipairs(plan[id] or {}) do
        if p.window == count[id] then
          if p.start then s[p.start + 1] = p.value end
          if p.stop then e[p.stop + 1] = p.value end
        end
      end
      S[k], E[k] = s, e
    end
    return S, E
  end

  local PLAN = {
    ["eiffel-where"] = {{window = 1, start = 13, stop = 13, value = 4}},          -- "Paris": exact
    ["eiffel-when"] = {{window = 1, start = 16, value = 5}, {window = 1, stop = 18, value = 5}}, -- "built in 1889"
    ["curie-born"] = {{window = 1, start = 13, value = 3}, {window = 1, stop = 15, value = 3}},  -- "Warsaw in 1867"
    ["curie-discovered"] = {
      {window = 2, start = 22, stop = 22, value = 3},                             -- "polonium" (6)
      {window = 3, start = 8, value = 4}, {window = 3, stop = 10, value = 4},     -- "polonium and radium" (8)
    },
    ["curie-died"] = {{window = 4, start = 19, stop = 19, value = 2}},            -- "1934"
    ["curie-pierre-died"] = {
      {window = 1, start = 0, stop = 0, value = 3}, {window = 2, start = 0, stop = 0, value = 3},
      {window = 3, start = 0, stop = 0, value = 3}, {window = 4, start = 0, stop = 0, value = 3},
      {window = 5, start = 0, stop = 0, value = 3},
      {window = 3, start = 11, value = 1}, {window = 3, stop = 13, value = 1},     -- a distractor (2)
    },
  }

  it("finds the best span over windows and maps it to characters of the context", function()
    local S, E = logits_for(PLAN)
    local preds, det = qa.postprocess(examples, feats, S, E, {version_2 = true})
    assert.equals("Paris", preds["eiffel-where"])
    assert.equals("built in 1889", preds["eiffel-when"])
    assert.equals("Warsaw in 1867", preds["curie-born"])
    assert.equals("polonium and radium", preds["curie-discovered"])
    local best = det["curie-discovered"].nbest[1]
    assert.same({154, 173, 8}, {best.start, best.stop, best.score})
    assert.equals("polonium", det["curie-discovered"].nbest[2].text)
    assert.equals("1934", preds["curie-died"])
    -- null = min over windows of start[CLS] + end[CLS] = 6 > best span 2: no answer
    assert.equals("", preds["curie-pierre-died"])
    assert.equals(6, det["curie-pierre-died"].null_score)
    assert.equals("polonium and radium", det["curie-pierre-died"].best_text)
    local total = 0
    for _, c in ipairs(det["curie-discovered"].nbest) do total = total + c.probability end
    assert.is_true(near(total, 1, 1e-9))
  end)

  it("gives the hand-computed exact match and F1 (v2.0 and v1.1 readings)", function()
    local S, E = logits_for(PLAN)
    local preds = qa.postprocess(examples, feats, S, E, {version_2 = true})
    local r = metrics.squad(preds, examples)
    -- EM: Paris 1, built in 1889 0, Warsaw in 1867 0, polonium and radium 1, 1934 1, "" 1
    -- F1: 1, 1/3 precision of "1889" -> 0.5, 0.5, 1, 1, 1
    assert.is_true(near(r.exact_match, 4 / 6, 1e-9))
    assert.is_true(near(r.f1, 5 / 6, 1e-9))
    -- v1.1: the unanswerable question gets the distractor and scores 0
    local p1 = qa.postprocess(examples, feats, S, E, {version_2 = false})
    local r1 = metrics.squad(p1, examples)
    assert.is_true(near(r1.exact_match, 3 / 6, 1e-9))
    assert.is_true(near(r1.f1, 4 / 6, 1e-9))
    -- a 2-token limit drops the 3-token span: "polonium" wins, F1 1/2 vs "polonium and radium"
    local p2 = qa.postprocess(examples, feats, S, E, {version_2 = true, max_answer_length = 2})
    assert.equals("polonium", p2["curie-discovered"])
    assert.is_true(near(metrics.squad(p2, examples).f1, 4.5 / 6, 1e-9))
    -- a high null threshold answers the unanswerable question after all
    local p3 = qa.postprocess(examples, feats, S, E, {version_2 = true, null_threshold = 5})
    assert.equals("polonium and radium", p3["curie-pierre-died"])
  end)

  it("tunes the null threshold on the dev set", function()
    local S, E = logits_for(PLAN)
    local _, det = qa.postprocess(examples, feats, S, E, {version_2 = true})
    local t, f1 = qa.best_threshold(examples, det)
    -- diffs (null - best): -8, -10, -6, -8, -4 and 4 (curie-pierre-died); only the last
    -- should abstain, so any threshold in [-4, 4) is best: the search returns -4
    assert.equals(-4, t)
    assert.is_true(near(f1, 5 / 6, 1e-9))
  end)
end)

describe("finetune.tasks and the synthetic QA generator", function()
  local tasks = require("bert.finetune.tasks")

  it("collapses Brown tags to their base tag", function()
    assert.equals("np$", tasks.brown_base_tag("np$-tl"))
    assert.equals("nn", tasks.brown_base_tag("fw-nn"))
    assert.equals("nn", tasks.brown_base_tag("NN-TL-HL"))
    assert.equals("--", tasks.brown_base_tag("---hl"))
    assert.equals("ppss+md", tasks.brown_base_tag("ppss+md"))
    assert.equals("md*", tasks.brown_base_tag("md*"))
  end)

  it("splits 80/10/10 with a fixed seed", function()
    local list = {}
    for i = 1, 50 do list[i] = i end
    local a, b, c = tasks.split(list)
    assert.same({40, 5, 5}, {#a, #b, #c})
    local a2 = tasks.split(list)
    assert.same(a, a2)
    local seen = {}
    for _, part in ipairs({a, b, c}) do for _, v in ipairs(part) do assert.is_nil(seen[v]) seen[v] = true end end
  end)

  it("qnli: GLUE's QNLI dev split 65/10/25 by question-and-sentence group, no text in two parts", function()
    local d = tmpdir()
    assert(bert.mkdir(d .. "/glue")) assert(bert.mkdir(d .. "/glue/QNLI"))
    local rows = {"index\tquestion\tsentence\tlabel"}
    -- 200 pairs: question i % 120 with sentence i % 90, so many pairs share a question or a sentence
    for i = 0, 199 do
      rows[#rows + 1] = string.format("%d\tWhy q%d ?\tThe sentence s%d .\t%s", i, i % 120, i % 90,
        i % 3 == 0 and "entailment" or "not_entailment")
    end
    local f = assert(io.open(d .. "/glue/QNLI/dev.tsv", "w"))
    f:write(table.concat(rows, "\n"), "\n")
    f:close()
    local t = tasks.load("qnli", {data_dir = d})
    assert.equals("classification", t.kind)
    assert.equals(200, #t.train + #t.dev + #t.test)
    local part_of = {}
    for _, part in ipairs({"train", "dev", "test"}) do
      for _, e in ipairs(t[part]) do
        for _, key in ipairs({"q:" .. e.text, "s:" .. e.text_pair}) do
          assert.is_true(part_of[key] == nil or part_of[key] == part, key .. " in " .. part .. " and " .. tostring(part_of[key]))
          part_of[key] = part
        end
      end
    end
    -- the groups (30 here: pair i joins q(i % 120) and s(i % 90)) are split, not the pairs
    assert.is_true(#t.test > 0 and #t.dev > 0 and #t.train > #t.test, string.format("%d/%d/%d", #t.train, #t.dev, #t.test))
    assert.same({"entailment", "not_entailment"}, t.labels)
    assert.matches("not the official dev score", t.note, 1, true)
    assert.same(t.test, tasks.load("qnli", {data_dir = d}).test)   -- a fixed split
  end)

  it("writes SQuAD JSON whose answers point into their contexts, marked synthetic", function()
    local gen = require("bert.finetune.synthetic_qa")
    local sentences = {
      {{"Marie", "np"}, {"Curie", "np"}, {"was", "bedz"}, {"born", "vbn"}, {"in", "in"}, {"Warsaw", "np"}, {".", "."}},
      {{"She", "pps"}, {"won", "vbd"}, {"the", "at"}, {"prize", "nn"}, {"in", "in"}, {"1903", "cd"}, {".", "."}},
      {{"The", "at"}, {"tower", "nn"}, {"was", "bedz"}, {"built", "vbn"}, {"in", "in"}, {"Paris", "np"}, {".", "."}},
    }
    local docs = {}
    for d = 1, 6 do docs[d] = {id = "d" .. d, sentences = sentences} end
    local set = gen.generate(docs, {version_2 = true, seed = 3, split = {{docs[1], docs[2], docs[3], docs[4]}, {docs[5]}, {docs[6]}},
      unanswerable_fraction = 0.5})
    assert.is_true(set.metadata.synthetic)
    local dir = tmpdir()
    gen.write(dir, set, {version_2 = true})
    local back, version = readers.read_squad(dir .. "/train.json")   -- validates every answer_start
    assert.equals("v2.0", version)
    assert.equals(#set.train, #back)
    local impossible = 0
    for _, ex in ipairs(back) do
      if ex.is_impossible then impossible = impossible + 1
      else assert.truthy(ex.question:find("what", 1, true)) end
    end
    assert.is_true(impossible > 0 and impossible < #back)
    local meta = util.decode_json(util.read_file(dir .. "/train.json")).metadata
    assert.is_true(meta.synthetic)
    assert.truthy(meta.description:find("SYNTHETIC", 1, true))
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)

describe("finetune.load_model's config overrides", function()
  it("are checked against the family's keys, Hugging Face's aliases translated, the task's labels kept", function()
    local tok = tokenizer()
    local m = finetune.load_model("tiny", {kind = "classification", labels = {"a", "b", "c"}, tokenizer = tok,
      config = {hidden_dropout_prob = 0.3, num_labels = 7}})
    assert.equals(0.3, m.config.hidden_dropout_prob)
    assert.equals(3, m.config.num_labels)   -- the task's label set wins
    -- DistilBERT calls it dropout: the BERT name is translated, not stored beside it unread
    local d = finetune.load_model("distilbert-tiny", {kind = "classification", labels = {"a", "b"}, tokenizer = tok,
      config = {hidden_dropout_prob = 0.2}})
    assert.equals(0.2, d.config.dropout)
    assert.is_nil(rawget(d.config, "hidden_dropout_prob"))
    -- DeBERTa's classifier dropout is cls_dropout; BERT's name for it is not DeBERTa's
    local err = error_of(finetune.load_model, "deberta-tiny", {kind = "classification", labels = {"a", "b"},
      tokenizer = tok, config = {classifier_dropout = 0.2}, config_source = "--config-overrides"})
    assert.matches("--config-overrides: 'classifier_dropout' is not a key of the deberta-v2 config", err, 1, true)
    err = error_of(finetune.load_model, "tiny", {kind = "classification", labels = {"a", "b"}, tokenizer = tok,
      config = {hiden_dropout_prob = 0.2}})
    assert.matches("load_model: opts.config: 'hiden_dropout_prob' is not a key of the bert config", err, 1, true)
    -- keys the models read though no size sets them: DeBERTa's legacy and embedding_size, is_decoder
    local lm = finetune.load_model("deberta-tiny", {kind = "classification", labels = {"a", "b"}, tokenizer = tok,
      config = {legacy = false, embedding_size = 24}})
    assert.is_false(lm.config.legacy)
    assert.equals(24, lm.config.embedding_size)
    local causal = finetune.load_model("tiny", {kind = "classification", labels = {"a", "b"}, tokenizer = tok,
      config = {is_decoder = true}})
    assert.is_true(causal.config.is_decoder)
  end)
end)

describe("finetune: end to end through the Trainer (tiny BERT, small vocabulary)", function()
  local experiment = require("bert.finetune.experiment")
  -- one thread: these models are so small that thread hand-offs cost more
  -- than they save (ten times more on a busy 2-core machine)
  local threads
  setup(function() threads = bert.get_num_threads() end)
  teardown(function() bert.set_num_threads(threads) end)

  local function run(kind, task, extra)
    local out = tmpdir()
    local args = {task = task, model = "tiny", tokenizer = FIX .. "vocab.txt", output = out, seq_len = 32,
      batch_size = 8, seed = 1, no_plot = true, quiet = true, log_every = 1, threads = 1}
    extra = extra or {}
    for i = 1, #extra, 2 do   -- command-line style pairs: "--doc-stride", "2"
      args[extra[i]:sub(3):gsub("%-", "_")] = tonumber(extra[i + 1]) or extra[i + 1]
    end
    local summary = experiment.run(kind, args)
    local rows = {}
    for line in io.lines(out .. "/metrics.jsonl") do rows[#rows + 1] = assert(util.decode_json(line)) end
    return summary, out, rows
  end

  local function losses(rows)
    local first, last
    for _, r in ipairs(rows) do
      if r.loss then first = first or r.loss last = r.loss end
    end
    return first, last
  end

  local function cleanup(dir) os.execute("rm -rf '" .. dir .. "'") end

  it("sequence classification: learns, writes summary.json, predicts", function()
    local summary, out, rows = run("classification", FIX .. "classify", {"--epochs", "6", "--lr", "2e-3"})
    local first, last = losses(rows)
    assert.is_true(last < first, string.format("loss %.3f -> %.3f", first, last))
    local s = assert(util.decode_json(util.read_file(out .. "/summary.json")))
    assert.is_number(s.accuracy)
    assert.is_number(s.macro_f1)
    assert.is_true(s.accuracy >= 0.75, "dev accuracy " .. s.accuracy)
    local evals = 0
    for _, r in ipairs(rows) do if r.eval then evals = evals + 1 end end
    assert.equals(6, evals)   -- one evaluation per epoch
    local p = finetune.pipeline(out)
    local r = p:predict{text = "the food was really bad .", text_pair = "we think so ."}
    assert.truthy(r.label == "pos" or r.label == "neg")
    assert.is_true(near(r.probabilities[1].p + r.probabilities[2].p, 1, 1e-5))
    assert.equals(summary.test.accuracy, s.accuracy)
    -- the same model through bert.pipeline, batched: the same answers
    local tc = bert.pipeline("text-classification", out)
    local both = tc({{text = "the food was really bad .", text_pair = "we think so ."}, {text = "great ."}})
    assert.equals(2, #both)
    assert.equals(r.label, both[1].label)
    assert.is_true(near(r.score, both[1].score, 1e-6))
    assert.has_error(function() bert.pipeline("token-classification", out) end)
    -- best/ is self-contained: the tokenizer files sit beside the weights
    for _, f in ipairs({"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                        "special_tokens_map.json"}) do
      assert.truthy(util.exists(out .. "/best/" .. f), "best/" .. f)
    end
    assert.is_number(s.majority_baseline.accuracy)
    cleanup(out)
  end)

  it("a run that never evaluated during training evaluates dev once at the end, then test", function()
    -- steps 3 with evaluations every 100: the end-of-run evaluation keeps the model as best/;
    -- the test phase reads its dev result instead of scoring dev a second time
    local classify = require("bert.finetune.classify")
    local original, calls = classify.evaluate, 0
    classify.evaluate = function(...) calls = calls + 1 return original(...) end
    local ok, summary = pcall(run, "classification", FIX .. "classify", {"--steps", "3", "--eval-every", "100"})
    classify.evaluate = original
    assert(ok, summary)
    assert.equals(2, calls)   -- dev once, test once
    assert.equals(3, summary.steps)
    assert.is_number(summary.dev.accuracy)
  end)

  it("--config-overrides: the checkpoint's config with the given keys, kept in best/config.json", function()
    local summary, out = run("classification", FIX .. "classify", {"--steps", "2", "--config-overrides",
      "hidden_dropout_prob=0,classifier_dropout=0.25"})
    assert.equals(2, summary.steps)
    local c = assert(util.decode_json(util.read_file(out .. "/best/config.json")))
    assert.equals(0, c.hidden_dropout_prob)
    assert.equals(0.25, c.classifier_dropout)
    assert.equals(0.1, c.attention_probs_dropout_prob)   -- the keys not named keep the model's
    cleanup(out)
    -- a key the family does not have is refused by name, with the option, before training
    local err = error_of(run, "classification", FIX .. "classify", {"--steps", "2", "--config-overrides",
      "hiden_dropout_prob=0"})
    assert.matches("--config-overrides: 'hiden_dropout_prob' is not a key of the bert config", err, 1, true)
    assert.matches("hidden_dropout_prob", err, 1, true)   -- the keys it has are listed
  end)

  it("stops early after --patience evaluations without a better dev metric", function()
    -- a learning rate of 0: the dev metric never improves after the first evaluation
    local summary = run("classification", FIX .. "classify", {"--epochs", "20", "--lr", "0", "--eval-every", "1",
      "--patience", "2"})
    assert.equals(3, summary.steps)
    assert.equals(3, summary.stopped_early)
  end)

  it("--compare: the from-scratch run takes exactly the pretrained run's steps, under a time budget", function()
    local tok = bert.tokenizer.load(FIX .. "vocab.txt")
    local ckpt = tmpdir()
    assert(bert.mkdir(ckpt))
    bert.manual_seed(3)
    assert(require("bert.model_dir").save(ckpt, bert.model("BertForMaskedLM", "tiny", {vocab_size = tok:vocab_size()}), tok))
    local out = tmpdir()
    local pre, scratch, text = experiment.compare("classification", {task = FIX .. "classify", model = ckpt,
      output = out, seq_len = 32, batch_size = 4, epochs = 200, time_budget = 2, seed = 1, no_plot = true,
      quiet = true, threads = 1})
    assert.is_true(pre.steps >= 2 and pre.steps < 200 * 4, "steps " .. pre.steps)
    assert.equals(pre.steps, scratch.steps)
    assert.matches("majority class baseline", text)
    assert.is_true(pre.wall_seconds < 30)
    cleanup(out)
    cleanup(ckpt)
  end)

  it("token classification: learns, scores entities, tags words", function()
    local task = FIX .. "ner_iob2.conll," .. FIX .. "ner_iob2.conll"
    local _, out, rows = run("tagging", task, {"--epochs", "12", "--lr", "3e-3", "--batch-size", "2"})
    local first, last = losses(rows)
    assert.is_true(last < first, string.format("loss %.3f -> %.3f", first, last))
    local s = assert(util.decode_json(util.read_file(out .. "/summary.json")))
    assert.is_number(s.accuracy)
    assert.is_number(s.entity_f1)
    local p = finetune.pipeline(out)
    local r = p:predict{text = "Marie Curie was born in Warsaw ."}
    assert.equals(7, #r.tags)
    assert.equals("Warsaw", r.words[6])
    local tc = bert.pipeline("token-classification", out, {batch_size = 2})
    local tagged = tc({"Marie Curie was born in Warsaw .", "Paris is big .", "Curie died ."})
    assert.same(r.tags, tagged[1].tags)
    assert.same(p:predict{text = "Curie died ."}.tags, tagged[3].tags)
    cleanup(out)
  end)

  it("question answering: dev and test windows are encoded when evaluated, not alive while training", function()
    local task = FIX .. "squad_v2.json," .. FIX .. "squad_v2.json"
    local qa, batch = finetune.qa, require("bert.finetune.batch")
    local encode, Loader = qa.encode, batch.Loader
    local calls, at_first_step = {}, nil
    qa.encode = function(tok, examples, opts)
      calls[#calls + 1] = opts.training and "train" or "eval"
      return encode(tok, examples, opts)
    end
    batch.Loader = function(...)
      local loader = Loader(...)
      local next_batch = loader.next
      loader.next = function(self)
        at_first_step = at_first_step or table.concat(calls, ",")
        return next_batch(self)
      end
      return loader
    end
    local ok, s = pcall(run, "qa", task, {"--steps", "2", "--doc-stride", "2", "--seq-len", "24"})
    qa.encode, batch.Loader = encode, Loader
    assert(ok, s)
    assert.equals("train", at_first_step)
    assert.equals("train,eval,eval", table.concat(calls, ","))
    -- SQuAD v2.0 tunes its null threshold on dev: asked for no dev evaluation, it still makes one
    local v2 = run("qa", task, {"--steps", "2", "--doc-stride", "2", "--seq-len", "24", "--no-dev-eval", "true"})
    assert.is_table(v2.dev)
    assert.equals(1, v2.evaluated.dev.evaluations)
  end)

  it("question answering: learns, scores EM/F1, answers with a span of the context", function()
    local task = FIX .. "squad_v2.json," .. FIX .. "squad_v2.json"
    local _, out, rows = run("qa", task, {"--epochs", "8", "--lr", "3e-3", "--doc-stride", "2", "--seq-len", "24"})
    local first, last = losses(rows)
    assert.is_true(last < first, string.format("loss %.3f -> %.3f", first, last))
    local s = assert(util.decode_json(util.read_file(out .. "/summary.json")))
    assert.is_number(s.exact_match)
    assert.is_number(s.f1)
    local p = finetune.pipeline(out)
    local ctx = "The Eiffel Tower is in Paris . It was built in 1889 for the World Fair ."
    local r = p:predict{question = "Where is the Eiffel Tower ?", context = ctx}
    -- every candidate span, kept or not, is the text of its character range
    local pos = util.char_positions(ctx)
    assert.is_true(#r.nbest >= 1, "no candidate spans")
    for _, c in ipairs(r.nbest) do
      assert.equals(util.char_sub(ctx, pos, c.start, c.stop), c.text)
    end
    -- the answer is the best candidate, or "" exactly when the model abstains
    if r.no_answer then
      assert.equals("", r.answer)
      assert.is_nil(r.start)
    else
      assert.equals(r.nbest[1].text, r.answer)
      assert.equals(util.char_sub(ctx, pos, r.start, r.stop), r.answer)
    end
    -- without the v2.0 option of abstaining it answers with the best span
    local r1 = p:predict{question = "Where is the Eiffel Tower ?", context = ctx, null_threshold = math.huge}
    assert.is_false(r1.no_answer)
    assert.equals(util.char_sub(ctx, pos, r1.start, r1.stop), r1.answer)
    assert.is_true(r.windows >= 2)
    -- batched through bert.pipeline: the same answers as one at a time
    local qp = bert.pipeline("question-answering", out)
    local q2 = {question = "When was it built ?", context = ctx}
    local both = qp({{question = "Where is the Eiffel Tower ?", context = ctx}, q2})
    assert.equals(r.answer, both[1].answer)
    assert.equals(p:predict(q2).answer, both[2].answer)
    assert.equals(r.windows, both[1].windows)
    cleanup(out)
  end)
end)
