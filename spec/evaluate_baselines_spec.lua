local B = require("bert.evaluate.baselines")

local function near(a, b, tol) return math.abs(a - b) <= (tol or 1e-9) end

local function error_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

local function ex(text, label, pair) return {text = text, label = label, text_pair = pair} end

local function texts(list)
  local out = {}
  for i, t in ipairs(list) do out[i] = {text = t} end
  return out
end

describe("evaluate.baselines: majority", function()
  it("predicts the commonest training label for every test example", function()
    local pred, info = B.majority({ex("x", "b"), ex("y", "a"), ex("z", "a")}, texts({"p", "q"}))
    assert.same({"a", "a"}, pred)
    assert.equals("a", info.label)
    assert.same({a = 2, b = 1}, info.counts)
  end)

  it("breaks a tie by the label order given, else by first seen", function()
    local train = {ex("1", "b"), ex("2", "a"), ex("3", "a"), ex("4", "b")}
    assert.same({"b"}, (B.majority(train, texts({"t"}))))
    assert.same({"a"}, (B.majority(train, texts({"t"}), {labels = {"a", "b"}})))
    assert.same({"b"}, (B.majority(train, texts({"t"}), {labels = {"b", "a"}})))
    -- a listed label without examples does not win a tie it is not in
    assert.same({"a"}, (B.majority(train, texts({"t"}), {labels = {"c", "a", "b"}})))
  end)

  it("predicts the training mean for numeric labels (regression)", function()
    local pred, info = B.majority({ex("x", 1), ex("y", 2), ex("z", 4.5)}, texts({"p", "q"}))
    assert.is_true(near(info.mean, 2.5))
    assert.same({2.5, 2.5}, pred)
    -- numeric strings need opts.regression
    assert.same({"1"}, (B.majority({ex("x", "1"), ex("y", "1"), ex("z", "4")}, texts({"p"}))))
    local r = B.majority({ex("x", "1"), ex("y", "2")}, texts({"p"}), {regression = true})
    assert.is_true(near(r[1], 1.5))
  end)
end)

describe("evaluate.baselines: most frequent tag", function()
  local train = {
    {words = {"the", "dogs", "run"}, tags = {"DET", "NOUN", "VERB"}},
    {words = {"a", "run", "is", "fun"}, tags = {"DET", "NOUN", "AUX", "ADJ"}},
    {words = {"they", "run", "the", "fish"}, tags = {"PRON", "VERB", "DET", "NOUN"}},
    {words = {"fish", "swim"}, tags = {"VERB", "VERB"}},
    {words = {"the", "cat"}, tags = {"DET", "NOUN"}},
  }
  -- tag counts: NOUN 4, DET 4, VERB 4, AUX 1, ADJ 1, PRON 1 (DET seen first)

  it("gives each word its commonest tag, unknown words the commonest overall", function()
    local pred, info = B.most_frequent_tag(train, {{words = {"the", "run", "zebra", "The"}}})
    -- run: VERB 2 NOUN 1; zebra and The unseen: the tie NOUN/DET/VERB 4 goes to DET (seen first)
    assert.same({{"DET", "VERB", "DET", "DET"}}, pred)
    assert.equals("DET", info.default)
    assert.equals(2, info.unknown)
    assert.equals(4, info.tokens)
  end)

  it("breaks a word's tie by the globally commoner tag, then by first seen", function()
    local t = {
      {words = {"x", "y", "y", "z"}, tags = {"A", "B", "A", "B"}},
      {words = {"w", "w", "v", "v"}, tags = {"C", "A", "D", "C"}},
    }
    -- A 3, B 2, C 2, D 1.  y: A 1 B 1 -> A (commoner); w: C 1 A 1 -> A;
    -- v: D 1 C 1 -> C; a word with tags of equal global counts: first seen
    local pred = B.most_frequent_tag(t, {{words = {"y", "w", "v", "q"}}})
    assert.same({{"A", "A", "C", "A"}}, pred)
    local t2 = {{words = {"x", "x", "u", "u"}, tags = {"C", "B", "B", "C"}}}
    assert.same({{"C"}}, (B.most_frequent_tag(t2, {{words = {"x"}}})))   -- B 2, C 2: C seen first
  end)

  it("backs off to the lowercased form with opts.lowercase", function()
    local pred = B.most_frequent_tag(train, {{words = {"The", "FISH", "Zebra"}}}, {lowercase = true})
    -- fish: NOUN 1 VERB 1, both 4 overall: NOUN, seen first
    assert.same({{"DET", "NOUN", "DET"}}, pred)
  end)
end)

