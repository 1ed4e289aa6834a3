-- F.attention_rel: DeBERTa's disentangled attention as one fused CPU kernel
-- (csrc/cpu/attention_rel.c), against the materialised math and finite
-- differences.
local bert = require("bert")
local G = require("spec.support.gradcheck")
local F = bert.F

local function randn(shape, seed, scale) return bert.randn(shape, {seed = seed}) * (scale or 1) end
local function maxdiff(a, b) return (a - b):abs():max():item() end

-- rows[i][j]: a DeBERTa-like table row (clamped, log-ish far away) in [0, R)
local function rows_for(Tq, Tk, R)
  local t = {}
  local span = R // 2
  for i = 0, Tq - 1 do
    local row = {}
    for j = 0, Tk - 1 do
      local r = i - j
      if math.abs(r) > 3 then r = (r > 0 and 1 or -1) * (3 + math.floor(math.log(math.abs(r) - 2) * 2)) end
      row[j + 1] = math.max(0, math.min(R - 1, span + r))
    end
    t[i + 1] = row
  end
  return bert.tensor(t, "int32")
end

-- softmax(scale (q kᵀ + q Kr[row]ᵀ + k Qr[row]ᵀ) + mask bias) v, every [B, A, T, T] tensor materialised
local function reference(q, k, v, kr, qr, rows, mask, scale, causal)
  local B, A, Tq, Tk = q:size(1), q:size(2), q:size(3), k:size(3)
  local s = q:matmul(k:transpose(3, 4))
  local idx = rows:view(1, 1, Tq, Tk):expand(B, A, Tq, Tk):contiguous()
  if kr then s = s + q:matmul(kr:transpose(2, 3)):gather(4, idx) end
  if qr then
    local by_key = k:matmul(qr:transpose(2, 3)):gather(4, rows:t():contiguous():view(1, 1, Tk, Tq):expand(B, A, Tk, Tq):contiguous())
    s = s + by_key:transpose(3, 4)
  end
  s = s * scale
  if mask then s = s + ((mask:float() - 1) * 3e38):view(B, 1, 1, Tk) end
  if causal then   -- an additive -inf above the diagonal
    local tri = {}
    for i = 1, Tq do tri[i] = {}; for j = 1, Tk do tri[i][j] = j <= i and 0 or -math.huge end end
    s = s + bert.tensor(tri):view(1, 1, Tq, Tk)
  end
  return s:softmax(4):matmul(v)
end

