-- tools/build_corpus.lua (the `--corpus english` builder) on tiny made-up
-- sources and a fake evaluation set in a temporary directory: no network,
-- no npm or apt packages, no data/ needed.
local bert = require("bert")
local cjson = require("cjson")
local corpus = require("bert.data.corpus")

local tmp_root = os.tmpname()
os.remove(tmp_root)
assert(bert.mkdir(tmp_root))

local function write(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  assert(f:close())
end

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- runs the builder; returns ok, its stdout and stderr
local function build(argv)
  local out, err = tmp_root .. "/stdout", tmp_root .. "/stderr"
  local parts = {"lua5.4", "tools/build_corpus.lua"}
  for _, a in ipairs(argv) do parts[#parts + 1] = q(a) end
  local ok = os.execute(table.concat(parts, " ") .. " >" .. q(out) .. " 2>" .. q(err))
  return ok == true, read(out) or "", read(err) or ""
end

local function lines_of(path)
  local set, list = {}, {}
  for _, doc in ipairs(assert(corpus.read(path))) do
    for _, s in ipairs(doc) do set[s] = (set[s] or 0) + 1; list[#list + 1] = s end
  end
  return set, list
end

---------------------------------------------------------------- fixtures

local EVAL = tmp_root .. "/eval"
assert(bert.mkdir(EVAL))
assert(bert.mkdir(EVAL .. "/glue")); assert(bert.mkdir(EVAL .. "/glue/TOY"))
write(EVAL .. "/glue/TOY/dev.tsv", "index\tsentence\tlabel\n" ..
  "0\tThe quick brown fox jumps over the lazy dog.\t1\n" ..
  "1\tVery short one.\t0\n")
assert(bert.mkdir(EVAL .. "/squad"))
local CONTEXT = "Alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike " ..
  "november oscar papa. Second sentence here."
write(EVAL .. "/squad/dev-v1.1.json", cjson.encode({version = "1.1", data = {{title = "Toy", paragraphs = {
  {context = CONTEXT, qas = {{id = "q1", question = "What comes after alpha?",
                              answers = {{text = "bravo", answer_start = 6}}}}}}}}}))

local SRC = tmp_root .. "/src"
assert(bert.mkdir(SRC))
local A = {                                          -- plain format, never held out
  {"Source a document one starts like this.",
   "THE QUICK BROWN FOX -- jumps over the LAZY dog!",                 -- evaluation text
   "A shared sentence that appears in two documents.",
   "Refrain line repeated inside this document.",
   "Refrain line repeated inside this document."},
  {"Doc two keeps this ordinary sentence here.",
   "Before that, alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike, we said.",  -- a 13-gram
   "Then bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike stopped.",              -- 12 only
   "They shouted golf hotel india juliet kilo lima.",                 -- a 13-gram across
   "Mike november oscar papa second sentence here today.",            -- the two sentences
   "Doc two ends with one more plain sentence."},
  {"Duplicate document first sentence goes here.", "Duplicate document second sentence goes here."},
}
assert(corpus.write(SRC .. "/a.txt", A))

local NB = 300
local b = {}
for i = 1, NB do
  b[#b + 1] = cjson.encode({id = "b" .. i, sentences = {
    string.format("Source bee document %d sentence one words.", i),
    string.format("Source bee document %d sentence two words.", i)}})
end
b[#b + 1] = cjson.encode({id = "dupdoc", sentences = {     -- = A[3] up to case and punctuation
  "duplicate document, first sentence goes here", "DUPLICATE document second sentence goes here!"}})
b[#b + 1] = cjson.encode({id = "sharing", sentences = {
  "A shared sentence that appears in two documents.", "Source bee sharing document keeps this one."}})
write(SRC .. "/b.jsonl", table.concat(b, "\n") .. "\n")

local c = {}                                         -- never held out, after b in the list
for i = 1, 20 do
  c[i] = cjson.encode({id = "c" .. i, sentences = {string.format("Source sea document %d has its own words.", i),
                                                   string.format("Source sea document %d ends right here.", i)}})
end
write(SRC .. "/c.jsonl", table.concat(c, "\n") .. "\n")