describe("evaluate.baselines: bag-of-words features", function()
  it("tokenises lowercased words and single punctuation marks", function()
    assert.same({"don", "'", "t", "stop", "!"}, B.tokens("Don't  STOP!"))
    assert.same({}, B.tokens(" \t"))
  end)

  it("gives unigrams and bigrams of a single text, each once", function()
    local names, values = B.features({text = "Good good film"})
    assert.same({"good", "good good", "film", "good film"}, names)
    assert.same({1, 1, 1, 1}, values)
    names = B.features({text = "Good good film"}, {bigrams = false})
    assert.same({"good", "film"}, names)
  end)

  it("puts a pair's texts in namespaces a:/b: and adds word-overlap features", function()
    local names, values = B.features({text = "The cat sat.", text_pair = "the cat ran"}, {bigrams = false})
    local got = {}
    for i, n in ipairs(names) do got[n] = values[i] end
    assert.same({"a:the", "a:cat", "a:sat", "a:.", "b:the", "b:cat", "b:ran",
      "overlap:frac_a", "overlap:frac_b", "overlap:jaccard", "overlap:log_shared"}, names)
    -- word types (punctuation left out): A = {the, cat, sat}, B = {the, cat, ran}, 2 shared
    assert.is_true(near(got["overlap:frac_a"], 2 / 3))
    assert.is_true(near(got["overlap:frac_b"], 2 / 3))
    assert.is_true(near(got["overlap:jaccard"], 2 / 4))
    assert.is_true(near(got["overlap:log_shared"], math.log(3)))
    -- an empty side: fractions 0
    names, values = B.features({text = "a b", text_pair = ""}, {bigrams = false})
    assert.same({0, 0, 0, 0}, {values[3], values[4], values[5], values[6]})
  end)
end)

