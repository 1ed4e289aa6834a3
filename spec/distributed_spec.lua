-- bert.distributed: the world of one, the pieces that make numbers independent
-- of the rank count (sharded loader, dropout keyed by global sample), and,
-- under `mpirun -np 2` on this machine, collectives, data-parallel training
-- equal to one process, kill -9 of a rank, resume with another rank count,
-- refused mismatches and timeouts.  The mpirun parts are skipped, saying so,
-- only when Open MPI is not installed (`make deps` installs it).
local bert = require("bert")
local cjson = require("cjson")
local dist = require("bert.distributed")
local pre = require("bert.data.pretraining")

local tmpdir = require("spec.support.tmpdir").path

local read = require("bert.fs").read_file   -- nil for a missing file

-- mpirun, with the flags this machine needs (loopback, 2 ranks on any core count, root in CI)
local info = bert.backend_info().distributed
local no_mpirun = require("spec.support.optional").missing("mpirun")
local have_mpi = info.available and not no_mpirun
local why = not info.available and info.reason .. " (install: sudo apt-get install openmpi-bin libopenmpi-dev)" or no_mpirun
local root = (io.popen("id -u"):read("l") or "") == "0"
-- (single-copy shared memory needs ptrace rights that containers often lack: off)
local MPIRUN = "OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive OMPI_MCA_btl_vader_single_copy_mechanism=none " ..
               "mpirun -np 2 --oversubscribe" ..
               (root and " --allow-run-as-root" or "")
local mpi_it = it
if not have_mpi then
  io.stderr:write("\ndistributed_spec: SKIPPING the mpirun tests: ", why, "\n")
  mpi_it = function(name) it(name, function() pending("MPI: " .. why) end) end
end

