--- bert.ablate.archive: a grid's results kept where they outlive the machine.
-- A grid runs for days in runs/ablate/NAME, on one machine's disk; a new
-- machine starts without it.  save() copies the small files that carry the
-- results -- grid.json, each cell's done.json, the suite's results.json,
-- protocol.json and per-task result.json (every seed's scores), the
-- first-round fine-tunings' summary.json, each pretraining run's
-- summary.json, metrics.jsonl and reused.json -- into a folder that is
-- committed (results/ablate/NAME by default), never a checkpoint.  Cells
-- still running are saved too, for what they have finished (evidence to
-- cite: their checkpoints cannot be), and marked unfinished by the lack of
-- a done.json.  restore() copies a saved folder's finished cells back into
-- a grid directory that lacks them, so that the grid relaunched on a new
-- machine skips them; unfinished cells start again.
local cjson = require("cjson")
local bert = require("bert")
local fs = require("bert.fs")
local common = require("bert.ablate.common")

local M = {}

-- the names kept inside a cell (outside evaluation task folders) and a run
local CELL_FILES = {["done.json"] = true, ["results.json"] = true, ["protocol.json"] = true, ["summary.json"] = true}
local RUN_FILES = {"summary.json", "metrics.jsonl", "reused.json"}

local function join(a, b) return a .. "/" .. b end

-- Relative paths of the files of a cell worth keeping: CELL_FILES in the
-- cell folder and one level down (cells/ID/TASK/summary.json,
-- cells/ID/evaluate/results.json), and tasks/T/result.json of every
-- evaluation folder; a fine-tuning run's own folders are not entered.
local function cell_files(dir, rel)
  local out = {}
  local function walk(r, depth)
    for _, name in ipairs(fs.listdir(join(dir, r)) or {}) do
      local p = join(r, name)
      if fs.isdir(join(dir, p)) then
        if name == "tasks" then
          for _, task in ipairs(fs.listdir(join(dir, p)) or {}) do
            if fs.exists(join(dir, join(p, task) .. "/result.json")) then out[#out + 1] = join(p, task) .. "/result.json" end
          end
        elseif depth < 1 then
          walk(p, depth + 1)
        end
      elseif CELL_FILES[name] then
        out[#out + 1] = p
      end
    end
  end
  walk(rel, 0)
  return out
end

-- Makes the folders of path's parent, as mkdir -p.
local function make_parents(path)
  local prefix = path:sub(1, 1) == "/" and "" or "."
  for part in (path:match("^(.*)/[^/]+$") or ""):gmatch("[^/]+") do
    prefix = prefix .. "/" .. part
    if not fs.isdir(prefix) then assert(bert.mkdir(prefix)) end
  end
end

local function copy_file(from, to)
  local text, err = fs.read_file(from)
  if not text then error("ablate archive: cannot read " .. from .. ": " .. tostring(err), 0) end
  make_parents(to)
  local ok, werr = fs.write_atomic(to, text)
  if not ok then error("ablate archive: cannot write " .. to .. ": " .. tostring(werr), 0) end
end

--- Copies the results of grid directory `dir` into `into` (made if
-- missing; files already there are replaced, none removed).  Returns
-- {cells = N finished, unfinished = N with some results, files = N}.
function M.save(dir, into)
  local grid = common.read_json(dir .. "/grid.json")
  if not grid then error("ablate --archive: " .. dir .. " has no grid.json (not a grid directory)", 0) end
  local files = {"grid.json"}
  local finished, unfinished, runs = 0, 0, {}
  for _, cell in ipairs(grid.cells or {}) do
    local rel = "cells/" .. cell.id
    local kept = fs.isdir(join(dir, rel)) and cell_files(dir, rel) or {}
    for _, p in ipairs(kept) do files[#files + 1] = p end
    if fs.exists(join(dir, rel) .. "/done.json") then finished = finished + 1
    elseif #kept > 0 then unfinished = unfinished + 1 end
    if not runs[cell.pretrain_id] then
      runs[cell.pretrain_id] = true
      for _, name in ipairs(RUN_FILES) do
        local p = "pretrain/" .. cell.pretrain_id .. "/" .. name
        if fs.exists(join(dir, p)) then files[#files + 1] = p end
      end
    end
  end
  for _, p in ipairs(files) do copy_file(join(dir, p), join(into, p)) end
  return {cells = finished, unfinished = unfinished, files = #files}
end

--- Copies the finished cells saved in `from` into grid directory `dir`
-- where `dir` lacks them: their cell files and their pretraining runs'
-- files (not those of a run shared with a cell the archive has not
-- finished, nor of one started in `dir`).  The saved grid must have the
-- settings of `grid` (bert.ablate.load's) and of dir/grid.json when there
-- is one.  Returns the ids of the cells restored.
function M.restore(from, dir, grid)
  local saved_text = fs.read_file(from .. "/grid.json")
  if not saved_text then error("ablate --restore: " .. from .. " has no grid.json (not a saved grid)", 0) end
  local function settings(g)
    local c = common.copy(g)
    c.file, c.description, c.comparisons = nil, nil, nil   -- another path, the same grid; text only
    return common.canonical(c)
  end
  local saved = cjson.decode(saved_text)
  if grid and settings(saved) ~= settings(grid) then
    error("ablate --restore: " .. from .. " holds a grid with other settings than " .. tostring(grid.file or grid.name) ..
      " (grid.json differs): restore into the grid that saved it", 0)
  end
  local here = fs.read_file(dir .. "/grid.json")
  if here and settings(cjson.decode(here)) ~= settings(saved) then
    error("ablate --restore: " .. dir .. "/grid.json differs from " .. from .. "/grid.json: another grid's results", 0)
  end
  if not here then copy_file(from .. "/grid.json", dir .. "/grid.json") end
  -- a run shared with a cell the archive has not finished is not restored, nor
  -- are its cells: that cell would find the run finished and no checkpoint
  local whole = {}
  for _, cell in ipairs(saved.cells or {}) do
    local done = fs.exists(join(from, "cells/" .. cell.id) .. "/done.json")
    whole[cell.pretrain_id] = done and whole[cell.pretrain_id] ~= false
  end
  local restored = {}
  for _, cell in ipairs(saved.cells or {}) do
    local rel = "cells/" .. cell.id
    -- (nor one whose run was started here: that run's files are its own)
    local run_here = fs.exists(join(dir, "pretrain/" .. cell.pretrain_id) .. "/args.json")
    if whole[cell.pretrain_id] and not run_here and not fs.exists(join(dir, rel) .. "/done.json") then
      for _, p in ipairs(cell_files(from, rel)) do copy_file(join(from, p), join(dir, p)) end
      for _, name in ipairs(RUN_FILES) do
        local p = "pretrain/" .. cell.pretrain_id .. "/" .. name
        if fs.exists(join(from, p)) and not fs.exists(join(dir, p)) then copy_file(join(from, p), join(dir, p)) end
      end
      restored[#restored + 1] = cell.id
    end
  end
  return restored
end

return M
