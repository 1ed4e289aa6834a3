--- bert.ablate.status: where a running grid stands, read from its
-- directory alone (no process is asked): each cell finished, evaluating
-- (tasks finished per evaluation point), pretraining (step, checkpoint,
-- recent seconds a step) or not started, and what is left in hours of one
-- core where this grid has measured it.  `ablate.lua --status DIR`.
local cjson = require("cjson")
local fs = require("bert.fs")
local common = require("bert.ablate.common")
local read_json, pretrain_dir, fmt_duration = common.read_json, common.pretrain_dir, common.fmt_duration

local M = {}

-- The last `window` lines of a metrics.jsonl that carry a step: {step, time}.
local function recent_steps(path, window)
  local f = io.open(path, "rb")
  if not f then return {} end
  local out = {}
  for line in f:lines() do
    local ok, r = pcall(cjson.decode, line)
    if ok and type(r) == "table" and type(r.step) == "number" and type(r.time) == "number" and r.loss then
      out[#out + 1] = {step = r.step, time = r.time}
      if #out > window then table.remove(out, 1) end
    end
  end
  f:close()
  return out
end

-- Seconds a step over the recent lines: the mean of those intervals that
-- are within 3x of the median of the last five, or nil. The last five set
-- the scale, so the estimate follows the machine the run is on now (a run
-- carried to a slower or faster machine goes on in the same metrics.jsonl)
-- and leaves out an interval in which the process stood still (stopped,
-- suspended, restarting); held-out evaluations and saves stay in.
function M.step_seconds(points)
  local per = {}
  for i = 2, #points do
    local a, b = points[i - 1], points[i]
    if b.step > a.step then per[#per + 1] = (b.time - a.time) / (b.step - a.step) end
  end
  if #per == 0 then return nil end
  local latest = {table.unpack(per, math.max(1, #per - 4))}
  table.sort(latest)
  local median = latest[(#latest + 1) // 2]
  local sum, n = 0, 0
  for _, x in ipairs(per) do
    if x <= 3 * median and x >= median / 3 then sum, n = sum + x, n + 1 end
  end
  return sum / n
end

-- The evaluation points of a cell: "evaluate" and one per snapshot fraction.
local function points(grid, run)
  local out = {{dir = "evaluate", name = "final"}}
  local ev = grid.quick_evaluation or grid.evaluation
  if not ev or grid.quick_evaluation or ev.learning_curve == false then return out end
  for f in tostring(run and run.settings and run.settings.snapshots or ""):gmatch("[^,]+") do
    local x = tonumber(f)
    if x then out[#out + 1] = {dir = string.format("evaluate-at-%g", x), name = string.format("@%g", x)} end
  end
  return out
end

--- The state of grid directory dir: {name, cells = {{label, seed, state,
-- detail, pretrain_left, tasks_left}}, finished, pretrain_seconds_left,
-- tasks_left, task_seconds} (seconds left where measured here) and its
-- text, as `ablate.lua --status` prints it.
function M.status(dir)
  local grid = read_json(dir .. "/grid.json")
  if not grid then error("ablate --status: " .. dir .. " has no grid.json (not a grid directory)", 0) end
  local ev = grid.quick_evaluation or grid.evaluation
  local tasks = ev and (ev.tasks or require("bert.evaluate").SUITES[ev.suite or "all"]) or {}
  local runs = {}
  for _, r in ipairs(grid.pretrain_runs or {}) do runs[r.id] = r end
  local st = {name = grid.name, cells = {}, finished = 0, pretrain_seconds_left = 0, tasks_left = 0}
  -- seconds an evaluation task took here (its CPU seconds, one thread: its wall time), for the estimate
  local task_seconds, ntask = 0, 0
  local measured_step
  for _, cell in ipairs(grid.cells or {}) do
    local cdir = dir .. "/cells/" .. cell.id
    local run = runs[cell.pretrain_id]
    local rdir = pretrain_dir(dir, cell.pretrain_id)
    local c = {label = cell.label, seed = cell.seed}
    local pts = points(grid, run)
    local done_tasks, per_point = 0, {}
    for _, p in ipairs(pts) do
      local n = 0
      for _, t in ipairs(tasks) do
        local r = read_json(cdir .. "/" .. p.dir .. "/tasks/" .. t .. "/result.json")
        if r then
          n = n + 1
          local s = r.cpu_seconds and r.cpu_seconds.total
          if type(s) == "number" then task_seconds, ntask = task_seconds + s, ntask + 1 end
        end
      end
      done_tasks = done_tasks + n
      per_point[#per_point + 1] = string.format("%s %d of %d", p.name, n, #tasks)
    end
    c.tasks_left = #tasks * #pts - done_tasks
    local recent = recent_steps(rdir .. "/metrics.jsonl", 20)
    measured_step = measured_step or M.step_seconds(recent)
    if fs.exists(cdir .. "/done.json") then
      c.state, c.detail, c.tasks_left = "finished", "", 0
      st.finished = st.finished + 1
    elseif read_json(rdir .. "/summary.json") then
      c.state = "evaluating"
      c.detail = #tasks > 0 and ("tasks finished: " .. table.concat(per_point, ", ")) or ""
    elseif #recent > 0 then
      local total = cell.pretrain_steps
      local last = recent[#recent].step
      local ckpt = read_json(rdir .. "/checkpoint/trainer.json") or read_json(rdir .. "/checkpoint.old/trainer.json")
      local per = M.step_seconds(recent)
      c.state = "pretraining"
      c.pretrain_left = per and per * math.max(0, total - last) or nil
      c.detail = string.format("step %d of %d (checkpoint %s)%s", math.floor(last), total,
        ckpt and string.format("%d", math.floor(ckpt.step)) or "none yet",
        per and string.format(", %.2f s a step lately: %s left", per, fmt_duration(c.pretrain_left)) or "")
    else
      c.state, c.detail = "not started", ""
      c.pretrain_left = false   -- filled below once a step time is known
    end
    st.tasks_left = st.tasks_left + c.tasks_left
    st.cells[#st.cells + 1] = c
  end
  local unknown = false
  for i, c in ipairs(st.cells) do
    if c.pretrain_left == false then
      c.pretrain_left = measured_step and measured_step * grid.cells[i].pretrain_steps or nil
    end
    if c.state == "pretraining" or c.state == "not started" then
      if c.pretrain_left then st.pretrain_seconds_left = st.pretrain_seconds_left + c.pretrain_left
      else unknown = true end
    end
  end
  if unknown then st.pretrain_seconds_left = nil end
  st.task_seconds = ntask > 0 and task_seconds / ntask or nil
  -- the text
  local lines = {string.format("%s: %d cells, %d finished (%s)", grid.name or "grid", #st.cells, st.finished, dir)}
  for i, c in ipairs(st.cells) do
    lines[#lines + 1] = string.format("  [%d/%d] %s, seed %d: %s%s", i, #st.cells, c.label, c.seed, c.state,
      c.detail ~= "" and (": " .. c.detail) or "")
  end
  lines[#lines + 1] = string.format("left: pretraining %s; %d evaluation tasks%s",
    st.pretrain_seconds_left and (fmt_duration(st.pretrain_seconds_left) .. " of one core")
      or "of unknown length (no step timed here yet)",
    st.tasks_left, st.task_seconds and string.format(" (~%s of one core at the %s a task measured here)",
      fmt_duration(st.tasks_left * st.task_seconds), fmt_duration(st.task_seconds)) or "")
  st.text = table.concat(lines, "\n")
  return st
end

return M
