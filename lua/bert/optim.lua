--- bert.optim: AdamW (and BERT's original AdamWeightDecayOptimizer), LAMB,
-- SGD with momentum, global-norm gradient clipping and learning-rate
-- schedules.  The per-element math is fused C (csrc/cpu/optim.c, reached as
-- bert.core.optim_kernels); this file holds the bookkeeping: which
-- parameters decay, per-parameter state, and state saving.
--
--   local optim = require("bert.optim")
--   local opt = optim.AdamW(model:named_parameters(), {lr = 1e-4, weight_decay = 0.01})
--   local sched = optim.Scheduler(opt, optim.schedule{kind = "linear", warmup = 100, total = 1000, lr = 1e-4})
--   ... loss:backward(); optim.clip_grad_norm(opt, 1.0); opt:step(); sched:step(); opt:zero_grad()
--   (or, clipping inside the update: opt:step{grad_scale = optim.clip_scale(optim.grad_norm(opt), 1.0)})
--
-- Parameters: a list of {name = "bert.encoder...weight", param = tensor}
-- (model:named_parameters()), a list of tensors (named "1", "2", ...), or
-- an object with a :named_parameters() method.  Each must be a contiguous
-- float32 tensor; its gradient is p:grad() (parameters without one are
-- skipped by step(), as in torch).
--
-- Weight decay is excluded for parameters whose name contains any of the
-- plain substrings in opts.no_decay (default {"bias", "LayerNorm.weight",
-- "LayerNorm.bias"}, HF's list; BERT's TF code uses the regexes
-- LayerNorm|layer_norm|bias).  no_decay may also be a function(name, param)
-- returning true to exclude.
--
-- State dict layout (opt:state_dict(); version 1):
--   {
--     format = "bert.optim", version = 1,
--     kind = "AdamW" | "LAMB" | "SGD",
--     step = <number of step() calls>,
--     hyper = {lr =, beta1 =, beta2 =, eps =, weight_decay =, bias_correction =,   -- AdamW, LAMB
--              always_adapt =,                                                    -- LAMB
--              momentum =, dampening =, nesterov =},                              -- SGD
--     param_steps = {[name] = <updates applied to that parameter>},
--     tensors = {["exp_avg." .. name] = t, ["exp_avg_sq." .. name] = t}          -- AdamW, LAMB
--               {["momentum_buffer." .. name] = t}                               -- SGD (momentum > 0)
--   }
-- The tensors are the optimizer's live buffers (not copies); load_state_dict
-- copies them.  Only parameters that have been updated have state.
-- optim.state_to_safetensors(sd) turns it into (tensors, metadata) for
-- bert.save_safetensors: tensor names are kept and every plain value becomes
-- a metadata string under "bert.optim." (numbers written with %.17g, so they
-- round-trip exactly); optim.state_from_safetensors(tensors, metadata) undoes
-- it, ignoring entries that are not its own (so one file can also hold
-- model weights).  optim.save_state(path, opt_or_sd) / optim.load_state(path)
-- do both steps.
local core = require("bert.core")
local class = require("bert.nn.class")

local K = core.optim_kernels
local TensorMT = getmetatable(core.zeros({1}))

local M = {}

local DEFAULT_NO_DECAY = {"bias", "LayerNorm.weight", "LayerNorm.bias"}

-- {====================================================== argument helpers

local function is_tensor(x) return getmetatable(x) == TensorMT end

local function describe(x)
  if is_tensor(x) then return "a bert.Tensor" end
  if type(x) == "string" then return string.format("%q", x) end
  if type(x) == "number" or type(x) == "boolean" then return tostring(x) end
  return "a " .. type(x)
end

local function shape_str(t) return "[" .. table.concat(t:shape(), " x ") .. "]" end

-- A finite number >= lo (and < hi when given), or the default.
local function num_opt(who, opts, key, default, lo, hi, strict_lo)
  local v = opts[key]
  if v == nil then return default end
  if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then
    error(string.format("%s: option '%s' must be a finite number, got %s", who, key, describe(v)), 3)
  end
  if (strict_lo and v <= lo) or v < lo or (hi and v >= hi) then
    local range = (strict_lo and "> " or ">= ") .. lo .. (hi and (" and < " .. hi) or "")
    error(string.format("%s: option '%s' must be %s, got %s", who, key, range, tostring(v)), 3)
  end
  return v
end

local function bool_opt(who, opts, key, default)
  local v = opts[key]
  if v == nil then return default end
  if type(v) ~= "boolean" then
    error(string.format("%s: option '%s' must be a boolean, got %s", who, key, describe(v)), 3)
  end
  return v
end

local check_options = require("bert.options").check

-- Normalises params into a list of {name =, param =}.
local function collect(who, params)
  if type(params) == "table" and not is_tensor(params) and getmetatable(params)
      and type(params.named_parameters) == "function" then
    params = params:named_parameters()
  end
  if is_tensor(params) then params = {params} end
  if type(params) ~= "table" then
    error(string.format("%s: argument #1 (params) must be a list of tensors or of {name=, param=}, got %s",
      who, describe(params)), 4)
  end
  local list, seen_name, seen_tensor = {}, {}, {}
  for i = 1, #params do
    local e = params[i]
    local name, p
    if is_tensor(e) then
      name, p = tostring(i), e
    elseif type(e) == "table" and is_tensor(e.param) then
      name, p = e.name, e.param
      if type(name) ~= "string" or name == "" then
        error(string.format("%s: params[%d].name must be a non-empty string, got %s", who, i, describe(name)), 4)
      end
    else
      error(string.format("%s: params[%d] is %s, not a bert.Tensor or {name=, param=}", who, i, describe(e)), 4)
    end
    if p:dtype() ~= "float32" then
      error(string.format("%s: parameter '%s' %s is %s, expected float32", who, name, shape_str(p), p:dtype()), 4)
    end
    if not p:is_contiguous() then
      error(string.format("%s: parameter '%s' %s is not contiguous", who, name, shape_str(p)), 4)
    end
    if seen_name[name] then
      error(string.format("%s: parameter name '%s' appears twice (params[%d] and params[%d])",
        who, name, seen_name[name], i), 4)
    end
    if seen_tensor[p] then
      error(string.format("%s: params[%d] ('%s') is the same tensor as params[%d]", who, i, name, seen_tensor[p]), 4)
    end
    seen_name[name], seen_tensor[p] = i, i
    list[#list + 1] = {name = name, param = p}
  end
  if #list == 0 then error(who .. ": argument #1 (params) is empty", 4) end
  return list
end

local function decay_filter(who, no_decay)
  if no_decay == nil then no_decay = DEFAULT_NO_DECAY end
  if type(no_decay) == "function" then return function(name, p) return not no_decay(name, p) end end
  if type(no_decay) ~= "table" then
    error(string.format("%s: option 'no_decay' must be a list of name substrings or a function, got %s",
      who, describe(no_decay)), 4)
  end
  for i, pat in ipairs(no_decay) do
    if type(pat) ~= "string" then
      error(string.format("%s: no_decay[%d] must be a string, got %s", who, i, describe(pat)), 4)
    end
  end
  return function(name)
    for _, pat in ipairs(no_decay) do
      if name:find(pat, 1, true) then return false end
    end
    return true
  end
end

-- Device gradients (bert.vulkan) are reduced on the device with one read
-- back for the whole list, and scaled there; host ones by the C kernels.
local function split_devices(grads)
  local host, dev = {}, {}
  for _, g in ipairs(grads) do
    if g:device() == "cpu" then host[#host + 1] = g else dev[#dev + 1] = g end
  end
  return host, dev
end

local function sumsq(grads)
  local host, dev = split_devices(grads)
  local s = #host > 0 and K.sumsq(host) or 0
  if #dev > 0 then s = s + core.vulkan.sumsq(dev) end
  return s
end

local function scale_(grads, coef)
  local host, dev = split_devices(grads)
  if #host > 0 then K.scale_(host, coef) end
  for _, g in ipairs(dev) do g:mul_(coef) end
end
-- }======================================================

-- {====================================================== optimizer base

local Optimizer = class("Optimizer")

-- Shared construction: entries with their decay flag, empty state.
local function new_optimizer(class, who, params, opts, known)
  if opts == nil then opts = {} end
  if type(opts) ~= "table" then
    error(string.format("%s: argument #2 (opts) must be a table, got %s", who, describe(opts)), 3)
  end
  check_options(who, opts, known, 4)
  local self = setmetatable({}, class)
  self.who = who
  self.entries = collect(who, params)
  local decays = decay_filter(who, opts.no_decay)
  self.by_name = {}
  for _, e in ipairs(self.entries) do
    e.decay = decays(e.name, e.param) and true or false
    e.state = nil        -- {step = n, <buffer name> = tensor, ...} once updated
    self.by_name[e.name] = e
  end
  self.step_count = 0
  return self
end

function Optimizer:set_lr(lr)
  if type(lr) ~= "number" or lr ~= lr or lr < 0 or lr == math.huge then
    error(string.format("%s.set_lr: lr must be a finite number >= 0, got %s", self.who, describe(lr)), 2)
  end
  self.hyper.lr = lr
end

function Optimizer:get_lr() return self.hyper.lr end

--- Zeroes every gradient in place (the buffers stay, so views into a flat
-- gradient arena keep working); opts.set_to_none drops them instead.
function Optimizer:zero_grad(opts)
  local to_none = type(opts) == "table" and opts.set_to_none
  local grads = {}
  for _, e in ipairs(self.entries) do
    if to_none then
      e.param:set_grad(nil)
    else
      grads[#grads + 1] = e.param:grad()
    end
  end
  if #grads > 0 then K.zero_grad_(grads) end   -- streaming stores: not kept in the cache
end

--- The {name =, param =, decay =} entries, in order.
function Optimizer:param_entries() return self.entries end

-- Fresh zero state {step = 0, <buffer> = tensor} for each entry of list:
-- host buffers are views of one arena per buffer name (in list order, so a
-- flat parameter arena's moments are one flat arena too); device ones are
-- allocated per parameter, with the parameter.
local function new_states(buffers, list)
  local total = 0
  for _, e in ipairs(list) do
    if e.param:device() == "cpu" then total = total + e.param:numel() end
  end
  local arenas = {}
  for _, b in ipairs(buffers) do arenas[b] = total > 0 and core.zeros({total}) or nil end
  local states, off = {}, 0
  for i, e in ipairs(list) do
    local st = {step = 0}
    local n = e.param:numel()
    if e.param:device() == "cpu" and n == 0 then
      for _, b in ipairs(buffers) do st[b] = core.zeros(e.param:shape()) end
    elseif e.param:device() == "cpu" then
      for _, b in ipairs(buffers) do st[b] = arenas[b]:narrow(1, off + 1, n):view(e.param:shape()) end
      off = off + n
    else
      for _, b in ipairs(buffers) do st[b] = core.vulkan.zeros(e.param:shape()) end
    end
    states[i] = st
  end
  return states
end

-- The entries that have a gradient now, with it; gives new ones state.
local function live_entries(self)
  local live, grads, fresh = {}, {}, {}
  for _, e in ipairs(self.entries) do
    local g = e.param:grad()
    if g then
      live[#live + 1], grads[#live + 1] = e, g
      if e.state == nil then fresh[#fresh + 1] = e end
    end
  end
  if #fresh > 0 then
    local states = new_states(self._buffers, fresh)
    for i, e in ipairs(fresh) do e.state = states[i] end
  end
  return live, grads
end

-- Every live parameter in one C call (AdamW, LAMB on the host: one pass of
-- the thread pool over all of them, bit-identical to the per-parameter
-- kernels).  Returns false, having changed nothing, when a parameter or
-- gradient is on a device or the kernel refuses the arguments: the
-- per-parameter path then runs (and names the parameter in its error).
local function step_multi(self, live, grads, scale)
  local ps, ms, vs, wds, steps = {}, {}, {}, {}, {}
  for i, e in ipairs(live) do
    if e.param:device() ~= "cpu" or grads[i]:device() ~= "cpu" then return false end
    ps[i], ms[i], vs[i] = e.param, e.state.exp_avg, e.state.exp_avg_sq
    wds[i] = e.decay and self.hyper.weight_decay or 0.0
    steps[i] = e.state.step + 1
  end
  local ok, trust = self:_update_multi(ps, grads, ms, vs, wds, steps, live, scale)
  if not ok then return false end
  for _, e in ipairs(live) do e.state.step = e.state.step + 1 end
  return true, trust
end

-- opts.grad_scale: a finite number > 0, or 1 when absent.
local function step_scale(who, opts)
  if opts == nil then return 1 end
  if type(opts) ~= "table" then
    error(string.format("%s.step: argument #1 (opts) must be a table or nil, got %s", who, describe(opts)), 3)
  end
  check_options(who .. ".step", opts, {grad_scale = true}, 4)
  local s = opts.grad_scale
  if s == nil then return 1 end
  if type(s) ~= "number" or not (s > 0) or s == math.huge then
    error(string.format("%s.step: option 'grad_scale' must be a finite number > 0, got %s", who, describe(s)), 3)
  end
  return s
end

--- opt:step([{grad_scale = s}]): one update of every parameter that has a
-- gradient.  grad_scale (default 1) updates as if every gradient had first
-- been multiplied by s: global-norm clipping (optim.clip_scale) without a
-- pass of its own over the gradients.  On the host's one-call path (AdamW,
-- LAMB) the gradients are read scaled and left as they were; otherwise
-- (SGD, device parameters) they are scaled in place first, as
-- clip_grad_norm does.  Either way the update is bit-identical to
-- clip_grad_norm followed by step().
function Optimizer:step(opts)
  local scale = step_scale(self.who, opts)
  self.step_count = self.step_count + 1
  local live, grads = live_entries(self)
  if self._update_multi and #live > 0 and step_multi(self, live, grads, scale) then return end
  if scale ~= 1 then scale_(grads, scale) end
  local update = self._update
  for i, e in ipairs(live) do
    local st = e.state
    st.step = st.step + 1
    local ok, err = pcall(update, self, e, grads[i], st)
    if not ok then
      st.step = st.step - 1
      err = tostring(err):gsub("^[^\n]-:%d+: ", "")   -- the kernel's message, without our position
      error(string.format("%s.step: parameter '%s' %s: %s", self.who, e.name, shape_str(e.param), err), 2)
    end
  end
end

function Optimizer:state_dict()
  local hyper = {}
  for k, v in pairs(self.hyper) do hyper[k] = v end
  local sd = {format = "bert.optim", version = 1, kind = self.kind, step = self.step_count,
              hyper = hyper, param_steps = {}, tensors = {}}
  for _, e in ipairs(self.entries) do
    if e.state then
      sd.param_steps[e.name] = e.state.step
      for _, b in ipairs(self._buffers) do sd.tensors[b .. "." .. e.name] = e.state[b] end
    end
  end
  return sd
end

--- Restores a state_dict exactly (buffers are copied).  Raises an error
-- naming the offending entry when the dict does not fit this optimizer.
function Optimizer:load_state_dict(sd)
  local who = self.who .. ".load_state_dict"
  if type(sd) ~= "table" then error(who .. ": expected a state dict table, got " .. describe(sd), 2) end
  if sd.format ~= "bert.optim" or sd.version ~= 1 then
    error(string.format("%s: not a version-1 bert.optim state dict (format %s, version %s)",
      who, describe(sd.format), describe(sd.version)), 2)
  end
  if sd.kind ~= self.kind then
    error(string.format("%s: state dict is for %s, not %s", who, describe(sd.kind), self.kind), 2)
  end
  if math.type(sd.step) ~= "integer" or sd.step < 0 then
    error(who .. ": 'step' must be a non-negative integer, got " .. describe(sd.step), 2)
  end
  if type(sd.hyper) ~= "table" or type(sd.param_steps) ~= "table" or type(sd.tensors) ~= "table" then
    error(who .. ": 'hyper', 'param_steps' and 'tensors' must be tables", 2)
  end
  for k, v in pairs(self.hyper) do
    if type(sd.hyper[k]) ~= type(v) then
      error(string.format("%s: hyper.%s is %s, expected a %s", who, k, describe(sd.hyper[k]), type(v)), 2)
    end
  end
  -- check everything before changing anything
  local new_state = {}
  for name, n in pairs(sd.param_steps) do
    local e = self.by_name[name]
    if e == nil then error(string.format("%s: state for unknown parameter '%s'", who, tostring(name)), 2) end
    if math.type(n) ~= "integer" or n < 1 then
      error(string.format("%s: param_steps['%s'] must be a positive integer, got %s", who, name, describe(n)), 2)
    end
    local st = {step = n}
    for _, b in ipairs(self._buffers) do
      local key = b .. "." .. name
      local t = sd.tensors[key]
      if not is_tensor(t) then error(string.format("%s: tensor '%s' is missing", who, key), 2) end
      if t:dtype() ~= "float32" or shape_str(t) ~= shape_str(e.param) then
        error(string.format("%s: tensor '%s' is %s %s, parameter '%s' is %s float32", who, key,
          shape_str(t), t:dtype(), name, shape_str(e.param)), 2)
      end
      st[b] = t
    end
    new_state[name] = st
  end
  for key in pairs(sd.tensors) do
    local b, name = tostring(key):match("^([%w_]+)%.(.*)$")
    local known = false
    for _, bb in ipairs(self._buffers) do if bb == b then known = true end end
    if not known or sd.param_steps[name] == nil then
      error(string.format("%s: unexpected tensor '%s'", who, tostring(key)), 2)
    end
  end
  for k in pairs(self.hyper) do self.hyper[k] = sd.hyper[k] end
  self.step_count = sd.step
  local restored = {}
  for _, e in ipairs(self.entries) do
    e.state = nil
    if new_state[e.name] then restored[#restored + 1] = e end
  end
  local states = new_states(self._buffers, restored)
  for i, e in ipairs(restored) do
    local from, st = new_state[e.name], states[i]
    st.step = from.step
    for _, b in ipairs(self._buffers) do st[b]:copy_(from[b]) end
    e.state = st
  end
end
-- }======================================================

-- {====================================================== AdamW

local AdamW = class("AdamW", Optimizer)
AdamW._buffers = {"exp_avg", "exp_avg_sq"}

local function read_betas(who, opts)
  local betas = opts.betas or {0.9, 0.999}
  if type(betas) ~= "table" then
    error(string.format("%s: option 'betas' must be {beta1, beta2}, got %s", who, describe(betas)), 3)
  end
  local b = {}
  for i = 1, 2 do
    local v = betas[i]
    if type(v) ~= "number" or not (v >= 0 and v < 1) then
      error(string.format("%s: betas[%d] must be a number in [0, 1), got %s", who, i, describe(v)), 3)
    end
    b[i] = v
  end
  return b[1], b[2]
end

local ADAMW_OPTS = {lr = true, betas = true, eps = true, weight_decay = true, bias_correction = true,
                    bert_original = true, no_decay = true}

--- optim.AdamW(params, {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0.01,
--   bias_correction = true, no_decay = {...}, bert_original = false})
-- bert_original = true changes the defaults to BERT's AdamWeightDecayOptimizer:
-- eps 1e-6 and no bias correction (explicit options still win).
function M.AdamW(params, opts)
  local who = "optim.AdamW"
  local self = new_optimizer(AdamW, who, params, opts, ADAMW_OPTS)
  opts = opts or {}
  local original = bool_opt(who, opts, "bert_original", false)
  local b1, b2 = read_betas(who, opts)
  self.kind = "AdamW"
  self.hyper = {
    lr = num_opt(who, opts, "lr", 1e-3, 0),
    beta1 = b1, beta2 = b2,
    eps = num_opt(who, opts, "eps", original and 1e-6 or 1e-8, 0),
    weight_decay = num_opt(who, opts, "weight_decay", 0.01, 0),
    bias_correction = bool_opt(who, opts, "bias_correction", not original),
  }
  return self
end

function AdamW:_update(e, g, st)
  local h = self.hyper
  K.adamw(e.param, g, st.exp_avg, st.exp_avg_sq, h.lr, h.beta1, h.beta2, h.eps,
          e.decay and h.weight_decay or 0.0, h.bias_correction, st.step)
end

function AdamW:_update_multi(ps, gs, ms, vs, wds, steps, _, scale)
  local h = self.hyper
  return pcall(K.adamw_multi, ps, gs, ms, vs, wds, steps, h.lr, h.beta1, h.beta2, h.eps, h.bias_correction,
               scale)
end
-- }======================================================

-- {====================================================== LAMB

local LAMB = class("LAMB", Optimizer)
LAMB._buffers = {"exp_avg", "exp_avg_sq"}

local LAMB_OPTS = {lr = true, betas = true, eps = true, weight_decay = true, bias_correction = true,
                   always_adapt = true, no_decay = true}

--- optim.LAMB(params, {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-6, weight_decay = 0.01,
--   bias_correction = true, always_adapt = false, no_decay = {...}})
-- Per tensor: u = m̂/(sqrt(v̂)+eps) + wd*p, p -= lr * (|p|/|u|) * u; the
-- trust ratio is 1 when either norm is 0, and (as in ALBERT and apex) for
-- parameters excluded from weight decay unless always_adapt is set.
-- After each step, opt.trust_ratios[name] holds the ratio used (for Vulkan
-- parameters a one-element device tensor: :item() reads it, and waits).
function M.LAMB(params, opts)
  local who = "optim.LAMB"
  local self = new_optimizer(LAMB, who, params, opts, LAMB_OPTS)
  opts = opts or {}
  local b1, b2 = read_betas(who, opts)
  self.kind = "LAMB"
  self.hyper = {
    lr = num_opt(who, opts, "lr", 1e-3, 0),
    beta1 = b1, beta2 = b2,
    eps = num_opt(who, opts, "eps", 1e-6, 0),
    weight_decay = num_opt(who, opts, "weight_decay", 0.01, 0),
    bias_correction = bool_opt(who, opts, "bias_correction", true),
    always_adapt = bool_opt(who, opts, "always_adapt", false),
  }
  self.trust_ratios = {}
  return self
end

function LAMB:_update(e, g, st)
  local h = self.hyper
  local wd = e.decay and h.weight_decay or 0.0
  local adapt = h.always_adapt or wd ~= 0
  self.trust_ratios[e.name] = K.lamb(e.param, g, st.exp_avg, st.exp_avg_sq, h.lr, h.beta1, h.beta2,
                                     h.eps, wd, h.bias_correction, st.step, adapt)
end

function LAMB:_update_multi(ps, gs, ms, vs, wds, steps, live, scale)
  local h = self.hyper
  local adapt = {}
  for i = 1, #ps do adapt[i] = h.always_adapt or wds[i] ~= 0 end
  local ok, trust = pcall(K.lamb_multi, ps, gs, ms, vs, wds, steps, adapt, h.lr, h.beta1, h.beta2, h.eps,
                          h.bias_correction, scale)
  if not ok then return false end
  for i, e in ipairs(live) do self.trust_ratios[e.name] = trust[i] end
  return true
end
-- }======================================================

-- {====================================================== SGD

local SGD = class("SGD", Optimizer)

local SGD_OPTS = {lr = true, momentum = true, dampening = true, weight_decay = true, nesterov = true,
                  no_decay = true}

--- optim.SGD(params, {lr = (required), momentum = 0, dampening = 0, weight_decay = 0,
--   nesterov = false, no_decay = {...}}) — torch.optim.SGD's update (weight
-- decay added to the gradient; the momentum buffer starts as the first
-- gradient).
function M.SGD(params, opts)
  local who = "optim.SGD"
  if type(opts) ~= "table" or opts.lr == nil then
    error(who .. ": option 'lr' is required", 2)
  end
  local self = new_optimizer(SGD, who, params, opts, SGD_OPTS)
  self.kind = "SGD"
  self.hyper = {
    lr = num_opt(who, opts, "lr", nil, 0),
    momentum = num_opt(who, opts, "momentum", 0, 0),
    dampening = num_opt(who, opts, "dampening", 0, 0),
    weight_decay = num_opt(who, opts, "weight_decay", 0, 0),
    nesterov = bool_opt(who, opts, "nesterov", false),
  }
  local h = self.hyper
  if h.nesterov and (h.momentum <= 0 or h.dampening ~= 0) then
    error(who .. ": nesterov momentum requires momentum > 0 and dampening 0", 2)
  end
  self._buffers = h.momentum ~= 0 and {"momentum_buffer"} or {}
  return self
end

function SGD:_update(e, g, st)
  local h = self.hyper
  K.sgd(e.param, g, st.momentum_buffer, h.lr, h.momentum, h.dampening,
        e.decay and h.weight_decay or 0.0, h.nesterov, st.step == 1)
end
-- }======================================================

-- {====================================================== clipping

-- The gradients of params (an optimizer, or anything collect() accepts).
local function gradients(who, params)
  local entries
  if type(params) == "table" and not is_tensor(params) and type(params.param_entries) == "function" then
    entries = params:param_entries()
  else
    entries = collect(who, params)
  end
  local grads = {}
  for _, e in ipairs(entries) do
    local g = e.param:grad()
    if g then grads[#grads + 1] = g end
  end
  return grads
end

--- optim.clip_grad_norm(params, max_norm) -> total norm before clipping.
-- The global L2 norm over every gradient (summed in double); when it
-- exceeds max_norm all gradients are scaled in place by
-- max_norm / (norm + 1e-6), as torch.nn.utils.clip_grad_norm_.  A
-- non-finite norm is returned without touching the gradients (skip the
-- step).  params: an optimizer, a list of tensors or of {name=, param=}.
function M.clip_grad_norm(params, max_norm)
  local who = "optim.clip_grad_norm"
  if type(max_norm) ~= "number" or not (max_norm > 0) then
    error(string.format("%s: argument #2 (max_norm) must be a number > 0, got %s", who, describe(max_norm)), 2)
  end
  local grads = gradients(who, params)
  local total = math.sqrt(sumsq(grads))
  if total ~= total or total == math.huge then return total end
  local coef = M.clip_scale(total, max_norm)
  if coef < 1 then scale_(grads, coef) end
  return total
end

--- optim.clip_scale(norm, max_norm) -> the factor clipping applies to the
-- gradients: max_norm / (norm + 1e-6) when that is below 1, else 1.  With
-- optim.grad_norm it clips inside the update, one pass fewer:
--   local norm = optim.grad_norm(opt)
--   opt:step{grad_scale = optim.clip_scale(norm, 1.0)}
function M.clip_scale(norm, max_norm)
  if type(norm) ~= "number" or not (norm >= 0) or norm == math.huge then
    error(string.format("optim.clip_scale: argument #1 (norm) must be a finite number >= 0, got %s",
      describe(norm)), 2)
  end
  if type(max_norm) ~= "number" or not (max_norm > 0) then
    error(string.format("optim.clip_scale: argument #2 (max_norm) must be a number > 0, got %s",
      describe(max_norm)), 2)
  end
  local coef = max_norm / (norm + 1e-6)
  return coef < 1 and coef or 1
end

--- optim.grad_norm(params) -> the global L2 norm of the gradients (no clipping).
function M.grad_norm(params)
  return math.sqrt(sumsq(gradients("optim.grad_norm", params)))
end
-- }======================================================

-- {====================================================== schedules

local SCHEDULE_OPTS = {kind = true, warmup = true, total = true, lr = true, min_lr = true}

--- optim.schedule{kind = "linear" | "cosine" | "constant" | "linear_tf" | "one_cycle", warmup = 0,
--   total = N, lr = X, min_lr = 0} -> function(step) -> lr, for 0-based steps.
-- warmup: lr*s/warmup for s < warmup (so step 0 has lr 0, as HF/TF BERT).
-- linear:   then min_lr + (lr-min_lr)*max(0, (total-s)/(total-warmup))   (HF get_linear_schedule_with_warmup)
-- cosine:   then min_lr + (lr-min_lr)*0.5*(1+cos(pi*min(1, (s-warmup)/(total-warmup))))
-- constant: then lr
-- linear_tf: then min_lr + (lr-min_lr)*max(0, 1 - s/total)   (TF BERT: decay counted from step 0)
-- one_cycle: a triangle, min_lr + (lr-min_lr)*s/warmup up to the peak at warmup, then as linear
--           back to min_lr at total (Smith's one-cycle policy, linear: Cramming's schedule)
function M.schedule(opts)
  local who = "optim.schedule"
  if type(opts) ~= "table" then error(who .. ": expected an options table, got " .. describe(opts), 2) end
  check_options(who, opts, SCHEDULE_OPTS, 3)
  local kind = opts.kind or "linear"
  if kind ~= "linear" and kind ~= "cosine" and kind ~= "constant" and kind ~= "linear_tf" and kind ~= "one_cycle" then
    error(string.format("%s: option 'kind' must be \"linear\", \"cosine\", \"constant\", \"linear_tf\" or " ..
      "\"one_cycle\", got %s",
      who, describe(kind)), 2)
  end
  local function int_opt(key, default)
    local v = opts[key]
    if v == nil then return default end
    if math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v) and v < 2^53) then
      error(string.format("%s: option '%s' must be an integer, got %s", who, key, describe(v)), 3)
    end
    if v < 0 then error(string.format("%s: option '%s' must be >= 0, got %s", who, key, tostring(v)), 3) end
    return math.tointeger(v)
  end
  local warmup = int_opt("warmup", 0)
  local total = int_opt("total", nil)
  if opts.lr == nil then error(who .. ": option 'lr' is required", 2) end
  local lr = num_opt(who, opts, "lr", nil, 0)
  local min_lr = num_opt(who, opts, "min_lr", 0, 0)
  if min_lr > lr then
    error(string.format("%s: min_lr %s exceeds lr %s", who, tostring(min_lr), tostring(lr)), 2)
  end
  if kind ~= "constant" then
    if total == nil then error(string.format("%s: option 'total' is required for kind %q", who, kind), 2) end
    if total < warmup then
      error(string.format("%s: total (%d) is smaller than warmup (%d)", who, total, warmup), 2)
    end
  end
  local span = total and math.max(1, total - warmup)
  return function(s)
    if type(s) ~= "number" or s < 0 then
      error("schedule: step must be a number >= 0, got " .. describe(s), 2)
    end
    if s < warmup then
      if kind == "one_cycle" then return min_lr + (lr - min_lr) * (s / warmup) end
      return lr * (s / warmup)
    end
    if kind == "constant" then return lr end
    local f
    if kind == "linear" or kind == "one_cycle" then
      f = math.max(0.0, (total - s) / span)
    elseif kind == "linear_tf" then
      f = math.max(0.0, 1.0 - s / math.max(1, total))
    else
      f = 0.5 * (1.0 + math.cos(math.pi * math.min(1.0, (s - warmup) / span)))
    end
    if min_lr == 0 then return lr * f end
    return min_lr + (lr - min_lr) * f
  end
end

local Scheduler = class("Scheduler")

--- optim.Scheduler(opt, fn): sets opt's lr to fn(0) now and to fn(n) after
-- the n-th :step() (call it after opt:step(), as torch's LambdaLR).
function M.Scheduler(opt, fn)
  local who = "optim.Scheduler"
  if type(opt) ~= "table" or type(opt.set_lr) ~= "function" then
    error(who .. ": argument #1 must be an optimizer, got " .. describe(opt), 2)
  end
  if type(fn) ~= "function" then
    error(who .. ": argument #2 must be a function step -> lr (see optim.schedule), got " .. describe(fn), 2)
  end
  local self = setmetatable({opt = opt, fn = fn, last_step = 0}, Scheduler)
  opt:set_lr(fn(0))
  return self
end

function Scheduler:step()
  self.last_step = self.last_step + 1
  self.opt:set_lr(self.fn(self.last_step))
  return self.opt:get_lr()
end

function Scheduler:get_lr() return self.opt:get_lr() end

--- {step = n}: plain values, storable as safetensors metadata.
function Scheduler:state_dict() return {step = self.last_step} end

function Scheduler:load_state_dict(sd)
  if type(sd) ~= "table" or math.type(sd.step) ~= "integer" or sd.step < 0 then
    error("optim.Scheduler.load_state_dict: expected {step = <integer >= 0>}, got "
      .. (type(sd) == "table" and ("step " .. describe(sd.step)) or describe(sd)), 2)
  end
  self.last_step = sd.step
  self.opt:set_lr(self.fn(self.last_step))
end
-- }======================================================

-- {====================================================== safetensors round trip

local PREFIX = "bert.optim."

local function encode(v)
  if type(v) == "boolean" then return tostring(v) end
  if math.type(v) == "integer" then return string.format("%d", v) end
  if type(v) == "number" then
    local s = string.format("%.17g", v)
    if not s:find("[%.eEn]") then s = s .. ".0" end   -- keep floats floats
    return s
  end
  return v
end

local function decode(s)
  if s == "true" then return true elseif s == "false" then return false end
  return tonumber(s) or s
end

--- optim.state_to_safetensors(sd) -> tensors, metadata (see the layout at the top).
function M.state_to_safetensors(sd)
  local who = "optim.state_to_safetensors"
  if type(sd) ~= "table" or sd.format ~= "bert.optim" then
    error(who .. ": expected an optimizer state dict, got " .. describe(sd), 2)
  end
  local meta = {
    [PREFIX .. "format"] = sd.format,
    [PREFIX .. "version"] = encode(sd.version),
    [PREFIX .. "kind"] = sd.kind,
    [PREFIX .. "step"] = encode(sd.step),
  }
  for k, v in pairs(sd.hyper) do
    if type(v) ~= "number" and type(v) ~= "boolean" then
      error(string.format("%s: hyper.%s is %s, not a number or boolean", who, k, describe(v)), 2)
    end
    meta[PREFIX .. "hyper." .. k] = encode(v)
  end
  for name, n in pairs(sd.param_steps) do meta[PREFIX .. "param_step." .. name] = encode(n) end
  local tensors = {}
  for k, t in pairs(sd.tensors) do tensors[k] = t end
  return tensors, meta
end

--- optim.state_from_safetensors(tensors, metadata) -> sd.
function M.state_from_safetensors(tensors, meta)
  local who = "optim.state_from_safetensors"
  if type(tensors) ~= "table" or type(meta) ~= "table" then
    error(who .. ": expected (tensors, metadata) tables as bert.load_safetensors returns", 2)
  end
  if meta[PREFIX .. "format"] ~= "bert.optim" then
    error(who .. ": the metadata has no bert.optim state (key '" .. PREFIX .. "format')", 2)
  end
  local sd = {format = "bert.optim", version = decode(meta[PREFIX .. "version"]),
              kind = meta[PREFIX .. "kind"], step = decode(meta[PREFIX .. "step"] or ""),
              hyper = {}, param_steps = {}, tensors = {}}
  for k, v in pairs(meta) do
    local h = k:match("^bert%.optim%.hyper%.(.+)$")
    if h then sd.hyper[h] = decode(v) end
    local name = k:match("^bert%.optim%.param_step%.(.+)$")
    if name then sd.param_steps[name] = decode(v) end
  end
  for k, t in pairs(tensors) do
    local name = k:match("^[%w_]+%.(.*)$")
    if name and sd.param_steps[name] then sd.tensors[k] = t end
  end
  return sd
end

--- optim.save_state(path, opt_or_sd[, metadata]) -> true | nil, message.
-- Extra string metadata (e.g. a scheduler step) may be passed and comes
-- back from load_state as its second result.
function M.save_state(path, sd, extra)
  if type(sd) == "table" and type(sd.state_dict) == "function" then sd = sd:state_dict() end
  local tensors, meta = M.state_to_safetensors(sd)
  for k, v in pairs(extra or {}) do
    if meta[k] ~= nil then error("optim.save_state: metadata key '" .. tostring(k) .. "' is reserved", 2) end
    meta[k] = tostring(v)
  end
  return core.save_safetensors(path, tensors, {metadata = meta})
end

--- optim.load_state(path) -> sd, metadata | nil, message.
function M.load_state(path)
  local tensors, meta = core.load_safetensors(path)
  if not tensors then return nil, meta end
  return M.state_from_safetensors(tensors, meta), meta
end
-- }======================================================

return M