describe("bert.distributed without mpirun", function()
  it("is a world of one whose collectives return their input", function()
    local rank, size = dist.init()
    assert.equal(0, rank)
    assert.equal(1, size)
    assert.is_true(dist.is_main())
    assert.is_false(dist.active())
    assert.same({1, 2}, dist.all_reduce(bert.tensor({1, 2}), "mean"):totable())
    assert.same({3}, dist.broadcast(bert.tensor({3}), 0):totable())
    assert.same({1, 1, 1}, dist.all_gather(bert.tensor({{2}})):shape())
    assert.same({2, 0.5}, dist.all_reduce_numbers({2, 0.5}))
    assert.equal(7, dist.broadcast_number(7))
    assert.is_true(dist.any(true))
    assert.same({0, 6}, {dist.shard(6)})
    assert.is_true(dist.owns(1) and dist.owns(2))
    assert.same({2, 3}, dist.split_map(2, function(a, b) return {a + 1, b + 1} end))
    dist.barrier()
  end)

  it("checksums a tensor's bits, whatever the thread count", function()
    local t = bert.randn({70000}, {seed = 3})
    local c = bert.core.dist.checksum(t)
    assert.equal("integer", math.type(c))
    assert.equal(c, bert.core.dist.checksum(t:clone()))
    local before = bert.get_num_threads()
    bert.set_num_threads(2)
    assert.equal(c, bert.core.dist.checksum(t))
    bert.set_num_threads(1)
    assert.equal(c, bert.core.dist.checksum(t))
    bert.set_num_threads(before)
    t:narrow(1, 69999, 1):add_(1e-7)
    assert.are_not.equal(c, bert.core.dist.checksum(t))
  end)

  it("says in backend_info whether MPI can be loaded and how", function()
    assert.equal("boolean", type(info.available))
    assert.is_false(info.in_use)
    assert.truthy(info.mode:find("dlopen"))
    if not info.available then assert.equal("string", type(info.reason)) end
    assert.equal(1, info.size)
  end)

  it("works as a world of one without the MPI library, and says so when mpirun needs it", function()
    local script = tmpdir() .. ".lua"
    local f = assert(io.open(script, "w"))
    f:write([[
      package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
      package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
      local bert = require("bert")
      local dist = require("bert.distributed")
      local info = bert.backend_info().distributed
      print(tostring(info.available) .. "|" .. tostring(info.reason))
      local ok, rank, size = pcall(dist.init)
      print(tostring(ok) .. "|" .. tostring(rank) .. "|" .. tostring(size))
      if ok then print(dist.all_reduce(bert.tensor({4}), "mean"):totable()[1]) end
    ]])
    f:close()
    local function run(env)
      local p = io.popen(env .. " BERT_MPI_LIBRARY=/nonexistent/libmpi.so.40 lua5.4 " .. script .. " 2>&1")
      local out = p:read("a")
      p:close()
      return out
    end
    local alone = run("")
    assert.truthy(alone:find("false|cannot load /nonexistent/libmpi.so.40", 1, true), alone)
    assert.truthy(alone:find("true|0|1\n4.0", 1, true), alone)
    local launched = run("OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0")
    assert.truthy(launched:find("distributed.init: started by mpirun, but cannot load /nonexistent/libmpi.so.40", 1,
      true), launched)
  end)

  it("rejects bad arguments with the function's name", function()
    assert.has_error(function() dist.all_reduce(bert.tensor({1}), "median") end)
    local ok, err = pcall(dist.all_reduce, bert.tensor({1}), "median")
    assert.is_false(ok)
    assert.truthy(tostring(err):find("all_reduce: argument #2 %(op%)"), err)
    ok, err = pcall(dist.broadcast, bert.tensor({1}), 3)
    assert.truthy(tostring(err):find("broadcast: root 3 outside 0..0"), err)
    ok, err = pcall(bert.core.dist.set_batch_shard, 3, 2, 4)
    assert.truthy(tostring(err):find("rows %[3, 5%) outside a batch of 4"), err)
    ok, err = pcall(bert.core.dist.reducer, bert.zeros({2, 2}), 4)
    assert.truthy(tostring(err):find("contiguous 1%-D float32"), err)
  end)

  it("gives a loader's shard exactly its rows of each global batch, masks included", function()
    local words = {}
    for i = 1, 40 do words[i] = "w" .. i end
    local docs = {}
    for d = 1, 12 do
      local doc = {}
      for s = 1, 6 do
        local sent = {}
        for k = 1, 5 + (d * s) % 7 do sent[k] = words[(d * 7 + s * 3 + k * 5) % 40 + 1] end
        doc[s] = table.concat(sent, " ")
      end
      docs[d] = doc
    end
    local given = false
    local tok = assert(bert.tokenizer.train{kind = "wordpiece", vocab_size = 80, iterator = function()
      if given then return nil end
      given = true
      return table.concat(words, " ")
    end})
    local dir = tmpdir()
    assert(pre.create_shards{documents = docs, tokenizer = tok, output = dir, max_seq_length = 24,
                             masking = "dynamic", seed = 3})
    local function loader(first, rows)
      return assert(pre.Loader{dir = dir, batch_size = 8, seq_len = 24, seed = 4, masking = "dynamic",
                               shard_first = first, shard_rows = rows})
    end
    local whole, a, b = loader(), loader(0, 4), loader(4, 4)
    for _ = 1, 3 do
      local w, x, y = whole:next(), a:next(), b:next()
      for _, k in ipairs({"input_ids", "labels", "attention_mask", "token_type_ids", "next_sentence_label"}) do
        assert.same(w[k]:totable(), bert.cat({x[k], y[k]}, 1):totable(), k)
      end
    end
    assert.same(whole:state(), a:state())
    for _, l in ipairs({whole, a, b}) do l:close() end
    local ok, err = pcall(pre.Loader, {dir = dir, batch_size = 8, shard_first = 6, shard_rows = 4})
    assert.is_false(ok)
    assert.truthy(tostring(err):find("shard rows %[6, 10%) outside the batch of 8"), err)
  end)

  it("keys dropout (hidden and attention) by global sample: two halves equal the whole batch", function()
    local model = bert.model("BertModel", {vocab_size = 30, hidden_size = 16, num_hidden_layers = 2,
                                           num_attention_heads = 2, intermediate_size = 32,
                                           hidden_dropout_prob = 0.3, attention_probs_dropout_prob = 0.3})
    model:training()
    local ids = bert.randint(0, 30, {4, 6}, {seed = 2})
    local function run(first, rows)
      bert.set_rng_state(9, 1000)
      bert.core.dist.set_batch_shard(first, rows, 4)
      local out = model:forward{input_ids = ids:narrow(1, first + 1, rows):contiguous()}.last_hidden_state
      bert.core.dist.set_batch_shard(0, 0, 0)
      return out, select(2, bert.rng_state())
    end
    local whole, after = run(0, 4)
    local lo, after_lo = run(0, 2)
    local hi, after_hi = run(2, 2)
    assert.tensor_near(whole, bert.cat({lo, hi}, 1), 1e-6)
    assert.equal(after, after_lo)   -- the generator moved past the whole batch's masks on every shard
    assert.equal(after, after_hi)
    -- and the masks do differ between samples (the check is not vacuous)
    bert.set_rng_state(9, 1000)
    local unkeyed = model:forward{input_ids = ids:narrow(1, 3, 2):contiguous()}.last_hidden_state
    assert.is_true((unkeyed - hi):abs():max():item() > 1e-3)
  end)

  it("keys dropout by global sample in every family, DeBERTa's relative attention too", function()
    -- DeBERTa's attention reserved its counters per shard: a 2-row half differed by up to 0.23
    for _, arch in ipairs({"RobertaModel", "AlbertModel", "ElectraModel", "DistilBertModel", "DebertaV2Model"}) do
      local model = bert.model(arch, "tiny")
      model:training()
      local ids = bert.randint(5, 30, {4, 6}, {seed = 2})
      local function run(first, rows)
        bert.set_rng_state(9, 1000)
        bert.core.dist.set_batch_shard(first, rows, 4)
        local out = model:forward{input_ids = ids:narrow(1, first + 1, rows):contiguous()}.last_hidden_state
        bert.core.dist.set_batch_shard(0, 0, 0)
        return out
      end
      local whole = run(0, 4)
      assert.tensor_near(whole, bert.cat({run(0, 2), run(2, 2)}, 1), 1e-5, arch)
    end
  end)
end)