local dsents = {"Source dee unique sentence stays here."}  -- copies of every b sentence two, held-out eligible
for i = 1, NB do dsents[#dsents + 1] = string.format("Source bee document %d sentence two words.", i) end
write(SRC .. "/d.jsonl", cjson.encode({id = "d1", sentences = dsents}) .. "\n")

local function argv(out, extra)
  local t = {"--output", out, "--eval-dir", EVAL, "--eval-sets", "glue,squad", "--quiet",
             "--source", "a=" .. SRC .. "/a.txt", "--source", "b=" .. SRC .. "/b.jsonl",
             "--source", "c=" .. SRC .. "/c.jsonl", "--source", "d=" .. SRC .. "/d.jsonl",
             "--heldout-from", "b,d", "--heldout-per-mille", "100"}
  for _, x in ipairs(extra or {}) do t[#t + 1] = x end
  return t
end

------------------------------------------------------------------- specs

describe("tools/build_corpus.lua", function()
  local OUT = tmp_root .. "/out"
  local ok, stdout, stderr, stats, train, held, train_list, held_list

  setup(function()
    ok, stdout, stderr = build(argv(OUT))
    if ok then
      stats = cjson.decode(read(OUT .. "/stats.json"))
      train, train_list = lines_of(OUT .. "/english.txt")
      held, held_list = lines_of(OUT .. "/heldout.txt")
    end
  end)

  it("builds", function()
    assert.is_true(ok, stderr)
    assert.are.equal("", stdout)   -- --quiet
  end)

  it("drops exact duplicate documents, up to case and punctuation", function()
    assert.are.equal(1, stats.sources.b.removed.duplicate_documents)
    assert.are.equal(1, train["Duplicate document first sentence goes here."])
    assert.is_nil(train["duplicate document, first sentence goes here"])
    assert.is_nil(held["duplicate document, first sentence goes here"])
  end)

  it("drops a sentence repeated in another document, keeps repeats inside one", function()
    assert.are.equal(1, train["A shared sentence that appears in two documents."])
    assert.are.equal(1, train["Source bee sharing document keeps this one."]
                       or held["Source bee sharing document keeps this one."])
    assert.are.equal(2, train["Refrain line repeated inside this document."])
  end)

  it("drops a sentence equal to an evaluation text", function()
    for s in pairs(train) do assert.is_nil(s:lower():find("quick brown fox", 1, true), s) end
    assert.are.equal(1, stats.sources.a.removed.eval_exact_sentences)
    assert.are.equal(1, stats.sources.a.removed_by_eval_set.glue.exact_sentences)
    assert.are.equal(1, stats.eval_sets.glue.removed_exact_sentences)
    assert.are.equal(1, train["Source a document one starts like this."])
  end)

  it("drops every sentence a shared 13-gram touches, not a 12-gram overlap", function()
    for s in pairs(train) do
      assert.is_nil(s:find("alpha bravo", 1, true), s)
      assert.is_nil(s:find("They shouted", 1, true), s)
      assert.is_nil(s:find("Mike november", 1, true), s)
    end
    assert.are.equal(1, train["Then bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike stopped."])
    assert.are.equal(1, train["Doc two keeps this ordinary sentence here."])
    assert.are.equal(1, train["Doc two ends with one more plain sentence."])
    local r = stats.sources.a.removed
    assert.are.equal(3, r.eval_13gram_sentences)
    assert.are.equal(1, r.eval_13gram_documents)
    assert.are.equal(3, stats.sources.a.removed_by_eval_set.squad["13gram_sentences"])
    assert.are.equal(0, stats.sources.a.removed_by_eval_set.glue["13gram_sentences"])
    local log = read(OUT .. "/removed.tsv")
    assert.truthy(log:find("eval_13gram\ta\ta:2\tsquad\tThey shouted", 1, true))
    assert.truthy(log:find("eval_exact\ta\ta:1\tglue\tTHE QUICK", 1, true))
  end)

  it("holds out a fixed part, only from the allowed sources, disjoint from training", function()
    assert.is_true(#held_list > 0)
    assert.are.same({}, stats.sources.a.heldout_ids)
    assert.are.same({}, stats.sources.c.heldout_ids)
    assert.are.equal(0, stats.sources.c.heldout.documents)
    local nb = #stats.sources.b.heldout_ids
    assert.is_true(nb > 5 and nb < 60, "held out " .. nb .. " of " .. NB)   -- ~10%
    for _, s in ipairs(held_list) do
      assert.truthy(s:find("^Source bee ") or s:find("^Source dee "), s)
      assert.is_nil(train[s], s)
    end
    for s in pairs(train) do assert.is_nil(held[s], s) end
    -- each b "sentence two" is kept exactly once; a held-out document keeps its
    -- own against the later training document d1 that copies it
    for i = 1, NB do
      local s = string.format("Source bee document %d sentence two words.", i)
      assert.are.equal(1, (train[s] or 0) + (held[s] or 0), s)
    end
    for _, id in ipairs(stats.sources.b.heldout_ids) do
      local i = assert(tonumber(id:match("^b(%d+)$")), id)
      assert.are.equal(1, held[string.format("Source bee document %d sentence one words.", i)])
      assert.are.equal(1, held[string.format("Source bee document %d sentence two words.", i)])
      assert.is_nil(train[string.format("Source bee document %d sentence one words.", i)])
    end
    assert.are.equal(stats.total.heldout.documents, nb + #stats.sources.d.heldout_ids)
  end)

  it("counts what it writes", function()
    local words, bytes = 0, 0
    for _, s in ipairs(train_list) do
      bytes = bytes + #s + 1
      for _ in s:gmatch("%S+") do words = words + 1 end
    end
    assert.are.equal(#train_list, stats.total.train.sentences)
    assert.are.equal(words, stats.total.train.words)
    assert.are.equal(bytes, stats.total.train.bytes)
    assert.are.equal(#held_list, stats.total.heldout.sentences)
    assert.are.equal(#assert(corpus.read(OUT .. "/english.txt")), stats.total.train.documents)
    assert.are.same({"a", "b", "c", "d"}, stats.order)
  end)

  it("is deterministic", function()
    local ok2, _, err2 = build(argv(tmp_root .. "/out2"))
    assert.is_true(ok2, err2)
    assert.are.equal(read(OUT .. "/english.txt"), read(tmp_root .. "/out2/english.txt"))
    assert.are.equal(read(OUT .. "/heldout.txt"), read(tmp_root .. "/out2/heldout.txt"))
  end)

  it("writes atomically: no temporary file left, a failed build keeps the old outputs", function()
    for _, n in ipairs({"english.txt", "heldout.txt", "stats.json", "removed.tsv"}) do
      assert.is_nil(read(OUT .. "/" .. n .. ".tmp"), n)
    end
    local dir = tmp_root .. "/out3"
    assert(bert.mkdir(dir))
    write(dir .. "/english.txt", "OLD\n")
    -- an evaluation set that is missing: a clear error, nothing replaced
    local bad, _, err = build(argv(dir, {"--eval-sets", "glue,squad,blimp"}))
    assert.is_false(bad)
    assert.truthy(err:find("evaluation set blimp not found", 1, true), err)
    assert.truthy(err:find("fetch_data.sh blimp", 1, true), err)
    -- a held-out part below the minimum: refused before anything is written
    bad, _, err = build(argv(dir, {"--min-heldout-bytes", "100000000"}))
    assert.is_false(bad)
    assert.truthy(err:find("held-out part", 1, true), err)
    assert.are.equal("OLD\n", read(dir .. "/english.txt"))
    for _, n in ipairs({"heldout.txt", "stats.json", "english.txt.tmp", "heldout.txt.tmp", "stats.json.tmp"}) do
      assert.is_nil(read(dir .. "/" .. n), n)
    end
  end)

  it("tools/fetch_english.sh --help documents itself without fetching", function()
    local f = io.popen("sh tools/fetch_english.sh --help 2>&1")
    local text = f:read("a")
    assert.is_true(f:close())
    assert.truthy(text:find("usage: sh tools/fetch_english.sh", 1, true), text)
  end)

  it("tools/fetch_multilingual.sh --help documents itself without fetching", function()
    local f = io.popen("sh tools/fetch_multilingual.sh --help 2>&1")
    local text = f:read("a")
    assert.is_true(f:close())
    assert.truthy(text:find("usage: sh tools/fetch_multilingual.sh", 1, true), text)
  end)

  teardown(function()
    if not os.getenv("KEEP") then os.execute("rm -rf " .. q(tmp_root)) end
  end)
end)

describe("tools/build_corpus.lua --by-language", function()
  local ML = tmp_root .. "/ml"
  assert(bert.mkdir(ML))
  -- a Chinese evaluation sentence (7 characters, no spaces) and a corpus that repeats it
  assert(bert.mkdir(ML .. "/eval")) assert(bert.mkdir(ML .. "/eval/xnli"))
  write(ML .. "/eval/xnli/dev-zh.tsv", "人人生而自由平等\t他们赋有理性和良心\tentailment\r\n")
  local docs = {
    cjson.encode({id = "zh1", lang = "zh", sentences = {"人人生而自由平等。", "这是一个不同的句子。"}}),
    cjson.encode({id = "de1", lang = "de", sentences = {"Alle Menschen sind frei und gleich an Würde geboren."}}),
    cjson.encode({id = "xx1", lang = "xx", sentences = {"Kept out by the language list, whatever it says."}}),
    cjson.encode({id = "en-tagged", sentences = {"This one takes the source's own language tag."}}),
  }
  write(ML .. "/u.jsonl", table.concat(docs, "\n") .. "\n")
  local ok_, _, err_ = build({"--output", ML .. "/out", "--eval-dir", ML .. "/eval", "--eval-sets", "xnli", "--quiet",
    "--by-language", "--languages", "zh,de,en", "--source", "u@en=" .. ML .. "/u.jsonl"})

  it("writes a training file per language, keeping the languages asked for", function()
    assert.is_true(ok_, err_)
    local st = cjson.decode(read(ML .. "/out/stats.json"))
    assert.same({"de", "en", "zh"}, (function() local k = {} for l in pairs(st.languages) do k[#k + 1] = l end
      table.sort(k) return k end)())
    assert.equals(1, st.sources.u.skipped_language_documents)
    local de = lines_of(ML .. "/out/train/de.txt")
    assert.truthy(de["Alle Menschen sind frei und gleich an Würde geboren."])
    assert.truthy(lines_of(ML .. "/out/train/en.txt")["This one takes the source's own language tag."])
    assert.is_nil(read(ML .. "/out/english.txt"))
  end)

  it("counts each CJK character as a word: a Chinese evaluation sentence is excluded", function()
    local zh = lines_of(ML .. "/out/train/zh.txt")
    assert.is_nil(zh["人人生而自由平等。"])
    assert.truthy(zh["这是一个不同的句子。"])
  end)
end)
