-- The thread pool (csrc/core/parallel.c): every kernel that it splits gives
-- the one-thread result at 2 and 3 threads (3 oversubscribes this machine),
-- on shapes large enough to be split: GEMMs by rows and by columns with
-- transposed operands, batched GEMMs (a GEMM inside a pool chunk), the
-- per-thread partial sums of the bias / LayerNorm gradients, attention's
-- per-thread scratch, elementwise passes, random fills and optimizer steps.
local bert = require("bert")
local F = bert.F
local optim = require("bert.optim")

local function randn(shape, seed) return bert.randn(shape, {seed = seed}) end
local function rel(a, b) return ((a - b):abs():max():item()) / (b:abs():max():item() + 1e-30) end

-- Runs f() at 1, 2 and 3 threads; f returns a list of tensors.
local function across_threads(f)
  local saved = bert.get_num_threads()
  local runs = {}
  for _, n in ipairs({1, 2, 3}) do
    bert.set_num_threads(n)
    runs[n] = f()
  end
  bert.set_num_threads(saved)
  return runs
end

local function assert_close(runs, tol)
  for _, n in ipairs({2, 3}) do
    for i, t in ipairs(runs[1]) do
      local e = rel(runs[n][i], t)
      assert(e <= tol, string.format("result %d at %d threads differs from 1 thread by %.3g (tol %.3g)", i, n, e, tol))
    end
  end
end

local function assert_equal(runs)
  for _, n in ipairs({2, 3}) do
    for i, t in ipairs(runs[1]) do
      assert.are.equal(0, (runs[n][i] - t):abs():max():item(),
                       string.format("result %d at %d threads is not bit-identical", i, n))
    end
  end
end

describe("the thread pool", function()
  it("splits GEMMs by rows and by columns, with transposed operands", function()
    local a, b = randn({640, 256}, 1), randn({256, 160}, 2)     -- more rows: split by rows
    local c, d = randn({96, 384}, 3), randn({384, 512}, 4)      -- more columns: by columns
    local runs = across_threads(function()
      return {a:matmul(b), c:matmul(d), b:t():matmul(a:t()), d:t():matmul(c:t()),
              a:t():contiguous():t():matmul(b)}
    end)
    assert_close(runs, 1e-5)
    -- and against a plain sum for a few entries of the split product
    local got, A, B = runs[2][1]:totable(), a:totable(), b:totable()
    for _, ij in ipairs({{1, 1}, {640, 160}, {333, 77}}) do
      local i, j = ij[1], ij[2]
      local s = 0
      for k = 1, 256 do s = s + A[i][k] * B[k][j] end
      assert.is_true(math.abs(got[i][j] - s) < 1e-4 * (1 + math.abs(s)), string.format("(%d, %d): %g vs %g", i, j, got[i][j], s))
    end
  end)

  it("runs batched GEMMs with a GEMM inside each pool chunk", function()
    local q, k = randn({6, 4, 96, 64}, 5), randn({6, 4, 64, 96}, 6)
    assert_close(across_threads(function() return {q:matmul(k), q:matmul(k:transpose(3, 4):contiguous():transpose(3, 4))} end), 1e-5)
  end)

  it("gives the same linear, bias_gelu and layer_norm gradients", function()
    local runs = across_threads(function()
      local x, w, b = randn({300, 200}, 7), randn({256, 200}, 8), randn({256}, 9)
      local g, beta, r = randn({256}, 10), randn({256}, 11), randn({300, 256}, 12)
      for _, t in ipairs({x, w, b, g, beta}) do t:requires_grad(true) end
      local h = F.bias_gelu(F.linear(x, w), b)
      local y = F.layer_norm(h, g, beta, 1e-12, r)
      y:backward(randn({300, 256}, 13))
      return {y:detach(), x:grad(), w:grad(), b:grad(), g:grad(), beta:grad()}
    end)
    assert_close(runs, 2e-5)
  end)

  it("gives the same attention, cross-entropy and softmax, forward and backward", function()
    local runs = across_threads(function()
      local q, k, v = randn({4, 4, 64, 32}, 14), randn({4, 4, 64, 32}, 15), randn({4, 4, 64, 32}, 16)
      for _, t in ipairs({q, k, v}) do t:requires_grad(true) end
      local o = F.attention(q, k, v)
      local logits = randn({256, 300}, 17)
      logits:requires_grad(true)
      local labels = bert.randint(0, 300, {256}, {seed = 18})
      local loss = F.cross_entropy(logits, labels) + (o * randn({4, 4, 64, 32}, 19)):sum()
      loss:backward()
      return {o:detach(), q:grad(), k:grad(), v:grad(), logits:grad(), randn({200, 300}, 20):softmax(2),
              randn({300, 200}, 21):sum(1)}
    end)
    assert_close(runs, 1e-5)
  end)

  it("fills, drops out, steps optimizers and sorts identically at any thread count", function()
    local runs = across_threads(function()
      local p = randn({70001}, 22)
      p:set_grad(randn({70001}, 23))
      local opt = optim.AdamW({p}, {lr = 0.01, weight_decay = 0.01})
      opt:step()
      local x = randn({300, 400}, 24)
      bert.manual_seed(27)
      return {randn({100001}, 25), bert.rand({100001}, {seed = 26}), F.dropout(x, 0.1, true),
              p:detach(), x:gelu(), randn({200, 300}, 28):sort_indices(2)}
    end)
    assert_equal(runs)
  end)

  it("is the only source of threads in the kernels: no OpenMP parallel regions in csrc/core and csrc/cpu", function()
    -- libgomp's threads busy-wait after each region and would slow a shared
    -- machine down again; loops go through bert_parallel_for (core/parallel.h)
    local found = {}
    for _, dir in ipairs({"csrc/core", "csrc/cpu"}) do
      for name in io.popen("ls " .. dir):lines() do
        if name:match("%.[ch]$") then
          local n = 0
          for line in io.lines(dir .. "/" .. name) do
            n = n + 1
            if line:match("^%s*#%s*pragma%s+omp%s+parallel") or line:match("^%s*#%s*pragma%s+omp%s+for") then
              found[#found + 1] = dir .. "/" .. name .. ":" .. n
            end
          end
        end
      end
    end
    assert(#found == 0, "OpenMP parallel regions (use bert_parallel_for from core/parallel.h): " .. table.concat(found, ", "))
  end)
end)