local config = tmpdir() .. ".json"
local corpus = require("spec.support.tiny_corpus").write(tmpdir() .. ".txt", 60, 11)
do
  local f = assert(io.open(config, "w"))
  f:write(cjson.encode({vocab_size = 100, hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 2,
                        intermediate_size = 64, max_position_embeddings = 64}))
  f:close()
end

local function pretrain_cmd(launcher, out, extra)
  return string.format("%s lua5.4 experiments/pretrain.lua --model %s --corpus %s --tokenizer wordpiece " ..
    "--vocab-size 120 --batch-size 8 --seq-len 32 --log-every 1 --threads 1 --no-plot --output %s %s",
    launcher, config, corpus, out, extra or "")
end

local function metrics(dir)
  local out, lines = {}, 0
  for line in io.lines(dir .. "/metrics.jsonl") do
    local rec = cjson.decode(line)
    if rec.loss then out[rec.step] = rec.loss; lines = lines + 1 end
  end
  return out, lines
end

local function weights(dir)
  return bert.load_safetensors(dir .. "/checkpoint/model.safetensors")
end

-- Tolerance: the ranks' gradients are summed in another order than one
-- process's GEMMs and reductions sum them (and the all-reduce adds partial
-- sums), so float32 rounding differs at ~1e-7 relative per step; AdamW
-- rescales tiny gradient differences, so after tens of steps losses agree
-- to ~1e-6 relative and weights to ~1e-5 absolute (measured: 1.3e-7 and
-- 1.2e-7 after 20 steps, 1.3e-7 over 300).  The bounds leave 10x to 100x.
local LOSS_RTOL, WEIGHT_ATOL = 1e-5, 1e-4

local function assert_same_run(a_dir, b_dir, steps)
  local a, na = metrics(a_dir)
  local b, nb = metrics(b_dir)
  assert.equal(steps, na)
  assert.equal(steps, nb, "rank 0 alone writes one metrics line per step")
  for s = 1, steps do
    assert.truthy(a[s] and b[s], "missing step " .. s)
    assert.is_true(math.abs(a[s] - b[s]) <= LOSS_RTOL * math.abs(a[s]),
      string.format("step %d: loss %.9g (1 process) vs %.9g (2 ranks)", s, a[s], b[s]))
  end
  local wa, wb = weights(a_dir), weights(b_dir)
  for name, t in pairs(wa) do
    assert.is_true((t - wb[name]):abs():max():item() <= WEIGHT_ATOL, name)
  end
end

