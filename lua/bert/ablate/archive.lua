--- bert.ablate.archive: a grid's results kept where they outlive the machine.
-- A grid runs for days in runs/ablate/NAME, on one machine's disk; a new
-- machine starts without it.  save() copies the small files that carry the
-- results -- grid.json, each cell's done.json, the suite's results.json,
-- protocol.json and per-task result.json (every seed's scores), the
-- first-round fine-tunings' summary.json, each pretraining run's
-- summary.json, metrics.jsonl and reused.json -- into a folder that is
-- committed (results/ablate/NAME by default).  Cells still running are
-- saved too, for what they have finished (evidence to cite), and marked
-- unfinished by the lack of a done.json.  restore() copies a saved
-- folder's finished cells back into a grid directory that lacks them, so
-- that the grid relaunched on a new machine skips them.
--
-- With opts.carry, save() also keeps FOLDER/carry/: what the unfinished
-- cells need to go on elsewhere instead of starting again (a cell
-- pretrains for longer than a session lasts, and a session may find a new
-- machine).  Per pretraining run of an unfinished cell: a run still
-- training keeps args.json, its tokenizer, metrics, its latest checkpoint
-- (weights in float32, the optimizer's moments rounded to bfloat16: half
-- the bytes, an error of 2^-9 relative in m and v) and, in place of its
-- shards (rebuilt from the corpus on resume), their meta.json and
-- digests; a finished run keeps its final weights.  Both keep the
-- learning-curve snapshots whose evaluation has not finished.  restore()
-- puts a carried run back where the grid directory has none, with its
-- cells' finished evaluation tasks; the grid then resumes it.
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
  return #text
end

-------------------------------------------------------------- carry

local CARRY = "carry"
local SKIP_IN_TOKENIZER = {["training-text.txt"] = true}   -- the corpus text the tokenizer learned from

-- Copies the plain files of folder `from` (not those named in skip);
-- returns how many and their bytes.
local function copy_dir(from, to, skip)
  local n, bytes = 0, 0
  for _, name in ipairs(fs.listdir(from) or {}) do
    if not (skip and skip[name]) and not fs.isdir(join(from, name)) then
      n, bytes = n + 1, bytes + copy_file(join(from, name), join(to, name))
    end
  end
  return n, bytes
end

-- Run `id`'s unfinished cells: {cell directories, curve = whether their
-- learning-curve snapshots are evaluated}; nil when all are finished.
local function unfinished_cells(dir, grid, id)
  local out = {curve = grid.evaluation ~= nil and not grid.quick_evaluation and grid.evaluation.learning_curve ~= false}
  for _, cell in ipairs(grid.cells or {}) do
    local cdir = join(dir, "cells/" .. cell.id)
    if cell.pretrain_id == id and not fs.exists(cdir .. "/done.json") then out[#out + 1] = cdir end
  end
  return #out > 0 and out or nil
end

-- Is the snapshot at `fraction` still to be evaluated by one of the cells?
local function snapshot_wanted(cells, fraction)
  if not cells.curve then return false end
  for _, cdir in ipairs(cells) do
    if not fs.exists(string.format("%s/evaluate-at-%g/results.json", cdir, fraction)) then return true end
  end
  return false
end

-- Copies checkpoint folder `from` (weights, tokenizer, trainer state;
-- with moments, the optimizer's in bfloat16) into `to`; returns the step
-- it holds, files, bytes.  nil when a save replaced it meanwhile (the
-- Trainer swaps whole folders: a copy that began before has mixed steps).
local function copy_checkpoint(from, to, moments)
  local before = common.read_json(from .. "/trainer.json")
  if not before then return nil end
  fs.remove_tree(to)
  local n, bytes = copy_dir(from, to, {["optimizer.safetensors"] = true, ["trainer.json"] = true})
  if moments then
    -- the step counts stay integers; load_state reads the bfloat16 moments back as float32
    local tensors, meta = bert.load_safetensors(from .. "/optimizer.safetensors")
    if not tensors then return nil end
    local path = to .. "/optimizer.safetensors"
    local ok, err = bert.save_safetensors(path, tensors, {metadata = meta, dtype = "BF16"})
    if not ok then error("ablate archive: cannot write " .. path .. ": " .. tostring(err), 0) end
    n, bytes = n + 1, bytes + #(fs.read_file(path) or "")
    n, bytes = n + 1, bytes + copy_file(from .. "/trainer.json", to .. "/trainer.json")
  end
  local after = common.read_json(from .. "/trainer.json")
  if not after or after.step ~= before.step then return nil end
  return before.step, n, bytes
end

-- Copies what run `rel` (pretrain/ID) needs to go on into carry folder `to`;
-- returns {files, bytes, step, finished} or nil when there is nothing to carry.
local function carry_run(dir, rel, to, cells)
  local src, dst = join(dir, rel), join(to, rel)
  local args = common.read_json(src .. "/args.json")
  local finished = fs.exists(src .. "/summary.json")
  if not args then return nil end
  local files, bytes = 0, 0
  local function add(n, b) files, bytes = files + n, bytes + b end
  -- the latest checkpoint (checkpoint.old alone: caught between the Trainer's two renames)
  local step, seen
  for _ = 1, 20 do
    for _, name in ipairs({"checkpoint", "checkpoint.old"}) do
      if not step and fs.exists(join(src, name) .. "/trainer.json") then
        local n, b
        seen = true
        step, n, b = copy_checkpoint(join(src, name), dst .. "/checkpoint", not finished)
        if step then add(n, b) end
      end
    end
    if step or not seen then break end
    os.execute("sleep 1")
  end
  if not step then
    if seen then error("ablate archive: " .. src .. ": no consistent copy of its checkpoint in 20 tries", 0) end
    return nil   -- no checkpoint saved yet: nothing to go on from
  end
  add(1, copy_file(src .. "/args.json", dst .. "/args.json"))
  add(copy_dir(src .. "/tokenizer", dst .. "/tokenizer", SKIP_IN_TOKENIZER))
  if not finished then
    -- complete lines only: the resume drops those past the checkpoint's step, and a line cut by a write in progress
    local metrics = fs.read_file(src .. "/metrics.jsonl") or ""
    make_parents(dst .. "/metrics.jsonl")
    assert(fs.write_atomic(dst .. "/metrics.jsonl", metrics:match("^(.*\n)") or ""))
    if fs.exists(src .. "/data/phrases.txt") then
      add(1, copy_file(src .. "/data/phrases.txt", dst .. "/data/phrases.txt"))
    end
    -- the shards are rebuilt from the corpus on resume (bert.pretrain checks them against these digests)
    for _, set in ipairs({"train", "eval"}) do
      local meta_path = string.format("%s/data/%s/meta.json", src, set)
      local shard_meta = common.read_json(meta_path)
      if not shard_meta then error("ablate archive: " .. meta_path .. " is missing: the run's data cannot be rebuilt", 0) end
      local digests = {}
      for _, shard in ipairs(shard_meta.shards or {}) do
        local hex, herr = fs.sha256(string.format("%s/data/%s/%s", src, set, shard.file))
        if not hex then error("ablate archive: " .. tostring(herr), 0) end
        digests[shard.file] = hex
      end
      add(1, copy_file(meta_path, string.format("%s/data/%s/meta.json", dst, set)))
      common.write_json(string.format("%s/data/%s/sha256.json", dst, set), digests)
    end
  end
  for _, sn in ipairs(require("bert.pretrain").snapshot_plan(args)) do
    if snapshot_wanted(cells, sn.fraction) and fs.exists(join(src, sn.name) .. "/model.safetensors") then
      add(copy_dir(join(src, sn.name), join(dst, sn.name)))
    end
  end
  return {files = files, bytes = bytes, step = step, finished = finished}
end

-- Replaces into/carry with what the unfinished cells of `grid` need;
-- returns {runs = N, files = N, bytes = N}.
local function save_carry(dir, grid, into)
  local tmp = join(into, CARRY .. ".tmp")
  fs.remove_tree(tmp)
  local manifest, total = {saved_at = os.date("!%Y-%m-%dT%H:%M:%SZ"), runs = {}}, {runs = 0, files = 0, bytes = 0}
  local seen = {}
  for _, cell in ipairs(grid.cells or {}) do
    local id = cell.pretrain_id
    local rel = "pretrain/" .. id
    if not seen[id] and not fs.exists(join(dir, rel) .. "/reused.json") then
      seen[id] = true
      local cells = unfinished_cells(dir, grid, id)
      local got = cells and carry_run(dir, rel, tmp, cells)
      if got then
        manifest.runs[id] = {step = got.step, finished = got.finished, files = got.files, bytes = got.bytes}
        total.runs, total.files, total.bytes = total.runs + 1, total.files + got.files, total.bytes + got.bytes
      end
    end
  end
  make_parents(join(tmp, "carry.json"))
  common.write_json(join(tmp, "carry.json"), manifest)   -- the carry's done-marker, written last
  fs.remove_tree(join(into, CARRY))
  local ok, err = os.rename(tmp, join(into, CARRY))
  if not ok then error("ablate archive: cannot rename " .. tmp .. ": " .. tostring(err), 0) end
  return total
end

-------------------------------------------------------------- save, restore

--- Copies the results of grid directory `dir` into `into` (made if
-- missing; files already there are replaced, none removed) and, with
-- opts.carry, replaces into/carry (above).  Returns {cells = N finished,
-- unfinished = N with some results, files = N, carry = {runs, files, bytes}}.
function M.save(dir, into, opts)
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
  local carried = opts and opts.carry and save_carry(dir, grid, into) or nil
  return {cells = finished, unfinished = unfinished, files = #files, carry = carried}
end

local function copy_tree(from, to)
  for _, name in ipairs(fs.listdir(from) or {}) do
    if fs.isdir(join(from, name)) then copy_tree(join(from, name), join(to, name))
    else copy_file(join(from, name), join(to, name)) end
  end
end

-- Puts the runs carried in from/carry back into `dir` where it has no run
-- of that id (one started here is its own), with their unfinished cells'
-- finished evaluation tasks; returns "ID (step N)" for each.
local function restore_carry(from, dir, saved)
  local manifest = common.read_json(join(from, CARRY) .. "/carry.json")
  local ids = {}
  for id in pairs(manifest and manifest.runs or {}) do ids[#ids + 1] = id end
  table.sort(ids)
  local carried = {}
  for _, id in ipairs(ids) do
    local rel = "pretrain/" .. id
    if not fs.exists(join(dir, rel)) then
      copy_tree(join(from, CARRY .. "/" .. rel), join(dir, rel))
      for _, name in ipairs(RUN_FILES) do
        local p = join(rel, name)
        if fs.exists(join(from, p)) and not fs.exists(join(dir, p)) then copy_file(join(from, p), join(dir, p)) end
      end
      for _, cell in ipairs(saved.cells or {}) do
        if cell.pretrain_id == id then
          for _, p in ipairs(cell_files(from, "cells/" .. cell.id)) do
            if not fs.exists(join(dir, p)) then copy_file(join(from, p), join(dir, p)) end
          end
        end
      end
      local run = manifest.runs[id]
      carried[#carried + 1] = string.format("%s (%s at step %s)", id, run.finished and "finished" or "pretraining",
        tostring(math.tointeger(run.step) or run.step))
    end
  end
  return carried
end

--- Copies the finished cells saved in `from` into grid directory `dir`
-- where `dir` lacks them: their cell files and their pretraining runs'
-- files (not those of a run shared with a cell the archive has not
-- finished, nor of one started in `dir`).  The saved grid must have the
-- settings of `grid` (bert.ablate.load's) and of dir/grid.json when there
-- is one.  Then the carried runs (above).  Returns the ids of the cells
-- restored and a line for each run carried back.
function M.restore(from, dir, grid)
  -- one restorer at a time: shard processes launched together would otherwise copy a run
  -- while another one, whose cell it is, resumes it
  make_parents(join(dir, ".restore.lock"))
  local lock, why
  for _ = 1, 3600 do
    lock, why = fs.lock_file(join(dir, ".restore.lock"))
    if lock or why ~= "locked" then break end
    os.execute("sleep 1")
  end
  if not lock then error("ablate --restore: cannot lock " .. join(dir, ".restore.lock") .. ": " .. tostring(why), 0) end
  local _ <close> = setmetatable({}, {__close = function() lock:release() end})
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
  return restored, restore_carry(from, dir, saved)
end

return M
