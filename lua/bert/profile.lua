--- bert.profile: where a training step's time goes (BERT_PROFILE set).
--
-- With the environment variable BERT_PROFILE set when bert loads, every C
-- function of bert.core (the tensor methods and metamethods, bert.F, the
-- optimizer kernels, ...) is wrapped to add its wall time to the op of that
-- name in the current phase; the backward's time per kind of node comes from
-- the C autograd (bert.backward_profile).  Without BERT_PROFILE nothing is
-- wrapped and phase() is a plain call.
--
--   local profile = require("bert.profile")
--   local out = profile.phase("forward", model.forward, model, batch)
--   ...
--   io.stderr:write(profile.format(profile.report(), steps))
--
-- Only the outermost C call is counted (a C function calling back into Lua,
-- such as no_grad, is not wrapped), so op times within a phase add up to at
-- most the phase; the rest of the phase is Lua and bookkeeping ("(lua)").
local core = require("bert.core")

local M = {}
M.enabled = os.getenv("BERT_PROFILE") ~= nil

local clock = core.wall_time
local current = nil       -- the phase running now
local depth = 0           -- wrapped C calls in progress
local phases, phase_order = {}, {}
local ops = {}            -- ops[phase][name] = {seconds =, calls =}

-- C functions that call back into Lua (their inner ops are what counts),
-- and the profiler's own clock and readers
local SKIP = {no_grad = true, wall_time = true, backward_profile = true, set_backward_profiling = true,
              recompute_attach = true, recompute_dispatcher = true, recompute_dead = true, __gc = true, __close = true,
              __index = true, __newindex = true, __tostring = true, __len = true, __name = true}

local function finish(name, t0, ...)
  depth = depth - 1
  if depth == 0 and current then
    local dt = clock() - t0
    local tab = ops[current]
    local e = tab[name]
    if e then
      e.seconds, e.calls = e.seconds + dt, e.calls + 1
    else
      tab[name] = {seconds = dt, calls = 1}
    end
  end
  return ...
end

local function wrap(name, f)
  return function(...)
    depth = depth + 1
    return finish(name, clock(), f(...))
  end
end

local function is_c(f) return type(f) == "function" and debug.getinfo(f, "S").what == "C" end

local function wrap_table(t, prefix, seen)
  if seen[t] then return end
  seen[t] = true
  for k, v in pairs(t) do
    if type(k) == "string" and not SKIP[k] and is_c(v) then t[k] = wrap(prefix .. k, v) end
  end
end

--- Wraps bert.core's C functions (called once, by bert's init when
-- BERT_PROFILE is set, before any module keeps a reference to them).
function M.install(c)
  if M.installed then return end
  M.installed = true
  local seen = {}
  local mt = getmetatable(c.zeros({1}))
  if type(mt.__index) == "table" then wrap_table(mt.__index, ":", seen) end
  wrap_table(mt, "", seen)   -- __add, __mul, ...
  for k, v in pairs(c) do
    if type(v) == "table" and k ~= "Tensor" then wrap_table(v, k .. ".", seen) end
  end
  wrap_table(c, "", seen)
end

--- phase(name, f, ...) -> f(...), its wall time (and the ops it calls)
-- counted under name.  Phases do not nest: an inner one counts on its own.
local function leave(name, prev, t0, ...)
  phases[name] = phases[name] + clock() - t0
  current, depth = prev, 0
  return ...
end

function M.phase(name, f, ...)
  if not M.enabled then return f(...) end
  if phases[name] == nil then
    phases[name], ops[name] = 0, {}
    phase_order[#phase_order + 1] = name
  end
  local prev = current
  current, depth = name, 0
  return leave(name, prev, clock(), f(...))
end

--- report([reset = true]) -> {phases = {{name =, seconds =, ops = {{name =, seconds =, calls =}...}}...},
--   backward_nodes = {{name =, seconds =, calls =}...}}, ops sorted by time.
function M.report(reset)
  local function sorted(tab)
    local list = {}
    for name, e in pairs(tab) do list[#list + 1] = {name = name, seconds = e.seconds, calls = e.calls} end
    table.sort(list, function(a, b) return a.seconds > b.seconds end)
    return list
  end
  local r = {phases = {}, backward_nodes = sorted(core.backward_profile(reset ~= false))}
  for _, name in ipairs(phase_order) do
    r.phases[#r.phases + 1] = {name = name, seconds = phases[name], ops = sorted(ops[name])}
  end
  if reset ~= false then phases, phase_order, ops = {}, {}, {} end
  return r
end

--- format(report, steps[, top = 12[, step_seconds]]) -> text: each phase's
-- time per step and fraction of the step, its top ops (and the backward's
-- node kinds under the phase named "backward"), the rest of each phase as
-- "(lua)".  step_seconds: the steps' whole time (else the phases' sum); the
-- part of it outside every phase is shown as "other".
function M.format(r, steps, top, step_seconds)
  top = top or 12
  local phased = 0
  for _, p in ipairs(r.phases) do phased = phased + p.seconds end
  local total = step_seconds or phased
  local lines = {string.format("profile: %.1f ms per step over %d steps (phases; fraction of the step)",
                               total / steps * 1e3, steps)}
  local function line(indent, name, seconds, calls)
    lines[#lines + 1] = string.format("%s%-28s %9.1f ms %6.1f%%%s", indent, name, seconds / steps * 1e3,
      total > 0 and 100 * seconds / total or 0, calls and string.format(" %6d calls", calls // steps) or "")
  end
  for _, p in ipairs(r.phases) do
    line("", p.name, p.seconds)
    local list = p.ops
    if p.name == "backward" and #r.backward_nodes > 0 then list = r.backward_nodes end
    local counted = 0
    for i, e in ipairs(list) do
      counted = counted + e.seconds
      if i <= top then line("  ", e.name, e.seconds, e.calls) end
    end
    if #list > top then
      local rest = 0
      for i = top + 1, #list do rest = rest + list[i].seconds end
      line("  ", string.format("(%d more ops)", #list - top), rest)
    end
    line("  ", "(lua)", math.max(0, p.seconds - counted))
  end
  if step_seconds then line("", "other", math.max(0, step_seconds - phased)) end
  return table.concat(lines, "\n") .. "\n"
end

return M
