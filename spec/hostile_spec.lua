-- Hostile input and limits (issue 16): each finding of the fuzzing campaign
-- has a test here that failed before its fix.
local bert = require("bert")
local core = require("bert.core")

local tmpdir = require("spec.support.tmpdir").dir

local function writefile(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
  return path
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- {====================================================== safetensors

describe("safetensors header messages", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  local function raw(header, data)
    return writefile(dir .. "/x.safetensors", string.pack("<I8", #header) .. header .. (data or ""))
  end

  -- printable() wrote "..." and a NUL up to 3 bytes past its 40-byte buffer
  -- when an escape landed at its end (ASan: stack-buffer-overflow).
  it("keeps an escaped, truncated dtype inside its buffer", function()
    for letters = 30, 40 do
      local dtype = string.rep("A", letters) .. "\\n\\n\\n"
      local path = raw('{"w":{"dtype":"' .. dtype .. '","shape":[1],"data_offsets":[0,4]}}', "\0\0\0\0")
      local t, msg = core.load_safetensors(path)
      assert.is_nil(t)
      local shown = msg:match('unknown dtype "(.-)" %(supported')
      assert.is_truthy(shown, msg)
      assert.is_true(#shown <= 39, ("%d bytes shown for a 40-byte buffer: %s"):format(#shown, shown))
    end
  end)

  it("finds duplicate metadata keys in linear-logarithmic time", function()
    local function header(n, dup)
      local parts = {}
      for i = 1, n do parts[i] = ('"k%d":"v"'):format(i) end
      if dup then parts[#parts + 1] = '"k1":"v"' end
      return '{"__metadata__":{' .. table.concat(parts, ",") .. '}}'
    end
    local t0 = os.clock()
    local h, msg = core.safetensors_header(raw(header(100000, true)))
    local took = os.clock() - t0
    assert.is_nil(h)
    assert.matches("key 'k1' appears twice", msg, 1, true)
    -- the pairwise comparison took 51 s for 200k keys (a loaded 2-core
    -- machine); sorting takes a fraction of a second
    assert.is_true(took < 3, ("%.1f s for 100k metadata keys"):format(took))
  end)

  it("refuses shapes past 2^40 elements with the file's name", function()
    local path = raw('{"w":{"dtype":"F32","shape":[0,1099511627776,2],"data_offsets":[0,0]}}')
    local t, msg = core.load_safetensors(path)
    assert.is_nil(t)
    assert.matches(path, msg, 1, true)
    assert.matches("too large", msg, 1, true)
  end)
end)
-- }======================================================

-- {====================================================== sizes

describe("overflow-safe sizes", function()
  it("refuses a view whose size product wraps int64", function()
    local ok, err = pcall(function() return bert.zeros(0):view(2 ^ 62, 32) end)
    assert.is_false(ok)
    assert.matches("too large", err)
    ok, err = pcall(function() return bert.zeros(0):view(0, 2 ^ 30, 2 ^ 30, 2 ^ 30) end)
    assert.is_false(ok)
    assert.matches("too large", err)
  end)

  it("refuses an expand past 2^40 elements", function()
    local ok, err = pcall(function() return bert.zeros(1, 1):expand(2 ^ 31, 2 ^ 31) end)
    assert.is_false(ok)
    assert.matches("too large", err)
  end)

  it("still allows empty views and ordinary large ones", function()
    local z = bert.zeros(0):view(0, 5)
    assert.same({0, 5}, z:shape())
    local e = bert.zeros(1, 1):expand(2 ^ 20, 2 ^ 19)
    assert.equal(2 ^ 39, e:numel())
    assert.equal(0, e:get(2 ^ 20, 2 ^ 19))
  end)
end)
-- }======================================================

-- {====================================================== shards

describe("shard reader", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

  local function fnv(words)
    local h = 0xcbf29ce484222325
    for _, w in ipairs(words) do
      h = h ~ (w & 0xffffffff)
      h = h * 0x100000001b3
    end
    return h
  end

  -- A masked shard whose instance claims more masked positions than the
  -- file holds: the checksum is right, the counts are not.
  it("rejects per-instance counts past the totals before reading them", function()
    local n, T, P = 1, 5, 1
    local payload = {5, 2, 0, 5,  1, 2, 3, 4, 5,  1,  2}   -- len la label npred | tokens | pos | repl
    local body = {}
    for i, w in ipairs(payload) do body[i] = string.pack("<i4", w) end
    local header = "BERTSHRD" .. string.pack("<I4I4I4I4I8I8I8I4I4", 1, 1, 8, 1, n, T, P, 100, 0)
                   .. string.pack("<i8", fnv(payload))
    local path = writefile(dir .. "/s.bin", header .. table.concat(body))
    local inst, msg = core.data.read_shards({path})
    assert.is_nil(inst)
    assert.matches(path .. ": corrupt instance 0", msg, 1, true)
  end)

  it("refuses loader sizes outside int32 instead of wrapping them", function()
    local inst = assert(core.data.read_shards({"fuzz/corpus/shard/nsp_static"}))
    local ok, err = pcall(core.data.loader, inst, {batch_size = 2 ^ 32 + 2, seq_len = 16})
    assert.is_false(ok)
    assert.matches("option 'batch_size' = 4294967298 is outside the int32 range", err, 1, true)
  end)

  it("refuses a misspelt option of the C data constructors instead of taking a default", function()
    local inst = assert(core.data.read_shards({"fuzz/corpus/shard/nsp_static"}))
    local ok, err = pcall(core.data.loader, inst, {batch_size = 2, seq_len = 16, shufle = false})
    assert.is_false(ok)
    assert.matches("loader: unknown option 'shufle' (the options: batch_size, seq_len,", err, 1, true)
    ok, err = pcall(core.data.create, core.data.corpus(), {max_seq_lenght = 64})
    assert.is_false(ok)
    assert.matches("create: unknown option 'max_seq_lenght'", err, 1, true)
  end)
end)
-- }======================================================

-- {====================================================== integer arithmetic

describe("int32 arithmetic", function()
  local five = bert.tensor({5}, "int32")

  it("refuses a fractional, non-finite or huge alpha", function()
    for _, alpha in ipairs({2.5, 0 / 0, 1 / 0, 1e300, -3e9}) do
      local ok, err = pcall(function() return five:add(five, alpha) end)
      assert.is_false(ok, tostring(alpha))
      assert.matches("add: alpha .* must be an integer within int32 range", err)
      ok, err = pcall(function() return five:clone():sub_(five, alpha) end)
      assert.is_false(ok, tostring(alpha))
      assert.matches("sub_: alpha", err)
    end
    assert.equal(20, five:add(five, 3):item())
    assert.equal(-10, five:sub(five, 3):item())
  end)

  it("keeps a fractional alpha with float operands", function()
    assert.equal(17.5, five:add(bert.tensor({5}), 2.5):item())
    assert.equal(17.5, bert.tensor({5}):add(five, 2.5):item())
  end)

  it("refuses an int32 arange past int32 instead of wrapping", function()
    local ok, err = pcall(bert.arange, 0, 5e9, 1e9, "int32")
    assert.is_false(ok)
    assert.matches("arange: values up to 4e%+09 do not fit int32", err)
    assert.same({0, 1e9, 2e9}, bert.arange(0, 3e9, 1e9, "int32"):totable())
  end)

  it("refuses an integer to a negative integer power", function()
    local ok, err = pcall(function() return bert.tensor({0}, "int32") ^ -1 end)
    assert.is_false(ok)
    assert.matches("negative integer power", err)
    ok = pcall(function() return bert.tensor({2, 3}, "int32"):pow(bert.tensor({1, -2}, "int32")) end)
    assert.is_false(ok)
    assert.same({8, 1}, (bert.tensor({2, 1}, "int32") ^ 3):totable())
    assert.equal(0.5, (bert.tensor({2}) ^ -1):item())
  end)
end)
-- }======================================================

-- {====================================================== non-finite values

describe("NaN and Inf through the fused kernels", function()
  local F = bert.F
  local nan, inf = 0 / 0, 1 / 0
  local function is_nan(x) return x ~= x end
  local function finite(x) return x == x and x ~= inf and x ~= -inf end
  local function randn(shape, seed) return bert.randn(shape, {seed = seed}) end
  -- rows[i] of a [R, C] result: all NaN for poisoned rows, finite elsewhere
  local function check_rows(t, bad)
    local rows = t:totable()
    for i, row in ipairs(rows) do
      for _, x in ipairs(type(row) == "table" and row or {row}) do
        if bad[i] then assert.is_true(is_nan(x) or not finite(x), ("row %d: %s"):format(i, tostring(x)))
        else assert.is_true(finite(x), ("row %d should be finite, got %s"):format(i, tostring(x))) end
      end
    end
  end

  for _, v in ipairs({nan, inf, -inf}) do
    local name = tostring(v)
    it("softmax, log_softmax and cross_entropy with " .. name, function()
      local x = randn({3, 5}, 1)
      x:set(v, 2, 3)
      -- -inf is an ordinary masked score: probability 0, the row stays finite
      check_rows(x:softmax(2), {false, v ~= -inf, false})
      local loss = F.cross_entropy(x, bert.tensor({1, 2, 3}, "int32"), {reduction = "none"})
      local l = loss:totable()
      assert.is_true(finite(l[1]) and finite(l[3]))
      if v ~= -inf then assert.is_true(is_nan(l[2]) or l[2] == inf, tostring(l[2])) end
    end)

    it("attention with " .. name .. " in a query, a key and a value", function()
      local q, k, vv = randn({1, 1, 4, 8}, 2), randn({1, 1, 4, 8}, 3), randn({1, 1, 4, 8}, 4)
      q:set(v, 1, 1, 2, 1)
      local out = F.attention(q, k, vv):view(4, 8)
      check_rows(out, {false, true, false, false})
      local k2 = k:clone()
      k2:set(v, 1, 1, 3, 1)
      -- a poisoned key reaches every query that scores it
      local o2 = F.attention(randn({1, 1, 4, 8}, 5), k2, vv):view(4, 8)
      for _, row in ipairs(o2:totable()) do
        for _, x in ipairs(row) do if v == nan then assert.is_true(is_nan(x)) end end
      end
    end)

    it("bias_gelu (erf and tanh), layer_norm and linear with " .. name, function()
      local x = randn({3, 6}, 6)
      x:set(v, 2, 4)
      for _, mode in ipairs({"none", "tanh"}) do
        local y = F.bias_gelu(x, bert.zeros(6), mode):totable()
        local g = y[2][4]
        if v == -inf then assert.is_true(g == 0 or is_nan(g), tostring(g))
        elseif v == inf then assert.is_true(g == inf or is_nan(g), tostring(g))
        else assert.is_true(is_nan(g)) end
        assert.is_true(finite(y[1][1]) and finite(y[3][6]))
      end
      check_rows(F.layer_norm(x, bert.ones(6), bert.zeros(6), 1e-5), {false, true, false})
      local lin = F.linear(x, randn({4, 6}, 7), bert.zeros(4))
      check_rows(lin, {false, true, false})
    end)

    it("backward through attention and cross_entropy with " .. name, function()
      local x = randn({2, 5}, 8)
      x:set(v, 1, 2)
      x:requires_grad(true)
      F.cross_entropy(x, bert.tensor({1, 2}, "int32")):backward()
      local g = x:grad():totable()
      if v == -inf then assert.is_true(finite(g[1][1]), tostring(g[1][1]))
      else assert.is_true(is_nan(g[1][1]) or not finite(g[1][1]), tostring(g[1][1])) end
      local q = randn({1, 1, 3, 4}, 9)
      q:set(v, 1, 1, 1, 1)
      q:requires_grad(true)
      F.attention(q, randn({1, 1, 3, 4}, 10), randn({1, 1, 3, 4}, 11)):sum():backward()
      assert.is_true(is_nan(q:grad():get(1, 1, 1, 2)) or v == -inf)
    end)
  end
end)
-- }======================================================

-- {====================================================== anomaly detection

describe("non-finite losses and gradients in training", function()
  -- A one-parameter "model": loss = sum(log(w * x)); x <= 0 makes it NaN
  -- inside log, from finite inputs.
  local function setup(opts)
    local w = bert.tensor({1, 2})
    w:requires_grad(true)
    local model = {
      named_parameters = function() return {{name = "head.w", param = w}} end,
      training = function() end, evaluate = function() end,
      forward = function(_, batch)
        return {loss = opts.loss and opts.loss(w, batch.x) or (w * batch.x):log():sum()}
      end,
    }
    function model.parameters() return {w} end
    local xs = opts.xs
    local k = 0
    local t = bert.train.Trainer{model = model, optimizer = bert.optim.SGD({w}, {lr = 0.1}),
      next_batch = function() k = k + 1; return {x = bert.tensor(xs[k] or {1, 1})} end,
      steps = opts.steps or 4, progress = false, on_nonfinite = opts.on_nonfinite, clip = opts.clip}
    return t, w
  end

  after_each(function() bert.set_detect_anomaly(false) end)

  it("stops at a NaN loss by default, before the update, naming the step", function()
    local t, w = setup{xs = {{1, 1}, {1, 1}, {-1, 1}}}
    local ok, err = pcall(t.run, t)
    assert.is_false(ok)
    assert.matches("training stopped at step 3: the loss is %-?nan", err)
    assert.matches("weights are unchanged", err, 1, true)
    assert.equal(2, t.step)
    local v = w:totable()
    assert.is_true(v[1] == v[1] and v[2] == v[2], "weights stay finite")
  end)

  it("skips the update when asked, and goes on", function()
    local t, w = setup{xs = {{1, 1}, {-1, 1}, {1, 1}}, on_nonfinite = "skip", steps = 3}
    local summary = t:run()
    assert.equal(3, summary.step)
    local v = w:totable()
    assert.is_true(v[1] == v[1] and v[2] == v[2])
  end)

  -- loss = sum(exp(w x)): exp(88) is finite, its gradient x exp(w x) is not
  local function overflow(w, x) return (w * x):exp():sum() end

  it("stops on a non-finite gradient with a finite loss, naming the parameter", function()
    local t, w = setup{xs = {{88000, 0}}, loss = overflow, clip = 1.0}
    w:requires_grad(false); w:set(1e-3, 1); w:set(0, 2); w:requires_grad(true)
    local ok, err = pcall(t.run, t)
    assert.is_false(ok)
    assert.matches("training stopped at step 1: the gradient of head.w holds inf", err)
    assert.equal(0, t.step)
    assert.same({bert.tensor({1e-3}):item(), 0}, w:totable())
  end)

  it("names the op with bert.set_detect_anomaly(true)", function()
    assert.is_false(bert.is_anomaly_enabled())
    bert.set_detect_anomaly(true)
    local t = setup{xs = {{1, 1}, {-1, 1}}}
    local ok, err = pcall(t.run, t)
    assert.is_false(ok)
    assert.matches("training stopped at step 2: the loss is %-?nan; first op to go non%-finite: log gave %-?nan", err)
    -- in backward: the parameter, and the op whose gradient went bad
    local t2, w = setup{xs = {{88000, 0}}, loss = overflow}
    w:requires_grad(false); w:set(1e-3, 1); w:requires_grad(true)
    ok, err = pcall(t2.run, t2)
    assert.is_false(ok)
    assert.matches("training stopped at step 1: the gradient of head.w holds inf; first op: " ..
                   "%a+ backward gave a non%-finite gradient %(inf", err)
  end)
end)
-- }======================================================

-- {====================================================== data path

describe("corpus validation", function()
  local validate = require("bert.data.validate")
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)
  local function corpus(name, bytes) return writefile(dir .. "/" .. name, bytes) end

  it("refuses binary, Latin-1, NUL, overlong-line, control-only, empty and one-document corpora", function()
    local cases = {
      {"/bin/ls", "^/bin/ls:1: NUL byte"},
      {corpus("latin1.txt", "ok line\ncaf\233 au lait\n\nsecond\n"), "latin1.txt:2: invalid UTF%-8 %(byte 0xE9 at column 4%)"},
      {corpus("nul.txt", "a\n\nb\0c\n"), "nul.txt:3: NUL byte at column 2"},
      {corpus("long.txt", "a\n\n" .. string.rep("x", 70000) .. "\n"), "long.txt:3: line of 70000 bytes, over the limit of 65536"},
      {corpus("ctl.txt", "\1\2\n\n\3\n"), "ctl.txt:1: a line of control characters only"},
      {corpus("empty.txt", ""), "empty.txt: 0 documents, at least 2 needed"},
      {corpus("blank.txt", "\n  \n\t\n"), "blank.txt: 0 documents"},
      {corpus("one.txt", "one document\nof two lines\n"), "one.txt: 1 document, at least 2 needed"},
      {corpus("surrogate.txt", "a\n\n\237\160\128\n"), "surrogate.txt:3: invalid UTF%-8"},
      {corpus("overlong.txt", "a\n\n\192\175\n"), "overlong.txt:3: invalid UTF%-8"},
    }
    for _, c in ipairs(cases) do
      local docs, err = validate.corpus(c[1])
      assert.is_nil(docs, c[1])
      assert.matches(c[2], err)
    end
  end)

  it("repairs invalid UTF-8 when allowed, and reads a good corpus", function()
    local path = corpus("latin1.txt", "caf\233 au lait\n\nsecond doc\n")
    local docs = assert(validate.corpus(path, {allow_invalid_utf8 = true}))
    assert.same({{"caf\239\191\189 au lait"}, {"second doc"}}, docs)
    docs = assert(validate.corpus(corpus("ok.txt", "déjà vu\nline two\n\n\nthird\n")))
    assert.same({{"déjà vu", "line two"}, {"third"}}, docs)
  end)

  it("pretrain.lua --corpus /bin/ls exits non-zero naming the file before creating the run directory", function()
    local out = dir .. "/run"
    local p = io.popen(string.format("lua5.4 experiments/pretrain.lua --corpus /bin/ls --output '%s' 2>&1; echo rc=$?", out))
    local text = p:read("a")
    p:close()
    assert.matches("pretrain: /bin/ls:1: NUL byte", text, 1, true)
    assert.matches("rc=1", text, 1, true)
    assert.is_false(exists(out))
    assert.is_false(exists(out .. "/args.json"))
  end)
end)

describe("resume validates what it reads", function()
  local dir, run, corpus_path
  setup(function()
    dir = tmpdir()
    run = dir .. "/run"
    local lines = {}
    local words = {"the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "red", "house", "by"}
    for d = 1, 12 do
      for s = 1, 6 do
        local w = {}
        for k = 1, 6 do w[k] = words[(d * 7 + s * 3 + k * 5) % #words + 1] end
        lines[#lines + 1] = table.concat(w, " ") .. " ."
      end
      lines[#lines + 1] = ""
    end
    corpus_path = writefile(dir .. "/corpus.txt", table.concat(lines, "\n"))
  end)
  teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

  local function pretrain(extra)
    local p = io.popen(string.format("lua5.4 experiments/pretrain.lua --corpus '%s' --output '%s' --model tiny " ..
      "--vocab-size 60 --seq-len 16 --batch-size 4 --steps 2 --save-every 1 --no-plot %s 2>&1; echo rc=$?",
      corpus_path, run, extra or ""))
    local text = p:read("a")
    p:close()
    return text
  end

  it("refuses a corrupt eval shard, meta.json, args.json or metrics line, naming the file", function()
    assert.matches("rc=0", pretrain(), 1, true)
    -- a flipped byte in the held-out shard: found before training resumes
    local shard = run .. "/data/eval/shard-00000.bin"
    local f = assert(io.open(shard, "r+b"))
    f:seek("set", 70)
    local b = f:read(1)
    f:seek("set", 70)
    f:write(string.char((b:byte() + 1) % 256))
    f:close()
    local text = pretrain("--resume '" .. run .. "' --steps 4")
    assert.matches(shard .. ": checksum mismatch", text, 1, true)
    assert.matches("rc=1", text, 1, true)
    assert.is_nil(text:find("step 3", 1, true))
    -- --repair rebuilds the shards from the corpus and continues
    text = pretrain("--resume '" .. run .. "' --repair")
    assert.matches("--repair: rebuilding", text, 1, true)
    assert.matches("rc=0", text, 1, true)
    -- a corrupt line inside metrics.jsonl is refused, not silently dropped
    local m = assert(io.open(run .. "/metrics.jsonl", "rb")):read("a")
    writefile(run .. "/metrics.jsonl", "{garbage\n" .. m)
    text = pretrain("--resume '" .. run .. "'")
    assert.matches("metrics.jsonl:1: corrupt metrics line", text, 1, true)
    assert.matches("rc=1", text, 1, true)
    writefile(run .. "/metrics.jsonl", m)
    writefile(run .. "/data/train/meta.json", "{")
    text = pretrain("--resume '" .. run .. "'")
    assert.matches(run .. "/data/train/meta.json: not a shard set description", text, 1, true)
    writefile(run .. "/args.json", "{\"x")
    text = pretrain("--resume '" .. run .. "'")
    assert.matches(run .. "/args.json: corrupt run settings: invalid JSON", text, 1, true)
    assert.matches("rc=1", text, 1, true)
  end)
end)

describe("fine-tuning readers", function()
  local readers = require("bert.finetune.readers")
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf '" .. dir .. "'") end)
  local function file(name, bytes) return writefile(dir .. "/" .. name, bytes) end
  local function fails(pattern, fn, ...)
    local ok, err = pcall(fn, ...)
    assert.is_false(ok, "accepted")
    assert.matches(pattern, err)
  end

  it("refuses Latin-1 labels and texts, naming the line", function()
    fails("data.tsv:3: invalid UTF%-8", readers.read_classification,
          file("data.tsv", "text\tlabel\ngood\tpos\nbad\tn\233g\n"))
    fails("x.conll:2: invalid UTF%-8", readers.read_conll, file("x.conll", "a O\ncaf\233 B-PER\n"))
  end)

  it("refuses a label 1e400 instead of a class named inf", function()
    fails("d.jsonl:2: 'label' inf is not a finite number", readers.read_classification,
          file("d.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": 1e400}\n'))
  end)

  it("checks entity tags and the declared IOB scheme", function()
    fails("t.conll:3: tag 'Q%-PER' is neither O nor", readers.read_conll,
          file("t.conll", "John B-PER\nSmith I-PER\nsaid Q-PER\nhi O\n"))
    fails("u.conll:1: tag 'B%-' is neither O nor", readers.read_conll, file("u.conll", "John B-\nx O\n"))
    fails("v.iob2:2: tag 'I%-LOC' does not continue a B%-LOC", readers.read_conll,
          file("v.iob2", "in O\nParis I-LOC\n"))
    fails("w.conll:2: tag 'I%-LOC' does not continue", function(p) return readers.read_conll(p, {scheme = "iobes"}) end,
          file("w.conll", "in O\nParis I-LOC\n"))
    fails("e.conll:2: the sentence ends inside an entity", function(p) return readers.read_conll(p, {scheme = "iobes"}) end,
          file("e.conll", "in O\nNew B-LOC\n"))
    -- IOB1 (CoNLL-2003's files) and a POS tag set stay accepted
    assert.equal(1, #readers.read_conll(file("ok.iob1", "in O\nParis I-LOC\nLyon B-LOC\n")))
    assert.equal(1, #readers.read_conll(file("pos.conll", "the DT\ncat NN\n")))
  end)

  it("checks SQuAD types: lists are lists", function()
    local ctx = '"context": "Paris is big."'
    fails("q.json:1: question 'q1': 'answers' must be a list", readers.read_squad, file("q.json",
      '{"data": [{"paragraphs": [{' .. ctx .. ', "qas": [{"id": "q1", "question": "What?", ' ..
      '"answers": {"text": "Paris", "answer_start": 0}}]}]}]}'))
    fails("r.json: not SQuAD JSON", readers.read_squad, file("r.json", '{"data": {"a": 1}}'))
    fails("s.json: data%[1%].paragraphs%[1%]: 'qas' must be a list", readers.read_squad, file("s.json",
      '{"data": [{"paragraphs": [{' .. ctx .. ', "qas": {"id": "q1"}}]}]}'))
    fails("'is_impossible' must be true or false", readers.read_squad, file("t.json",
      '{"data": [{"paragraphs": [{' .. ctx .. ', "qas": [{"id": "q1", "question": "W?", "answers": [], ' ..
      '"is_impossible": "yes"}]}]}]}'))
  end)
end)
-- }======================================================

describe("NaN and Inf on the Vulkan backend", function()
  local info = bert.backend_info().vulkan
  if not (info and info.available) then
    it("skipped", function() pending(require("spec.support.optional").no_vulkan()) end)
    return
  end
  local F = bert.F
  local nan = 0 / 0
  local function nan_positions(t)
    local out = {}
    for i, row in ipairs(t:to("cpu"):totable()) do
      for j, x in ipairs(type(row) == "table" and row or {row}) do out[#out + 1] = (x ~= x) and (i .. "," .. j) or nil end
    end
    return table.concat(out, " ")
  end

  it("puts NaN where the CPU does: softmax, cross_entropy, attention, bias_gelu, layer_norm", function()
    local x = bert.randn({3, 5}, {seed = 1})
    x:set(nan, 2, 3)
    local xv = x:to("vulkan")
    assert.equal(nan_positions(x:softmax(2)), nan_positions(xv:softmax(2)))
    local labels = bert.tensor({1, 2, 3}, "int32")
    assert.equal(nan_positions(F.cross_entropy(x, labels, {reduction = "none"})),
                 nan_positions(F.cross_entropy(xv, labels:to("vulkan"), {reduction = "none"})))
    assert.equal(nan_positions(F.bias_gelu(x, bert.zeros(5))), nan_positions(F.bias_gelu(xv, bert.zeros(5):to("vulkan"))))
    assert.equal(nan_positions(F.layer_norm(x, bert.ones(5), bert.zeros(5), 1e-5)),
                 nan_positions(F.layer_norm(xv, bert.ones(5):to("vulkan"), bert.zeros(5):to("vulkan"), 1e-5)))
    local q, k, v = bert.randn({1, 1, 4, 8}, {seed = 2}), bert.randn({1, 1, 4, 8}, {seed = 3}), bert.randn({1, 1, 4, 8}, {seed = 4})
    q:set(nan, 1, 1, 2, 1)
    assert.equal(nan_positions(F.attention(q, k, v):view(4, 8)),
                 nan_positions(F.attention(q:to("vulkan"), k:to("vulkan"), v:to("vulkan")):view(4, 8)))
  end)
end)
