-- The masking modes of bert.data.pretraining (csrc/data/instances.c):
-- SpanBERT's geometric spans (mask_mode "span") and ALBERT's n-grams
-- ("ngram") hit the requested rate, never cover a special token, mask
-- contiguous runs (longer than token masking's), and the same in the
-- dynamic loader; bad options are refused by name.  ERNIE's phrases
-- ("phrase", with bert.data.chunker's learned table): phrases masked
-- whole, the rate, no special token, deterministic under a seed, static
-- and dynamic; the phrase file round-trips and a damaged one is refused
-- naming the file and the line.
local bert = require("bert")
local pt = require("bert.data.pretraining")
local tokenizer = require("bert.tokenizer")

local tok = assert(tokenizer.load("spec/fixtures/tokenizer/bert-base-uncased-vocab.txt"))
local CLS, SEP, MASK = tok:token_to_id("[CLS]"), tok:token_to_id("[SEP]"), tok:token_to_id("[MASK]")

local WORDS = {}
for w in ([[the a cat dog sat on mat ran fast slow house tree river bank money city road car blue
  green red small large old new happy sad quickly tokenization unbelievably hyperparameters wordpieces
  snowboarding time year people way day man thing woman life child world school]]):gmatch("%S+") do
  WORDS[#WORDS + 1] = w
end
local docs = {}
do
  local state = 5
  local function rnd(n) state = (state * 1103515245 + 12345) % 2147483648 return state % n + 1 end
  for d = 1, 60 do
    local doc = {}
    for _ = 1, 3 + rnd(8) do
      local ws = {}
      for _ = 1, 4 + rnd(14) do ws[#ws + 1] = WORDS[rnd(#WORDS)] end
      doc[#doc + 1] = table.concat(ws, " ") .. "."
    end
    docs[d] = doc
  end
end

local root = os.tmpname()
os.remove(root)
assert(bert.mkdir(root))
local n = 0
local function make(opts)
  n = n + 1
  local o = {documents = docs, tokenizer = tok, output = root .. "/s" .. n, max_seq_length = 64,
             masking = "static", dupe_factor = 2, masked_lm_prob = 0.15, max_predictions_per_seq = 64, seed = 3}
  for k, v in pairs(opts) do o[k] = v end
  local info = assert(pt.create_shards(o))
  local s = assert(pt.read(info.dir))
  local list = {}
  for i = 1, s:stats().instances do list[i] = s:get(i) end
  return list, info.dir
end

-- Checks every instance: the count the rate asks for (exact when units
-- are tokens), no special token covered; returns the predicted share and
-- the mean length of runs of adjacent masked positions.
local function check(list, exact, prob)
  local pred, total, runs, run_tokens = 0, 0, 0, 0
  for _, inst in ipairs(list) do
    local x = #inst.tokens * prob   -- rounded half to even, as Python's round() and the C side
    local r = math.floor(x + 0.5)
    if math.abs(x + 0.5 - r) < 1e-9 and r % 2 == 1 then r = r - 1 end
    local want = math.min(64, math.max(1, r))
    if exact then
      assert.equal(want, #inst.masked_positions)
    else
      assert.is_true(#inst.masked_positions <= want and #inst.masked_positions >= want - 3,
        #inst.masked_positions .. " of " .. want)
    end
    local prev
    for q, p in ipairs(inst.masked_positions) do
      local orig = inst.tokens[p + 1]
      assert.is_true(orig ~= CLS and orig ~= SEP and orig ~= MASK, "a special token was masked")
      assert.equal(orig, inst.masked_labels[q])
      if prev == nil or p ~= prev + 1 then runs = runs + 1 end
      run_tokens = run_tokens + 1
      prev = p
    end
    pred = pred + #inst.masked_positions
    total = total + #inst.tokens
  end
  return pred / total, run_tokens / runs
end

describe("masking modes", function()
  local _, token_run = check((make({})), true, 0.15)

  it("span (SpanBERT): the exact rate, no special token, long contiguous runs", function()
    local list = make({mask_mode = "span"})
    local share, run = check(list, true, 0.15)
    assert.is_true(share > 0.13 and share < 0.17, "share " .. share)
    -- geometric spans (p = 0.2, mean length about 3.8 before clipping to the budget)
    assert.is_true(run > 2.0 and run > token_run + 0.8, string.format("span runs %.2f, token runs %.2f", run, token_run))
  end)

  it("ngram (ALBERT): the rate, n-grams no longer than max_span, between token and span masking", function()
    local list = make({mask_mode = "ngram", max_span = 3})
    local share, run = check(list, true, 0.15)
    assert.is_true(share > 0.13 and share < 0.17, "share " .. share)
    assert.is_true(run > token_run + 0.2, string.format("n-gram runs %.2f, token runs %.2f", run, token_run))
    -- max_span = 1 is token masking by units
    local _, run1 = check((make({mask_mode = "ngram", max_span = 1, seed = 9})), true, 0.15)
    assert.is_true(run1 < run, string.format("1-gram runs %.2f, 3-gram runs %.2f", run1, run))
  end)

  it("span over whole words and at --mask-prob 0.3", function()
    local list = make({mask_mode = "span", whole_word_mask = true, masked_lm_prob = 0.3})
    local share = check(list, false, 0.3)
    assert.is_true(share > 0.26 and share < 0.31, "share " .. share)
  end)

  it("the dynamic loader masks by the shard set's mode at the requested rate", function()
    local _, dir = make({mask_mode = "span", masking = "dynamic", dupe_factor = 1})
    local loader = assert(pt.Loader{dir = dir, batch_size = 8, seq_len = 64, seed = 1})
    local masked, real, specials_hit = 0, 0, 0
    for _ = 1, 5 do
      local b = loader:next()
      local ids, labels, attn = b.input_ids:totable(), b.labels:totable(), b.attention_mask:totable()
      for i = 1, #ids do
        local rlen = 0
        for t = 1, #ids[i] do
          if attn[i][t] == 1 then rlen = rlen + 1 end
          if labels[i][t] ~= -100 then
            masked = masked + 1
            if labels[i][t] == CLS or labels[i][t] == SEP then specials_hit = specials_hit + 1 end
          end
        end
        real = real + rlen
      end
    end
    loader:close()
    assert.equal(0, specials_hit)
    local share = masked / real
    assert.is_true(share > 0.13 and share < 0.17, "share " .. share)
  end)

  it("refuses bad options by name", function()
    local ok, err = pcall(pt.create_shards, {documents = docs, tokenizer = tok, output = root .. "/bad", mask_mode = "spans"})
    assert.is_false(ok)
    assert.matches("option 'mask_mode' must be 'tokens', 'span', 'ngram' or 'phrase', got spans", err, 1, true)
    ok, err = pcall(pt.create_shards, {documents = docs, tokenizer = tok, output = root .. "/bad", mask_mode = "span",
                                       max_span = 0})
    assert.is_false(ok)
    assert.matches("max_span", err, 1, true)
    ok, err = pcall(pt.create_shards, {documents = docs, tokenizer = tok, output = root .. "/bad", span_p = 0})
    assert.is_false(ok)
    assert.matches("span_p", err, 1, true)
  end)

  teardown(function() os.execute("rm -rf '" .. root .. "'") end)
end)

describe("phrase masking (ERNIE 1.0) with a learned phrase table", function()
  local chunker = require("bert.data.chunker")
  -- sentences of random words with planted phrases (some of several word pieces)
  local PLANTED = {"new york city", "hong kong", "unbelievably snowboarding", "the united states", "prime minister"}
  local pdocs = {}
  do
    local state = 17
    local function rnd(k) state = (state * 1103515245 + 12345) % 2147483648 return state % k + 1 end
    for d = 1, 60 do
      local doc = {}
      for _ = 1, 3 + rnd(8) do
        local ws = {}
        for _ = 1, 4 + rnd(14) do ws[#ws + 1] = WORDS[rnd(#WORDS)] end
        if rnd(10) <= 5 then table.insert(ws, rnd(#ws), PLANTED[rnd(#PLANTED)]) end
        doc[#doc + 1] = table.concat(ws, " ") .. "."
      end
      pdocs[d] = doc
    end
  end
  local proot = os.tmpname()
  os.remove(proot)
  assert(bert.mkdir(proot))
  teardown(function() os.execute("rm -rf '" .. proot .. "'") end)

  local phrases = chunker.learn{documents = pdocs, tokenizer = tok}
  local V = tok:vocab_size()
  local cont = {}
  for _, id in ipairs(chunker.word_continuation(tok, V)) do cont[id] = true end
  local phrase_set, max_phrase = {}, 0
  for _, p in ipairs(phrases.list) do
    phrase_set[table.concat(p.ids, " ")] = true
    max_phrase = math.max(max_phrase, #p.ids)
  end

  -- The reference segmentation, written apart from the C one: whole words
  -- (a first piece and its ## pieces, never across a special token), then,
  -- left to right, the longest run of two or more words that is a phrase.
  local function units(tokens)
    local words = {}
    for i, t in ipairs(tokens) do
      if t ~= CLS and t ~= SEP and t ~= MASK then
        local last = words[#words]
        if cont[t] and last and last[2] == i - 1 then last[2] = i else words[#words + 1] = {i, i} end
      end
    end
    local out, w = {}, 1
    while w <= #words do
      local best, k = w, w + 1
      while k <= #words and words[k][1] == words[k - 1][2] + 1 and words[k][2] - words[w][1] < max_phrase do
        if phrase_set[table.concat(tokens, " ", words[w][1], words[k][2])] then best = k end
        k = k + 1
      end
      out[#out + 1] = {words[w][1], words[best][2], phrase = best > w}
      w = best + 1
    end
    return out
  end

  -- Every unit masked whole or not at all; returns the predicted share and
  -- how many phrases were masked.
  local function check_whole(list, prob)
    local pred, total, phrases_masked = 0, 0, 0
    for _, inst in ipairs(list) do
      local masked = {}
      for q, p in ipairs(inst.masked_positions) do
        local orig = inst.tokens[p + 1]
        assert.is_true(orig ~= CLS and orig ~= SEP and orig ~= MASK, "a special token was masked")
        assert.equal(orig, inst.masked_labels[q])
        masked[p + 1] = true
      end
      for _, u in ipairs(units(inst.tokens)) do
        local n = 0
        for i = u[1], u[2] do if masked[i] then n = n + 1 end end
        assert.is_true(n == 0 or n == u[2] - u[1] + 1,
          string.format("unit %d..%d (%s) partly masked", u[1], u[2], u.phrase and "a phrase" or "a word"))
        if n > 0 and u.phrase then phrases_masked = phrases_masked + 1 end
      end
      local want = math.min(64, math.max(1, math.floor(#inst.tokens * prob + 0.5)))
      assert.is_true(#inst.masked_positions <= want, #inst.masked_positions .. " > " .. want)
      pred = pred + #inst.masked_positions
      total = total + #inst.tokens
    end
    return pred / total, phrases_masked
  end

  local k = 0
  local function pmake(opts)
    k = k + 1
    local o = {documents = pdocs, tokenizer = tok, output = proot .. "/p" .. k, max_seq_length = 64,
               masking = "static", dupe_factor = 3, masked_lm_prob = 0.15, max_predictions_per_seq = 64, seed = 3,
               mask_mode = "phrase", phrases = phrases}
    for key, v in pairs(opts) do o[key] = v end
    local info = assert(pt.create_shards(o))
    local s = assert(pt.read(info.dir))
    local list = {}
    for i = 1, s:stats().instances do list[i] = s:get(i) end
    return list, info.dir
  end

  it("learns the planted phrases (Mikolov's collocation score, two passes), nothing else", function()
    local texts = {}
    for _, p in ipairs(phrases.list) do texts[p.text] = p end
    for _, want in ipairs(PLANTED) do assert.is_truthy(texts[want], "missing phrase '" .. want .. "'") end
    assert.equal(#PLANTED, phrases:count())
    for _, p in ipairs(phrases.list) do assert.is_true(p.count >= 5 and p.score >= 10) end
  end)

  it("masks phrases and words whole at the requested rate, never special tokens", function()
    local share, masked = check_whole((pmake({})), 0.15)
    assert.is_true(share > 0.13 and share < 0.16, "share " .. share)
    assert.is_true(masked >= 20, "only " .. masked .. " phrases masked")
    local share3 = check_whole((pmake({masked_lm_prob = 0.3, seed = 4})), 0.3)
    assert.is_true(share3 > 0.27 and share3 < 0.31, "share " .. share3)
  end)

  it("respects max_predictions_per_seq", function()
    local list = pmake({masked_lm_prob = 0.5, max_predictions_per_seq = 5})
    for _, inst in ipairs(list) do assert.is_true(#inst.masked_positions <= 5) end
  end)

  it("is deterministic under a seed", function()
    local a, b, c = pmake({seed = 21}), pmake({seed = 21}), pmake({seed = 22})
    assert.same(a, b)
    assert.are_not.same(a, c)
  end)

  it("the dynamic loader masks phrases whole with the shard set's phrases.txt, the same for the same seed", function()
    local _, dir = pmake({masking = "dynamic", dupe_factor = 1})
    assert.equal(phrases:serialize(), require("bert.fs").read_file(dir .. "/phrases.txt"))
    local function batches(seed)
      local loader = assert(pt.Loader{dir = dir, batch_size = 8, seq_len = 64, seed = seed})
      local out = {}
      for i = 1, 6 do
        local b = loader:next()
        out[i] = {ids = b.input_ids:totable(), labels = b.labels:totable(), attn = b.attention_mask:totable()}
      end
      loader:close()
      return out
    end
    local got = batches(5)
    assert.same(got, batches(5))
    local list = {}
    for _, b in ipairs(got) do
      for r = 1, #b.ids do
        local inst = {tokens = {}, masked_positions = {}, masked_labels = {}}
        for t = 1, #b.ids[r] do
          if b.attn[r][t] == 1 then
            inst.tokens[t] = b.labels[r][t] ~= -100 and b.labels[r][t] or b.ids[r][t]
            if b.labels[r][t] ~= -100 then
              inst.masked_positions[#inst.masked_positions + 1] = t - 1
              inst.masked_labels[#inst.masked_labels + 1] = b.labels[r][t]
            end
          end
        end
        list[#list + 1] = inst
      end
    end
    local share, masked = check_whole(list, 0.15)
    assert.is_true(share > 0.12 and share < 0.16, "share " .. share)
    assert.is_true(masked >= 5, "only " .. masked .. " phrases masked")
    -- a phrase file changed under the shard set is noticed
    local f = assert(io.open(dir .. "/phrases.txt", "wb"))
    f:write(chunker.from_list({phrases.list[1]}):serialize())
    f:close()
    local l2, err = pt.Loader{dir = dir, batch_size = 8, seq_len = 64}
    assert.is_nil(l2)
    assert.matches("not the phrase table the shards were made with", err, 1, true)
  end)

  it("the phrase table round-trips through its file", function()
    local path = proot .. "/phrases.txt"
    assert.is_true(phrases:save(path))
    local again = assert(chunker.load(path, {vocab_size = V}))
    assert.equal(phrases:count(), again:count())
    for i, p in ipairs(phrases.list) do
      assert.same(p.ids, again.list[i].ids)
      assert.equal(p.count, again.list[i].count)
      assert.near(p.score, again.list[i].score, 1e-5 * p.score)
      assert.equal(p.text, again.list[i].text)
      assert.same(p.ids, again:handle():get(i))
    end
    assert.equal(phrases:checksum(), again:checksum())
    assert.equal(phrases:serialize(), again:serialize())
    assert.is_nil(select(2, pcall(function() return chunker.load(proot .. "/none.txt") end)))
    local none, err = chunker.load(proot .. "/none.txt")
    assert.is_nil(none)
    assert.matches("cannot read " .. proot .. "/none.txt", err, 1, true)
  end)

  it("refuses a damaged phrase file naming the file and the line", function()
    local good = phrases:serialize()
    local lines = {}
    for l in good:gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
    local first = 4   -- header, comment, column names, then the phrases
    assert.matches("^%d+ %d+", lines[first])
    local function with(i, text)
      local copy = {table.unpack(lines)}
      copy[i] = text
      return table.concat(copy, "\n") .. "\n"
    end
    local cases = {
      {with(1, "# some other file"), 1, "not a phrase table"},
      {with(first, "12 x7\t5\t1.5\tfoo"), first, "ids must be two or more token ids"},
      {with(first, "12\t5\t1.5\tfoo"), first, "ids must be two or more token ids"},
      {with(first, "12 " .. V .. "\t5\t1.5\tfoo"), first, "outside the vocabulary"},
      {with(first, lines[first]:gsub("\t%d+\t", "\t0\t", 1)), first, "count must be a positive integer"},
      {with(first, lines[first]:gsub("\t[^\t]*\t([^\t]*)$", "\tnan\t%1", 1)), first, "score must be a finite number"},
      {with(first, "1 2\t5"), first, "expected 4 tab-separated fields"},
      {with(first + 1, lines[first]), first + 1, "repeats the phrase of line " .. first},
      {with(#lines, "# end: 99 phrases"), #lines, "the end line counts 99 phrases"},
      {table.concat(lines, "\n", 1, #lines - 1) .. "\n", #lines - 1, "no '# end: N phrases' line"},
      {good:sub(1, #good - 8), #lines, "no newline"},
    }
    for i, c in ipairs(cases) do
      local path = string.format("%s/bad%d.txt", proot, i)
      local f = assert(io.open(path, "wb"))
      f:write(c[1])
      f:close()
      local t, err = chunker.load(path, {vocab_size = V})
      assert.is_nil(t, "case " .. i)
      assert.matches(string.format("%s:%d: ", path, c[2]), err, 1, true)
      assert.matches(c[3], err, 1, true)
    end
  end)

  it("refuses phrase masking without a table, and bad learning options, by name", function()
    local ok, err = pcall(pt.create_shards, {documents = pdocs, tokenizer = tok, output = proot .. "/bad", mask_mode = "phrase"})
    assert.is_false(ok)
    assert.matches("mask_mode 'phrase' needs option 'phrases'", err, 1, true)
    ok, err = pcall(pt.create_shards, {documents = pdocs, tokenizer = tok, output = proot .. "/bad", mask_mode = "phrase",
                                       phrases = {}})
    assert.is_false(ok)
    assert.matches("option 'phrases' expected a phrase table", err, 1, true)
    ok, err = pcall(chunker.learn, {documents = pdocs, tokenizer = tok, max_words = 1})
    assert.is_false(ok)
    assert.matches("chunker.learn: option 'max_words' must be at least 2", err, 1, true)
    ok, err = pcall(chunker.learn, {documents = pdocs, tokenizer = tok, min_count = 0})
    assert.is_false(ok)
    assert.matches("option 'min_count' must be a positive integer", err, 1, true)
    ok, err = pcall(chunker.from_list, {{ids = {1, 2}}, {ids = {1, 2}}})
    assert.is_false(ok)
    assert.matches("phrase 2 repeats phrase 1", err, 1, true)
  end)
end)
