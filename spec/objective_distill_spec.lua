-- --objective distill: DistilBERT's losses and TinyBERT's against values
-- worked out by hand on tiny tensors, the teacher kept out of training and
-- of the checkpoint, the student started from the right teacher layers, a
-- short end-to-end run from a teacher pretrained here, and the refusals.
local cjson = require("cjson")
local bert = require("bert")
local distill = require("bert.objectives.distill")
local blocks = require("bert.models.blocks")

local tmpdir = require("spec.support.tmpdir").path
local losses = require("spec.support.losses")

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local function softmax(row, T)
  local m, out, z = -math.huge, {}, 0
  for _, v in ipairs(row) do m = math.max(m, v / T) end
  for i, v in ipairs(row) do out[i] = math.exp(v / T - m); z = z + out[i] end
  for i = 1, #out do out[i] = out[i] / z end
  return out
end

local function near(expected, actual, tol, what)
  tol = tol or 1e-5
  assert(math.abs(expected - actual) <= tol * (1 + math.abs(expected)),
    string.format("%s: expected %.9g, got %.9g", what or "value", expected, actual))
end

-- tiny models: a 4-layer BERT teacher and students of its width
local V = 40
local function bert_teacher(layers)
  return bert.model("BertForMaskedLM", {vocab_size = V, hidden_size = 16, num_hidden_layers = layers or 4,
    num_attention_heads = 2, intermediate_size = 32, max_position_embeddings = 32})
end
local function distil_student(layers, heads)
  return bert.model("DistilBertForMaskedLM", {vocab_size = V, dim = 16, n_layers = layers or 2, n_heads = heads or 2,
    hidden_dim = 32, max_position_embeddings = 32})
end

-- a batch of 2 sequences of 6 tokens, the second with 2 pads, 3 masked tokens
local function batch()
  return {
    input_ids = bert.tensor({{2, 7, 9, 4, 11, 3}, {2, 5, 8, 3, 0, 0}}, "int32"),
    attention_mask = bert.tensor({{1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 0, 0}}, "int32"),
    token_type_ids = bert.zeros({2, 6}, "int32"),
    labels = bert.tensor({{-100, 13, -100, -100, 6, -100}, {-100, -100, 21, -100, -100, -100}}, "int32"),
  }
end

