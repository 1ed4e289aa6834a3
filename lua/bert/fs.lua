--- bert.fs: the file helpers every module needs, in one place.
-- Writes go through a temporary file and a rename, so a reader never sees
-- a half-written file.
local cjson = require("cjson.safe")

-- bert.core is loaded on first use: the helpers that need no C (read_file,
-- read_json, write_atomic) then work before the library is built, as the
-- corpus converters tools/fetch_data.sh runs need
local core_module
local function core()
  core_module = core_module or require("bert.core")
  return core_module
end

local M = {}

--- The whole file, or nil, message.
function M.read_file(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local s, rerr = f:read("a")
  f:close()
  if not s then return nil, path .. ": " .. tostring(rerr) end
  return s
end

--- The JSON object (a table) in the file at path; or nil and a message
-- that names the path, and `what` (e.g. "run settings") when given.
function M.read_json(path, what)
  local text, err = M.read_file(path)
  if not text then
    if what then return nil, string.format("%s: cannot read %s (%s)", path, what, tostring(err)) end
    return nil, err
  end
  local corrupt = what and string.format("corrupt %s: ", what) or ""
  local value, jerr = cjson.decode(text)
  if value == nil then return nil, string.format("%s: %sinvalid JSON (%s)", path, corrupt, tostring(jerr)) end
  if type(value) ~= "table" then
    return nil, string.format("%s: %sexpected a JSON object, got %s", path, corrupt, type(value))
  end
  return value
end

--- Is there a readable file or a directory at path?
function M.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return core().isdir(path)
end

function M.isdir(...) return core().isdir(...) end
function M.mkdir(...) return core().mkdir(...) end

--- The names in a directory, sorted; or nil, message.
function M.listdir(path)
  local names, err = core().listdir(path)
  if not names then return nil, err end
  table.sort(names)
  return names
end

--- Writes text to path atomically; true, or nil, message.
function M.write_atomic(path, text)
  local tmp = string.format("%s.tmp%d", path, math.random(1 << 30))
  local f, err = io.open(tmp, "wb")
  if not f then return nil, path .. ": " .. err:sub(#tmp + 3) end   -- the file meant, not the temporary name
  local ok, werr = f:write(text)
  local closed, cerr = f:close()
  if not ok or not closed then
    os.remove(tmp)
    return nil, path .. ": " .. tostring(werr or cerr)
  end
  local renamed, rerr = os.rename(tmp, path)
  if not renamed then os.remove(tmp) return nil, rerr end
  return true
end

--- An exclusive flock on path (bert.core.lock_file): the lock; or nil,
-- "locked", the holder's "pid N\nhost H\n"; or nil, message.
function M.lock_file(...) return core().lock_file(...) end

--- Takes DIR/.lock, the one-writer lock of a run directory (a flock: held
-- until lock:release() or the process ends, a killed one's included).
-- Returns the lock, or nil and a message naming the holder's pid and host.
function M.lock_run_dir(dir)
  local lock, why, holder = core().lock_file(dir .. "/.lock")
  if lock then return lock end
  if why ~= "locked" then return nil, "cannot lock the run directory: " .. why end
  return nil, string.format("%s is in use by another run (pid %s on host %s): wait for it to end, or give another " ..
    "--output", dir, holder:match("pid (%d+)") or "?", holder:match("host ([^\n]+)") or "?")
end

--- What a run directory holds that a fresh run would replace: "a finished
-- run (N steps)" or "a resumable run (checkpoint at step N)"; nil when
-- neither (an empty directory, or only the data a fresh run may reuse).
function M.previous_run(dir)
  local summary = M.read_json(dir .. "/summary.json")
  if summary then
    local steps = math.tointeger(summary.steps)
    return steps and string.format("a finished run (%d steps)", steps) or "a finished run (summary.json)"
  end
  for _, name in ipairs({"checkpoint", "checkpoint.old"}) do
    if M.exists(dir .. "/" .. name) then
      local state = M.read_json(dir .. "/" .. name .. "/trainer.json")
      local step = state and math.tointeger(state.step)
      return step and string.format("a resumable run (checkpoint at step %d)", step) or "a resumable run (" .. name .. "/)"
    end
  end
  return nil
end

--- Why a fresh run may not go into dir (a message naming what is there and
-- the ways on), or nil: a finished or resumable run is replaced only with
-- overwrite.
function M.refuse_previous_run(dir, overwrite)
  local previous = M.previous_run(dir)
  if not previous or overwrite then return nil end
  return string.format("%s holds %s: --resume %s continues it, --overwrite replaces it, or give another --output",
    dir, previous, dir)
end

--- Runs tools/fetch_data.sh WHAT (evaluation sets, corpora) into
-- $BERT_DATA, or ./data of the working directory (where the library reads
-- them): the clone's script, else the copy beside the running script
-- (SCRIPT_DIR/../tools: an installed `bert`'s share/bert).  true when it ran
-- and succeeded; nil, message when no fetcher is found.
function M.fetch_data(what)
  local paths = {"tools/fetch_data.sh"}
  local script_dir = arg and type(arg[0]) == "string" and arg[0]:match("^(.*)/[^/]*$")
  if script_dir then paths[2] = script_dir .. "/../tools/fetch_data.sh" end
  for _, path in ipairs(paths) do
    if M.exists(path) then
      local data = os.getenv("BERT_DATA") or ((os.getenv("PWD") or ".") .. "/data")
      local q = function(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
      return os.execute("BERT_DATA=" .. q(data) .. " sh " .. q(path) .. " " .. q(what)) == true
    end
  end
  return nil, "tools/fetch_data.sh not found: run from the clone's root, or `bert fetch " .. what .. "` first"
end

--- The SHA-256 of a file's bytes (64 hex digits, by coreutils' sha256sum:
-- a C library call would hash no faster), or nil, message.
function M.sha256(path)
  if not M.exists(path) then return nil, path .. ": no such file" end
  local p = io.popen("sha256sum '" .. path:gsub("'", "'\\''") .. "' 2>/dev/null")
  local out = p and p:read("a") or ""
  if p then p:close() end
  local hex = out:match("^(%x+)%s")
  if not hex or #hex ~= 64 then return nil, path .. ": sha256sum gave no digest" end
  return hex
end

--- Removes a file or a directory tree (rm -rf).
function M.remove_tree(path)
  if M.exists(path) then os.execute("rm -rf '" .. path:gsub("'", "'\\''") .. "'") end
end

return M