describe("F.attention_rel", function()
  it("matches the materialised c2p + p2c attention, with padding, over several blocks and tiles", function()
    for _, shape in ipairs({{2, 3, 13, 4, 10}, {1, 2, 150, 5, 24}}) do
      local B, A, T, d, R = table.unpack(shape)
      local q, k, v = randn({B, A, T, d}, 1), randn({B, A, T, d}, 2), randn({B, A, T, d}, 3)
      local kr, qr = randn({A, R, d}, 4), randn({A, R, d}, 5)
      local rows = rows_for(T, T, R)
      local m = {}
      for b = 1, B do
        m[b] = {}
        for t = 1, T do m[b][t] = (b == 2 and t > T - 4) and 0 or 1 end
      end
      local mask = bert.tensor(m, "int32")
      local scale = 1 / math.sqrt(d * 3)
      local got = F.attention_rel(q, k, v, {kr = kr, qr = qr, rows = rows, mask = mask, scale = scale})
      local want = reference(q, k, v, kr, qr, rows, mask, scale)
      assert.truthy(maxdiff(got, want) < 1e-5, "max diff " .. maxdiff(got, want))
      -- one term only
      got = F.attention_rel(q, k, v, {kr = kr, rows = rows, scale = scale})
      assert.truthy(maxdiff(got, reference(q, k, v, kr, nil, rows, nil, scale)) < 1e-5)
      got = F.attention_rel(q, k, v, {qr = qr, rows = rows, scale = scale})
      assert.truthy(maxdiff(got, reference(q, k, v, nil, qr, rows, nil, scale)) < 1e-5)
    end
  end)

  it("has gradients that match finite differences for q, k, v and both tables", function()
    local B, A, T, d, R = 2, 2, 7, 3, 8
    local mask = bert.tensor({{1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 0, 0}}, "int32")
    local rows = rows_for(T, T, R)
    G.gradcheck(function(q, k, v, kr, qr)
      return F.attention_rel(q, k, v, {kr = kr, qr = qr, rows = rows, mask = mask, scale = 0.4})
    end, {randn({B, A, T, d}, 11), randn({B, A, T, d}, 12), randn({B, A, T, d}, 13),
          randn({A, R, d}, 14), randn({A, R, d}, 15)})
    -- rows naming only a band in the middle of a larger table (the kernel multiplies just that band)
    local band = rows_for(T, T, 6) + 3
    local kr, qr = randn({A, 12, d}, 16), randn({A, 12, d}, 17)
    G.gradcheck(function(q, k, v, kr_, qr_)
      return F.attention_rel(q, k, v, {kr = kr_, qr = qr_, rows = band, mask = mask, scale = 0.4})
    end, {randn({B, A, T, d}, 18), randn({B, A, T, d}, 19), randn({B, A, T, d}, 20), kr, qr})
    assert.equal(0, kr:grad():narrow(2, 1, 3):abs():max():item())
    assert.equal(0, qr:grad():narrow(2, 10, 3):abs():max():item())
    local want = reference(randn({B, A, T, d}, 18), randn({B, A, T, d}, 19), randn({B, A, T, d}, 20), kr, qr, band, mask, 0.4)
    local got = F.attention_rel(randn({B, A, T, d}, 18), randn({B, A, T, d}, 19), randn({B, A, T, d}, 20),
      {kr = kr, qr = qr, rows = band, mask = mask, scale = 0.4})
    assert.truthy(maxdiff(got, want) < 1e-5)
  end)

  it("gives the same gradients as the composed ops on views (as DeBERTa passes them)", function()
    local B, A, T, d, R = 2, 3, 9, 4, 12
    local x = randn({B, T, A * d}, 21)
    local table_ = randn({R, A * d}, 22)
    local rows = rows_for(T, T, R)
    local function run(fused)
      x:requires_grad(true); x:zero_grad(); table_:requires_grad(true); table_:zero_grad()
      local heads = function(t) return t:view(B, T, A, d):transpose(2, 3) end
      local q, k, v = heads(x * 1.5), heads(x * -0.5), heads(x)
      local kr = (table_ * 0.7):view(R, A, d):transpose(1, 2)
      local qr = (table_ * -1.1):view(R, A, d):transpose(1, 2)
      local out = fused and F.attention_rel(q, k, v, {kr = kr, qr = qr, rows = rows, scale = 0.3})
                  or reference(q:contiguous(), k:contiguous(), v, kr, qr, rows, nil, 0.3)
      ;(out * randn(out:shape(), 23)):sum():backward()
      return out, x:grad():clone(), table_:grad():clone()
    end
    local o1, gx1, gt1 = run(true)
    local o2, gx2, gt2 = run(false)
    assert.truthy(maxdiff(o1, o2) < 1e-5)
    assert.truthy(maxdiff(gx1, gx2) < 1e-4)
    assert.truthy(maxdiff(gt1, gt2) < 1e-4)
  end)

  -- The kernel multiplies each chunk of 32 queries (keys) by only the table
  -- rows it reads: odd lengths cut the chunks, log buckets and the clamp
  -- merge distances, scattered rows make every window whole.
  it("matches the reference, outputs and gradients, over chunks of any shape of rows", function()
    local deberta = require("bert.models.deberta_v2")
    local scattered = {}
    for i = 1, 45 do
      scattered[i] = {}
      for j = 1, 45 do scattered[i][j] = (i * 7 + j * j * 3) % 40 end
    end
    for _, case in ipairs({
      {T = 77, R = 160, rows = deberta.relative_rows(77, {buckets = 80, max_relative = 512, span = 80})},
      -- T past the buckets: log-bucketed far distances, clamped beyond max_relative; the
      -- second batch row's keys past 100 padded (its second tile of 128 keys wholly)
      {T = 200, R = 32, rows = deberta.relative_rows(200, {buckets = 16, max_relative = 64, span = 16}), pad = 100},
      {T = 45, R = 40, rows = bert.tensor(scattered, "int32")},
      {T = 33, R = 5, rows = bert.full({33, 33}, 3, "int32")},
    }) do
      local B, A, d, T, R = 2, 2, 5, case.T, case.R
      local m = {}
      for b = 1, B do
        m[b] = {}
        for t = 1, T do m[b][t] = (b == 2 and t > T - (case.pad or 9)) and 0 or 1 end
      end
      local mask = bert.tensor(m, "int32")
      local gout = randn({B, A, T, d}, 60)
      local function run(fused)
        local ins = {randn({B, A, T, d}, 61), randn({B, A, T, d}, 62), randn({B, A, T, d}, 63),
                     randn({A, R, d}, 64), randn({A, R, d}, 65)}
        for _, t in ipairs(ins) do t:requires_grad(true) end
        local q, k, v, kr, qr = table.unpack(ins)
        local out = fused and F.attention_rel(q, k, v, {kr = kr, qr = qr, rows = case.rows, mask = mask, scale = 0.3})
                    or reference(q, k, v, kr, qr, case.rows, mask, 0.3)
        out:backward(gout)
        local grads = {}
        for n, t in ipairs(ins) do grads[n] = t:grad() end
        return out, grads
      end
      local got, ggot = run(true)
      local want, gwant = run(false)
      assert.truthy(maxdiff(got, want) < 1e-5, "T " .. T .. ": max diff " .. maxdiff(got, want))
      for n = 1, 5 do
        local tol = 1e-4 * math.max(1, gwant[n]:abs():max():item())
        assert.truthy(maxdiff(ggot[n], gwant[n]) < tol, "T " .. T .. ", gradient " .. n .. ": " .. maxdiff(ggot[n], gwant[n]))
      end
    end
  end)

  it("lays its output and the gradients of q, k, v out time-major, as F.attention: [B, T, H] with no copy", function()
    local B, A, T, d, R = 2, 3, 5, 4, 10
    local x = randn({B, T, 3 * A * d}, 70)
    x:requires_grad(true)
    local function heads(n) return x:narrow(3, n * A * d + 1, A * d):view(B, T, A, d):transpose(2, 3) end
    local kr, qr = randn({A, R, d}, 71), randn({A, R, d}, 72)
    local out = F.attention_rel(heads(0), heads(1), heads(2), {kr = kr, qr = qr, rows = rows_for(T, T, R), scale = 0.3})
    assert.is_true(out:transpose(2, 3):is_contiguous())
    local want = reference(heads(0):contiguous(), heads(1):contiguous(), heads(2):contiguous(), kr, qr,
                           rows_for(T, T, R), nil, 0.3)
    assert.truthy(maxdiff(out, want) < 1e-5)
    local g = randn({B, T, A * d}, 73)
    out:transpose(2, 3):reshape(B, T, A * d):backward(g)
    local gx = x:grad():clone()
    x:zero_grad()
    want:transpose(2, 3):reshape(B, T, A * d):backward(g)
    assert.truthy(maxdiff(gx, x:grad()) < 1e-5)
  end)

  it("takes the causal flag: against the masked reference, with padding, across blocks and tiles", function()
    for _, shape in ipairs({{2, 2, 9, 4, 10}, {1, 1, 150, 4, 24}}) do
      local B, A, T, d, R = table.unpack(shape)
      local q, k, v = randn({B, A, T, d}, 41), randn({B, A, T, d}, 42), randn({B, A, T, d}, 43)
      local kr, qr = randn({A, R, d}, 44), randn({A, R, d}, 45)
      local rows = rows_for(T, T, R)
      local m = {}
      -- right padding in the small case; in the long one the first 130 keys
      -- padded (left padding past the first 128-key tile)
      for b = 1, B do
        m[b] = {}
        for t = 1, T do m[b][t] = ((T < 100 and t > T - 2 and b == B) or (T > 100 and t <= 130)) and 0 or 1 end
      end
      local mask = bert.tensor(m, "int32")
      local got = F.attention_rel(q, k, v, {kr = kr, qr = qr, rows = rows, mask = mask, scale = 0.3, causal = true})
      local want = reference(q, k, v, kr, qr, rows, mask, 0.3, true)
      assert.truthy(maxdiff(got, want) < 1e-5, "max diff " .. maxdiff(got, want))
    end
    local B, A, T, d, R = 1, 2, 7, 3, 8
    local rows = rows_for(T, T, R)
    G.gradcheck(function(q, k, v, kr, qr)
      return F.attention_rel(q, k, v, {kr = kr, qr = qr, rows = rows, scale = 0.4, causal = true})
    end, {randn({B, A, T, d}, 46), randn({B, A, T, d}, 47), randn({B, A, T, d}, 48),
          randn({A, R, d}, 49), randn({A, R, d}, 50)})
  end)

  it("applies dropout reproducibly from the seed and not in evaluation", function()
    local q, k, v = randn({1, 2, 6, 4}, 31), randn({1, 2, 6, 4}, 32), randn({1, 2, 6, 4}, 33)
    local kr = randn({2, 6, 4}, 34)
    local rows = rows_for(6, 6, 6)
    local function run(training)
      bert.manual_seed(5)
      return F.attention_rel(q, k, v, {kr = kr, rows = rows, dropout = 0.3, training = training})
    end
    assert.equal(0, maxdiff(run(true), run(true)))
    assert.truthy(maxdiff(run(true), run(false)) > 1e-3)
    assert.equal(0, maxdiff(run(false), F.attention_rel(q, k, v, {kr = kr, rows = rows})))
  end)

  it("rejects bad arguments by name", function()
    local q = randn({1, 2, 5, 4}, 1)
    local kr = randn({2, 6, 4}, 2)
    assert.error_matches(function() F.attention_rel(q, q, q, {kr = kr}) end, "option 'rows' %(int32 %[Tq x Tk%]%) is required")
    assert.error_matches(function() F.attention_rel(q, q, q, {kr = kr, rows = bert.zeros({5, 4}, "int32")}) end,
      "rows must be int32 %[5 x 5%]")
    assert.error_matches(function() F.attention_rel(q, q, q, {kr = kr, rows = bert.full({5, 5}, 6, "int32")}) end,
      "rows%[0%]%[0%] = 6 is outside the 6 rows of the relative table")
    assert.error_matches(function() F.attention_rel(q, q, q, {kr = randn({3, 6, 4}, 3), rows = bert.zeros({5, 5}, "int32")}) end,
      "kr %[3 x 6 x 4%] must be float32 %[heads 2 x rows 6 x head_dim 4%]")
    assert.error_matches(function()
      F.attention_rel(q, q, q, {kr = kr, rows = bert.zeros({5, 5}, "int32"), mask = bert.ones({2, 5}, "int32")})
    end, "mask %[2 x 5%] must be a %[1 x 5%] keep mask")
  end)
end)

