-- Our own packed GEMM (provider "bert", csrc/cpu/gemm_kernel.c) against
-- OpenBLAS: matmul at odd shapes and shapes past every blocking size, all
-- four transpose combinations and padded leading dimensions; alpha and beta
-- (beta 0 with NaN in C) through the test-only core._sgemm_reference_diff.
local bert = require("bert")

-- the blocking of the AVX-512 build is KC 256, NC 1024, MC 168; the last
-- shape exceeds it in every dimension (and every build's smaller one)
local shapes = {
  {1, 1, 1}, {3, 5, 7}, {13, 37, 29}, {65, 33, 130}, {200, 129, 300},
  {128, 128, 64}, {128, 64, 128}, {200, 1100, 300},
}

-- op(A) [M,K] and op(B) [K,N] as views: transposed ("T") or not, and a
-- row stride wider than the row when padded (a narrowed wider tensor)
local function operand(rows, cols, trans, pad, seed)
  local r, c = rows, cols
  if trans then r, c = cols, rows end
  local t = bert.randn({r, c + pad}, {seed = seed})
  if pad > 0 then t = t:narrow(2, 1, c) end
  return trans and t:t() or t
end

local function relative_diff(x, y)
  local diff = x:sub(y):abs():max():item()
  local mag = y:abs():max():item()
  return diff / math.max(mag, 1e-30)
end

describe("gemm provider bert", function()
  local saved
  before_each(function() saved = bert.backend_info().gemm end)
  after_each(function() bert.set_gemm(saved) end)

  it("is listed and selectable", function()
    local found = false
    for _, p in ipairs(bert.gemm_providers()) do found = found or p == "bert" end
    assert.is_true(found)
    bert.set_gemm("bert")
    assert.equal("bert", bert.backend_info().gemm)
  end)

  for _, layout in ipairs({"NN", "NT", "TN", "TT"}) do
    for _, pad in ipairs({0, 5}) do
      it(string.format("matmul %s%s agrees with OpenBLAS", layout,
                       pad > 0 and " with padded leading dimensions" or ""), function()
        for i, s in ipairs(shapes) do
          local M, N, K = s[1], s[2], s[3]
          local a = operand(M, K, layout:sub(1, 1) == "T", pad, 2 * i)
          local b = operand(K, N, layout:sub(2, 2) == "T", pad, 2 * i + 1)
          bert.set_gemm("openblas")
          local want = a:matmul(b)
          bert.set_gemm("bert")
          local got = a:matmul(b)
          assert.same({M, N}, got:shape())
          local d = relative_diff(got, want)
          assert.is_true(d < 1e-5, string.format("%s %dx%dx%d pad %d: relative difference %g",
                                                 layout, M, N, K, pad, d))
        end
      end)
    end
  end

  it("batched matmul (per-head attention shapes) agrees with OpenBLAS", function()
    local q = bert.randn({2, 3, 128, 64}, {seed = 5})
    local k = bert.randn({2, 3, 128, 64}, {seed = 6})
    bert.set_gemm("openblas")
    local s_want = q:matmul(k:transpose(3, 4))
    local o_want = s_want:matmul(k)
    bert.set_gemm("bert")
    local s_got = q:matmul(k:transpose(3, 4))
    local o_got = s_got:matmul(k)
    assert.is_true(relative_diff(s_got, s_want) < 1e-5)
    assert.is_true(relative_diff(o_got, o_want) < 1e-5)
  end)

  it("applies alpha and beta, and never reads C when beta is 0", function()
    local cases = {{1, 0}, {1, 1}, {1, 0.5}, {0.125, 0}, {0.125, 1}, {0.125, 0.5}}
    local seed = 1
    for _, s in ipairs(shapes) do
      for _, ab in ipairs(cases) do
        for t = 0, 3 do
          local ta, tb = t % 2 == 1, t >= 2
          for _, pad in ipairs({0, 3}) do
            seed = seed + 1
            local diff, mag, pad_ok = bert.core._sgemm_reference_diff(ta, tb, s[1], s[2], s[3],
                                                                    ab[1], ab[2], pad, seed)
            local what = string.format("%dx%dx%d ta %s tb %s alpha %g beta %g pad %d", s[1], s[2], s[3],
                                       ta, tb, ab[1], ab[2], pad)
            assert.is_true(diff <= 1e-5 * math.max(mag, 1), what .. ": difference " .. diff)
            assert.is_true(pad_ok, what .. ": wrote C's padding")
          end
        end
      end
    end
  end)

  it("handles K = 0, M = 0 and N = 0", function()
    for _, beta in ipairs({0, 0.5}) do
      local diff = bert.core._sgemm_reference_diff(false, false, 4, 5, 0, 1, beta, 2, 7)
      assert.equal(0, diff)
    end
    assert.equal(0, (bert.core._sgemm_reference_diff(false, true, 0, 5, 3, 1, 0, 1, 7)))
    assert.equal(0, (bert.core._sgemm_reference_diff(true, false, 4, 0, 3, 1, 0, 1, 7)))
    bert.set_gemm("bert")
    assert.same({{0, 0}, {0, 0}}, bert.zeros({2, 0}):matmul(bert.zeros({0, 2})):totable())
    assert.same({0, 2}, bert.zeros({0, 3}):matmul(bert.zeros({3, 2})):shape())
  end)
end)
