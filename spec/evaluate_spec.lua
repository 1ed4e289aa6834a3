-- The evaluation suite: GLUE/STS-B/MRPC metrics against hand-computed
-- values, the task readers and splits on small self-made files, regression
-- fine-tuning, and the suite's orchestration (protocol, table, resume).
local bert = require("bert")
local metrics = require("bert.finetune.metrics")
local readers = require("bert.finetune.readers")
local tasks = require("bert.finetune.tasks")
local util = require("bert.finetune.util")
local evaluate = require("bert.evaluate")

local FIX = "spec/fixtures/finetune/"

local function near(a, b, tol) return math.abs(a - b) <= (tol or 1e-9) end

local tmpdir = require("spec.support.tmpdir").dir

local function write(path, text)
  local dir = path:match("^(.*)/[^/]+$")
  os.execute("mkdir -p '" .. dir .. "'")
  assert(util.write_file(path, text))
end

local function error_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

describe("evaluation metrics", function()
  it("Matthews correlation: binary and multiclass by hand, 0 for one predicted class", function()
    -- TP 2, FP 1, TN 1, FN 1: (2*1 - 1*1) / sqrt(3*3*2*2) = 1/6
    assert.is_true(near(1 / 6, metrics.matthews_corrcoef({"1", "1", "0", "0", "1"}, {"1", "0", "0", "1", "1"})))
    -- 3 classes: 4 right of 6, every class twice in gold and prediction: (4*6 - 12) / (36 - 12) = 0.5
    assert.is_true(near(0.5, metrics.matthews_corrcoef({0, 1, 1, 0, 2, 2}, {0, 1, 2, 0, 1, 2})))
    assert.equals(0, metrics.matthews_corrcoef({"1", "1", "1"}, {"1", "0", "1"}))
    assert.is_true(near(1, metrics.matthews_corrcoef({"a", "b"}, {"a", "b"})))
    assert.is_true(near(-1, metrics.matthews_corrcoef({"a", "b"}, {"b", "a"})))
  end)

  it("binary F1 of the positive class (MRPC)", function()
    -- positive "1": TP 2, FP 1, FN 1 -> P 2/3, R 2/3, F1 2/3
    assert.is_true(near(2 / 3, metrics.binary_f1({"1", "1", "0", "0", "1"}, {"1", "0", "0", "1", "1"}, "1")))
    assert.equals(0, metrics.binary_f1({"0", "0"}, {"1", "1"}, "1"))
  end)

  it("Pearson by hand; Spearman with ties at mean ranks", function()
    -- sxy 11, sxx 5, syy 26
    assert.is_true(near(11 / math.sqrt(130), metrics.pearson({1, 2, 3, 4}, {2, 4, 5, 9})))
    assert.are.same({1, 2.5, 2.5, 4}, metrics.ranks({1, 2, 2, 3}))
    assert.are.same({3, 1.5, 1.5}, metrics.ranks({7, 5, 5}))
    -- ranks x {1, 2.5, 2.5, 4}, y {1, 3, 2, 4}: sxy 4.5, sxx 4.5, syy 5
    assert.is_true(near(4.5 / math.sqrt(22.5), metrics.spearman({1, 2, 2, 3}, {1, 3, 2, 4})))
    assert.is_true(near(1, metrics.spearman({1, 2, 3}, {10, 20, 300})))   -- monotone, not linear
    local r = metrics.pearson({1, 1, 1}, {1, 2, 3})
    assert.is_true(r ~= r, "a constant list has no correlation (NaN)")
    local c = {}
    for i = 1, 1000 do c[i] = 2.4 end   -- its float mean is not exactly 2.4
    local y = {}
    for i = 1, 1000 do y[i] = i end
    r = metrics.pearson(c, y)
    assert.is_true(r ~= r, "rounding must not give a constant a correlation")
  end)
end)

