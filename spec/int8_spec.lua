-- int8 inference (csrc/cpu/qlinear.c, bert.quantize): the quantised linear
-- against float32 within the error bound its scales give, every kernel the
-- CPU has bit-for-bit against the scalar one on odd shapes, a whole
-- quantised BERT-mini against float32, and what a quantised model refuses.
local bert = require("bert")
local F = bert.F

local tmpdir = require("spec.support.tmpdir").dir
local VOCAB = "spec/fixtures/finetune/vocab.txt"

-- x [M, K] with a row of zeros, a row that is all positive (as after a
-- GELU, where the zero point matters) and rows of mixed magnitude
local function activations(M, K, seed)
  local x = bert.randn({M, K}, {seed = seed})
  if M >= 3 then
    x:select(1, 1):zero_()
    x:select(1, 2):copy_(x:select(1, 2):abs() * 3)
    x:select(1, 3):mul_(0.01)
  end
  return x
end

-- The bound of the header of csrc/cpu/qlinear.c, element by element:
-- |y - y8| <= sw[n]/2 sum_k |x[m,k]| + sx[m]/2 sum_k |w_hat[n,k]|, plus the
-- float rounding of either product.
local function check_bound(x, w, b, y8)
  local q = F.quantize_int8(w)
  local X, W, What = x:totable(), w:totable(), q:dequantize():totable()
  local sw, Y8 = q:scales():totable(), y8:totable()
  local B = b and b:totable()
  local worst = 0
  for m = 1, #X do
    local lo, hi, xabs = 0, 0, 0
    for _, v in ipairs(X[m]) do lo, hi, xabs = math.min(lo, v), math.max(hi, v), xabs + math.abs(v) end
    local sx = (hi - lo) / 127
    for n = 1, #W do
      local y, wabs, prod = B and B[n] or 0, 0, 0
      for k = 1, #X[m] do
        y = y + X[m][k] * W[n][k]
        wabs = wabs + math.abs(What[n][k])
        prod = prod + math.abs(X[m][k] * W[n][k])
      end
      local bound = sw[n] / 2 * xabs + sx / 2 * wabs + 1e-5 * (prod + math.abs(y)) + 1e-6
      local err = math.abs(y - Y8[m][n])
      assert.is_true(err <= bound, string.format("row %d col %d: |error| %.3g > bound %.3g", m, n, err, bound))
      worst = math.max(worst, err / bound)
    end
  end
  return worst
end

local function max_diff(a, b) return (a - b):abs():max():item() end