describe("DeBERTa attention", function()
  it("runs the fused kernel and the composed ops to the same outputs and gradients", function()
    local deberta = require("bert.models.deberta_v2")
    local ids = bert.tensor({{2, 5, 7, 9, 3, 4, 8, 6, 5}, {2, 9, 3, 4, 4, 1, 0, 0, 0}}, "int32")
    local mask = ids:ne(0)
    local function run(fused)
      deberta.Attention.fused = fused
      bert.manual_seed(3)
      local m = bert.model("DebertaV2ForMaskedLM", "tiny", {vocab_size = 12, max_position_embeddings = 64,
        position_buckets = 4, share_att_key = false})
      m:evaluate()
      local labels = bert.tensor({{-100, 5, -100, 7, -100, -100, 2, -100, -100}, {-100, 3, -100, -100, 1, -100, -100, -100, -100}}, "int32")
      local out = m:forward{input_ids = ids, attention_mask = mask, labels = labels}
      out.loss:backward()
      return out.loss:item(), m.flat_grad:clone()
    end
    local l1, g1 = run(true)
    local l2, g2 = run(false)
    deberta.Attention.fused = true
    assert.near(l1, l2, 1e-5)
    assert.truthy(maxdiff(g1, g2) < 1e-4 * math.max(1, g2:abs():max():item()))
  end)
end)

