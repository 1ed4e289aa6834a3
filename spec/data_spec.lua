local bert = require("bert")
local corpus = require("bert.data.corpus")
local pt = require("bert.data.pretraining")
local tokenizer = require("bert.tokenizer")

local FIX = "spec/fixtures/data/"

---------------------------------------------------------------- helpers

local tok = assert(tokenizer.load("spec/fixtures/tokenizer/bert-base-uncased-vocab.txt"))
local CLS, SEP = tok:token_to_id("[CLS]"), tok:token_to_id("[SEP]")
local MASK, PAD = tok:token_to_id("[MASK]"), tok:token_to_id("[PAD]")

local WORDS = {}
for w in ([[the a cat dog sat on mat ran fast slow house tree river bank money
  city road car blue green red small large old new happy sad quickly tokenization
  unbelievably hyperparameters wordpieces snowboarding time year people way day man
  thing woman life child world school state family student group country problem]]):gmatch("%S+") do
  WORDS[#WORDS + 1] = w
end

-- A deterministic synthetic corpus: every sentence starts with its
-- document's number (0..ndocs-1) and 200 + its index, markers that single
-- tokens of the vocabulary encode.
local function synthetic(ndocs, seed)
  local state = seed
  local function rnd(n)
    state = (state * 6364136223846793005 + 1442695040888963407)
    return ((state >> 33) % n) + 1
  end
  local docs = {}
  for d = 1, ndocs do
    local doc = {}
    for s = 1, 2 + rnd(12) do
      local words = {tostring(d - 1), tostring(199 + s)}
      for _ = 1, 3 + rnd(14) do words[#words + 1] = WORDS[rnd(#WORDS)] end
      doc[#doc + 1] = table.concat(words, " ") .. "."
    end
    docs[d] = doc
  end
  return docs
end

local tmp_root = require("spec.support.tmpdir").dir()
local ndirs = 0
local function tmpdir()
  ndirs = ndirs + 1
  return tmp_root .. "/d" .. ndirs
end

local function read_bytes(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function write_bytes(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

local function copy_set(src)
  local dst = tmpdir()
  assert(bert.mkdir(dst))
  write_bytes(dst .. "/meta.json", read_bytes(src .. "/meta.json"))
  local i = 0
  while true do
    local name = string.format("/shard-%05d.bin", i)
    local f = io.open(src .. name, "rb")
    if not f then break end
    local s = f:read("a")
    f:close()
    write_bytes(dst .. name, s)
    i = i + 1
  end
  return dst
end

local function marker(id)   -- the number a token stands for, or nil
  local n = tonumber(tok:id_to_token(id) or "")
  return n
end

local function segments(inst)
  local a, b = {}, {}
  for j, id in ipairs(inst.tokens) do
    if id ~= CLS and id ~= SEP then
      if inst.token_type_ids[j] == 0 then a[#a + 1] = id else b[#b + 1] = id end
    end
  end
  return a, b
end

local function markers(ids)  -- documents and sentence indices seen
  local docs, sents = {}, {}
  for _, id in ipairs(ids) do
    local n = marker(id)
    if n and n < 200 then docs[#docs + 1] = n elseif n then sents[#sents + 1] = n end
  end
  return docs, sents
end

local DOCS = synthetic(150, 7)

local SETS = {}
local function shards(key, opts)
  if SETS[key] then return SETS[key] end
  local o = {documents = DOCS, tokenizer = tok, output = tmpdir(), max_seq_length = 64,
             max_predictions_per_seq = 10, dupe_factor = 2, seed = 3, instances_per_shard = 500}
  for k, v in pairs(opts or {}) do o[k] = v end
  local info = assert(pt.create_shards(o))
  SETS[key] = info
  return info
end

local function all_instances(dir)
  local s = assert(pt.read(dir))
  local list = {}
  for i = 1, s:stats().instances do list[i] = s:get(i) end
  return list, s:stats()
end

----------------------------------------------------------------- corpus

describe("corpus", function()
  it("splits sentences by its rules", function()
    local cases = {
      {"Mr. Smith went to Washington. He arrived at 3.30 p.m. on Monday.",
       {"Mr. Smith went to Washington.", "He arrived at 3.30 p.m. on Monday."}},
      {"I met J. R. R. Tolkien. He was nice! Was he? Yes.",
       {"I met J. R. R. Tolkien.", "He was nice!", "Was he?", "Yes."}},
      {"Prices rose 3.5% in the U.S. economy. Then... they fell... Finally it stopped.",
       {"Prices rose 3.5% in the U.S. economy.", "Then... they fell...", "Finally it stopped."}},
      {'He said "Stop." Then he left. (This is a note.) Another one.',
       {'He said "Stop."', "Then he left.", "(This is a note.)", "Another one."}},
      {'Use e.g. apples, i.e. fruit. "Really?" she asked.\nDr. Who?',
       {"Use e.g. apples, i.e. fruit.", '"Really?" she asked.', "Dr. Who?"}},
      {"It cost $4.50. That is cheap\226\128\166 Not really.",
       {"It cost $4.50.", "That is cheap\226\128\166", "Not really."}},
      {"No terminator at the end", {"No terminator at the end"}},
      {"   ", {}},
    }
    for _, c in ipairs(cases) do
      assert.same(c[2], corpus.split_sentences(c[1]))
    end
  end)

  it("reads the plain format and raw text", function()
    local docs = assert(corpus.read(FIX .. "plain.txt"))
    assert.same({{"The first sentence.", "A second one."}, {"Document two has one line."},
                 {"Third document.", "Its second sentence."}}, docs)
    local raw = assert(corpus.from_text(FIX .. "raw.txt"))
    assert.same({{"Mr. Smith went to Washington.", "He arrived at 3.30 p.m. on Monday!"},
                 {"Dr. J. Watson wrote \"It was late.\"", "Then he slept...", "The end."}}, raw)
    local none, err = corpus.read(FIX .. "missing.txt")
    assert.is_nil(none)
    assert.matches("missing.txt", err)
    assert.has_error(function() corpus.split_sentences(nil) end,
      "split_sentences: argument #1 (text) expected string, got nil")
  end)

  it("writes what it reads", function()
    local path = tmp_root .. "/w.txt"
    assert(corpus.write(path, {{"a b.", "c."}, {"d."}}))
    assert.same({{"a b.", "c."}, {"d."}}, corpus.read(path))
  end)
end)

------------------------------------------------------------- instances

describe("instance creation", function()
  it("builds [CLS] A [SEP] B [SEP] within max_seq_length (nsp)", function()
    local info = shards("nsp")
    assert.equal("nsp", info.objective)
    local list, st = all_instances(info.dir)
    assert.equal(info.instances, #list)
    local short, same, differ = 0, 0, 0
    for _, inst in ipairs(list) do
      local n = #inst.tokens
      assert.is_true(n <= 64)
      assert.equal(CLS, inst.tokens[1])
      assert.equal(SEP, inst.tokens[n])
      local nsep, la = 0, 0
      for j, id in ipairs(inst.tokens) do
        if id == SEP then nsep = nsep + 1 end
        if inst.token_type_ids[j] == 0 then la = j end
      end
      assert.equal(2, nsep)
      assert.equal(SEP, inst.tokens[la])       -- type 0 = [CLS] A [SEP]
      for j = la + 1, n do assert.equal(1, inst.token_type_ids[j]) end
      if n < 40 then short = short + 1 end
      local a, b = segments(inst)
      assert.is_true(#a >= 1 and #b >= 1)
      local da, db = markers(a), markers(b)
      if #da > 0 and #db > 0 then
        if inst.label == 0 then
          assert.equal(da[1], db[1])            -- IsNext: same document
          same = same + 1
        elseif da[1] ~= db[1] then
          differ = differ + 1
        end
      end
    end
    -- NotNext share: 50% plus the single-sentence chunks
    local p = st.label1 / st.instances
    assert.is_true(p > 0.45 and p < 0.65, "NotNext share " .. p)
    assert.is_true(short > 0, "short_seq_prob gives some short instances")
    assert.is_true(same > 100 and differ > 100)
  end)

  it("swaps the two segments for sop, from one document", function()
    local info = shards("sop", {objective = "sop"})
    local list, st = all_instances(info.dir)
    local swapped, ordered = 0, 0
    for _, inst in ipairs(list) do
      local a, b = segments(inst)
      local da, sa = markers(a)
      local db, sb = markers(b)
      if #da > 0 and #db > 0 and da[1] == db[1] and #sa > 0 and #sb > 0 then
        if inst.label == 0 then
          assert.is_true(sa[#sa] < sb[1], "in order")
          ordered = ordered + 1
        else
          -- swapped: B holds the earlier sentences (or a one-sentence chunk's random B)
          if sb[#sb] < sa[1] then swapped = swapped + 1 end
        end
      end
    end
    assert.is_true(swapped > 100 and ordered > 100, swapped .. " " .. ordered)
    local p = st.label1 / st.instances
    assert.is_true(p > 0.45 and p < 0.65, "swapped share " .. p)
  end)

  it("packs full sentences across documents for objective none", function()
    local info = shards("none", {objective = "none", dupe_factor = 1})
    local list = all_instances(info.dir)
    local inner, full = 0, 0
    for _, inst in ipairs(list) do
      local n = #inst.tokens
      assert.is_true(n <= 64)
      assert.equal(CLS, inst.tokens[1])
      assert.equal(SEP, inst.tokens[n])
      assert.equal(-1, inst.label)
      for j = 1, n do assert.equal(0, inst.token_type_ids[j]) end
      full = full + n
      local doc = nil
      for j = 2, n - 1 do
        local id = inst.tokens[j]
        assert.is_false(id == SEP and inst.tokens[j + 1] == SEP, "no empty document")
        if id == SEP then
          inner = inner + 1
          doc = nil
        else
          local m = marker(id)
          if m and m < 200 then
            if doc then assert.equal(doc, m, "a document changes only after a [SEP]") end
            doc = m
          end
        end
      end
    end
    assert.is_true(inner > 10, "documents are crossed with a [SEP]")
    assert.is_true(full / #list > 0.8 * 64, "blocks are nearly full: " .. full / #list)
  end)

  it("is deterministic: the same seed gives the same bytes", function()
    local opts = {documents = DOCS, tokenizer = tok, max_seq_length = 64, dupe_factor = 2, seed = 11}
    opts.output = tmpdir()
    local a = assert(pt.create_shards(opts))
    opts.output = tmpdir()
    local b = assert(pt.create_shards(opts))
    opts.output, opts.seed = tmpdir(), 12
    local c = assert(pt.create_shards(opts))
    local sa = read_bytes(a.dir .. "/shard-00000.bin")
    assert.equal(sa, read_bytes(b.dir .. "/shard-00000.bin"))
    assert.are_not.equal(sa, read_bytes(c.dir .. "/shard-00000.bin"))
  end)
end)

---------------------------------------------------------------- masking

local function mask_stats(list)
  local cand, pred, m, keep, rand = 0, 0, 0, 0, 0
  for _, inst in ipairs(list) do
    for _, id in ipairs(inst.tokens) do
      if id ~= CLS and id ~= SEP then cand = cand + 1 end
    end
    for q, p in ipairs(inst.masked_positions) do
      local orig = inst.tokens[p + 1]
      assert.is_true(orig ~= CLS and orig ~= SEP, "specials are never masked")
      assert.equal(orig, inst.masked_labels[q])
      local r = inst.masked_ids[q]
      pred = pred + 1
      if r == MASK then m = m + 1 elseif r == orig then keep = keep + 1 else rand = rand + 1 end
    end
  end
  return cand, pred, m, keep, rand
end

describe("masking", function()
  it("static: about 15% predicted, 80/10/10", function()
    local list = all_instances(shards("nsp").dir)
    local cand, pred, m, keep, rand = mask_stats(list)
    local r = pred / cand
    assert.is_true(r > 0.14 and r < 0.18, "predicted share " .. r)
    assert.is_true(math.abs(m / pred - 0.8) < 0.02, "mask share " .. m / pred)
    assert.is_true(math.abs(keep / pred - 0.1) < 0.02, "keep share " .. keep / pred)
    assert.is_true(math.abs(rand / pred - 0.1) < 0.02, "random share " .. rand / pred)
    for _, inst in ipairs(list) do
      local want = math.min(10, math.max(1, math.floor(#inst.tokens * 0.15 + 0.5)))
      assert.is_true(#inst.masked_positions <= want)
      for q = 2, #inst.masked_positions do
        assert.is_true(inst.masked_positions[q] > inst.masked_positions[q - 1])
      end
    end
  end)

  it("whole-word masking masks every piece of a word together", function()
    local info = shards("wwm", {whole_word_mask = true})
    local list = all_instances(info.dir)
    local groups = 0
    for _, inst in ipairs(list) do
      local masked = {}
      for _, p in ipairs(inst.masked_positions) do masked[p + 1] = true end
      for j = 2, #inst.tokens do
        local t = tok:id_to_token(inst.tokens[j])
        local prev = inst.tokens[j - 1]
        if t:sub(1, 2) == "##" and prev ~= CLS and prev ~= SEP then
          assert.equal(masked[j - 1] or false, masked[j] or false)
          if masked[j] then groups = groups + 1 end
        end
      end
    end
    assert.is_true(groups > 20, "some multi-piece words were masked: " .. groups)
  end)

  it("dynamic: drawn in the loader, about 15%, 80/10/10, never on specials or padding", function()
    local L = assert(pt.Loader{dir = shards("dyn", {masking = "dynamic"}).dir, batch_size = 16,
                               masking = "dynamic", seed = 5})
    local cand, pred, m, keep = 0, 0, 0, 0
    for _ = 1, 20 do
      local b = L:next()
      local ids, lab, att = b.input_ids:totable(), b.labels:totable(), b.attention_mask:totable()
      for i = 1, #ids do
        for j = 1, #ids[i] do
          local orig = lab[i][j] ~= -100 and lab[i][j] or ids[i][j]
          if att[i][j] == 1 and orig ~= CLS and orig ~= SEP then cand = cand + 1 end
          if lab[i][j] ~= -100 then
            assert.equal(1, att[i][j])
            assert.is_true(orig ~= CLS and orig ~= SEP and orig ~= PAD)
            pred = pred + 1
            if ids[i][j] == MASK then m = m + 1 elseif ids[i][j] == orig then keep = keep + 1 end
          end
        end
      end
    end
    L:close()
    local r = pred / cand
    assert.is_true(r > 0.14 and r < 0.18, "predicted share " .. r)
    assert.is_true(math.abs(m / pred - 0.8) < 0.03, "mask share " .. m / pred)
    assert.is_true(math.abs(keep / pred - 0.1) < 0.03, "keep share " .. keep / pred)
  end)

  it("counts unigram targets", function()
    local info = shards("nsp")
    local counts = pt.unigram_counts(info.dir)
    assert.same({tok:vocab_size()}, counts:shape())
    assert.equal(info.predictions, counts:sum():item())
    local dyn = shards("dyn", {masking = "dynamic"})
    local dc = pt.unigram_counts(dyn.dir)
    local list = all_instances(dyn.dir)
    local n = 0
    for _, inst in ipairs(list) do n = n + #inst.tokens - 3 end
    assert.equal(n, dc:sum():item())
    assert.equal(0, dc:get(CLS + 1))
  end)
end)

----------------------------------------------------------------- loader

local function batches(L, n)
  local out = {}
  for i = 1, n do
    local b = L:next()
    local t = {}
    for k, v in pairs(b) do t[k] = v:totable() end
    out[i] = t
  end
  return out
end

describe("loader", function()
  it("gives BertForPreTraining's inputs", function()
    local info = shards("nsp")
    local L = assert(pt.Loader{dir = info.dir, batch_size = 4, seq_len = 80, masking = "static"})
    local b = L:next()
    assert.same({4, 80}, b.input_ids:shape())
    for _, k in ipairs({"input_ids", "token_type_ids", "attention_mask", "labels"}) do
      assert.equal("int32", b[k]:dtype())
      assert.same({4, 80}, b[k]:shape())
    end
    assert.same({4}, b.next_sentence_label:shape())
    local ids, att, lab = b.input_ids:totable(), b.attention_mask:totable(), b.labels:totable()
    for i = 1, 4 do
      assert.equal(CLS, ids[i][1])
      for j = 1, 80 do
        if att[i][j] == 0 then assert.equal(PAD, ids[i][j]); assert.equal(-100, lab[i][j]) end
      end
    end
    assert.equal(math.floor(info.instances / 4), L:batches_per_epoch())
    L:close()
    assert.has_error(function() L:next() end, "Loader:next: the loader is closed")
    local N = assert(pt.Loader{dir = shards("none", {objective = "none", dupe_factor = 1}).dir,
                               batch_size = 2, masking = "dynamic"})
    assert.is_nil(N:next().next_sentence_label)
    N:close()
  end)

  for _, masking in ipairs({"static", "dynamic"}) do
    it("resumes exactly with set_state (" .. masking .. ", across epochs)", function()
      local info = shards("small", {dupe_factor = 1, max_seq_length = 32, documents = synthetic(20, 3)})
      local A = assert(pt.Loader{dir = info.dir, batch_size = 8, masking = masking, seed = 9})
      local per = A:batches_per_epoch()
      assert.is_true(per >= 2 and per < 15, "a few batches per epoch: " .. per)
      local total = 2 * per + 3
      batches(A, 3)
      local s = A:state()
      assert.same({epoch = 0, batch = 3, seed = 9, batch_size = 8, instances = info.instances}, s)
      for _, v in pairs(s) do assert.equal("number", type(v)) end
      local rest = batches(A, total - 3)
      A:close()
      local B = assert(pt.Loader{dir = info.dir, batch_size = 8, masking = masking, seed = 9})
      batches(B, 1)
      B:set_state(s)
      assert.same(rest, batches(B, total - 3))
      -- an uninterrupted run gives the same, and epochs differ in order
      B:set_state({epoch = 0, batch = 0})
      local e0 = batches(B, per)
      local e1 = batches(B, per)
      assert.are_not.same(e0, e1)
      B:close()
      local C = assert(pt.Loader{dir = info.dir, batch_size = 8, masking = masking, seed = 10})
      assert.are_not.same(e0[1], batches(C, 1)[1])
      C:close()
    end)
  end

  it("reports corrupt and truncated shards clearly", function()
    local src = shards("nsp").dir
    local d1 = copy_set(src)
    local s = read_bytes(d1 .. "/shard-00000.bin")
    write_bytes(d1 .. "/shard-00000.bin", s:sub(1, #s - 100))
    local L, err = pt.Loader{dir = d1}
    assert.is_nil(L)
    assert.matches("shard%-00000%.bin: truncated shard", err)
    write_bytes(d1 .. "/shard-00000.bin", s:sub(1, 30))
    assert.matches("truncated shard", select(2, pt.Loader{dir = d1}))
    local mid = #s // 2
    write_bytes(d1 .. "/shard-00000.bin", s:sub(1, mid) .. string.char((s:byte(mid + 1) + 1) % 256) .. s:sub(mid + 2))
    assert.matches("checksum mismatch", select(2, pt.Loader{dir = d1}))
    write_bytes(d1 .. "/shard-00000.bin", "NOTSHARD" .. s:sub(9))
    assert.matches("not a shard file", select(2, pt.read(d1)))
    os.remove(d1 .. "/shard-00000.bin")
    assert.matches("shard%-00000%.bin", select(2, pt.unigram_counts(d1)))
    write_bytes(d1 .. "/meta.json", "{broken")
    assert.matches("not a shard set", select(2, pt.Loader{dir = d1}))
    assert.matches("no meta.json", select(2, pt.Loader{dir = tmp_root .. "/nowhere"}))
  end)
end)

------------------------------------------------------------- arguments

describe("arguments", function()
  it("are checked with clear messages", function()
    assert.has_error(function() pt.create_shards() end,
      "create_shards: argument #1 (options) expected table, got nil")
    assert.has_error(function() pt.create_shards{tokenizer = tok, output = "x"} end,
      "create_shards: option 'documents' expected a list of documents (lists of sentences), got nil")
    assert.has_error(function()
      pt.create_shards{documents = DOCS, tokenizer = tok, output = "x", objective = "mlm"}
    end, "create_shards: option 'objective' must be 'nsp', 'sop' or 'none', got mlm")
    assert.has_error(function()
      pt.create_shards{documents = DOCS, tokenizer = tok, output = "x", max_seq_length = 3}
    end, "create_shards: option 'max_seq_length' must be an integer >= 5, got 3")
    assert.has_error(function()
      pt.create_shards{documents = {{"a"}, {1}}, tokenizer = tok, output = tmpdir()}
    end, "create_shards: document 2 sentence 1 expected string, got number")
    assert.has_error(function()
      pt.create_shards{documents = {{""}}, tokenizer = tok, output = tmpdir()}
    end, "create_shards: the documents hold no tokens")
    -- a misspelt option is named (max_seq_len would make 128-token instances silently)
    assert.error_matches(function()
      pt.create_shards{documents = DOCS, tokenizer = tok, output = "x", max_seq_len = 64}
    end, "create_shards: unknown option 'max_seq_len' %(the options: documents, tokenizer, output,")
    assert.error_matches(function() pt.Loader{dir = "x", batchsize = 4} end,
      "Loader: unknown option 'batchsize' %(the options: dir, batch_size,")
    local dyn = shards("dyn", {masking = "dynamic"}).dir
    assert.has_error(function() pt.Loader{dir = dyn, masking = "static"} end)
    local ok, err = pcall(pt.Loader, {dir = dyn, masking = "static"})
    assert.is_false(ok)
    assert.matches("Loader: .*static masks", err)
    assert.has_error(function() pt.Loader{dir = dyn, seq_len = 16} end,
      "Loader: seq_len 16 is shorter than the shards' max_seq_length 64")
    assert.has_error(function() pt.Loader{dir = dyn, masking = "sometimes"} end,
      "Loader: option 'masking' must be 'static' or 'dynamic', got sometimes")
    assert.has_error(function() pt.Loader{dir = dyn, batch_size = 0} end,
      "Loader: option 'batch_size' must be a positive integer, got 0")
    local L = assert(pt.Loader{dir = dyn, seed = 1})
    assert.has_error(function() L:set_state({epoch = 0, batch = 0, seed = 2}) end,
      "Loader:set_state: state has seed = 2, this loader 1")
    assert.has_error(function() L:set_state({epoch = 0, batch = 100000}) end)
    assert.has_error(function() L:set_state("x") end,
      "Loader:set_state: argument #1 expected a table from Loader:state()")
    L:close()
    assert.has_error(function() pt.split_documents(DOCS, {heldout = 1.5}) end,
      "split_documents: option 'heldout' must be in [0, 1), got 1.5")
  end)

  it("splits held-out documents deterministically", function()
    local tr, ev = pt.split_documents(DOCS, {heldout = 0.1, seed = 1})
    assert.equal(15, #ev)
    assert.equal(135, #tr)
    local tr2, ev2 = pt.split_documents(DOCS, {heldout = 0.1, seed = 1})
    assert.same(ev, ev2)
    assert.same(tr, tr2)
    local _, ev3 = pt.split_documents(DOCS, {heldout = 0.1, seed = 2})
    assert.are_not.same(ev, ev3)
    local seen = {}
    for _, d in ipairs(tr) do seen[d] = true end
    for _, d in ipairs(ev) do assert.is_nil(seen[d]) end
  end)
end)