describe("distill losses", function()
  it("soft targets: T² · KL(softmax(t/T) ‖ softmax(s/T)), averaged over the rows that count", function()
    local s_rows = {{1.0, -0.5, 2.0}, {0.3, 0.1, -1.2}, {4.0, 0.0, 0.0}}
    local t_rows = {{0.5, 0.5, 1.5}, {-1.0, 2.0, 0.0}, {9.0, 9.0, 9.0}}
    local T = 2
    local s = bert.tensor(s_rows):requires_grad(true)
    local t = bert.tensor(t_rows):requires_grad(true)
    local weights = bert.tensor({1, 1, 0})    -- the third row is padding
    local loss = distill.soft_target_loss(s, t, T, weights)
    local expected = 0
    for r = 1, 2 do
      local p, q = softmax(t_rows[r], T), softmax(s_rows[r], T)
      for v = 1, 3 do expected = expected + p[v] * math.log(p[v] / q[v]) end
    end
    expected = T * T * expected / 2
    near(expected, loss:item(), 1e-5, "soft-target loss")
    -- every row counts without weights
    local all = 0
    for r = 1, 3 do
      local p, q = softmax(t_rows[r], T), softmax(s_rows[r], T)
      for v = 1, 3 do all = all + p[v] * math.log(p[v] / q[v]) end
    end
    near(T * T * all / 3, distill.soft_target_loss(s, t, T):item(), 1e-5, "soft-target loss, no weights")
    -- the gradient is T·(q − p)/rows on the rows that count, none for the teacher
    loss:backward()
    local g = s:grad():totable()
    for r = 1, 3 do
      local p, q = softmax(t_rows[r], T), softmax(s_rows[r], T)
      for v = 1, 3 do
        near(r < 3 and T * (q[v] - p[v]) / 2 or 0, g[r][v], 1e-5, string.format("d loss / d s[%d][%d]", r, v))
      end
    end
    local tg = t:grad()
    assert.is_true(tg == nil or tg:abs():sum():item() == 0, "the teacher's logits got a gradient")
    -- a student equal to its teacher has no loss
    near(0, distill.soft_target_loss(bert.tensor(t_rows), bert.tensor(t_rows), T):item(), 1e-6)
  end)

  it("cosine: the mean of 1 − cos over the non-pad rows", function()
    local s = bert.tensor({{{1, 0}, {1, 1}, {3, 4}}})
    local t = bert.tensor({{{0, 2}, {2, 2}, {-3, -4}}})
    local mask = bert.tensor({{1, 1, 0}}, "int32")
    -- row 1: orthogonal (1 − 0), row 2: parallel (1 − 1), row 3 is padding
    near(0.5, distill.cosine_loss(s, t, mask):item(), 1e-6, "cosine loss")
    -- without a mask the opposite third row counts too: (1 + 0 + 2) / 3
    near(1.0, distill.cosine_loss(s, t):item(), 1e-6, "cosine loss, no mask")
    local s2 = bert.tensor({{{1, 2}, {0.5, -1}}})
    local t2 = bert.tensor({{{2, 1}, {1, 1}}})
    local c1 = (1 * 2 + 2 * 1) / (math.sqrt(5) * math.sqrt(5))
    local c2 = (0.5 - 1) / (math.sqrt(1.25) * math.sqrt(2))
    near(((1 - c1) + (1 - c2)) / 2, distill.cosine_loss(s2, t2, bert.tensor({{1, 1}}, "int32")):item(), 1e-6)
  end)

  it("TinyBERT's hidden-state MSE over real tokens, and its layer map", function()
    local s = bert.tensor({{{1, 2}, {3, 4}, {100, 100}}})
    local t = bert.tensor({{{0, 2}, {1, 1}, {0, 0}}})
    local mask = bert.tensor({{1, 1, 0}}, "int32")
    -- (1 + 0 + 4 + 9) / (2 rows x 2 units)
    near(14 / 4, distill.hidden_mse(s, t, mask):item(), 1e-6, "hidden MSE")
    assert.same({[0] = 0, 2, 4}, distill.layer_map(2, 4))
    assert.same({[0] = 0, 4, 8, 12}, distill.layer_map(3, 12))
    assert.same({[0] = 0, 1, 4}, distill.layer_map(2, 4, {1, 4}))
    assert.same({[0] = 0, 1, 2, 3, 4}, distill.layer_map(4, 4))
    -- the layers a student starts from: DistilBERT took 0, 2, 4, 7, 9, 11 of BERT-base's 12
    assert.same({0, 2, 4, 7, 9, 11}, distill.init_layers(6, 12))
    assert.same({0, 3}, distill.init_layers(2, 4))
    assert.same({0}, distill.init_layers(1, 4))
    assert.same({0, 1, 2, 3}, distill.init_layers(4, 4))
    assert.is_nil(distill.init_layers(5, 4))
  end)

  it("TinyBERT's attention scores q·kᵀ/√d per head, and their MSE over real query-key pairs", function()
    local H, A = 4, 2
    local attention = blocks.SelfAttention({hidden_size = H, num_attention_heads = A, initializer_range = 0.5,
                                            attention_probs_dropout_prob = 0})
    local x_rows = {{{0.1, -0.2, 0.3, 0.4}, {1.0, 0.5, -0.5, 0.0}, {-0.3, 0.2, 0.2, -0.1}}}
    local x = bert.tensor(x_rows)
    local scores = distill.attention_scores(attention, x)
    assert.same({1, A, 3, 3}, scores:shape())
    -- by hand: q = x Wqᵀ + bq, k likewise, head h takes units 2h-1, 2h
    local function project(name, row)
      local W, b = attention.p[name .. ".weight"]:totable(), attention.p[name .. ".bias"]:totable()
      local out = {}
      for o = 1, H do
        local v = b[o]
        for i = 1, H do v = v + W[o][i] * row[i] end
        out[o] = v
      end
      return out
    end
    local q, k = {}, {}
    for i = 1, 3 do q[i], k[i] = project("query", x_rows[1][i]), project("key", x_rows[1][i]) end
    local got = scores:totable()
    for h = 1, A do
      for i = 1, 3 do
        for j = 1, 3 do
          local dot = 0
          for u = 2 * h - 1, 2 * h do dot = dot + q[i][u] * k[j][u] end
          near(dot / math.sqrt(H / A), got[1][h][i][j], 1e-5, string.format("score head %d (%d, %d)", h, i, j))
        end
      end
    end
    -- MSE over the pairs of real tokens (the third is padding): 2 heads x 4 pairs
    local s = bert.zeros({1, 2, 3, 3})
    local t = bert.tensor({{{{1, 2, 50}, {3, 4, 50}, {50, 50, 50}}, {{0, 1, 50}, {1, 0, 50}, {50, 50, 50}}}})
    local mask = bert.tensor({{1, 1, 0}}, "int32")
    near((1 + 4 + 9 + 16 + 0 + 1 + 1 + 0) / 8, distill.attention_mse(s, t, mask):item(), 1e-6, "attention MSE")
  end)
end)