describe("int8 linear", function()
  local kernels
  setup(function() _, kernels = F.int8_kernel() end)
  teardown(function() F.int8_kernel("auto") end)

  it("stays within the quantisation error bound of float32", function()
    for _, s in ipairs({{M = 5, K = 37, N = 19}, {M = 9, K = 128, N = 33}, {M = 3, K = 1, N = 2}}) do
      local x, w = activations(s.M, s.K, 1), bert.randn({s.N, s.K}, {seed = 2}) * 0.05
      local b = bert.randn({s.N}, {seed = 3})
      local y8 = F.linear_int8(x, F.quantize_int8(w), b)
      local worst = check_bound(x, w, b, y8)
      -- quantised, not float32 under another name: it does differ
      if s.K > 1 then assert.is_true(max_diff(y8, F.linear(x, w, b)) > 0) end
      assert.is_true(worst <= 1)
    end
  end)

  it("keeps zero exact: a row of zeros gives the bias", function()
    local x, w, b = bert.zeros({2, 40}), bert.randn({7, 40}, {seed = 4}), bert.randn({7}, {seed = 5})
    local y = F.linear_int8(x, F.quantize_int8(w), b)
    assert.equal(0, max_diff(y, b:view(1, 7):expand(2, 7)))
  end)

  it("gives the same bits with every kernel the CPU has, on odd shapes", function()
    assert.equal("scalar", kernels[#kernels])
    for _, K in ipairs({1, 3, 5, 33, 63, 65, 130}) do
      for _, MN in ipairs({{1, 1}, {3, 15}, {7, 17}, {9, 33}, {67, 65}}) do
        local M, N = MN[1], MN[2]
        local x, w = activations(M, K, K + M), bert.randn({N, K}, {seed = N})
        local b = bert.randn({N}, {seed = 7})
        local q = F.quantize_int8(w)
        F.int8_kernel("scalar")
        local ref = F.linear_int8(x, q, b)
        for _, k in ipairs(kernels) do
          F.int8_kernel(k)
          assert.equal(0, max_diff(F.linear_int8(x, q, b), ref), string.format("%s M=%d K=%d N=%d", k, M, K, N))
        end
      end
    end
  end)

  it("gives the same bits on one thread and on several", function()
    local x, w = activations(130, 200, 8), bert.randn({150, 200}, {seed = 9})
    local q = F.quantize_int8(w)
    local threads = bert.get_num_threads()
    bert.set_num_threads(1)
    local one = F.linear_int8(x, q)
    bert.set_num_threads(3)
    local many = F.linear_int8(x, q)
    bert.set_num_threads(threads)
    assert.equal(0, max_diff(one, many))
  end)

  it("takes any leading dims, and F.linear runs a marked weight as int8", function()
    local x, w, b = bert.randn({2, 3, 24}, {seed = 10}), bert.randn({5, 24}, {seed = 11}), bert.randn({5})
    local q = F.quantize_int8(w)
    local y8 = F.linear_int8(x, q, b)
    assert.same({2, 3, 5}, y8:shape())
    assert.equal(0, max_diff(y8:view(6, 5), F.linear_int8(x:reshape(6, 24), q, b)))
    assert.is_nil(F.int8_of(w))
    F.set_int8(w, true)
    assert.is_true(F.int8_of(w))                    -- quantised on first use
    assert.equal(0, max_diff(F.linear(x, w, b), y8))
    assert.equal("userdata", type(F.int8_of(w)))
    F.set_int8(w, false)
    assert.is_nil(F.int8_of(w))
    assert.is_true(max_diff(F.linear(x, w, b), y8) > 0)
  end)

  it("gives NaN for a row holding a NaN or an infinity, as float32 does, and leaves the others", function()
    local x, w = bert.randn({3, 8}, {seed = 12}), bert.randn({4, 8}, {seed = 13})
    x:select(1, 2):select(1, 3):fill_(0 / 0)
    x:select(1, 3):select(1, 1):fill_(math.huge)
    local y = F.linear_int8(x, F.quantize_int8(w)):totable()
    for n = 1, 4 do
      assert.is_true(y[2][n] ~= y[2][n])
      assert.is_true(y[3][n] ~= y[3][n])
      assert.is_true(y[1][n] == y[1][n])
    end
  end)

  it("refuses bad arguments by name", function()
    local w = bert.randn({4, 8})
    local q = F.quantize_int8(w)
    assert.has_error(function() F.linear_int8(bert.randn({2, 7}), q) end,
      "linear_int8: input [2 x 7] and the int8 weight [4 x 8]: in_features differ")
    assert.has_error(function() F.linear_int8(bert.randn({2, 8}), q, bert.randn({3})) end,
      "linear_int8: bias [3] does not match the int8 weight [4 x 8] (expected [4])")
    assert.has_error(function() F.linear_int8(bert.ones({2, 8}, "int32"), q) end,
      "linear_int8: expects float32 tensors, got input int32")
    assert.has_error(function() F.quantize_int8(bert.randn({8})) end,
      "quantize_int8: expects a float32 [out x in] weight on the CPU, got float32 [8] on cpu")
    local bad = bert.randn({2, 3})
    bad:select(1, 2):select(1, 2):fill_(math.huge)
    assert.has_error(function() F.quantize_int8(bad) end, "quantize_int8: weight row 2 has a non-finite value")
    bad = bert.randn({2, 3})
    bad:select(1, 1):select(1, 3):fill_(0 / 0)
    assert.has_error(function() F.quantize_int8(bad) end, "quantize_int8: weight row 1 has a non-finite value")
    assert.has_error(function() F.set_int8(bert.randn({3}), true) end,
      "set_int8: expects a float32 [out x in] weight on the CPU, got float32 [3] on cpu")
    local ok, err = pcall(F.int8_kernel, "sse9")
    assert.is_false(ok)
    assert.truthy(err:find("int8_kernel: 'sse9' is not a kernel (this CPU has: auto", 1, true), err)
    assert.has_error(function() F.linear_int8(bert.randn({2, 8}), w) end)
  end)
end)

describe("model:quantize(\"int8\")", function()
  local function forward(model, batch)
    return bert.no_grad(function() return model:forward(batch) end)
  end

  it("keeps a BERT-mini's logits close to float32", function()
    bert.manual_seed(0)
    local model = bert.model("BertForMaskedLM", "mini", {vocab_size = 2000}):evaluate()
    local batch = {input_ids = bert.randint(0, 2000, {4, 32}, {seed = 1}), attention_mask = bert.ones({4, 32}, "int32")}
    local ref = forward(model, batch).logits
    assert.equal(model, model:quantize("int8"))
    assert.equal("int8", model.quantized)
    local got = forward(model, batch).logits
    local V = ref:size(3)
    local a, b = ref:view(-1, V), got:view(-1, V)
    local cos = (a * b):sum(2) / ((a * a):sum(2):sqrt() * (b * b):sum(2):sqrt())
    assert.is_true(cos:min():item() > 0.99, tostring(cos:min():item()))
    local agree, rows = 0, a:size(1)
    local ta, tb = a:totable(), b:totable()
    for r = 1, rows do
      local ia, ib = 1, 1
      for v = 2, V do
        if ta[r][v] > ta[r][ia] then ia = v end
        if tb[r][v] > tb[r][ib] then ib = v end
      end
      if ia == ib then agree = agree + 1 end
    end
    assert.is_true(agree / rows >= 0.85, agree .. " of " .. rows)
    -- every linear ran int8: 4 layers x (fused QKV, attention output, FFN in, FFN out),
    -- the MLM transform and the tied decoder; the embedding tables were never quantised
    assert.same(18, require("bert.quantize").stats(model).weights)
    model:quantize(nil)
    assert.is_nil(model.quantized)
    assert.equal(0, max_diff(forward(model, batch).logits, ref))
  end)

  it("refuses backward, naming the int8 linear", function()
    local model = bert.model("BertForSequenceClassification", "tiny", {vocab_size = 500, num_labels = 2})
    model:quantize("int8")
    local out = model:forward{input_ids = bert.randint(0, 500, {2, 8}, {seed = 3}), labels = bert.tensor({0, 1}, "int32")}
    local ok, err = pcall(function() out.loss:backward() end)
    assert.is_false(ok)
    assert.truthy(err:find("linear_int8: a model quantised to int8 runs inference only", 1, true), err)
  end)

  it("refuses a model on a device: int8 runs on the CPU", function()
    if not bert.backend_info().vulkan.available then
      pending("no Vulkan device")
      return
    end
    local model = bert.model("BertModel", "tiny", {vocab_size = 100})
    model:to("vulkan")
    assert.has_error(function() model:quantize("int8") end,
      "quantize: the model is on vulkan; int8 runs on the CPU")
    assert.has_error(function() F.linear_int8(bert.randn({2, 8}):to("vulkan"), F.quantize_int8(bert.randn({4, 8}))) end,
      "linear_int8: runs on the CPU only, got input on vulkan")
  end)

  it("refuses an unknown kind", function()
    local model = bert.model("BertModel", "tiny", {vocab_size = 100})
    assert.has_error(function() model:quantize("int4") end,
      'quantize: unknown kind "int4" (expected "int8", or nil for float32)')
  end)

  it("saves float32 weights: loading and quantising again gives the same int8 model", function()
    local tok = assert(bert.tokenizer.load(VOCAB))
    bert.manual_seed(3)
    local model = bert.model("BertForMaskedLM", {vocab_size = tok:vocab_size(), hidden_size = 32, num_hidden_layers = 2,
      num_attention_heads = 2, intermediate_size = 64, max_position_embeddings = 64}):evaluate()
    local batch = {input_ids = bert.randint(0, tok:vocab_size(), {2, 12}, {seed = 4})}
    local fp32 = forward(model, batch).logits
    model:quantize("int8")
    local int8 = forward(model, batch).logits
    local dir = tmpdir()
    assert(require("bert.model_dir").save(dir, model, tok))
    local loaded = bert.from_pretrained(dir, {verbose = false}):evaluate()
    assert.equal(0, max_diff(forward(loaded, batch).logits, fp32))
    loaded:quantize("int8")
    assert.equal(0, max_diff(forward(loaded, batch).logits, int8))
    -- the pipelines' int8 option
    local fill = bert.pipeline("fill-mask", dir, {int8 = true})
    assert.equal("int8", fill.model.quantized)
    local r = fill("the food was [MASK] .", {top_k = 2})
    assert.equal(2, #r)
    -- and experiments/predict.lua --int8
    local p = io.popen("lua5.4 experiments/predict.lua --model '" .. dir .. "' --text 'the food was [MASK] .' " ..
      "--top 2 --json --int8 2>&1; echo rc=$?")
    local out = p:read("a")
    p:close()
    assert.truthy(out:find("rc=0", 1, true), out)
    assert.equal(2, #require("cjson").decode(out:match("^(%b{})")).masks[1], out)
    p = io.popen("lua5.4 experiments/predict.lua --model '" .. dir .. "' --text x --int8 --device vulkan 2>&1; echo rc=$?")
    out = p:read("a")
    p:close()
    assert.truthy(out:find("predict.lua: --int8 runs on the CPU: drop --device vulkan\nrc=1", 1, true), out)
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("tools/int8_accuracy.lua scores a classifier in float32 and int8 on the same features", function()
    local tok = assert(bert.tokenizer.load(VOCAB))
    local task_dir = "spec/fixtures/finetune/classify"
    local task = require("bert.finetune.tasks").load(task_dir, {kind = "classification"})
    bert.manual_seed(5)
    local model = bert.model("BertForSequenceClassification", {vocab_size = tok:vocab_size(), hidden_size = 32,
      num_hidden_layers = 1, num_attention_heads = 2, intermediate_size = 64, max_position_embeddings = 64,
      num_labels = #task.labels})
    model.config.finetune = {max_length = 6}   -- as fine-tuning records it: the tool encodes at that length
    local dir = tmpdir()
    assert(require("bert.model_dir").save(dir, model, tok))
    local classify = require("bert.finetune.classify")
    local features = classify.encode(tok, task.test, {max_length = 6, labels = task.labels})
    local fp32 = classify.evaluate(bert.from_pretrained(dir, {verbose = false}), features,
      {labels = task.labels, pad_id = tok:token_to_id("[PAD]")})
    local p = io.popen("lua5.4 tools/int8_accuracy.lua --model '" .. dir .. "' --task " .. task_dir .. " 2>&1; echo rc=$?")
    local out = p:read("a")
    p:close()
    assert.truthy(out:find("rc=0", 1, true), out)
    assert.truthy(out:find(#features .. " examples at 6 tokens", 1, true), out)
    local f32, i8 = out:match("\naccuracy%s+([%d.]+)%s+([%d.]+)")
    assert.truthy(f32, out)
    assert.near(100 * fp32.accuracy, tonumber(f32), 0.006)
    assert.truthy(tonumber(i8) >= 0 and tonumber(i8) <= 100)
    local changed, n = out:match("predictions changed: (%d+) of (%d+)")
    assert.equal(#features, tonumber(n), out)
    assert.truthy(tonumber(changed) <= #features)
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)