describe("evaluate.baselines: bag-of-words models", function()
  local train = {
    ex("good movie", "pos"), ex("great film", "pos"), ex("a good film", "pos"),
    ex("bad movie", "neg"), ex("awful film", "neg"), ex("a bad film", "neg"),
  }

  it("separates a linearly separable set and predicts by the telling words", function()
    local pred, info = B.bag_of_words(train, train, {bigrams = false})
    for i, e in ipairs(train) do assert.equals(e.label, pred[i]) end
    -- movie/film/a occur as often in each class: only good/great/bad/awful tell
    -- swapping good/great with bad/awful swaps the classes: the optimum
    -- gives movie, film and a weight 0 and the bias 0
    pred = B.bag_of_words(train, texts({"great movie", "awful movie", "a good", "bad"}), {bigrams = false})
    assert.same({"pos", "neg", "pos", "neg"}, pred)
    assert.same({"pos", "neg"}, info.labels)
    assert.equals(1, info.l2)
    assert.equals(7, info.features)   -- good movie great film a bad awful
    -- min_count = 2 drops great and awful (one example each)
    pred, info = B.bag_of_words(train, texts({"great", "good"}), {bigrams = false, min_count = 2})
    assert.equals(5, info.features)
    assert.equals("pos", pred[2])
  end)

  it("fits three classes (softmax)", function()
    local t = {ex("red apple", "r"), ex("red", "r"), ex("green leaf", "g"), ex("blue sky", "b"),
      ex("blue sea", "b"), ex("sky blue", "b")}
    local pred, info = B.bag_of_words(t, texts({"red", "green", "blue", "an apple"}), {l2 = 0.1})
    assert.same({"r", "g", "b", "r"}, pred)
    assert.same({"r", "g", "b"}, info.labels)
    local _, info2 = B.bag_of_words(t, {}, {labels = {"b", "g", "r"}})
    assert.same({"b", "g", "r"}, info2.labels)
  end)

  it("predicts the one training class without fitting", function()
    local pred, info = B.bag_of_words({ex("x", "yes"), ex("y", "yes")}, texts({"x", "zzz"}))
    assert.same({"yes", "yes"}, pred)
    assert.same({}, info.fits)
  end)

  it("ridge regression recovers a known linear relation", function()
    -- y = 1 + 2[a] - [b] + 0.5[c] over every subset of {a, b, c}
    local t = {}
    for mask = 0, 7 do
      local words, y = {}, 1
      if mask & 1 ~= 0 then words[#words + 1] = "a" y = y + 2 end
      if mask & 2 ~= 0 then words[#words + 1] = "b" y = y - 1 end
      if mask & 4 ~= 0 then words[#words + 1] = "c" y = y + 0.5 end
      t[#t + 1] = ex(table.concat(words, " "), y)
    end
    local pred, info = B.bag_of_words(t, texts({"c a", "b", "", "a b c d"}), {bigrams = false, l2 = 1e-8, tol = 0})
    assert.is_nil(info.labels)
    assert.is_true(near(pred[1], 3.5, 1e-4))
    assert.is_true(near(pred[2], 0, 1e-4))
    assert.is_true(near(pred[3], 1, 1e-4))
    assert.is_true(near(pred[4], 2.5, 1e-4))   -- d unseen
    -- a strong penalty shrinks toward the mean (14 / 8), not toward 0
    pred = B.bag_of_words(t, texts({"a"}), {bigrams = false, l2 = 1e6})
    assert.is_true(near(pred[1], 1.75, 1e-3))
  end)

  it("solves a pair task only the overlap features can (words never repeat)", function()
    local t, test, gold = {}, {}, {}
    local function w(k) return "w" .. k end
    for k = 1, 40 do
      local a, b, c = w(3 * k), w(3 * k + 1), w(3 * k + 2)
      local same = k % 2 == 0
      local e = ex(a .. " " .. b, same and "same" or "diff", same and (b .. " " .. a) or c)
      if k <= 30 then t[#t + 1] = e else test[#test + 1] = e gold[#gold + 1] = e.label end
    end
    local pred = B.bag_of_words(t, test)
    assert.same(gold, pred)
  end)

  it("picks the L2 strength on dev from the grid, strongest first", function()
    local dev = {ex("good", "pos"), ex("bad", "neg")}
    local seen = {}
    local pred, info = B.bag_of_words(train, texts({"good"}), {dev = dev, grid = {1, 100, 0.1},
      score = function(p, g) seen[#seen + 1] = #p return 0 end})
    assert.same({"pos"}, pred)
    assert.same({100, 1, 0.1}, {info.fits[1].l2, info.fits[2].l2, info.fits[3].l2})
    assert.equals(100, info.l2)   -- all tie at 0: the strongest
    assert.equals(0, info.dev_score)
    assert.same({2, 2, 2}, seen)
    -- the default dev score is accuracy: with more positive examples a
    -- strong penalty leaves the bias to decide, and "bad" comes out pos
    local t = {ex("nice", "pos"), ex("fine", "pos"), ex("lovely", "pos"), ex("good", "pos"),
      ex("bad", "neg"), ex("bad film", "neg"), ex("a bad day", "neg")}
    pred, info = B.bag_of_words(t, texts({"bad"}), {dev = dev, grid = {1e4, 0.1}})
    assert.same({"neg"}, pred)
    assert.equals(0.1, info.l2)
    assert.same({0.5, 1}, {info.fits[1].dev_score, info.fits[2].dev_score})
  end)

  it("is deterministic", function()
    local t = {}
    for k = 1, 60 do
      t[k] = ex("w" .. (k * 7 % 13) .. " w" .. (k * 5 % 11) .. " v" .. (k % 4),
        ({"x", "y", "z"})[k % 3 + 1], k % 2 == 0 and ("w" .. k % 9) or nil)
    end
    local p1, i1 = B.bag_of_words(t, t, {dev = t})
    local p2, i2 = B.bag_of_words(t, t, {dev = t})
    assert.same(p1, p2)
    assert.same(i1, i2)
  end)
end)

describe("evaluate.baselines: argument errors name the function, the argument and the value", function()
  it("rejects bad lists and examples", function()
    local e = error_of(B.majority, nil, {})
    assert.matches("baselines.majority: train must be a non%-empty list of examples, got nil", e)
    e = error_of(B.majority, {}, {})
    assert.matches("baselines.majority: train", e, 1, true)
    e = error_of(B.bag_of_words, {ex("a", "x"), {label = "y"}}, {})
    assert.matches("baselines.bag_of_words: train[2].text must be a string, got nil", e, 1, true)
    e = error_of(B.bag_of_words, {ex("a", "x")}, {{text = 5}})
    assert.matches("test[1].text must be a string, got 5", e, 1, true)
    e = error_of(B.majority, {ex("a", true)}, {})
    assert.matches("baselines.majority: train[1].label must be a string or a number, got true", e, 1, true)
    e = error_of(B.majority, {ex("a", "1"), ex("b", "high")}, {}, {regression = true})
    assert.matches("train[2].label must be a finite number (a regression target), got 'high'", e, 1, true)
    e = error_of(B.most_frequent_tag, {{words = {"a", "b"}, tags = {"X"}}}, {})
    assert.matches("baselines.most_frequent_tag: train[1].tags must be a list of 2 tags", e, 1, true)
    e = error_of(B.most_frequent_tag, {{words = {"a"}, tags = {"X"}}}, {{words = {"a", 3}}})
    assert.matches("test[1].words[2] must be a string, got 3", e, 1, true)
  end)

  it("rejects bad options", function()
    local t = {ex("a", "x"), ex("b", "y")}
    local e = error_of(B.bag_of_words, t, {}, {l2 = -1})
    assert.matches("baselines.bag_of_words: opts.l2 must be a positive number, got -1", e, 1, true)
    e = error_of(B.bag_of_words, t, {}, {dev = t, grid = {1, 0}})
    assert.matches("opts.grid[2] must be a positive number, got 0", e, 1, true)
    e = error_of(B.bag_of_words, t, {}, {grid = {1}})
    assert.matches("opts.grid must be nil without opts.dev", e, 1, true)
    e = error_of(B.bag_of_words, t, {}, {max_iter = 0.5})
    assert.matches("opts.max_iter must be a positive integer, got 0.5", e, 1, true)
    e = error_of(B.bag_of_words, t, {}, {min_count = 0})
    assert.matches("opts.min_count must be a positive integer, got 0", e, 1, true)
    e = error_of(B.bag_of_words, t, {}, {bigrams = "yes"})
    assert.matches("opts.bigrams must be true, false or nil, got 'yes'", e, 1, true)
    e = error_of(B.majority, t, {}, "x")
    assert.matches("baselines.majority: opts must be a table or nil, got 'x'", e, 1, true)
    e = error_of(B.most_frequent_tag, {{words = {"a"}, tags = {"X"}}}, {}, {lowercase = 1})
    assert.matches("opts.lowercase must be true, false or nil, got 1", e, 1, true)
  end)
end)
