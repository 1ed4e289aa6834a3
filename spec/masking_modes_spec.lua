-- The masking modes of bert.data.pretraining (csrc/data/instances.c):
-- SpanBERT's geometric spans (mask_mode "span") and ALBERT's n-grams
-- ("ngram") hit the requested rate, never cover a special token, mask
-- contiguous runs (longer than token masking's), and the same in the
-- dynamic loader; bad options are refused by name.
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
    assert.matches("option 'mask_mode' must be 'tokens', 'span' or 'ngram', got spans", err, 1, true)
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