describe("evaluation task files", function()
  it("reads CoNLL-U: words and UPOS, multiword tokens and empty nodes skipped", function()
    local d = tmpdir()
    write(d .. "/x.conllu", table.concat({
      "# sent_id = s1", "# text = I can't go.",
      "1\tI\tI\tPRON\t_\t_\t0\t_\t_\t_",
      "2-3\tcan't\t_\t_\t_\t_\t_\t_\t_\t_",
      "2\tca\tcan\tAUX\t_\t_\t0\t_\t_\t_",
      "3\tn't\tnot\tPART\t_\t_\t0\t_\t_\t_",
      "3.1\tgo\tgo\tVERB\t_\t_\t_\t_\t_\t_",
      "4\t.\t.\tPUNCT\t_\t_\t0\t_\t_\t_", "",
      "1\tYes\tyes\tINTJ\t_\t_\t0\t_\t_\t_", ""}, "\n"))
    local s = readers.read_conllu(d .. "/x.conllu")
    assert.equals(2, #s)
    assert.are.same({"I", "ca", "n't", "."}, s[1].words)
    assert.are.same({"PRON", "AUX", "PART", "PUNCT"}, s[1].tags)
    assert.equals("s1", s[1].id)
    assert.equals("I can't go.", s[1].text)
    write(d .. "/bad.conllu", "1\tI\tI\tPRON\t_\t_\n")
    assert.truthy(error_of(readers.read_conllu, d .. "/bad.conllu"):find("bad.conllu:1: expected 10", 1, true))
  end)

  it("GLUE tasks: CoLA without a header, MRPC with a BOM, STS-B as regression; test is the official dev", function()
    local d = tmpdir()
    local cola, mrpc, stsb = {}, {"\239\187\191Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"},
      {"index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"}
    for i = 1, 20 do
      cola[i] = string.format("src\t%d\t\tsentence number %d .", i % 2, i)
      mrpc[i + 1] = string.format("%d\t%d\t%d\tfirst %d\tsecond %d", i % 2, i, i + 100, i, i)
      stsb[i + 1] = string.format("%d\tg\tf\ty\t0\tn\tn\tleft %d\tright %d\t%.3f", i, i, i, i / 4)
    end
    write(d .. "/glue/CoLA/train.tsv", table.concat(cola, "\n") .. "\n")
    write(d .. "/glue/CoLA/dev.tsv", table.concat(cola, "\n", 1, 5) .. "\n")
    write(d .. "/glue/MRPC/train.tsv", table.concat(mrpc, "\n") .. "\n")
    write(d .. "/glue/MRPC/dev.tsv", table.concat(mrpc, "\n", 1, 4) .. "\n")
    write(d .. "/glue/STS-B/train.tsv", table.concat(stsb, "\n") .. "\n")
    write(d .. "/glue/STS-B/dev.tsv", table.concat(stsb, "\n", 1, 3) .. "\n")
    local t = tasks.load("cola", {data_dir = d})
    assert.equals(18, #t.train) assert.equals(2, #t.dev) assert.equals(5, #t.test)
    assert.equals("mcc", t.metric)
    assert.equals("sentence number 1 .", t.test[1].text)
    assert.equals("1", t.test[1].label)
    local m = tasks.load("mrpc", {data_dir = d})
    assert.equals(3, #m.test)
    assert.equals("first 1", m.test[1].text) assert.equals("second 1", m.test[1].text_pair)
    assert.equals("1", m.positive_label)
    local s = tasks.load("stsb", {data_dir = d})
    assert.is_true(s.regression) assert.is_nil(s.labels)
    assert.equals("0.250", s.test[1].label)
    assert.equals("right 1", s.test[1].text_pair)
    -- the split is fixed: the same examples every time
    local again = tasks.load("cola", {data_dir = d})
    for i, ex in ipairs(t.dev) do assert.equals(ex.text, again.dev[i].text) end
    -- a missing file names the command that fetches it
    assert.truthy(error_of(tasks.load, "rte", {data_dir = d}):find("tools/fetch_data.sh glue", 1, true))
  end)

  it("SQuAD is split by article: no article's questions in two parts", function()
    local d = tmpdir()
    local data = {}
    for a = 1, 12 do
      local qas = {}
      for q = 1, 3 do qas[q] = {id = a .. "-" .. q, question = "what " .. q, answers = {{text = "word", answer_start = 4}}} end
      data[a] = {title = "Article_" .. a, paragraphs = {{context = "the word here", qas = qas}}}
    end
    write(d .. "/squad/dev-v1.1.json", require("cjson").encode({version = "1.1", data = data}))
    local t = tasks.load("squad", {data_dir = d})
    local part = {}
    for _, name in ipairs({"train", "dev", "test"}) do
      for _, ex in ipairs(t[name]) do
        assert.is_true(part[ex.title] == nil or part[ex.title] == name, ex.title .. " is in two parts")
        part[ex.title] = name
      end
    end
    assert.equals(36, #t.train + #t.dev + #t.test)
    assert.is_true(#t.test > 0 and #t.dev > 0)
    assert.truthy(t.note:find("not the official dev score", 1, true))
  end)
end)

describe("regression fine-tuning (STS-B's head)", function()
  it("every family's sequence-classification head takes num_labels = 1: one output, MSE on float targets", function()
    for _, fam in ipairs(bert.models.registry.order) do
      local arch = bert.models.architecture_for(fam, "sequence_classification")
      local m = bert.model(arch, "tiny", {vocab_size = 50, num_labels = 1})
      local out = m:forward{input_ids = bert.tensor({{2, 5, 7, 3, 0}, {2, 8, 3, 0, 0}}, "int32"),
        attention_mask = bert.tensor({{1, 1, 1, 1, 0}, {1, 1, 1, 0, 0}}, "int32"),
        labels = bert.tensor({0.5, 2.0}, "float32")}
      assert.same({2, 1}, out.logits:shape(), arch)
      local lg = out.logits:totable()
      local mse = ((lg[1][1] - 0.5) ^ 2 + (lg[2][1] - 2.0) ^ 2) / 2
      assert.is_true(math.abs(out.loss:item() - mse) <= 1e-5 * (1 + mse), arch)
    end
  end)

  it("trains a one-output head with MSE and reports Pearson and Spearman", function()
    local d = tmpdir()
    local rows = {"index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"}
    local words = {"the", "food", "was", "good", "bad", "service"}
    for i = 1, 40 do
      rows[#rows + 1] = string.format("%d\tg\tf\ty\t0\tn\tn\t%s %s\t%s\t%.1f", i, words[i % 6 + 1], words[(i * 7) % 6 + 1],
        words[(i * 5) % 6 + 1], (i % 5) * 1.0)
    end
    write(d .. "/glue/STS-B/train.tsv", table.concat(rows, "\n") .. "\n")
    write(d .. "/glue/STS-B/dev.tsv", table.concat(rows, "\n", 1, 12) .. "\n")
    local experiment = require("bert.finetune.experiment")
    local s = experiment.run("classification", {task = "stsb", model = "tiny", from_scratch = true, data_dir = d,
      tokenizer = FIX .. "vocab.txt", steps = 4, batch_size = 8, lr = 1e-3, output = d .. "/run", quiet = true,
      no_plot = true, threads = 1})
    assert.is_number(s.test.pearson) assert.is_number(s.test.spearman) assert.is_number(s.test.mse)
    assert.is_true(s.test.pearson >= -1 and s.test.pearson <= 1)
    assert.is_nil(s.majority_baseline)
    local cfg = util.decode_json(util.read_file(d .. "/run/best/config.json"))
    assert.equals(1, #(function() local n = {} for k in pairs(cfg.id2label) do n[#n + 1] = k end return n end)())
  end)
end)

describe("bert.evaluate", function()
  it("headline scores as the benchmarks report them", function()
    assert.equals(0.3, evaluate.headline("cola", {mcc = 0.3, accuracy = 0.9}))
    assert.is_true(near(0.8, evaluate.headline("mrpc", {f1 = 0.9, accuracy = 0.7})))
    assert.is_true(near(0.6, evaluate.headline("stsb", {pearson = 0.5, spearman = 0.7})))
    assert.equals(0.4, evaluate.headline("squad", {f1 = 0.4, exact_match = 0.3}))
    assert.equals(0.2, evaluate.headline("wnut17", {entity_f1 = 0.2, accuracy = 0.9}))
    assert.equals(0.9, evaluate.headline("rte", {accuracy = 0.9}))
    local m, sd = evaluate.mean_sd({1, 2, 3, 4})
    assert.equals(2.5, m) assert.is_true(near(math.sqrt(5 / 3), sd))
    local avg = evaluate.glue_average({tasks = {cola = {headline = {mean = 0.2}}, rte = {headline = {mean = 0.6}},
      wnli = {headline = {mean = 0.1}}}})
    assert.is_true(near(0.4, avg.mean), "WNLI is left out of the GLUE average")
  end)

  it("baselines are scored with the task's own metrics", function()
    local task = {name = "cola", kind = "classification", labels = {"0", "1"}}
    local r = evaluate.score_predictions(task, {"1", "1", "1"}, {{label = "1"}, {label = "0"}, {label = "1"}})
    assert.is_true(near(2 / 3, r.accuracy)) assert.equals(0, r.mcc)
    local pos = {name = "pos-en", kind = "tagging", labels = {"NOUN", "VERB"}}
    local p = evaluate.score_predictions(pos, {{"NOUN", "NOUN"}}, {{tags = {"NOUN", "VERB"}}})
    assert.equals(0.5, p.accuracy)
    assert.truthy(error_of(evaluate.score_predictions, task, {"1"}, {{label = "1"}, {label = "0"}})
      :find("1 predictions for 2 examples of task cola", 1, true))
  end)

  -- a tiny SST-2 and a tiny checkpoint in a fresh directory: the suite's options for them
  local function tiny_sst2()
    local d = tmpdir()
    local rows = {"sentence\tlabel"}
    for i = 1, 30 do rows[#rows + 1] = (i % 2 == 0 and "the food was good" or "the service was bad") .. "\t" .. i % 2 end
    write(d .. "/glue/SST-2/train.tsv", table.concat(rows, "\n") .. "\n")
    write(d .. "/glue/SST-2/dev.tsv", table.concat(rows, "\n", 1, 9) .. "\n")
    local ckpt = d .. "/ckpt"
    local tok = assert(require("bert.tokenizer").load(FIX .. "vocab.txt"))
    local model = bert.model("BertForMaskedLM", "tiny", {vocab_size = tok:vocab_size()})
    assert(model:save_pretrained(ckpt))
    assert(require("bert.model_dir").save_tokenizer(ckpt, tok))
    return d, {model = ckpt, tasks = {"sst2"}, data_dir = d, output = d .. "/eval", steps = 2, batch_size = 8,
      seeds = {1, 2}, lr_grid = {1e-3, 3e-3}, quiet = true, threads = 1}
  end

  it("evaluates dev only where the rate is chosen and test only at the chosen rate", function()
    local d, opts = tiny_sst2()
    local t = evaluate.run(opts).tasks.sst2
    local function summary_path(lr, seed) return string.format("%s/eval/tasks/sst2/lr%g-seed%d/summary.json", d, lr, seed) end
    local function summary(lr, seed) return util.decode_json(util.read_file(summary_path(lr, seed))) end
    local other = t.lr == 1e-3 and 3e-3 or 1e-3
    local chosen, unchosen, seed2 = summary(t.lr, 1), summary(other, 1), summary(t.lr, 2)
    -- the rate nobody chose is never tested; the second seed's dev score is read by nothing
    assert.is_table(unchosen.dev) assert.is_nil(unchosen.test)
    assert.is_nil(seed2.dev) assert.is_table(seed2.test)
    assert.is_table(chosen.dev) assert.is_table(chosen.test)
    assert.same({1, 1}, {chosen.evaluated.dev.evaluations, chosen.evaluated.test.evaluations})
    assert.same({1, 0}, {unchosen.evaluated.dev.evaluations, unchosen.evaluated.test and 1 or 0})
    assert.same({0, 1}, {seed2.evaluated.dev and 1 or 0, seed2.evaluated.test.evaluations})
    -- the task's costs: two dev and two test evaluations, CPU seconds by phase
    assert.same({2, 2}, {t.evaluated.dev.evaluations, t.evaluated.test.evaluations})
    for _, phase in ipairs({"encode", "train", "dev", "test", "total"}) do assert.is_number(t.cpu_seconds[phase], phase) end
    for _, lr in ipairs({1e-3, 3e-3}) do
      assert.is_falsy(util.exists(string.format("%s/eval/tasks/sst2/lr%g-seed1/best", d, lr)), "weights dropped")
    end
    -- a process that stopped between the grid and the chosen run's test: that run is trained and tested again
    chosen.test = nil
    assert(util.write_file(summary_path(t.lr, 1), util.json(chosen)))
    os.remove(d .. "/eval/tasks/sst2/result.json")
    local again = evaluate.run(opts).tasks.sst2
    assert.equals(t.lr, again.lr)
    assert.equals(2, #again.test.accuracy.values)
    assert.is_table(summary(t.lr, 1).test)
  end)

  it("reads another output's finished control when the checkpoint gives the same one, else runs its own", function()
    local d, opts = tiny_sst2()
    opts.from_scratch_control = true
    local first = evaluate.run(opts).tasks.sst2.from_scratch
    assert.is_nil(first.read_from)
    -- another checkpoint of the same architecture and tokenizer (another pretraining head)
    local ckpt2 = d .. "/ckpt2"
    assert(os.execute("cp -r '" .. opts.model .. "' '" .. ckpt2 .. "'"))
    local config = util.decode_json(util.read_file(ckpt2 .. "/config.json"))
    config.architectures = {"BertForPreTraining"}
    assert(util.write_file(ckpt2 .. "/config.json", util.json(config)))
    assert.is_true(evaluate.same_control(opts.model, ckpt2))
    local o2 = {}
    for k, v in pairs(opts) do o2[k] = v end
    o2.model, o2.output, o2.control_from = ckpt2, d .. "/eval2", {d .. "/nothing-here", d .. "/eval"}
    local second = evaluate.run(o2).tasks.sst2
    assert.equals(d .. "/eval", second.from_scratch.read_from)
    local saved = util.decode_json(util.read_file(d .. "/eval/tasks/sst2/result.json"))
    assert.same(saved.from_scratch.test, second.from_scratch.test)
    assert.is_falsy(util.exists(d .. "/eval2/tasks/sst2/scratch-lr0.001-seed1"), "no control run of its own")
    assert.truthy(util.read_file(d .. "/eval2/results.md"):find("| sst2 |", 1, true))
    -- another dropout (or vocabulary, or protocol) is another control: run, not read
    config.hidden_dropout_prob = 0.2
    assert(util.write_file(ckpt2 .. "/config.json", util.json(config)))
    assert.is_false(evaluate.same_control(opts.model, ckpt2))
    o2.output = d .. "/eval3"
    local third = evaluate.run(o2).tasks.sst2
    assert.is_nil(third.from_scratch.read_from)
    assert.truthy(util.exists(d .. "/eval3/tasks/sst2/scratch-lr0.001-seed1/summary.json"))
    o2.model, o2.output, o2.steps = opts.model, d .. "/eval4", 3
    assert.is_nil(evaluate.run(o2).tasks.sst2.from_scratch.read_from, "another step count")
  end)

  it("waits for a control another process is running, then reads it; runs its own when that process ends without one", function()
    local d, opts = tiny_sst2()
    opts.from_scratch_control = true
    evaluate.run(opts)
    local result_path = d .. "/eval/tasks/sst2/result.json"
    local saved = util.read_file(result_path)
    os.rename(result_path, d .. "/saved-result.json")   -- eval as if its sst2 control were still running
    local o2 = {}
    for k, v in pairs(opts) do o2[k] = v end
    o2.output, o2.control_from, o2.control_poll_seconds = d .. "/eval2", {d .. "/eval"}, 0.2
    -- the other process: holds eval's lock for 2 s, then writes its result and ends
    local lock = d .. "/eval/tasks/sst2/control.lock"
    local holder = string.format("flock '%s' sh -c 'sleep 2; cp %s/saved-result.json %s' >/dev/null 2>&1 &", lock, d,
      result_path)
    assert(os.execute(holder))
    os.execute("sleep 0.3")   -- the holder has the lock
    local t0 = bert.wall_time()
    local second = evaluate.run(o2).tasks.sst2
    assert.is_true(bert.wall_time() - t0 >= 1.5, "waited for the holder")
    assert.equals(d .. "/eval", second.from_scratch.read_from)
    assert.same(util.decode_json(saved).from_scratch.test, second.from_scratch.test)
    assert.is_falsy(util.exists(d .. "/eval2/tasks/sst2/scratch-lr0.001-seed1"), "no control run of its own")
    assert.is_falsy(util.exists(d .. "/eval2/tasks/sst2/control.lock") and
      not require("bert.core").lock_file(d .. "/eval2/tasks/sst2/control.lock"), "its own lock freed")
    -- a holder that ends without a result (killed): the waiting process runs the control itself
    os.remove(result_path)
    assert(os.execute(string.format("flock '%s' sleep 2 >/dev/null 2>&1 &", lock)))
    os.execute("sleep 0.3")
    o2.output = d .. "/eval3"
    local third = evaluate.run(o2).tasks.sst2
    assert.is_nil(third.from_scratch.read_from)
    assert.truthy(util.exists(d .. "/eval3/tasks/sst2/scratch-lr0.001-seed1/summary.json"))
  end)

  it("takes its own control lock when another process held it for an instant (a probe)", function()
    local d, opts = tiny_sst2()
    opts.from_scratch_control = true
    os.execute("mkdir -p '" .. d .. "/eval/tasks/sst2'")
    assert(os.execute(string.format("flock '%s/eval/tasks/sst2/control.lock' sleep 2 >/dev/null 2>&1 &", d)))
    os.execute("sleep 0.3")
    local r = evaluate.run(opts).tasks.sst2   -- its pretrained runs take less than the holder's 2 s
    assert.is_nil(r.from_scratch.read_from)
    assert.truthy(util.exists(d .. "/eval/tasks/sst2/scratch-lr0.001-seed1/summary.json"))
  end)

  it("runs a fine-tuning task with the protocol, writes the table, and skips it when rerun", function()
    local d, opts = tiny_sst2()
    local ckpt = opts.model
    local r = evaluate.run(opts)
    local t = r.tasks.sst2
    assert.equals(3, #t.runs, "two rates with seed 1, then seed 2 at the chosen rate")
    assert.equals(2, #t.test.accuracy.values)
    assert.is_number(t.headline.mean)
    assert.is_number(t.baselines.majority.headline)
    assert.is_number(t.baselines.bag_of_words.headline)
    local md = util.read_file(d .. "/eval/results.md")
    assert.truthy(md:find("| sst2 | accuracy |", 1, true))
    assert.truthy(md:find("GLUE average", 1, true))
    assert.truthy(util.exists(d .. "/eval/tasks/sst2/result.json"))
    -- a rerun reads the finished task instead of training again
    os.execute("rm -rf '" .. d .. "/eval/tasks/sst2/'*seed*")
    local again = evaluate.run(opts)
    assert.equals(t.headline.mean, again.tasks.sst2.headline.mean)
    assert.truthy(error_of(evaluate.run, {model = ckpt, suite = "nope", quiet = true}):find("unknown suite 'nope'", 1, true))
    -- the control alone first (it needs no trained weights), then a --scratch run reads its runs
    local o2 = {}
    for k, v in pairs(opts) do o2[k] = v end
    o2.output, o2.from_scratch_control, o2.scratch_only = d .. "/eval2", true, true
    evaluate.run(o2)
    assert.is_falsy(util.exists(d .. "/eval2/tasks/sst2/result.json"), "the control alone finishes no task")
    local first = util.read_file(d .. "/eval2/tasks/sst2/scratch-lr0.001-seed1/summary.json")
    assert.truthy(first)
    o2.scratch_only = nil
    local both = evaluate.run(o2)
    assert.equals(first, util.read_file(d .. "/eval2/tasks/sst2/scratch-lr0.001-seed1/summary.json"), "read, not rerun")
    assert.equals(3, #both.tasks.sst2.from_scratch.runs)
    -- another protocol into the same directory is refused, naming the setting
    o2.steps = 3
    local perr = error_of(evaluate.run, o2)
    assert.truthy(perr:find("holds runs made with steps = 2, not 3", 1, true), perr)
    o2.steps, o2.config_overrides = 2, "hidden_dropout_prob=0"
    perr = error_of(evaluate.run, o2)
    assert.truthy(perr:find("config_overrides", 1, true), perr)
    o2.config_overrides = nil
    -- other seeds: the finished task is evaluated again, its matching runs read
    o2.steps, o2.seeds = 2, {1, 2, 3}
    local more = evaluate.run(o2)
    assert.equals(3, #more.tasks.sst2.test.accuracy.values)
  end)

  it("--config-overrides reaches every fine-tuning run and the protocol", function()
    local d, opts = tiny_sst2()
    opts.config_overrides, opts.seeds = "hidden_dropout_prob=0,attention_probs_dropout_prob=0", {1}
    opts.keep_models = true
    local r = evaluate.run(opts)
    assert.equals(opts.config_overrides, r.protocol.config_overrides)
    local protocol = assert(util.decode_json(util.read_file(d .. "/eval/protocol.json")))
    assert.equals(opts.config_overrides, protocol.config_overrides)
    local run = d .. "/eval/tasks/sst2/lr0.001-seed1"
    local c = assert(util.decode_json(util.read_file(run .. "/best/config.json")))
    assert.equals(0, c.hidden_dropout_prob)
    assert.equals(0, c.attention_probs_dropout_prob)
    assert.truthy(util.read_file(d .. "/eval/results.md"):find("Config overrides: " .. opts.config_overrides, 1, true))
  end)

  it("experiments/evaluate.lua refuses --scratch-from without --scratch, naming both", function()
    local p = io.popen("lua5.4 experiments/evaluate.lua --model /nonexistent --scratch-from /tmp 2>&1; echo \"rc=$?\"")
    local out = p:read("a")
    p:close()
    assert.truthy(out:find("--scratch-from reads a from-scratch control: pass --scratch too", 1, true), out)
    assert.truthy(out:find("rc=1", 1, true), out)
  end)
end)
