--- bert.finetune.tasks: fine-tuning tasks by name or by file.
--
-- A task is {name, kind = "classification" | "tagging" | "qa", labels,
-- train, dev, test, metric (the dev metric that picks the best
-- checkpoint), description, label_names?, version_2?}.
--
-- Built in (files under data/, written by tools/fetch_data.sh):
--   spam         data/spam/spam.jsonl: SpamAssassin public corpus, ham vs
--                spam, text = subject + "\n" + body; split 80/10/10 by
--                message with a fixed seed.
--   brown-genre  data/brown/docs.jsonl: passages of consecutive sentences
--                (about 100 words) labelled by the document's genre (15
--                codes ca .. cr); split by document, per genre.
--   brown-pos    the same documents' sentences, Brown tags collapsed to
--                their base tag (see brown_base_tag); split by document.
--   synthetic-qa SQuAD-format cloze questions generated from the Brown
--                documents (bert.finetune.synthetic_qa); SYNTHETIC data,
--                not SQuAD.  Written to data/synthetic_qa[_v2]/ on first use.
--   cola sst2 mrpc stsb rte wnli   GLUE (data/glue); test = the official dev set
--   qnli         GLUE's QNLI dev (data/glue/QNLI; its train set is not at hand) split
--                65/10/25, pairs sharing a question or a sentence in one part
--   squad        SQuAD v1.1 dev (data/squad) split by article
--   wnut17       WNUT-17 NER (data/wnut17): train / dev / test as released
--   pos-en pos-de pos-fr pos-zh   UD UPOS (data/ud): the dev file split 90/10, the test file
--   xnli pawsx pos-xling   zero-shot cross-lingual transfer: fine-tuned on
--                English, tested on every language (task.test_sets); see
--                M.xling below
-- A path: a file (split 80/10/10 by example with the fixed seed), a
-- directory holding train.* and dev.* / validation.* (and test.*; without
-- one the dev set is also the test set), or "train,dev[,test]" paths.
local readers = require("bert.finetune.readers")
local util = require("bert.finetune.util")

local M = {}

M.SPLIT_SEED = 20181011   -- fixed: every run, pretrained or not, sees the same split

M.kinds = {
  spam = "classification", ["brown-genre"] = "classification",
  ["brown-pos"] = "tagging", ["synthetic-qa"] = "qa",
}

M.brown_genres = {
  ca = "press: reportage", cb = "press: editorial", cc = "press: reviews", cd = "religion",
  ce = "skill and hobbies", cf = "popular lore", cg = "belles-lettres",
  ch = "miscellaneous: government & house organs", cj = "learned", ck = "fiction: general",
  cl = "fiction: mystery", cm = "fiction: science", cn = "fiction: adventure",
  cp = "fiction: romance", cr = "humor",
}

local function fetch_hint(data_dir, what)
  return string.format("run `sh tools/fetch_data.sh %s` first (writes %s/%s/)", what, data_dir, what)
end

-- Makes sure data_dir/<rel> exists.  The library never runs the fetch
-- scripts itself: a caller may pass opts.fetch, a function(what) that
-- fetches the data (the experiment scripts run tools/fetch_data.sh);
-- otherwise a missing file is an error naming the command to run.
local function need(data_dir, rel, what, opts)
  local path = data_dir .. "/" .. rel
  if util.exists(path) then return path end
  if type(opts.fetch) == "function" then
    opts.fetch(what)
    if util.exists(path) then return path end
  end
  error(string.format("task data %s is missing: %s", path, fetch_hint(data_dir, what)), 0)
end

