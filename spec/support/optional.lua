-- The optional tools some specs need, looked up in one place, each with the
-- command that installs it.  `make test` installs only what builds and runs
-- the fast set (tools/deps.sh test); a spec that needs more skips, pending,
-- with the install command, where it is missing (docs/testing.md):
--   local optional = require("spec.support.optional")
--   local why = optional.missing("node", "onnxruntime-node")   -- nil, or why it skips
--   if why then return pending(why) end
--   optional.node_modules("tokenizers")   -- the directory for NODE_PATH, or nil
-- Commands are found on PATH; the Node packages in $BERT_NODE_MODULES
-- (onnxruntime-node) and $BERT_TOK_NODE_MODULES (tokenizers), else in
-- .deps/node and .deps/tok where `make deps` puts them.  Pointing PATH or
-- those variables elsewhere shows what a spec does without the tool.
local M = {}

-- name -> {the command installing it, the command on PATH, or the Node package}
local TOOLS = {
  node = {"sudo apt-get install nodejs", command = "node"},
  python3 = {"sudo apt-get install python3", command = "python3"},
  mpirun = {"sudo apt-get install openmpi-bin libopenmpi-dev", command = "mpirun"},
  spm_train = {"sudo apt-get install sentencepiece", command = "spm_train"},
  gnuplot = {"sudo apt-get install gnuplot-nox", command = "gnuplot"},
  curl = {"sudo apt-get install curl", command = "curl"},
  xz = {"sudo apt-get install xz-utils", command = "xz"},
  zip = {"sudo apt-get install zip", command = "zip"},
  unzip = {"sudo apt-get install unzip", command = "unzip"},
  sha256sum = {"sudo apt-get install coreutils", command = "sha256sum"},
  ["onnxruntime-node"] = {"sh tools/deps.sh onnxruntime-node", package = "onnxruntime-node",
                          env = "BERT_NODE_MODULES", default = ".deps/node/node_modules"},
  tokenizers = {"sh tools/deps.sh tokenizers", package = "@anush008/tokenizers",
                env = "BERT_TOK_NODE_MODULES", default = ".deps/tok/node_modules"},
}
M.VULKAN_INSTALL = "sudo apt-get install mesa-vulkan-drivers libvulkan-dev glslc, then make clean && make"

local function tool(name) return TOOLS[name] or error("spec.support.optional: no tool named '" .. tostring(name) .. "'", 3) end

local function on_path(command)
  local ok = os.execute("command -v " .. command .. " >/dev/null 2>&1")
  return ok == true or ok == 0
end

--- The directory holding the Node package `name` ("onnxruntime-node",
-- "tokenizers"), for NODE_PATH; nil when it is not installed.
function M.node_modules(name)
  local t = tool(name)
  assert(t.package, "spec.support.optional.node_modules: '" .. name .. "' is not a Node package")
  local dir = os.getenv(t.env) or t.default
  local f = io.open(dir .. "/" .. t.package .. "/package.json", "rb")
  if not f then return nil end
  f:close()
  return dir
end

--- nil when every named tool is there, else why the spec skips: the first
-- missing one and the command that installs it.
function M.missing(...)
  for _, name in ipairs({...}) do
    local t = tool(name)
    local there
    if t.package then there = M.node_modules(name) ~= nil else there = on_path(t.command) end
    if not there then return string.format("%s is not installed: skipped (install: %s)", t.package or name, t[1]) end
  end
  return nil
end

--- nil when the Vulkan backend has a device, else why the spec skips (the
-- backend's reason) and how to get one.
function M.no_vulkan()
  local info = require("bert").backend_info().vulkan
  if info and info.available then return nil end
  return string.format("no Vulkan device: %s: skipped (install: %s)", tostring(info and info.reason), M.VULKAN_INSTALL)
end

--- A PATH with every command of the current one except `names` (a fresh
-- directory of links): a subprocess run with it sees those tools missing.
function M.path_without(names)
  local dir = require("spec.support.tmpdir").dir()
  local q = function(x) return "'" .. x:gsub("'", "'\\''") .. "'" end
  -- one shell for all the links (the first directory of PATH wins, as in a lookup)
  local cmd = {}
  for d in (os.getenv("PATH") or ""):gmatch("[^:]+") do
    cmd[#cmd + 1] = string.format("ln -s %s/* %s/ 2>/dev/null", q(d), q(dir))
  end
  for _, n in ipairs(names) do cmd[#cmd + 1] = "rm -f " .. q(dir .. "/" .. n) end
  os.execute(table.concat(cmd, "; "))
  return dir
end

return M