describe("DeBERTa's relative rows", function()
  it("serve a shorter sequence from the longest table seen", function()
    local ids = bert.tensor({{2, 5, 7, 9, 3, 4, 8, 6, 5}}, "int32")
    local short = ids:narrow(2, 1, 5):contiguous()
    local function model()
      bert.manual_seed(9)
      local m = bert.model("DebertaV2Model", "tiny", {vocab_size = 12, max_position_embeddings = 64, position_buckets = 4})
      m:evaluate()
      return m
    end
    local warm = model()
    bert.no_grad(function() return warm:forward{input_ids = ids} end)
    local a = bert.no_grad(function() return warm:forward{input_ids = short} end).last_hidden_state
    local b = bert.no_grad(function() return model():forward{input_ids = short} end).last_hidden_state
    assert.equal(0, maxdiff(a, b))
    local deberta = require("bert.models.deberta_v2")
    local rows9 = deberta.relative_rows(9, warm.arch)
    assert.same(rows9:narrow(1, 1, 5):narrow(2, 1, 5):contiguous():totable(), deberta.relative_rows(5, warm.arch):totable())
  end)

  it("narrow the table to the rows a length reads (2T - 1 under the buckets), to the full table's outputs", function()
    local deberta = require("bert.models.deberta_v2")
    bert.manual_seed(4)
    local m = bert.model("DebertaV2Model", "tiny", {vocab_size = 12, max_position_embeddings = 64, position_buckets = 8})
    m:evaluate()
    local enc = m.roles.encoder
    for _, T in ipairs({3, 30}) do
      local extra = enc:extra(T)
      local full = deberta.relative_rows(T, enc.arch)
      local first, last = full:min():item(), full:max():item()
      assert.equal(last - first + 1, extra.rel:size(1))
      if T == 3 then assert.equal(5, extra.rel:size(1)) end
      assert.equal(0, extra.rows:min():item())
      assert.equal(0, maxdiff(extra.rows + first, full))
      local ids = bert.randint(1, 12, {2, T}, {seed = T})
      local got = bert.no_grad(function() return m:forward{input_ids = ids} end).last_hidden_state
      -- the encoder with the whole table and absolute rows
      local R = enc.m.LayerNorm(enc.m.rel_embeddings.p.weight)
      local want = bert.no_grad(function()
        local x = m.roles.embeddings(ids)
        for _, layer in ipairs(enc:layers()) do x = layer(x, nil, {rel = R, rows = full}) end
        return x
      end)
      assert.truthy(maxdiff(got, want) < 1e-5, "T " .. T .. ": " .. maxdiff(got, want))
    end
  end)

  it("follow HF's log buckets (|r| 511 -> 255, 512 -> 256 with 256 buckets over 512 positions)", function()
    local deberta = require("bert.models.deberta_v2")
    assert.equal(128, deberta.log_bucket(128, 256, 512))
    assert.equal(255, deberta.log_bucket(511, 256, 512))
    assert.equal(256, deberta.log_bucket(512, 256, 512))
    assert.equal(-255, deberta.log_bucket(-511, 256, 512))
    assert.equal(-7, deberta.log_bucket(-7, 256, 512))
  end)
end)
