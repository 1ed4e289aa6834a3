-- Zero-shot cross-lingual tasks (xnli, pawsx, pos-xling) on small
-- self-made files in XTREME's and UD's formats: the English split by line,
-- every language tested on the same lines, CRLF, untranslated PAWS-X pairs
-- dropped, errors that name the file and line.
local bert = require("bert")
local tasks = require("bert.finetune.tasks")
local util = require("bert.finetune.util")

local tmpdir = require("spec.support.tmpdir").dir

local function write(path, text)
  os.execute("mkdir -p '" .. path:match("^(.*)/[^/]+$") .. "'")
  assert(util.write_file(path, text))
end

-- n rows of LANG: "LANG premise i", "LANG hypothesis i", a label cycling through labels
local function pairs_file(lang, n, labels, row)
  local lines = {}
  for i = 1, n do
    local a, b = string.format("%s premise %d", lang, i), string.format("%s hypothesis %d", lang, i)
    if row then a, b = row(i, a, b) end
    lines[i] = a .. "\t" .. b .. "\t" .. labels[(i - 1) % #labels + 1]
  end
  return table.concat(lines, "\r\n") .. "\r\n"
end

local function index_of(text) return tonumber(text:match("(%d+)$")) end

describe("xnli", function()
  local d = tmpdir()
  local labels = {"entailment", "neutral", "contradiction"}
  for _, lang in ipairs(tasks.xling.xnli.langs) do write(d .. "/xnli/dev-" .. lang .. ".tsv", pairs_file(lang, 30, labels)) end
  local t = tasks.load("xnli", {data_dir = d})

  it("trains on English only, split by line 60/10/30 with the fixed seed", function()
    assert.equals(18, #t.train) assert.equals(3, #t.dev) assert.equals(9, #t.test)
    for _, part in ipairs({t.train, t.dev, t.test}) do
      for _, ex in ipairs(part) do assert.truthy(ex.text:match("^en premise")) end
    end
    assert.same({"contradiction", "entailment", "neutral"}, t.labels)
    assert.equals("accuracy", t.metric)
    assert.equals("classification", tasks.kinds.xnli)
    local again = tasks.load("xnli", {data_dir = d})
    for i, ex in ipairs(t.train) do assert.equals(ex.text, again.train[i].text) end
  end)

  it("tests every language on the translations of English's test lines, no CR left", function()
    assert.equals(15, #t.test_sets)
    assert.equals("en", t.test_sets[1].name)
    assert.equals(t.test, t.test_sets[1].examples)
    local in_test = {}
    for _, ex in ipairs(t.test) do in_test[index_of(ex.text)] = ex.label end
    for _, set in ipairs(t.test_sets) do
      assert.equals(9, #set.examples, set.name)
      for _, ex in ipairs(set.examples) do
        assert.truthy(ex.text:match("^" .. set.name .. " premise"))
        assert.equals(in_test[index_of(ex.text)], ex.label, set.name .. " " .. ex.text)
        assert.is_nil(ex.text_pair:find("\r", 1, true))
      end
    end
    -- no test line's translation is trained on
    for _, ex in ipairs(t.train) do assert.is_nil(in_test[index_of(ex.text)]) end
  end)

  it("names the file and line of a label outside the set", function()
    local bad = tmpdir()
    for _, lang in ipairs(tasks.xling.xnli.langs) do write(bad .. "/xnli/dev-" .. lang .. ".tsv", pairs_file(lang, 4, labels)) end
    write(bad .. "/xnli/dev-de.tsv", pairs_file("de", 4, {"entailment", "neutral", "maybe"}))
    local ok, err = pcall(tasks.load, "xnli", {data_dir = bad})
    assert.is_false(ok)
    -- the German file is read only for testing: the error comes on load all the same
    assert.truthy(tostring(err):find("dev-de.tsv:3", 1, true), tostring(err))
    assert.truthy(tostring(err):find("maybe", 1, true), tostring(err))
  end)

  it("names the command that fetches a missing language", function()
    local part = tmpdir()
    write(part .. "/xnli/dev-en.tsv", pairs_file("en", 10, labels))
    local ok, err = pcall(tasks.load, "xnli", {data_dir = part})
    assert.is_false(ok)
    assert.truthy(tostring(err):find("tools/fetch_data.sh xnli", 1, true), tostring(err))
  end)
end)

describe("pawsx", function()
  it("drops pairs with an empty or NS sentence in the language that has them only", function()
    local d = tmpdir()
    for _, lang in ipairs(tasks.xling.pawsx.langs) do
      write(d .. "/pawsx/dev-" .. lang .. ".tsv", pairs_file(lang, 40, {"1", "0"}, function(i, a, b)
        if lang == "de" and i % 2 == 0 then return a, "NS" end
        if lang == "ja" and i % 2 == 0 then return "", b end
        return a, b
      end))
    end
    local t = tasks.load("pawsx", {data_dir = d})
    assert.equals(24, #t.train) assert.equals(4, #t.dev) assert.equals(12, #t.test)
    local by = {}
    for _, set in ipairs(t.test_sets) do by[set.name] = set.examples end
    assert.equals(12, #by.en) assert.equals(12, #by.fr)
    local odd = 0
    for _, ex in ipairs(t.test) do if index_of(ex.text) % 2 == 1 then odd = odd + 1 end end
    assert.equals(odd, #by.de) assert.equals(odd, #by.ja)
    for _, ex in ipairs(by.de) do assert.equals(1, index_of(ex.text) % 2) assert.is_not.equals("NS", ex.text_pair) end
  end)
end)

describe("pos-xling", function()
  it("fine-tunes on English-EWT's dev file and tests every treebank's test file", function()
    local d = tmpdir()
    local function conllu(lang, n, tag)
      local out = {}
      for i = 1, n do
        out[#out + 1] = string.format("# sent_id = %s-%d\n1\t%sword%d\t_\t%s\t_\t_\t0\troot\t_\t_\n2\t.\t.\tPUNCT\t_\t_\t1\tpunct\t_\t_\n",
          lang, i, lang, i, tag)
      end
      return table.concat(out, "\n")
    end
    for lang, path in pairs(tasks.ud) do
      write(d .. "/ud/" .. path .. "-ud-test.conllu", conllu(lang, 5, lang == "zh" and "PROPN" or "NOUN"))
    end
    write(d .. "/ud/" .. tasks.ud.en .. "-ud-dev.conllu", conllu("en", 20, "NOUN"))
    local t = tasks.load("pos-xling", {data_dir = d})
    assert.equals("tagging", t.kind)
    assert.equals(18, #t.train) assert.equals(2, #t.dev)
    local names = {}
    for i, set in ipairs(t.test_sets) do names[i] = set.name assert.equals(5, #set.examples) end
    assert.same({"en", "de", "fr", "zh"}, names)
    assert.equals("zhword1", t.test_sets[4].examples[1].words[1])
    -- a tag seen only in a test language is in the label set (its tokens are scored, never predicted)
    assert.same({"NOUN", "PROPN", "PUNCT"}, t.labels)
  end)
end)

describe("the per-language table", function()
  it("gives each language's score, the control's and the difference with its Welch interval", function()
    local evaluate = require("bert.evaluate")
    local r = {task = "xnli", headline_name = "accuracy",
      languages = {{name = "en", n = 9, mean = 0.6, sd = 0.01, values = {0.59, 0.6, 0.61}},
                   {name = "de", n = 9, mean = 0.5, sd = 0.1, values = {0.4, 0.5, 0.6}},
                   {name = "sw", n = 9, mean = 0.4, values = {0.4}}},
      language_baselines = {en = {majority = {headline = 0.34}, bag_of_words = {headline = 0.45}}}}
    local control = {languages = {{name = "en", mean = 0.5, sd = 0.01, values = {0.49, 0.5, 0.51}},
                                  {name = "de", mean = 0.45, sd = 0.1, values = {0.35, 0.45, 0.55}},
                                  {name = "sw", mean = 0.3, values = {0.3}}}}
    local lines = {}
    evaluate.language_table(function(s) lines[#lines + 1] = s end, r, control)
    local text = table.concat(lines, "\n")
    -- en: +10 points, se = sqrt(2 * 0.01^2 / 3), df 4, t quantile 2.776: [+7.7, +12.3], a finding (bold)
    assert.truthy(text:find("| en | 9 | 60.0 ± 1.0 | not run | 50.0 ± 1.0 | **+10.0 [+7.7, +12.3]** | 34.0 | 45.0 |",
      1, true), text)
    -- de: +5 points inside a wide interval: not bold
    assert.truthy(text:find("| de | 9 | 50.0 ± 10.0 | not run | 45.0 ± 10.0 | +5.0 [-17.7, +27.7] |", 1, true), text)
    assert.truthy(text:find("| sw | 9 | 40.0 | not run | 30.0 | +10.0 (no interval", 1, true), text)
  end)
end)

describe("fine-tuning a cross-lingual task", function()
  it("tests the one model on every language and reports each in summary.test_sets", function()
    local d = tmpdir()
    local labels = {"entailment", "neutral", "contradiction"}
    for _, lang in ipairs(tasks.xling.xnli.langs) do write(d .. "/xnli/dev-" .. lang .. ".tsv", pairs_file(lang, 30, labels)) end
    local experiment = require("bert.finetune.experiment")
    local s = experiment.run("classification", {task = "xnli", model = "tiny", from_scratch = true, data_dir = d,
      tokenizer = "spec/fixtures/finetune/vocab.txt", steps = 2, batch_size = 8, lr = 1e-3, output = d .. "/run",
      quiet = true, no_plot = true, threads = 1})
    local n = 0
    for _, lang in ipairs(tasks.xling.xnli.langs) do
      local m = s.test_sets[lang]
      assert.is_number(m.accuracy, lang)
      assert.is_true(m.accuracy >= 0 and m.accuracy <= 1)
      n = n + 1
    end
    assert.equals(15, n)
    assert.equals(s.test.accuracy, s.test_sets.en.accuracy)
  end)
end)
