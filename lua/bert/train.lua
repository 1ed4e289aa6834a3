--- bert.train: the training loop shared by pretraining and fine-tuning.
--
--   local trainer = train.Trainer{
--     model = model, optimizer = opt, schedule = fn,   -- fn(step) -> lr (0-based steps)
--     next_batch = function() return batch end,        -- model inputs (a loader's :next())
--     steps = 1000, time_budget = 600, accum = 1, clip = 1.0,
--     accum_at = function(step) return n end,          -- micro-batches of a step, when they vary (a batch ramp)
--     output = "runs/x", save_every = 200, eval_every = 200, log_every = 10,
--     evaluate = function(model) return {accuracy = ...} end,
--     keep_best = "accuracy",                           -- also keep output/best/ (higher is better)
--     patience = 3,                                     -- stop after 3 evaluations without a new best
--     after_step = function(trainer) end,
--     phase = "pretrain",                               -- names the step lines
--     tokenizer = tok,                                  -- saved into every checkpoint directory
--     step_metrics = function(out, batch) return {mlm_accuracy = ...} end,
--     get_state = function() return {...} end, set_state = function(s) end,  -- e.g. the loader position
--     on_nonfinite = "stop" | "skip", max_skipped = 10,  -- a NaN/Inf loss or gradient (bert.anomaly)
--     repair = false,                                   -- resume drops corrupt metrics lines
--     snapshot_steps = {62, 250},                       -- also keep the model at these steps (output/snapshot-STEP/)
--   }
--   trainer:resume()          -- continues from output/checkpoint when there is one
--   trainer:fit_to_budget{max_steps = n, on_total = fn}  -- time_budget: the steps that fit, fixed once
--   local summary = trainer:run()
--
-- Under mpirun the same script trains data-parallel (bert.distributed):
-- each batch from next_batch is the global batch (or, with
-- sharded_batches = true, this rank's rows of it), gradients are averaged
-- over ranks during backward, and only rank 0 prints and writes files.
-- fingerprint (any plain value) must be the same on every rank.
--
-- A step: zero the gradients, `accum` forward/backward passes (losses
-- scaled by 1/accum), global-norm clipping, the scheduled learning rate,
-- one optimizer update.  Steps count updates, whatever their size:
-- trainer.micro_batches counts the micro-batches of the updates made (steps
-- x accum, unless accum_at(step) varies it: a function of the step, so a
-- resume replays it).  Checkpoints (output/checkpoint/) hold the model,
-- the optimizer, the step, the random generator and the caller's state, and
-- are replaced atomically, so a run killed at any point resumes to produce
-- the same losses, step for step, as one never interrupted.
local bert = require("bert")
local cjson = require("cjson")
local fs = require("bert.fs")
local class = require("bert.nn.class")
local distributed = require("bert.distributed")
local anomaly = require("bert.anomaly")
local profile = require("bert.profile")

local M = {}

local Trainer = class("Trainer")

local function now() return bert.wall_time() end

local read_file = fs.read_file

local write_file = fs.write_atomic

local exists = fs.exists

local remove_tree = fs.remove_tree

-- JSON has one number type: integral values come back as Lua integers
local function integers(v)
  if type(v) == "number" and math.type(v) == "float" and v == math.floor(v) and math.abs(v) < 2^53 then
    return math.tointeger(v)
  end
  if type(v) == "table" then
    local out = {}
    for k, x in pairs(v) do out[k] = integers(x) end
    return out
  end
  return v
end

local function fmt_time(s)
  if s ~= s or s == math.huge then return "?" end
  s = math.floor(s + 0.5)
  if s >= 3600 then return string.format("%dh%02dm", s // 3600, s % 3600 // 60) end
  if s >= 60 then return string.format("%dm%02ds", s // 60, s % 60) end
  return s .. "s"
end

function M.Trainer(opts)
  assert(type(opts) == "table", "Trainer: expects an options table")
  for _, k in ipairs({"model", "optimizer", "next_batch"}) do
    if opts[k] == nil then error("Trainer: option '" .. k .. "' is required", 2) end
  end
  local self = setmetatable({}, Trainer)
  for k, v in pairs(opts) do self[k] = v end
  self.accum = self.accum or 1
  self.log_every = self.log_every or 10
  self.step = 0
  self.micro_batches = 0
  self.tokens = 0
  self.train_seconds = 0
  self.best = nil
  self.progress = self.progress ~= false
  self.tty = os.getenv("TERM") ~= nil and os.getenv("CI") == nil and os.execute("test -t 2") == true
  self.dp = distributed.data_parallel(self)   -- nil for a single process
  self.writes = distributed.is_main()          -- only rank 0 writes and prints
  self.progress = self.progress and self.writes
  if self.output and self.writes then
    local ok, err = bert.mkdir(self.output)
    if not ok then error("Trainer: " .. err, 2) end
  end
  return self
end

-- Raises a write that failed (a full disk: "PATH: No space left on device")
-- as a reported error, one line without a traceback.
local function checked(ok, err)
  if not ok then error(tostring(err), 0) end
  return ok
end

--- Appends one JSON line to output/metrics.jsonl; a failed write stops
-- training (a record lost or cut short is never passed over: a resumed
-- run drops a cut last line and the lines after its checkpoint).
function Trainer:log(record)
  if not self.output or not self.writes then return end
  local path = self.output .. "/metrics.jsonl"
  local f = checked(io.open(path, "ab"))
  local ok, err = f:write(cjson.encode(record), "\n")
  local closed, cerr = f:close()
  if not (ok and closed) then error(path .. ": " .. tostring(err or cerr), 0) end
end

-- {============================================================ checkpoints

local function checkpoint_dir(self, name) return self.output .. "/" .. (name or "checkpoint") end

--- Writes output/<name>/ (model, optimizer, trainer state) atomically: the
-- files go to a temporary directory that then replaces the old one.
function Trainer:save(name)
  if not self.output then return nil, "Trainer:save: no output directory" end
  if self.dp then self.dp:check_weights() end   -- what rank 0 writes is every rank's model
  if not self.writes then return true end
  local final = checkpoint_dir(self, name)
  local tmp, old = final .. ".tmp", final .. ".old"
  remove_tree(tmp)
  -- a self-contained model directory: the tokenizer files beside the weights
  -- (a write that fails leaves the last checkpoint as it was, and no partial one)
  local ok, err = require("bert.model_dir").save(tmp, self.model, self.tokenizer)
  if not ok then remove_tree(tmp) return nil, err end
  ok, err = bert.optim.save_state(tmp .. "/optimizer.safetensors", self.optimizer)
  if not ok then remove_tree(tmp) return nil, err end
  local seed, offset = bert.rng_state()
  local state = {
    format = "bert.train", version = 1, step = self.step, micro_batches = self.micro_batches, tokens = self.tokens,
    train_seconds = self.train_seconds, rng = {seed = seed, offset = offset},
    best = self.best, user = self.get_state and self.get_state() or cjson.null,
  }
  ok, err = write_file(tmp .. "/trainer.json", cjson.encode(state))
  if not ok then remove_tree(tmp) return nil, err end
  remove_tree(old)
  if exists(final) then os.rename(final, old) end
  ok, err = os.rename(tmp, final)
  if not ok then return nil, err end
  remove_tree(old)
  return true
end

--- Writes output/snapshot-STEP/ (the model and its tokenizer, no optimizer:
-- a learning curve's point, evaluated later) unless it is there already.
function Trainer:snapshot()
  if not (self.output and self.writes) then return true end
  local final = string.format("%s/snapshot-%d", self.output, self.step)
  if exists(final .. "/config.json") then return true end
  local tmp = final .. ".tmp"
  remove_tree(tmp)
  local ok, err = require("bert.model_dir").save(tmp, self.model, self.tokenizer)
  if not ok then remove_tree(tmp) return nil, err end
  remove_tree(final)
  return os.rename(tmp, final)
end

-- Metrics the interrupted run wrote after step `step` (its checkpoint, or
-- 0 when it was killed before the first one) are replayed by the resumed
-- run: drop them, and a last line cut short by the kill.
local function drop_replayed_metrics(self, step)
  if not (self.output and self.writes) then return true end
  local path = self.output .. "/metrics.jsonl"
  local log = read_file(path)
  if not log then return true end
  local kept, n = {}, 0
  for line, nl in log:gmatch("([^\n]*)()") do
    n = n + 1
    local okl, rec = pcall(cjson.decode, line)
    if okl and type(rec) == "table" then
      if (rec.step or 0) <= step then kept[#kept + 1] = line end
    elseif line ~= "" and nl <= #log and not self.repair then
      -- only the last line may be cut short (a write killed midway)
      error(string.format("resume: %s:%d: corrupt metrics line (repair: drop it with --repair)", path, n), 3)
    end
  end
  return write_file(path, #kept > 0 and (table.concat(kept, "\n") .. "\n") or "")
end

-- A JSON number as written ("1e+06", "-3", "2.5"), for messages
local function as_written(v)
  if type(v) ~= "number" then return cjson.encode(v == nil and cjson.null or v) end
  return math.tointeger(v) and tostring(math.tointeger(v)) or string.format("%.17g", v)
end

--- Why a checkpoint's trainer.json state cannot be resumed (a message with
-- the key and the value as written), or nil: the step is a whole number from
-- 0 to the run's planned steps (`total`, when known), the random
-- generator's seed and offset whole numbers.  A tampered file is refused
-- rather than finishing "1000000 steps in 0 s".
function M.check_trainer_state(state, total)
  local function whole(v) return type(v) == "number" and math.tointeger(v) ~= nil end
  local step = state.step
  if not whole(step) or step < 0 then
    return string.format('"step": %s is not a step count (a whole number >= 0)', as_written(step))
  end
  if total and step > total then
    return string.format('"step": %s is beyond the %d steps this run plans', as_written(step), total)
  end
  local rng = state.rng
  if type(rng) ~= "table" or not whole(rng.seed) or not whole(rng.offset) then
    return '"rng": expected {"seed": N, "offset": N} with whole numbers, got ' .. cjson.encode(rng == nil and cjson.null or rng)
  end
  return nil
end

--- Restores output/checkpoint when present; returns true if it resumed.
-- A damaged checkpoint is an error, never a silent fresh start.
function Trainer:resume(dir)
  dir = dir or (self.output and checkpoint_dir(self))
  if not dir then return false end
  if not exists(dir) and exists(dir .. ".old") then dir = dir .. ".old" end   -- killed mid-replace
  if not exists(dir) then   -- killed before the first checkpoint: start again, and so does its log
    local ok, err = drop_replayed_metrics(self, 0)
    if not ok then error("resume: " .. tostring(err), 2) end
    return false
  end
  local text, err = read_file(dir .. "/trainer.json")
  if not text then error("resume: " .. dir .. " has no readable trainer.json (" .. tostring(err) .. ")", 2) end
  local ok, state = pcall(cjson.decode, text)
  if not ok or type(state) ~= "table" or state.format ~= "bert.train" then
    error("resume: " .. dir .. "/trainer.json is corrupt", 2)
  end
  local bad = M.check_trainer_state(state, self.steps)
  if bad then error(string.format("resume: %s/trainer.json: %s", dir, bad), 2) end
  local weights, werr = bert.load_safetensors(dir .. "/model.safetensors")
  if not weights then error("resume: " .. tostring(werr), 2) end
  -- checkpoint_dir: a composite model (ELECTRA's generator + discriminator) reads its other files from there
  local loaded, lerr = pcall(self.model.load_state_dict, self.model, weights, {checkpoint_dir = dir})
  if not loaded then error("resume: " .. tostring(lerr), 2) end
  local sd, serr = bert.optim.load_state(dir .. "/optimizer.safetensors")
  if not sd then error("resume: " .. tostring(serr), 2) end
  self.optimizer:load_state_dict(sd)
  self.step = math.tointeger(state.step)
  -- (checkpoints from before the count: every step had accum micro-batches)
  self.micro_batches = math.tointeger(state.micro_batches) or self.step * self.accum
  self.tokens = state.tokens or 0
  self.train_seconds = state.train_seconds or 0
  self.best = state.best
  bert.set_rng_state(math.tointeger(state.rng.seed), math.tointeger(state.rng.offset))
  if self.set_state and state.user ~= cjson.null then self.set_state(integers(state.user)) end
  local ok_drop, derr = drop_replayed_metrics(self, self.step)
  if not ok_drop then return nil, derr end
  return true
end
-- }============================================================

local function count_tokens(batch)
  local m = batch.attention_mask
  if type(m) == "userdata" then return m:sum():item() end
  if type(batch.input_ids) == "userdata" then return batch.input_ids:numel() end
  return 0
end

--- One optimizer step over `accum` micro-batches; returns the mean loss and
-- the merged step metrics.  A NaN/Inf loss or gradient norm stops training
-- before the update (or, with on_nonfinite = "skip", drops the update and
-- retries with the next batches): see bert.anomaly.
function Trainer:train_step()
  local model, opt, dp = self.model, self.optimizer, self.dp
  model:training()
  if self.schedule then opt:set_lr(self.schedule(self.step)) end
  local accum = self.accum
  if self.accum_at then
    accum = self.accum_at(self.step)
    if math.type(accum) ~= "integer" or accum < 1 then
      error(string.format("Trainer: accum_at(%d) must return an integer >= 1, got %s", self.step, tostring(accum)), 2)
    end
  end
  ::retry::
  profile.phase("optimizer", opt.zero_grad, opt)
  local loss_sum, metrics, tokens = 0, {}, 0
  for i = 1, accum do
    local batch = profile.phase("data", self.next_batch)
    if dp then batch = dp:enter(batch) end
    local out = profile.phase("forward", function()
      return self.forward and self.forward(model, batch) or model:forward(batch)
    end)
    local loss = out.loss
    local value = loss:item()
    if not dp and not anomaly.finite(value) and anomaly.bad_loss(self, value, loss) then goto retry end
    if accum > 1 then loss = loss / accum end
    profile.phase("backward", function()
      if dp then dp:backward(loss, i == accum) else loss:backward() end
    end)
    if not dp and bert.is_anomaly_enabled() and bert.anomaly_report() then anomaly.bad_gradient(self, "not finite") end
    loss_sum = loss_sum + value
    tokens = tokens + count_tokens(batch)
    if self.step_metrics then
      for k, v in pairs(self.step_metrics(out, batch)) do metrics[k] = (metrics[k] or 0) + v / accum end
    end
  end
  if dp then loss_sum, tokens = dp:finish_step(metrics, loss_sum, tokens) end
  -- with data parallelism the checks see the all-reduced loss and gradients,
  -- the same on every rank, so all ranks stop or skip together
  if dp and not anomaly.finite(loss_sum) and anomaly.handle(self, "the loss is " .. tostring(loss_sum)) then
    goto retry
  end
  local norm = profile.phase("optimizer", bert.optim.grad_norm, opt)
  if not anomaly.finite(norm) and anomaly.bad_gradient(self, norm) then goto retry end
  self.skipped = 0
  self.tokens = self.tokens + tokens
  self.micro_batches = self.micro_batches + accum
  -- clipping is applied inside the update (the gradients are read scaled)
  profile.phase("optimizer", opt.step, opt,
                self.clip and {grad_scale = bert.optim.clip_scale(norm, self.clip)} or nil)
  self.step = self.step + 1
  metrics.loss = loss_sum / accum
  if self.accum_at then metrics.accum = accum end
  metrics.grad_norm = norm
  metrics.lr = opt:get_lr()
  return metrics
end

function Trainer:run_eval()
  if not self.evaluate then return nil end
  self.model:evaluate()
  local result = bert.no_grad(function() return self.evaluate(self.model) end)
  self.model:training()
  local record = {step = self.step, eval = result}
  self:log(record)
  if self.progress then
    local keys, parts = {}, {}
    for k, v in pairs(result) do if type(v) == "number" then keys[#keys + 1] = k end end
    table.sort(keys)
    for _, k in ipairs(keys) do parts[#parts + 1] = string.format("%s %.4g", k, result[k]) end
    io.stderr:write(string.format("eval at step %d: %s\n", self.step, table.concat(parts, ", ")))
  end
  if self.keep_best and result[self.keep_best] and (self.best == nil or result[self.keep_best] > self.best) then
    self.best, self.best_step = result[self.keep_best], self.step
    self.evals_since_best = 0
    if self.output then checked(self:save("best")) end
  elseif self.keep_best then
    self.evals_since_best = (self.evals_since_best or 0) + 1
    if self.patience and self.evals_since_best >= self.patience then
      self.stopped_early = self.step
      if self.progress then
        io.stderr:write(string.format("early stop at step %d: no better %s in %d evaluations (best %.4g)\n",
          self.step, self.keep_best, self.evals_since_best, self.best or 0 / 0))
      end
    end
  end
  return result
end

local BAR_WIDTH = 20

-- The step line: step/total with the share done (a bar on a terminal),
-- the loss and step metrics, the rate and the time left.  The total is
-- fixed before the first line (a time budget is resolved by
-- Trainer:fit_to_budget), so it never changes while a phase runs.
local function progress_line(self, m, tps)
  local parts = {}
  if self.steps then
    local done = math.min(self.step / math.max(self.steps, 1), 1)
    if self.tty then
      local filled = math.floor(done * BAR_WIDTH + 0.5)
      parts[1] = string.format("%s%3d%% [%s%s] %d/%d", self.phase and (self.phase .. " ") or "",
        math.floor(done * 100), string.rep("#", filled), string.rep(".", BAR_WIDTH - filled), self.step, self.steps)
    else
      parts[1] = string.format("%sstep %d/%d (%d%%)", self.phase and (self.phase .. ": ") or "", self.step, self.steps,
        math.floor(done * 100))
    end
  else
    parts[1] = string.format("%sstep %d", self.phase and (self.phase .. ": ") or "", self.step)
  end
  parts[#parts + 1] = string.format("loss %.4f", m.loss)
  local keys = {}
  for k in pairs(m) do
    if k ~= "loss" and k ~= "lr" and k ~= "grad_norm" then keys[#keys + 1] = k end
  end
  table.sort(keys)
  for _, k in ipairs(keys) do
    parts[#parts + 1] = string.format(math.type(m[k]) == "integer" and "%s %d" or "%s %.3f", k, m[k])   -- (accum)
  end
  parts[#parts + 1] = string.format("lr %.2e", m.lr)
  -- rates over this sitting: a resumed run's earlier sittings ran on another
  -- machine or under another load, and the ETA is for this one
  local sitting = self.sitting or {step = 0, seconds = 0}
  local step_seconds = (self.train_seconds - sitting.seconds) / math.max(self.step - sitting.step, 1)
  parts[#parts + 1] = string.format("%.0f tok/s, %.2f s/step", tps, step_seconds)
  local left = math.huge
  if self.steps then left = (self.steps - self.step) * step_seconds end
  if self.time_budget then left = math.min(left, self.time_budget - (now() - self.started)) end
  parts[#parts + 1] = "ETA " .. fmt_time(math.max(left, 0))
  return table.concat(parts, " | ")
end

--- Trains until `steps` or `time_budget` (seconds of this run) is reached.
-- Returns {step, tokens_per_s, train_seconds, last = metrics, eval = last eval}.
function Trainer:run()
  self.started = now()
  local last, last_eval = nil, nil
  local window = {loss = 0, n = 0}
  local first_step, seconds_before = self.step, self.train_seconds
  self.sitting = {step = first_step, seconds = seconds_before, tokens = self.tokens}
  if profile.enabled then profile.report() end   -- BERT_PROFILE: this run's steps only
  while true do
    local out_of_time = self.time_budget ~= nil and now() - self.started >= self.time_budget
    local stop = (self.steps and self.step >= self.steps) or out_of_time
    if self.dp then stop = distributed.any(stop) end   -- every rank stops at the same step
    if stop then
      if out_of_time and self.steps and self.step < self.steps and self.progress then
        -- the plan was short of the budget's time (evaluations or saves it did not foresee)
        io.stderr:write(string.format("%stime budget reached at step %d of %d\n", self.tty and "\n" or "",
          self.step, self.steps))
      end
      break
    end
    local t0 = now()
    local m = self:train_step()
    local dt = now() - t0
    self.train_seconds = self.train_seconds + dt
    last = m
    window.loss, window.n = window.loss + m.loss, window.n + 1
    if self.step % self.log_every == 0 or (self.steps and self.step == self.steps) then
      local record = {step = self.step, time = self.train_seconds, tokens = self.tokens}
      for k, v in pairs(m) do record[k] = v end
      self:log(record)
      if self.progress then
        local line = progress_line(self, m, (self.tokens - self.sitting.tokens) /
          math.max(self.train_seconds - self.sitting.seconds, 1e-9))
        if self.tty then io.stderr:write("\r", line, "\27[K") else io.stderr:write(line, "\n") end
        io.stderr:flush()
      end
    end
    if self.eval_every and self.step % self.eval_every == 0 then
      if self.tty and self.progress then io.stderr:write("\n") end
      last_eval = self:run_eval()
    end
    if self.save_every and self.output and self.step % self.save_every == 0 then
      checked(self:save())
    end
    if self.snapshot_steps and self.output then
      for _, at in ipairs(self.snapshot_steps) do if at == self.step then checked(self:snapshot()) end end
    end
    if self.stopped_early then break end
    if self.after_step then self.after_step(self) end
  end
  if self.tty and self.progress then io.stderr:write("\n") end
  if profile.enabled and self.progress and self.step > first_step then
    io.stderr:write(profile.format(profile.report(), self.step - first_step, nil,
                                   self.train_seconds - seconds_before))
  end
  if self.output and self.save_every ~= false then checked(self:save()) end
  if self.dp then distributed.barrier() end   -- the others go on once rank 0's files are written
  return {
    step = self.step, train_seconds = self.train_seconds, stopped_early = self.stopped_early,
    tokens_per_s = self.tokens / math.max(self.train_seconds, 1e-9),
    last = last, eval = last_eval, distributed = self.dp and self.dp:stats(),
  }
end

--- Resolves the trainer's time_budget into a fixed number of steps, once,
-- before the first step line: steps train silently for a tenth of the
-- budget (at most a minute, at most a tenth of max_steps), the second half
-- of them timed (at least `calibration` steps), then trainer.steps becomes
-- what fits the rest of the budget (at most opts.max_steps, at least one
-- more step) and opts.on_total(steps) resizes the caller's schedule.
-- Evaluations and saves are planned for at their cost: one save is timed
-- when the plan has saves; an evaluation costs opts.eval_seconds, or one
-- is timed when the plan has one: with opts.time_evaluation = true the
-- trainer's evaluate (one without side effects), or the function
-- opts.time_evaluation(model) that evaluates as the trainer's would.  trainer.time_budget stays the hard limit (a
-- machine that slows down stops there, short of the plan, and says so).
-- Returns the steps, the seconds a step took, the steps timed and the
-- steps the calibration trained.
--   opts: {max_steps = n, calibration = 5, eval_seconds = s, time_evaluation = true | fn, on_total = fn}
local CALIBRATION_SHARE, CALIBRATION_SECONDS = 0.1, 60

function Trainer:fit_to_budget(opts)
  opts = opts or {}
  if type(self.time_budget) ~= "number" then
    error("Trainer:fit_to_budget: the trainer has no time_budget (seconds), got " .. tostring(self.time_budget), 2)
  end
  local calibration = opts.calibration or 5
  if math.type(calibration) ~= "integer" or calibration < 1 then
    error("Trainer:fit_to_budget: calibration must be an integer >= 1, got " .. tostring(calibration), 2)
  end
  local started, budget, first = now(), self.time_budget, self.step
  local progress, save_every, eval_every = self.progress, self.save_every, self.eval_every
  self.progress, self.save_every, self.eval_every = false, false, nil
  -- with max_steps, the calibration takes at most a tenth of them (beyond its minimum)
  local limit = opts.max_steps and self.step + math.max(calibration + 1, (opts.max_steps - self.step) // 10)
  local function capped(steps) return limit and math.min(steps or math.huge, limit, opts.max_steps) or steps end
  -- trains silently for at least n steps and `seconds` (never past
  -- max_steps); returns the steps it ran
  local function silent_steps(n, seconds)
    local from, t0 = self.step, now()
    self.steps = capped(self.step + n)
    self:run()
    local more = seconds - (now() - t0)
    if more > 0 and self.step < capped(math.huge) then
      self.steps, self.time_budget = capped(nil), more
      self:run()
      self.time_budget = budget
    end
    return self.step - from
  end
  -- the first steps are slow (first-touch allocations, cold caches): the
  -- first half of the calibration is not timed
  local window = math.min(budget * CALIBRATION_SHARE, CALIBRATION_SECONDS)
  silent_steps(1, window / 2)
  local t0 = now()
  local timed = silent_steps(calibration, window / 2)
  local per_step = math.max((now() - t0) / math.max(timed, 1), 1e-6)
  self.progress, self.save_every, self.eval_every = progress, save_every, eval_every
  local left = budget - (now() - started)
  local function steps_that_fit(seconds_per_step)
    local n = math.max(1, math.floor(math.min(left / seconds_per_step, 2^31)))
    return opts.max_steps and math.max(0, math.min(n, opts.max_steps - self.step)) or n
  end
  local fit = steps_that_fit(per_step)
  if self.dp then fit = distributed.broadcast_number(fit) end   -- every rank times the same evaluations and saves
  -- the evaluations and saves the plan holds, at the cost of one of each
  local eval_seconds, save_seconds = opts.eval_seconds or 0, 0
  local evaluate_once = opts.time_evaluation == true and self.evaluate or opts.time_evaluation
  if eval_every and self.evaluate and fit >= eval_every and evaluate_once and not opts.eval_seconds then
    local e0 = now()
    self.model:evaluate()
    bert.no_grad(function() return evaluate_once(self.model) end)
    self.model:training()
    eval_seconds = now() - e0
    left = left - eval_seconds
  end
  if save_every and self.output and fit >= save_every then
    local s0 = now()
    checked(self:save())
    save_seconds = now() - s0
    left = left - save_seconds
  end
  local overhead = (eval_every and eval_seconds / eval_every or 0) + (save_every and save_seconds / save_every or 0)
  local total = self.step + steps_that_fit(per_step + overhead)
  if self.dp then total = distributed.broadcast_number(total) end   -- rank 0's clock decides for all
  self.steps, self.time_budget = total, left
  if opts.on_total then opts.on_total(self.steps) end
  return self.steps, per_step, timed, self.step - first
end

--- Accuracy of argmax(logits) against int32 labels, ignoring ignore_index.
function M.accuracy(logits, labels, ignore_index)
  ignore_index = ignore_index or -100
  local pred = logits:argmax(-1):view(-1)
  local lab = labels:view(-1)
  local valid = lab:ne(ignore_index)
  local n = valid:sum():item()
  if n == 0 then return 0, 0 end
  local right = (pred:eq(lab) * valid):sum():item()
  return right / n, n
end

return M
