-- The gradients' column sums (layer norm's gamma and beta, the GELU and
-- linear biases; RMS norm's weight the same way) are summed over fixed row blocks in a
-- fixed order (bert_parallel_blocks), so a backward pass gives the same bits
-- twice and, where the GEMM's own order does not depend on the thread count,
-- at any thread count: fine-tuning runs repeat exactly.
local bert = require("bert")

local function grads(threads)
  local before = bert.get_num_threads()
  bert.set_num_threads(threads)
  bert.manual_seed(5)
  local m = bert.model("BertForSequenceClassification", "tiny", {vocab_size = 300, num_labels = 2})
  m:training()
  local ids = bert.randint(1, 300, {32, 64}, {seed = 1})
  local out = m:forward{input_ids = ids, attention_mask = bert.ones({32, 64}, "int32"),
                        labels = bert.randint(0, 2, {32}, {seed = 2})}
  out.loss:backward()
  local g = {}
  for _, np in ipairs(m:named_parameters()) do g[np.name] = np.param:grad():clone() end
  bert.set_num_threads(before)
  return g
end

local function differing(a, b)
  local names = {}
  for name, t in pairs(a) do
    if (t - b[name]):abs():max():item() ~= 0 then names[#names + 1] = name end
  end
  table.sort(names)
  return names
end

describe("gradient reductions", function()
  local saved
  before_each(function() saved = bert.backend_info().gemm end)
  after_each(function() bert.set_gemm(saved) end)

  it("give the same bits twice at 2 threads, with the default GEMM", function()
    assert.same({}, differing(grads(2), grads(2)))
  end)

  -- Each thread's block of a GEMM goes to the provider on one thread. Our
  -- own GEMM sums K in one order whatever the block's shape; OpenBLAS's and
  -- oneDNN's kernels may not (on an AMD EPYC, Zen 3, their 1- and 2-thread
  -- gradients differ in the last bits), so the thread-count check uses ours.
  it("give the same bits at 1 thread as at 2, with our own GEMM", function()
    bert.set_gemm("bert")
    local two = grads(2)
    assert.same({}, differing(two, grads(2)))
    assert.same({}, differing(two, grads(1)))
  end)
end)