describe("data-parallel training under mpirun -np 2 #slow", function()
  mpi_it("runs the collectives", function()
    local out = tmpdir() .. ".json"
    assert.is_true(os.execute(MPIRUN .. " lua5.4 spec/support/dist_worker.lua collectives " .. out .. " >/dev/null 2>&1"))
    local r = cjson.decode(read(out))
    assert.equal(2, r.size)
    assert.same({3, 6}, r.sum)
    assert.same({1.5}, r.mean)
    assert.same({1, 0}, r.max)
    assert.same({0, -1}, r.min)
    assert.same({11, 21}, r.broadcast)
    assert.same({{{0, 0}}, {{1, 2}}}, r.gather)
    assert.same({1, 1}, r.numbers)
    assert.same({true, false}, r.any)
    assert.same({42, true}, r.bnum)
    assert.same({10, 20, 30, 40, 50}, r.split)
    assert.same({{101}, {201, 202}, {301, 302, 303}}, r.split_lists)
    assert.same({{1.25, -1.5}, {2.25, -2.5}, {3.25, -3.5}}, r.split_floats)
    assert.truthy(r.bad_op:find("argument #2 %(op%)"))
    assert.truthy(r.bad_root:find("root 2 outside 0..1"))
    assert.truthy(r.bad_shard:find("does not split evenly over 2 ranks"))
    assert.is_true(r.info.in_use)
    assert.truthy(r.info.library:find("Open MPI"))
  end)

  for _, case in ipairs({{"BertForSequenceClassification", 1}, {"BertForSequenceClassification", 2},
                         {"BertForMaskedLM", 1}, {"BertForMaskedLM", 2},
                         -- other families: ALBERT's one shared layer gets its gradient from
                         -- every use before its bucket may go; RoBERTa's own positions and head
                         {"AlbertForMaskedLM", 2}, {"RobertaForSequenceClassification", 1}}) do
    local arch, accum = case[1], case[2]
    mpi_it(string.format("Trainer (%s, accum %d): 2 ranks give one process's losses and weights", arch, accum),
      function()
        local one, two = tmpdir() .. ".json", tmpdir() .. ".json"
        local cmd = string.format("lua5.4 spec/support/dist_worker.lua train %s %d 6 ", arch, accum)
        assert.is_true(os.execute("OMP_NUM_THREADS=1 " .. cmd .. one .. " >/dev/null 2>&1"))
        assert.is_true(os.execute(MPIRUN .. " " .. cmd .. two .. " >/dev/null 2>&1"))
        local a, b = cjson.decode(read(one)), cjson.decode(read(two))
        for s = 1, 6 do
          assert.is_true(math.abs(a.losses[s] - b.losses[s]) <= LOSS_RTOL * math.abs(a.losses[s]),
            string.format("step %d: %.9g vs %.9g", s, a.losses[s], b.losses[s]))
        end
        local worst = 0
        for i = 1, #a.params do worst = math.max(worst, math.abs(a.params[i] - b.params[i])) end
        assert.is_true(worst <= WEIGHT_ATOL, "weights differ by " .. worst)
        -- the gradient buckets started while backward ran
        assert.is_true(b.distributed.buckets > 1)
        assert.is_true(b.distributed.overlapped > 0.5)
      end)
  end

  -- recomputation: the parameters of a recomputed layer get their gradients
  -- in a nested backward the graph does not show, so nothing may be reduced
  -- while backward runs; the buckets all go after it
  mpi_it("Trainer with set_recompute: 2 ranks give one process's losses and weights", function()
    local one, two, plain = tmpdir() .. ".json", tmpdir() .. ".json", tmpdir() .. ".json"
    local cmd = "lua5.4 spec/support/dist_worker.lua train BertForMaskedLM 1 4 "
    assert.is_true(os.execute("OMP_NUM_THREADS=1 " .. cmd .. plain .. " >/dev/null 2>&1"))
    assert.is_true(os.execute("OMP_NUM_THREADS=1 " .. cmd .. one .. " recompute >/dev/null 2>&1"))
    assert.is_true(os.execute(MPIRUN .. " " .. cmd .. two .. " recompute >/dev/null 2>&1"))
    local p, a, b = cjson.decode(read(plain)), cjson.decode(read(one)), cjson.decode(read(two))
    local worst = 0
    for i = 1, #a.params do
      worst = math.max(worst, math.abs(a.params[i] - b.params[i]), math.abs(a.params[i] - p.params[i]))
    end
    assert.is_true(worst <= WEIGHT_ATOL, "weights differ by " .. worst)
    assert.are.equal(0, b.distributed.overlapped)
  end)

  for _, accum in ipairs({1, 2}) do
    mpi_it("pretrain.lua (accum " .. accum .. "): 2 ranks write one process's losses and checkpoint", function()
      local one, two = tmpdir(), tmpdir()
      local extra = "--steps 12 --accum " .. accum
      assert.is_true(os.execute(pretrain_cmd("OMP_NUM_THREADS=1", one, extra) .. " >/dev/null 2>&1"))
      assert.is_true(os.execute(pretrain_cmd(MPIRUN, two, extra) .. " >/dev/null 2>" .. two .. ".err"))
      assert_same_run(one, two, 12)
      local summary = cjson.decode(read(two .. "/summary.json"))
      assert.equal(2, summary.ranks)
      assert.equal("number", type(summary.mlm_accuracy))
    end)
  end

  local vk = bert.backend_info().vulkan
  if vk and vk.available then
    mpi_it("pretrain.lua --device vulkan: 2 ranks write one process's losses", function()
      local one, two = tmpdir(), tmpdir()
      local extra = "--steps 3 --device vulkan --max-eval 8"
      assert.is_true(os.execute(pretrain_cmd("OMP_NUM_THREADS=1", one, extra) .. " >/dev/null 2>&1"))
      assert.is_true(os.execute(pretrain_cmd(MPIRUN, two, extra) .. " >/dev/null 2>" .. two .. ".err"))
      assert_same_run(one, two, 3)
    end)
  end

  mpi_it("kill -9 of a rank ends the job within seconds with rank 0's message; --resume on 1 process continues", function()
    local steps = 200
    local straight, killed = tmpdir(), tmpdir()
    assert.is_true(os.execute(pretrain_cmd("OMP_NUM_THREADS=1", straight, "--steps " .. steps .. " --save-every 3")
      .. " >/dev/null 2>&1"))
    local wrap = killed .. ".sh"
    local f = assert(io.open(wrap, "w"))
    f:write('#!/bin/sh\necho $$ > "$PIDDIR/pid.$OMPI_COMM_WORLD_RANK"\nexec "$@"\n')
    f:close()
    os.execute("chmod +x " .. wrap .. " && mkdir -p " .. killed)
    local timing = killed .. ".time"
    os.execute(string.format([[
      export PIDDIR=%s
      (%s > %s.log 2>&1; echo $? > %s.rc) &
      for i in $(seq 1 1500); do
        if grep -q '"step":8[,}]' %s/metrics.jsonl 2>/dev/null; then break; fi
        sleep 0.02
      done
      t0=$(date +%%s%%N)
      kill -9 $(cat %s/pid.1)
      for i in $(seq 1 1500); do [ -f %s.rc ] && break; sleep 0.02; done
      echo $(( ($(date +%%s%%N) - t0) / 1000000 )) > %s]],
      killed, pretrain_cmd(MPIRUN .. " " .. wrap, killed, "--steps " .. steps .. " --save-every 3"),
      killed, killed, killed, killed, killed, timing))
    local ms = tonumber(read(timing))
    local log = read(killed .. ".log")
    assert.truthy(ms and ms < 10000, "the job took " .. tostring(ms) .. " ms to end")
    assert.truthy(log:find("rank 0 was stopped by mpirun: another rank of the job ended abnormally", 1, true), log)
    local partial = metrics(killed)
    assert.truthy(partial[8], "the run was not killed after step 8")
    assert.is_nil(partial[steps], "the run finished before it was killed")
    -- resume on one process: the saved state does not depend on the rank count
    assert.is_true(os.execute(string.format("OMP_NUM_THREADS=1 lua5.4 experiments/pretrain.lua --resume %s >/dev/null 2>&1",
      killed)))
    assert_same_run(straight, killed, steps)
  end)

  mpi_it("refuses ranks started with different settings", function()
    local err = tmpdir()
    assert.is_not_true(os.execute(MPIRUN .. " lua5.4 spec/support/dist_worker.lua mismatch >" .. err .. " 2>&1"))
    local log = read(err)
    assert.truthy(log:find("rank 1 has a different seed than rank 0", 1, true), log)
    assert.is_nil(log:find("not refused", 1, true))
  end)

  mpi_it("refuses to write a checkpoint when the ranks' weights differ", function()
    local err, out = tmpdir(), tmpdir()
    assert.is_not_true(os.execute(MPIRUN .. " lua5.4 spec/support/dist_worker.lua diverge " .. out .. " >" .. err .. " 2>&1"))
    local log = read(err)
    assert.truthy(log:find("the ranks' weights differ", 1, true), log)
    assert.is_nil(log:find("not refused", 1, true))
  end)

  mpi_it("gives up on a rank that stops answering after the timeout, with a message", function()
    local err = tmpdir()
    local t0 = bert.wall_time()
    assert.is_not_true(os.execute(MPIRUN .. " lua5.4 spec/support/dist_worker.lua hang >" .. err .. " 2>&1"))
    assert.is_true(bert.wall_time() - t0 < 20)
    local log = read(err)
    assert.truthy(log:find("rank 0 of 2 waited 1 s for the other ranks", 1, true), log)
  end)
end)