describe("distill: teacher and student", function()
  it("starts the student from the teacher's evenly spaced layers, embeddings and MLM head", function()
    local teacher = bert_teacher(4)
    local student = distil_student(2)
    local said = distill.initialise_student(student, teacher, distill.init_layers(2, 4))
    assert.matches("teacher 0, 3 -> student 0, 1", table.concat(said, "; "), 1, true)
    local t, s = teacher:state_dict(), student:state_dict()
    for m, l in ipairs({0, 3}) do
      for pair, names in pairs({q = {"attention.self.query.weight", "attention.q_lin.weight"},
                                ffn = {"intermediate.dense.weight", "ffn.lin1.weight"},
                                ln = {"output.LayerNorm.bias", "output_layer_norm.bias"}}) do
        assert.tensor_near(t["bert.encoder.layer." .. l .. "." .. names[1]],
          s["distilbert.transformer.layer." .. (m - 1) .. "." .. names[2]], 0, pair .. " of student layer " .. (m - 1))
      end
    end
    assert.tensor_near(t["bert.embeddings.word_embeddings.weight"], s["distilbert.embeddings.word_embeddings.weight"], 0)
    assert.tensor_near(t["cls.predictions.transform.dense.weight"], s["vocab_transform.weight"], 0)
    assert.tensor_near(t["cls.predictions.bias"], s["vocab_projector.bias"], 0)
    -- DistilBERT has no token types: BERT's type-0 row is folded into its positions
    local folded = t["bert.embeddings.position_embeddings.weight"] +
      t["bert.embeddings.token_type_embeddings.weight"]:select(1, 1):view(1, -1)
    assert.tensor_near(folded, s["distilbert.embeddings.position_embeddings.weight"], 1e-6)

    -- a student as deep as its teacher, from every layer, computes what the teacher does
    local whole = distil_student(4)
    distill.initialise_student(whole, teacher, {0, 1, 2, 3})
    teacher:evaluate()
    whole:evaluate()
    local b = batch()
    b.labels = nil
    local to, so = teacher:forward(b), whole:forward(b)
    assert.tensor_near(to.logits, so.logits, 1e-4)
    -- and the other way round: a DistilBERT teacher, a BERT student (token types zeroed)
    local back = bert.model("BertForMaskedLM", {vocab_size = V, hidden_size = 16, num_hidden_layers = 4,
      num_attention_heads = 2, intermediate_size = 32, max_position_embeddings = 32})
    local back_said = distill.initialise_student(back, whole, {0, 1, 2, 3})
    assert.matches("token-type (zeroed", table.concat(back_said, "; "), 1, true)
    back:evaluate()
    assert.tensor_near(to.logits, back:forward(b).logits, 1e-4)
  end)

  it("trains the student only: the teacher gets no gradient, is not optimized and is not saved", function()
    local teacher = bert_teacher(4)
    local before = teacher:state_dict()["bert.encoder.layer.1.attention.self.query.weight"]:clone()
    local student = distil_student(2)
    distill.initialise_student(student, teacher, {0, 3})
    local student_names = {}
    for _, np in ipairs(student:named_parameters()) do student_names[np.name] = np.param:numel() end
    local model = distill.Distiller(student, teacher, {temperature = 2, alpha_ce = 5, alpha_mlm = 2, alpha_cos = 1,
                                                        positions = "all"})
    -- the optimizer's list is the student's, every name and size
    local listed = {}
    for _, np in ipairs(model:named_parameters()) do listed[np.name] = np.param:numel() end
    assert.same(student_names, listed)
    assert.equal(student:num_parameters(), model:num_parameters())
    model:training()
    assert.is_false(teacher.is_training)
    local opt = bert.optim.AdamW(model, {lr = 1e-2})
    opt:zero_grad()
    local out = model:forward(batch())
    for _, k in ipairs({"loss_ce", "loss_mlm", "loss_cos"}) do assert.truthy(out[k], k) end
    near(5 * out.loss_ce:item() + 2 * out.loss_mlm:item() + out.loss_cos:item(), out.loss:item(), 1e-5, "weighted sum")
    out.loss:backward()
    for _, np in ipairs(teacher:named_parameters()) do
      local g = np.param:grad()
      assert.is_true(g == nil or g:abs():sum():item() == 0, "the teacher's " .. np.name .. " has a gradient")
    end
    assert.is_true(model.flat_grad:abs():sum():item() > 0, "the student has no gradient")
    opt:step()
    assert.tensor_near(before, teacher:state_dict()["bert.encoder.layer.1.attention.self.query.weight"], 0)
    -- the checkpoint is the student: its names, its class, loadable as a masked LM
    local dir = tmpdir()
    assert(model:save_pretrained(dir))
    local saved = bert.load_safetensors(dir .. "/model.safetensors")
    local saved_names = {}
    for k, v in pairs(saved) do saved_names[k] = v:numel() end
    assert.same(student_names, saved_names)
    assert.equal("DistilBertForMaskedLM", cjson.decode(read(dir .. "/config.json")).architectures[1])
    local loaded, info = bert.from_pretrained(dir)
    assert.equal(0, #info.missing)
    assert.tensor_near(student:state_dict()["vocab_transform.weight"], loaded:state_dict()["vocab_transform.weight"], 0)
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("adds TinyBERT's losses through a projection when the widths differ", function()
    local teacher = bert_teacher(4)
    local student = bert.model("BertForMaskedLM", {vocab_size = V, hidden_size = 8, num_hidden_layers = 2,
      num_attention_heads = 2, intermediate_size = 16, max_position_embeddings = 32})
    local s_layers, t_layers = student.base.roles.encoder:layers(), teacher.base.roles.encoder:layers()
    local map = distill.layer_map(2, 4)
    local tiny = {map = map, alpha_hidden = 1, alpha_attention = 1, student_attention = {}, teacher_attention = {}}
    for m = 1, 2 do
      tiny.student_attention[m] = s_layers[m].m.attention.m.self
      tiny.teacher_attention[map[m]] = t_layers[map[m]].m.attention.m.self
    end
    local projection = bert.nn.Linear(8, 16)
    local model = distill.Distiller(student, teacher, {temperature = 2, alpha_ce = 0, alpha_mlm = 0, alpha_cos = 1,
      positions = "masked", projection = projection, tinybert = tiny})
    model:evaluate()   -- no dropout: the terms are recomputed by hand below
    local b = batch()
    local out = model:forward(b)
    -- the terms by hand from both models' hidden states
    local inputs = {input_ids = b.input_ids, attention_mask = b.attention_mask, token_type_ids = b.token_type_ids,
                    output_hidden_states = true}
    local ss = student.base:forward(inputs).hidden_states
    local ts = teacher.base:forward(inputs).hidden_states
    assert.equal(3, #ss)
    assert.equal(5, #ts)
    local hidden, attention = 0, 0
    for m = 0, 2 do hidden = hidden + distill.hidden_mse(projection(ss[m + 1]), ts[map[m] + 1], b.attention_mask):item() end
    for m = 1, 2 do
      attention = attention + distill.attention_mse(distill.attention_scores(tiny.student_attention[m], ss[m]),
        distill.attention_scores(tiny.teacher_attention[map[m]], ts[map[m]]), b.attention_mask):item()
    end
    near(hidden, out.loss_hidden:item(), 1e-5, "hidden loss")
    near(attention, out.loss_attention:item(), 1e-5, "attention loss")
    near(out.loss_cos:item() + hidden + attention, out.loss:item(), 1e-5, "total")
    assert.is_nil(out.loss_ce)
    -- the projection is trained (it has a gradient) and saved under distill.*
    model:training()
    model:zero_grad()
    model:forward(b).loss:backward()
    assert.is_true(projection.p.weight:grad():abs():sum():item() > 0)
    local names = {}
    for _, np in ipairs(model:named_parameters()) do names[np.name] = true end
    assert.is_true(names["distill.hidden_projection.weight"])
    assert.equal(student:num_parameters(), model:num_parameters())
  end)
end)

describe("distill on vulkan", function()
  local info = bert.backend_info().vulkan
  if not (info and info.available) then
    it("agrees with the cpu", function() pending(require("spec.support.optional").no_vulkan()) end)
    return
  end
  it("agrees with the cpu: every loss term and the gradient", function()
    local function run_on(device)
      bert.manual_seed(5)
      local teacher = bert_teacher(4)
      local student = distil_student(2)
      distill.initialise_student(student, teacher, {0, 3})
      local s_layers, t_layers = student.base.roles.encoder:layers(), teacher.base.roles.encoder:layers()
      local map = distill.layer_map(2, 4)
      local tiny = {map = map, alpha_hidden = 1, alpha_attention = 1, student_attention = {}, teacher_attention = {}}
      for m = 1, 2 do
        tiny.student_attention[m] = s_layers[m].m.attention
        tiny.teacher_attention[map[m]] = t_layers[map[m]].m.attention.m.self
      end
      local model = distill.Distiller(student, teacher, {temperature = 2, alpha_ce = 5, alpha_mlm = 2, alpha_cos = 1,
        positions = "all", tinybert = tiny})
      if device == "vulkan" then model:to("vulkan") end
      model:evaluate()
      model:zero_grad()
      local out = model:forward(batch())
      out.loss:backward()
      local terms = {}
      for _, k in ipairs({"loss", "loss_ce", "loss_mlm", "loss_cos", "loss_hidden", "loss_attention"}) do
        terms[k] = out[k]:item()
      end
      return terms, model.flat_grad:to("cpu")
    end
    local cpu_terms, cpu_grad = run_on("cpu")
    local vk_terms, vk_grad = run_on("vulkan")
    for k, v in pairs(cpu_terms) do near(v, vk_terms[k], 1e-4, k) end
    assert.tensor_near(cpu_grad, vk_grad, 1e-3)
  end)
end)

-- end to end through experiments/pretrain.lua, on a small synthetic corpus
local corpus = require("spec.support.tiny_corpus").write(tmpdir() .. ".txt", 60, 11)

local teacher_config = tmpdir() .. ".json"
write(teacher_config, cjson.encode({vocab_size = 100, hidden_size = 32, num_hidden_layers = 4, num_attention_heads = 4,
  intermediate_size = 64, max_position_embeddings = 64}))
local student_config = tmpdir() .. ".json"   -- DistilBERT at the teacher's width, half its depth
write(student_config, cjson.encode({model_type = "distilbert", dim = 32, n_layers = 2, n_heads = 4, hidden_dim = 64,
  max_position_embeddings = 64}))
local narrow_config = tmpdir() .. ".json"    -- narrower, 2 heads
write(narrow_config, cjson.encode({vocab_size = 100, hidden_size = 16, num_hidden_layers = 2, num_attention_heads = 2,
  intermediate_size = 32, max_position_embeddings = 64}))

local function run(out, args)
  local ok = os.execute(string.format(
    "OMP_NUM_THREADS=1 lua5.4 experiments/pretrain.lua --corpus %s --batch-size 4 --seq-len 32 --log-every 1 " ..
    "--no-plot --threads 1 --output %s %s >%s.out 2>%s.err", corpus, out, args, out, out))
  return ok, read(out .. ".err")
end

describe("experiments/pretrain.lua --objective distill", function()
  local teacher_run = tmpdir()
  local teacher_dir = teacher_run .. "/checkpoint"

  setup(function()
    local ok, err = run(teacher_run, string.format("--model %s --tokenizer wordpiece --vocab-size 120 --objective mlm " ..
      "--steps 4 --eval-every 4", teacher_config))
    assert(ok, err)
  end)

  teardown(function() os.execute("rm -rf '" .. teacher_run .. "'*") end)

  it("distils a student from a teacher pretrained here and writes the summary", function()
    local out = tmpdir()
    local ok, err = run(out, string.format("--objective distill --teacher %s --model %s --steps 6 --eval-every 3",
      teacher_dir, student_config))
    assert.is_true(ok, err)
    -- it says what it copied and whose tokenizer it reads
    assert.matches("layers: teacher 0, 3 -> student 0, 1", err, 1, true)
    assert.matches("its tokenizer (wordpiece", err, 1, true)
    local summary = cjson.decode(read(out .. "/summary.json"))
    assert.equal("distill", summary.objective)
    assert.equal(6, summary.steps)
    for _, k in ipairs({"mlm_accuracy", "teacher_mlm_accuracy", "teacher_agreement"}) do
      assert.is_true(summary[k] >= 0 and summary[k] <= 1, k .. " " .. tostring(summary[k]))
    end
    assert.is_true(math.abs(summary.perplexity - math.exp(summary.mlm_loss)) < 1e-6 * summary.perplexity)
    -- every logged step has the three terms
    local steps = 0
    for line in io.lines(out .. "/metrics.jsonl") do
      local rec = cjson.decode(line)
      if rec.loss then
        steps = steps + 1
        for _, k in ipairs({"loss_ce", "loss_mlm", "loss_cos"}) do assert.truthy(rec[k], k .. " at step " .. rec.step) end
      end
    end
    assert.equal(6, steps)
    -- the checkpoint: the student with the teacher's tokenizer, as a masked LM and for fine-tuning
    assert.equal("DistilBertForMaskedLM", cjson.decode(read(out .. "/checkpoint/config.json")).architectures[1])
    assert.equal(read(teacher_dir .. "/vocab.txt"), read(out .. "/checkpoint/vocab.txt"))
    local weights = bert.load_safetensors(out .. "/checkpoint/model.safetensors")
    for name in pairs(weights) do assert.is_nil(name:find("^bert%."), "a teacher weight in the checkpoint: " .. name) end
    local classifier, info = bert.from_pretrained(out .. "/checkpoint",
      {architecture = "BertForSequenceClassification", verbose = false})
    assert.equal("DistilBertForSequenceClassification", info.architecture)
    assert.is_truthy(classifier)
    assert.equal(teacher_dir, cjson.decode(read(out .. "/args.json")).tokenizer)
    os.execute("rm -rf '" .. out .. "'*")
  end)

  it("runs TinyBERT's losses for a narrower student and resumes a killed run #slow", function()
    local out = tmpdir()
    local narrow4 = tmpdir() .. ".json"
    write(narrow4, cjson.encode({vocab_size = 100, hidden_size = 16, num_hidden_layers = 2, num_attention_heads = 4,
      intermediate_size = 32, max_position_embeddings = 64}))
    local ok, err = run(out, string.format("--objective distill --teacher %s --model %s --tinybert --steps 3 " ..
      "--eval-every 3 --save-every 3", teacher_dir, narrow4))
    assert.is_true(ok, err)
    assert.matches("projection 16 -> 32", err, 1, true)
    assert.matches("0->0, 1->2, 2->4", err, 1, true)
    local last
    for line in io.lines(out .. "/metrics.jsonl") do
      local rec = cjson.decode(line)
      if rec.loss then last = rec end
    end
    assert.truthy(last.loss_hidden and last.loss_attention)
    local weights = bert.load_safetensors(out .. "/checkpoint/model.safetensors")
    assert.truthy(weights["distill.hidden_projection.weight"])
    -- loadable for fine-tuning, the projection left aside
    local _, info = bert.from_pretrained(out .. "/checkpoint",
      {architecture = "BertForSequenceClassification", verbose = false})
    assert.equal(0, #info.unexpected)

    -- killed with -9 after step 8 and resumed: the same losses as a straight run, the projection included
    local steps, straight, killed = 300, tmpdir(), tmpdir()
    local settings = string.format("--objective distill --teacher %s --model %s --tinybert --steps %d --eval-every 100 " ..
      "--save-every 3", teacher_dir, narrow4, steps)
    assert.is_true((run(straight, settings)))
    os.execute(string.format([[
      OMP_NUM_THREADS=1 lua5.4 experiments/pretrain.lua --corpus %s --batch-size 4 --seq-len 32 --log-every 1 \
        --no-plot --threads 1 --output %s %s >/dev/null 2>&1 & pid=$!
      for i in $(seq 1 1500); do
        if grep -q '"step":8[,}]' %s/metrics.jsonl 2>/dev/null; then break; fi
        sleep 0.02
      done
      kill -9 $pid; wait $pid 2>/dev/null]], corpus, killed, settings, killed))
    local partial = losses(killed)
    assert.truthy(partial[8], "the run was not killed after step 8")
    assert.is_nil(partial[steps], "the run finished before it was killed")
    assert.is_true(os.execute(string.format("OMP_NUM_THREADS=1 lua5.4 experiments/pretrain.lua --resume %s " ..
      ">/dev/null 2>&1", killed)))
    local a, b = losses(straight), losses(killed)
    for step = 1, steps do
      assert.truthy(a[step] and b[step], "missing step " .. step)
      assert.equal(a[step], b[step], "loss differs at step " .. step)
    end
    os.execute("rm -rf '" .. out .. "'* '" .. narrow4 .. "' '" .. straight .. "'* '" .. killed .. "'*")
  end)

  it("refuses a bad --teacher, a conflicting --tokenizer and unequal heads for TinyBERT, naming them", function()
    local out = tmpdir()
    local function refused(args, ...)
      local ok, err = run(out, args)
      assert.is_not_true(ok, "ran: " .. args)
      for _, want in ipairs({...}) do assert.matches(want, err, 1, true) end
      assert.is_nil(io.open(out .. "/summary.json"))
    end
    refused("--objective distill --steps 1", "--objective distill needs --teacher DIR")
    refused("--objective distill --teacher /nonexistent/teacher --steps 1", "--teacher /nonexistent/teacher: no such directory")
    refused(string.format("--objective distill --teacher %s --steps 1", corpus), corpus .. ": not a directory")
    refused(string.format("--objective distill --teacher %s --tokenizer bpe --steps 1", teacher_dir),
      "--tokenizer bpe conflicts with --teacher " .. teacher_dir, "a wordpiece vocabulary of")
    -- another vocabulary: the one a run with a different size trains
    local other = tmpdir()
    assert(run(other, string.format("--model %s --tokenizer wordpiece --vocab-size 40 --objective mlm --steps 1", teacher_config)))
    refused(string.format("--objective distill --teacher %s --tokenizer %s/tokenizer --steps 1", teacher_dir, other),
      "--tokenizer " .. other .. "/tokenizer", "is not the tokenizer of --teacher " .. teacher_dir)
    refused(string.format("--objective distill --teacher %s --model %s --tinybert --steps 1", teacher_dir, narrow_config),
      "--tinybert", "has 2 attention heads and --teacher " .. teacher_dir .. " has 4")
    refused(string.format("--objective distill --teacher %s --model %s --distill-layers 1,2,3 --steps 1", teacher_dir,
      student_config), "--distill-layers 1,2,3: 3 teacher layers for a student of 2 layers")
    refused(string.format("--objective distill --teacher %s --model %s --distill-layers 2,9 --steps 1", teacher_dir,
      student_config), "--distill-layers 2,9: layer 9, but --teacher " .. teacher_dir .. " has 4 layers")
    refused(string.format("--objective distill --teacher %s --model %s --init-layers 0,1 --steps 1", teacher_dir,
      narrow_config), "--init-layers: the student is 16 wide, the teacher 32")
    refused(string.format("--objective distill --teacher %s --distill-temperature 0 --steps 1", teacher_dir),
      "option --distill-temperature: expected a number > 0, got '0'")
    -- a left-to-right teacher (a clm run's checkpoint: is_decoder), and a left-to-right student
    local causal = tmpdir()
    assert(os.execute(string.format("mkdir -p '%s' && cp '%s'/vocab.txt '%s'/tokenizer.json '%s'/", causal, teacher_dir,
      teacher_dir, causal)))
    local cfg = cjson.decode((read(teacher_dir .. "/config.json")))
    cfg.is_decoder = true
    write(causal .. "/config.json", cjson.encode(cfg))
    refused(string.format("--objective distill --teacher %s --steps 1", causal), "--teacher " .. causal ..
      ": a left-to-right model (config.json: is_decoder, bert)", "give a masked-LM teacher")
    local causal_student = causal .. "/student.json"
    local scfg = cjson.decode((read(teacher_config)))   -- a BERT student, causal
    scfg.is_decoder = true
    write(causal_student, cjson.encode(scfg))
    refused(string.format("--objective distill --teacher %s --model %s --steps 1", teacher_dir, causal_student),
      "--model " .. causal_student .. ": a left-to-right model (is_decoder) cannot be a DistilBERT student")
    os.execute("rm -rf '" .. causal .. "'")
    -- a model directory without an MLM head
    local base = tmpdir()
    assert(os.execute(string.format("mkdir -p '%s' && cp '%s'/vocab.txt '%s'/tokenizer.json '%s'/", base, teacher_dir,
      teacher_dir, base)))
    local encoder_only = bert.model("BertModel", teacher_dir .. "/config.json")
    assert(encoder_only:save_pretrained(base))
    refused(string.format("--objective distill --teacher %s --steps 1", base), "--teacher " .. base,
      "distillation needs the teacher's MLM head")
    os.execute("rm -rf '" .. out .. "'* '" .. other .. "'* '" .. base .. "'")
  end)
end)