-- {============================================================ splits

--- Splits a list by a seeded shuffle into train/dev/test fractions.
function M.split(list, fractions, seed)
  fractions = fractions or {0.8, 0.1, 0.1}
  local order = {}
  for i = 1, #list do order[i] = i end
  util.rng(seed or M.SPLIT_SEED):shuffle(order)
  local n = #list
  local n_dev = math.floor(n * fractions[2] + 0.5)
  local n_test = math.floor(n * fractions[3] + 0.5)
  -- at least one example in each part asked for (a zero fraction stays empty)
  if n >= 3 then
    if fractions[2] > 0 then n_dev = math.max(n_dev, 1) end
    if fractions[3] > 0 then n_test = math.max(n_test, 1) end
  end
  local train, dev, test = {}, {}, {}
  for k, i in ipairs(order) do
    if k <= n_test then test[#test + 1] = list[i]
    elseif k <= n_test + n_dev then dev[#dev + 1] = list[i]
    else train[#train + 1] = list[i] end
  end
  return train, dev, test
end
-- }============================================================

-- {============================================================ Brown

local brown_cache = {}

--- The Brown documents of data_dir/brown/docs.jsonl: a list of {id, genre,
-- sentences = {{{word, tag}, ...}, ...}} (cached).
function M.brown_docs(data_dir, opts)
  opts = opts or {}
  local path = need(data_dir, "brown/docs.jsonl", "brown", opts)
  if brown_cache[path] then return brown_cache[path] end
  local text = util.read_file(path)
  local docs = {}
  for n, line in readers.lines(text) do
    if line:match("%S") then
      local d, err = util.decode_json(line)
      if d == nil then readers.fail(path, n, "invalid JSON (%s)", tostring(err)) end
      if type(d) ~= "table" or type(d.sentences) ~= "table" or type(d.genre) ~= "string" then
        readers.fail(path, n, "expected {\"id\", \"genre\", \"sentences\"}")
      end
      d.line = n
      docs[#docs + 1] = d
    end
  end
  brown_cache[path] = docs
  return docs
end

--- Document split of the Brown corpus, per genre (each genre's documents
-- shuffled with the fixed seed; 10% to dev, 10% to test, at least one
-- each): three lists of documents.
function M.brown_split(docs, seed)
  local by_genre, genres = {}, {}
  for _, d in ipairs(docs) do
    if not by_genre[d.genre] then by_genre[d.genre] = {} genres[#genres + 1] = d.genre end
    table.insert(by_genre[d.genre], d)
  end
  table.sort(genres)
  local train, dev, test = {}, {}, {}
  for gi, g in ipairs(genres) do
    local list = by_genre[g]
    table.sort(list, function(a, b) return tostring(a.id) < tostring(b.id) end)
    local a, b, c = M.split(list, {0.8, 0.1, 0.1}, (seed or M.SPLIT_SEED) + gi)
    for _, d in ipairs(a) do train[#train + 1] = d end
    for _, d in ipairs(b) do dev[#dev + 1] = d end
    for _, d in ipairs(c) do test[#test + 1] = d end
  end
  return train, dev, test
end

--- Brown's base tag: lowercase, without the title (-tl), headline (-hl)
-- and cited-word (-nc) suffixes and the foreign-word prefix (fw-);
-- contractions keep their compound tag (ppss+md for "I'll") and negations
-- their star (md* for "can't"), so "np$-tl" -> "np$", "fw-nn" -> "nn".
function M.brown_base_tag(tag)
  local t = tag:lower()
  local prev
  repeat
    prev = t
    t = t:gsub("%-tl$", ""):gsub("%-hl$", ""):gsub("%-nc$", "")
  until t == prev
  t = t:gsub("^fw%-", "")
  if t == "" then t = tag end
  return t
end

local function words_of(sentence)
  local w = {}
  for i, wt in ipairs(sentence) do w[i] = wt[1] end
  return w
end

local function brown_genre(data_dir, opts)
  local docs = M.brown_docs(data_dir, opts)
  local target = opts.passage_words or 100
  local function passages(list)
    local out = {}
    for _, d in ipairs(list) do
      local cur, n = {}, 0
      local function flush()
        if n > 0 then
          out[#out + 1] = {text = table.concat(cur, " "), label = d.genre, id = d.id .. ":" .. (#out + 1)}
        end
        cur, n = {}, 0
      end
      for _, s in ipairs(d.sentences) do
        cur[#cur + 1] = table.concat(words_of(s), " ")
        n = n + #s
        if n >= target then flush() end
      end
      if n >= target / 2 then flush() end
    end
    return out
  end
  local tr, dv, te = M.brown_split(docs, opts.split_seed)
  local labels = {}
  for g in pairs(M.brown_genres) do labels[#labels + 1] = g end
  for _, d in ipairs(docs) do if not M.brown_genres[d.genre] then labels[#labels + 1] = d.genre end end
  labels = util.sorted_set(labels)
  return {
    name = "brown-genre", kind = "classification", labels = labels, label_names = M.brown_genres,
    train = passages(tr), dev = passages(dv), test = passages(te), metric = "accuracy",
    description = string.format("Brown corpus genre of ~%d-word passages (15 genres), split by document", target),
  }
end

local function brown_pos(data_dir, opts)
  local docs = M.brown_docs(data_dir, opts)
  local collapse = opts.fine_tags ~= true
  local seen = {}
  local function sentences(list)
    local out = {}
    for _, d in ipairs(list) do
      for si, s in ipairs(d.sentences) do
        local words, tags = {}, {}
        for i, wt in ipairs(s) do
          words[i] = wt[1]
          tags[i] = collapse and M.brown_base_tag(wt[2]) or wt[2]
          seen[tags[i]] = true
        end
        if #words > 0 then out[#out + 1] = {words = words, tags = tags, id = d.id .. ":" .. si} end
      end
    end
    return out
  end
  local tr, dv, te = M.brown_split(docs, opts.split_seed)
  local task = {
    name = "brown-pos", kind = "tagging", train = sentences(tr), dev = sentences(dv), test = sentences(te),
    metric = "accuracy",
    description = "Brown corpus part-of-speech tagging (" .. (collapse and "base tags: -tl/-hl/-nc suffixes and fw- dropped" or "full tags") .. "), split by document",
  }
  local labels = {}
  for t in pairs(seen) do labels[#labels + 1] = t end
  task.labels = util.sorted_set(labels)
  return task
end
-- }============================================================

local function spam(data_dir, opts)
  local path = need(data_dir, "spam/spam.jsonl", "spam", opts)
  local examples = readers.read_classification(path, {format = "jsonl", text_fields = {"subject", "body"},
    labels = {"ham", "spam"}})
  for _, ex in ipairs(examples) do ex.source = path end
  local train, dev, test = M.split(examples, {0.8, 0.1, 0.1}, opts.split_seed)
  return {
    name = "spam", kind = "classification", labels = {"ham", "spam"}, train = train, dev = dev, test = test,
    metric = "accuracy",
    description = "SpamAssassin public corpus: ham vs spam (subject + body), split 80/10/10 by message",
  }
end

local function synthetic_qa(data_dir, opts)
  local v2 = opts.version_2
  local dir = data_dir .. (v2 and "/synthetic_qa_v2" or "/synthetic_qa")
  local gen = require("bert.finetune.synthetic_qa")
  local current = false
  if util.exists(dir .. "/train.json") and util.exists(dir .. "/dev.json") and util.exists(dir .. "/test.json") then
    local doc = util.decode_json(util.read_file(dir .. "/dev.json") or "")
    current = type(doc) == "table" and type(doc.metadata) == "table" and doc.metadata.generator_version == gen.VERSION
  end
  if not current then
    local docs = M.brown_docs(data_dir, opts)
    io.stderr:write("generating SYNTHETIC cloze-style QA data from the Brown corpus into " .. dir .. "/\n")
    gen.write(dir, gen.generate(docs, {version_2 = v2, seed = opts.split_seed}), {version_2 = v2})
  end
  local task = {name = "synthetic-qa", kind = "qa", version_2 = v2, metric = "f1",
    description = "SYNTHETIC extractive QA (cloze questions over Brown passages)" .. (v2 and ", v2.0 with unanswerable questions" or "")}
  task.train = readers.read_squad(dir .. "/train.json")
  task.dev = readers.read_squad(dir .. "/dev.json")
  task.test = readers.read_squad(dir .. "/test.json")
  return task
end

-- {============================================================ the evaluation suite
-- The field's tasks (bert.evaluate runs them), from the files
-- tools/fetch_data.sh writes.  Where a benchmark's test labels are not
-- public or a train file is not at hand, the split is made here, fixed by
-- SPLIT_SEED, and every task's `note` says which split its test is.

local function labels_of(kind, lists)
  if kind == "qa" then return nil end
  local all = {}
  for _, list in ipairs(lists) do
    for _, ex in ipairs(list) do
      if kind == "classification" then all[#all + 1] = ex.label
      else for _, t in ipairs(ex.tags) do all[#all + 1] = t end end
    end
  end
  local set = util.sorted_set(all)
  -- "O" first for entity tags, so the fallback and id 0 are "outside"
  for i, l in ipairs(set) do
    if l == "O" then table.remove(set, i) table.insert(set, 1, "O") break end
  end
  return set
end

-- GLUE (glue_data layout): columns by number where the header is not the
-- reader's (CoLA has none; MRPC's and STS-B's name other columns);
-- metric: the one that picks the checkpoint and the learning rate (MRPC:
-- the mean of accuracy and F1, STS-B: of Pearson and Spearman, as the
-- GLUE leaderboard averages them).
M.glue = {
  cola = {dir = "CoLA", header = false, text = 4, label = 2, labels = {"0", "1"}, metric = "mcc",
    description = "CoLA: grammatical acceptability of single sentences (Matthews correlation)"},
  sst2 = {dir = "SST-2", labels = {"0", "1"}, metric = "accuracy",
    description = "SST-2: binary sentiment of movie-review sentences (accuracy)"},
  mrpc = {dir = "MRPC", header = true, text = 4, pair = 5, label = 1, labels = {"0", "1"}, positive_label = "1",
    metric = "accuracy_f1", description = "MRPC: are two news sentences paraphrases (F1 of class 1 and accuracy)"},
  stsb = {dir = "STS-B", header = true, text = 8, pair = 9, label = 10, regression = true, metric = "pearson_spearman",
    description = "STS-B: sentence-pair similarity 0-5, regression (Pearson and Spearman correlation)"},
  rte = {dir = "RTE", labels = {"entailment", "not_entailment"}, metric = "accuracy",
    description = "RTE: textual entailment of sentence pairs (accuracy)"},
  wnli = {dir = "WNLI", labels = {"0", "1"}, metric = "accuracy",
    description = "WNLI: Winograd pronoun entailment (accuracy; left out of the GLUE average, as BERT did)"},
}

local function glue(name)
  local g = M.glue[name]
  return function(data_dir, opts)
    local function read(split)
      local path = need(data_dir, "glue/" .. g.dir .. "/" .. split .. ".tsv", "glue", opts)
      local ex = readers.read_classification(path, {format = "tsv", header = g.header, text_column = g.text,
        pair_column = g.pair, label_column = g.label, labels = g.labels})
      for _, e in ipairs(ex) do e.source = path end
      return ex
    end
    local train, dev = M.split(read("train"), {0.9, 0.1, 0}, opts.split_seed)
    return {
      name = name, kind = "classification", labels = g.labels, regression = g.regression,
      positive_label = g.positive_label, metric = g.metric, train = train, dev = dev, test = read("dev"),
      description = g.description,
      note = "test is GLUE's official dev set (its test labels are not public); dev is 10% of train held out for " ..
        "model selection",
    }
  end
end

-- QNLI (question-answering NLI, from SQuAD: does the sentence answer the
-- question?): only GLUE's dev set is at hand (5,463 pairs), so it is split
-- into train / dev / test.  A question is paired with several sentences and
-- a sentence with several questions, so the pairs are split by connected
-- group (pairs that share a question or a sentence, transitively: 2,684
-- groups of 1-20 pairs): no question or sentence is seen in two parts.
M.QNLI_SPLIT = {0.65, 0.10, 0.25}

local function qnli(data_dir, opts)
  local path = need(data_dir, "glue/QNLI/dev.tsv", "glue", opts)
  local labels = {"entailment", "not_entailment"}
  local examples = readers.read_classification(path, {format = "tsv", header = true, text_column = "question",
    pair_column = "sentence", label_column = "label", labels = labels})
  local parent = {}
  local function find(x)   -- the group's root, the path to it shortened
    local root = x
    while parent[root] ~= root do root = parent[root] end
    while parent[x] ~= root do parent[x], x = root, parent[x] end
    return root
  end
  local function union(a, b)
    a, b = find(a), find(b)
    if a ~= b then parent[a] = b end
  end
  for _, e in ipairs(examples) do
    local q, s = "q\0" .. e.text, "s\0" .. e.text_pair
    parent[q], parent[s] = parent[q] or q, parent[s] or s
    union(q, s)
  end
  local groups, order = {}, {}
  for _, e in ipairs(examples) do
    e.source = path
    local root = find("q\0" .. e.text)
    if not groups[root] then groups[root] = {} order[#order + 1] = root end
    table.insert(groups[root], e)
  end
  local parts = {M.split(order, M.QNLI_SPLIT, opts.split_seed)}
  local out = {}
  for k, roots in ipairs(parts) do
    out[k] = {}
    for _, root in ipairs(roots) do for _, e in ipairs(groups[root]) do table.insert(out[k], e) end end
  end
  return {
    name = "qnli", kind = "classification", labels = labels, metric = "accuracy", train = out[1], dev = out[2],
    test = out[3], description = "QNLI: does the sentence contain the answer to the question (accuracy)",
    note = string.format("GLUE's QNLI dev set split by question and sentence group into %d train, %d dev, %d test " ..
      "pairs (QNLI's train set is not at hand): not the official dev score", #out[1], #out[2], #out[3]),
  }
end

-- SQuAD v1.1: only the dev file is at hand, so it is split by article
-- (no article's paragraphs in two parts): 34 articles train, 4 dev, 10 test.
M.SQUAD_SPLIT = {train = 34, dev = 4, test = 10}

local function squad(data_dir, opts)
  local path = need(data_dir, "squad/dev-v1.1.json", "squad", opts)
  local examples = readers.read_squad(path)
  local titles, seen = {}, {}
  for _, ex in ipairs(examples) do
    if not seen[ex.title] then seen[ex.title] = true titles[#titles + 1] = ex.title end
  end
  local n = #titles
  local frac = M.SQUAD_SPLIT
  local total = frac.train + frac.dev + frac.test
  local tr, dv, te = M.split(titles, {frac.train / total, frac.dev / total, frac.test / total}, opts.split_seed)
  local part = {}
  for _, t in ipairs(tr) do part[t] = "train" end
  for _, t in ipairs(dv) do part[t] = "dev" end
  for _, t in ipairs(te) do part[t] = "test" end
  local task = {name = "squad", kind = "qa", metric = "f1", train = {}, dev = {}, test = {}, split_titles = {
    train = tr, dev = dv, test = te}}
  for _, ex in ipairs(examples) do table.insert(task[part[ex.title]], ex) end
  task.description = "SQuAD v1.1 extractive QA (exact match and F1, the official normalisation)"
  task.note = string.format("SQuAD v1.1 dev split by article (%d train, %d dev, %d test of %d articles): " ..
    "not the official dev score", #tr, #dv, #te, n)
  return task
end

local function wnut17(data_dir, opts)
  local function read(file) return readers.read_conll(need(data_dir, "wnut17/" .. file, "wnut17", opts), {scheme = "iob2"}) end
  local task = {name = "wnut17", kind = "tagging", metric = "entity_f1", train = read("wnut17train.conll"),
    dev = read("emerging.dev.conll"), test = read("emerging.test.annotated"),
    description = "WNUT-17 emerging and rare entities (6 types), entity-level F1 (exact span and type)"}
  task.labels = labels_of("tagging", {task.train, task.dev, task.test})
  return task
end

-- Universal Dependencies UPOS: the train files are not at hand, so a
-- treebank's dev file is split 90/10 by sentence (train / model
-- selection) and its test file is the test.
M.ud = {en = "UD_English-EWT/en_ewt", de = "UD_German-GSD/de_gsd", fr = "UD_French-GSD/fr_gsd",
  zh = "UD_Chinese-GSD/zh_gsd"}

local function ud_pos(lang)
  return function(data_dir, opts)
    local base = "ud/" .. M.ud[lang]
    local dev_file = readers.read_conllu(need(data_dir, base .. "-ud-dev.conllu", "ud", opts))
    local train, dev = M.split(dev_file, {0.9, 0.1, 0}, opts.split_seed)
    local task = {name = "pos-" .. lang, kind = "tagging", metric = "accuracy", train = train, dev = dev,
      test = readers.read_conllu(need(data_dir, base .. "-ud-test.conllu", "ud", opts)),
      description = "Universal Dependencies " .. M.ud[lang]:match("^([^/]+)") .. " UPOS tagging (token accuracy, " ..
        "first sub-token)",
      note = "train and dev are 90/10 of the treebank's dev file (its train file is not at hand); test is its test file"}
    task.labels = labels_of("tagging", {task.train, task.dev, task.test})
    return task
  end
end

-- {============================================================ cross-lingual

-- Zero-shot cross-lingual transfer, as mBERT was measured (Pires et al.
-- 2019; Wu & Dredze 2019; XTREME): fine-tune on English only, test on every
-- language.  A task gets test_sets = {{name = LANG, examples}, ...}, English
-- first (task.test is English's), and metrics per language.
--
-- XNLI and PAWS-X: only the dev sets are at hand (XTREME's per-language tsv,
-- sentence1 TAB sentence2 TAB label, CRLF), and each language's file holds
-- translations of the same English pairs, line for line.  English's file is
-- split by line with the fixed seed (M.XLING_SPLIT: train / dev for model
-- selection / test), and every language is tested on the test lines only,
-- so that no test pair is a translation of a training pair.  PAWS-X pairs
-- with an empty or "NS" (not translated) sentence are dropped, as XTREME
-- does.
M.XLING_SPLIT = {0.6, 0.1, 0.3}
M.xling = {
  xnli = {langs = {"en", "ar", "bg", "de", "el", "es", "fr", "hi", "ru", "sw", "th", "tr", "ur", "vi", "zh"},
    labels = {"contradiction", "entailment", "neutral"},
    description = "XNLI: natural language inference in 15 languages, zero-shot from English (accuracy)"},
  pawsx = {langs = {"en", "de", "es", "fr", "ja", "ko", "zh"}, labels = {"0", "1"},
    description = "PAWS-X: adversarial paraphrase pairs in 7 languages, zero-shot from English (accuracy)"},
}

local function xling_pairs(name)
  local x = M.xling[name]
  return function(data_dir, opts)
    local function read(lang)
      local path = need(data_dir, name .. "/dev-" .. lang .. ".tsv", name, opts)
      local rows = readers.read_classification(path, {format = "tsv", header = false, text_column = 1,
        pair_column = 2, label_column = 3, labels = x.labels})
      local by_line = {}
      for _, e in ipairs(rows) do
        local untranslated = e.text == "" or e.text == "NS" or (e.text_pair or "") == "" or e.text_pair == "NS"
        if not untranslated then e.source = path by_line[e.line] = e end
      end
      return by_line, rows
    end
    local english, rows = read("en")
    local lines = {}
    for _, e in ipairs(rows) do if english[e.line] then lines[#lines + 1] = e.line end end
    local tr, dv, te = M.split(lines, M.XLING_SPLIT, opts.split_seed)
    table.sort(te)
    local function pick(by_line, list)
      local out = {}
      for _, n in ipairs(list) do if by_line[n] then out[#out + 1] = by_line[n] end end
      return out
    end
    local task = {name = name, kind = "classification", labels = x.labels, metric = "accuracy",
      train = pick(english, tr), dev = pick(english, dv), test = pick(english, te), test_sets = {},
      description = x.description,
      note = string.format("only the dev sets are at hand: English's is split by line %d/%d/%d%% (train, model " ..
        "selection, test) and every language is tested on the test lines' translations",
        M.XLING_SPLIT[1] * 100, M.XLING_SPLIT[2] * 100, M.XLING_SPLIT[3] * 100)}
    for _, lang in ipairs(x.langs) do
      task.test_sets[#task.test_sets + 1] = {name = lang, examples = lang == "en" and task.test or pick(read(lang), te)}
    end
    return task
  end
end

-- UD POS: fine-tuned on English-EWT exactly as pos-en (90/10 of its dev
-- file), tested on the test files of every treebank at hand.  The upper
-- bound with the target language's own data is pos-de, pos-fr, pos-zh.
M.XLING_UD = {"en", "de", "fr", "zh"}

local function pos_xling(data_dir, opts)
  local task = ud_pos("en")(data_dir, opts)
  task.name, task.test_sets = "pos-xling", {{name = "en", examples = task.test}}
  for i = 2, #M.XLING_UD do
    local lang = M.XLING_UD[i]
    task.test_sets[i] = {name = lang,
      examples = readers.read_conllu(need(data_dir, "ud/" .. M.ud[lang] .. "-ud-test.conllu", "ud", opts))}
  end
  local lists = {task.train, task.dev}
  for _, set in ipairs(task.test_sets) do lists[#lists + 1] = set.examples end
  task.labels = labels_of("tagging", lists)
  task.description = "UD UPOS tagging zero-shot from English-EWT to the German, French and Chinese GSD test sets " ..
    "(token accuracy, first sub-token)"
  task.note = "fine-tuned on 90% of English-EWT's dev file (its train file is not at hand), model selection on " ..
    "the other 10%; every language's test file is its test"
  return task
end
-- }============================================================

local builtin = {
  spam = spam, ["brown-genre"] = brown_genre, ["brown-pos"] = brown_pos, ["synthetic-qa"] = synthetic_qa,
  squad = squad, wnut17 = wnut17,
}
for name in pairs(M.glue) do builtin[name] = glue(name) M.kinds[name] = "classification" end
for lang in pairs(M.ud) do builtin["pos-" .. lang] = ud_pos(lang) M.kinds["pos-" .. lang] = "tagging" end
M.kinds.squad, M.kinds.wnut17 = "qa", "tagging"
builtin.qnli, M.kinds.qnli = qnli, "classification"
for name in pairs(M.xling) do builtin[name] = xling_pairs(name) M.kinds[name] = "classification" end
builtin["pos-xling"], M.kinds["pos-xling"] = pos_xling, "tagging"

-- {============================================================ files

local function read_any(kind, path, opts, labels)
  if kind == "classification" then
    local ex = readers.read_classification(path, {labels = labels, text_column = opts.text_column,
      pair_column = opts.pair_column, label_column = opts.label_column})
    for _, e in ipairs(ex) do e.source = path end
    return ex
  elseif kind == "tagging" then
    return readers.read_conll(path, {labels = labels})
  else
    return (readers.read_squad(path))
  end
end


local function find_split(dir, names)
  local exts = {"tsv", "jsonl", "json", "txt", "conll", "iob", "iob1", "iob2", "csv"}
  for _, n in ipairs(names) do
    for _, e in ipairs(exts) do
      local p = dir .. "/" .. n .. "." .. e
      if util.exists(p) then return p end
    end
  end
  return nil
end

local function from_path(spec, kind, opts)
  local train_p, dev_p, test_p
  if spec:find(",", 1, true) then
    local parts = {}
    for p in spec:gmatch("[^,]+") do parts[#parts + 1] = p end
    train_p, dev_p, test_p = parts[1], parts[2], parts[3]
  elseif util.isdir(spec) then
    train_p = find_split(spec, {"train"})
    dev_p = find_split(spec, {"dev", "validation", "valid", "val", "dev_matched"})
    test_p = find_split(spec, {"test", "test_labeled"})
    if not train_p then error(spec .. ": no train.* file (tsv, jsonl, json, conll, txt)", 0) end
  elseif util.exists(spec) then
    train_p = spec
  else
    local names = {}
    for k in pairs(builtin) do names[#names + 1] = k end
    table.sort(names)
    error(string.format("task '%s' is neither a built-in task (%s) nor a file or directory", spec,
      table.concat(names, ", ")), 0)
  end
  local task = {name = spec, kind = kind, version_2 = opts.version_2}
  local labels = opts.labels
  if train_p and not dev_p then
    local all = read_any(kind, train_p, opts, labels)
    task.train, task.dev, task.test = M.split(all, {0.8, 0.1, 0.1}, opts.split_seed)
    task.description = train_p .. " split 80/10/10 with a fixed seed"
  else
    task.train = read_any(kind, train_p, opts, labels)
    if not labels then labels = labels_of(kind, {task.train}) end
    if kind ~= "qa" then
      -- dev/test labels must be known: the label set is that of the training file
      -- unless given, so an unseen label is an error naming its line
      task.dev = read_any(kind, dev_p, opts, labels)
      task.test = test_p and read_any(kind, test_p, opts, labels) or nil
    else
      task.dev = read_any(kind, dev_p, opts)
      task.test = test_p and read_any(kind, test_p, opts) or nil
    end
    if not task.test then
      task.test = task.dev
      task.note = "no test file: the dev set is also the test set"
    end
    task.description = train_p .. " / " .. dev_p .. (test_p and (" / " .. test_p) or "")
  end
  if kind ~= "qa" then task.labels = labels or labels_of(kind, {task.train, task.dev, task.test}) end
  if kind == "qa" and task.version_2 == nil then
    for _, ex in ipairs(task.train) do if ex.is_impossible then task.version_2 = true break end end
  end
  if kind == "classification" then task.metric = "accuracy"
  elseif kind == "tagging" then
    task.metric = require("bert.finetune.metrics").is_entity_scheme(task.labels) and "entity_f1" or "accuracy"
  else task.metric = "f1" end
  return task
end
-- }============================================================

--- Loads a task: a built-in name or a path (see above).  opts: kind (the
-- kind the caller handles: a mismatch is an error), data_dir ("data"),
-- split_seed, version_2 (synthetic-qa), passage_words (brown-genre),
-- fine_tags (brown-pos: keep Brown's full tags), labels (a path task's
-- label list), fetch = function(what) (fetches a built-in task's data when missing).
function M.load(spec, opts)
  opts = opts or {}
  local data_dir = opts.data_dir or os.getenv("BERT_DATA") or "data"
  local task
  if builtin[spec] then
    task = builtin[spec](data_dir, opts)
  else
    if not opts.kind then error("tasks.load: a path needs opts.kind (classification, tagging or qa)", 2) end
    task = from_path(spec, opts.kind, opts)
  end
  if opts.kind and task.kind ~= opts.kind then
    local script = {classification = "finetune_classify.lua", tagging = "finetune_tag.lua", qa = "finetune_qa.lua"}
    error(string.format("task '%s' is a %s task: use experiments/%s", spec, task.kind, script[task.kind]), 0)
  end
  return task
end

--- Names of the built-in tasks of a kind (all when kind is nil).
function M.names(kind)
  local out = {}
  for name, k in pairs(M.kinds) do if kind == nil or k == kind then out[#out + 1] = name end end
  table.sort(out)
  return out
end

return M
