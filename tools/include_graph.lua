-- The include graph of csrc/ between folders, checked against the layers.
--   lua5.4 tools/include_graph.lua [--dot] [ROOT]
-- Reads every csrc/<folder>/*.c and *.h, collects `#include "folder/file"`
-- edges between folders, and fails (exit 1, one line per problem) when a
-- folder includes one it may not (a lower layer reaching up), when the
-- folder graph has a cycle, or when csrc/core names a device (the core knows
-- no backend).  --dot prints the folder graph for Graphviz instead.
local M = {}

-- Which folders each folder may include (besides itself).  The binding
-- (lua) depends on everything and nothing depends on it.
M.allowed = {
  core = {},
  cpu = {core = true},
  vulkan = {core = true},
  io = {core = true},
  data = {core = true},
  tokenize = {},
  dist = {core = true},
  lua = {core = true, cpu = true, vulkan = true, io = true, data = true, tokenize = true, dist = true},
}

-- Words that only a device backend may say.
M.device_words = {"vulkan", "bert_vk_", "vk%.h", "VkDevice", "BERT_STORAGE_VULKAN"}

local function list(dir, pattern)
  local p = io.popen('ls -1 "' .. dir .. '" 2>/dev/null')
  local out = {}
  for name in p:lines() do
    if not pattern or name:match(pattern) then out[#out + 1] = name end
  end
  p:close()
  table.sort(out)
  return out
end

-- { [folder] = { [other] = {"file:line", ...} } } and the problems found.
function M.scan(root)
  root = root or "csrc"
  local edges, problems = {}, {}
  for _, folder in ipairs(list(root)) do
    edges[folder] = edges[folder] or {}
    for _, file in ipairs(list(root .. "/" .. folder, "%.[ch]$")) do
      local path = root .. "/" .. folder .. "/" .. file
      local f = assert(io.open(path))
      local n = 0
      for line in f:lines() do
        n = n + 1
        local target = line:match('^%s*#%s*include%s+"([%w_]+)/')
        if target and target ~= folder then
          edges[folder][target] = edges[folder][target] or {}
          table.insert(edges[folder][target], path .. ":" .. n)
          local ok = M.allowed[folder]
          if ok and not ok[target] then
            problems[#problems + 1] = string.format("%s:%d: %s includes %s, a layer it may not depend on",
                                                    path, n, folder, target)
          elseif not ok then
            problems[#problems + 1] = string.format("%s:%d: folder %s has no place in the layers "
                                                    .. "(add it to tools/include_graph.lua)", path, n, folder)
          end
        end
        if folder == "core" then
          local code = line:gsub("/%*.-%*/", ""):gsub("^%s*%*.*", ""):gsub("//.*", "")
          for _, w in ipairs(M.device_words) do
            if code:lower():find(w:lower()) then
              problems[#problems + 1] = string.format("%s:%d: the core names a device (%s)", path, n,
                                                      w:gsub("%%", ""))
            end
          end
        end
      end
      f:close()
    end
  end
  -- cycles between folders (depth-first search)
  local state = {}
  local function visit(node, stack)
    state[node] = "open"
    stack[#stack + 1] = node
    for other in pairs(edges[node] or {}) do
      if state[other] == "open" then
        problems[#problems + 1] = "cycle between folders: " .. table.concat(stack, " -> ") .. " -> " .. other
      elseif not state[other] then
        visit(other, stack)
      end
    end
    stack[#stack] = nil
    state[node] = "done"
  end
  local names = {}
  for k in pairs(edges) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do if not state[k] then visit(k, {}) end end
  return edges, problems
end

function M.dot(edges)
  local out = {"digraph csrc {", "  rankdir=BT;"}
  local names = {}
  for k in pairs(edges) do names[#names + 1] = k end
  table.sort(names)
  for _, a in ipairs(names) do
    local targets = {}
    for b in pairs(edges[a]) do targets[#targets + 1] = b end
    table.sort(targets)
    for _, b in ipairs(targets) do
      out[#out + 1] = string.format('  "%s" -> "%s" [label="%d"];', a, b, #edges[a][b])
    end
  end
  out[#out + 1] = "}"
  return table.concat(out, "\n")
end

if arg and arg[0] and arg[0]:match("include_graph%.lua$") then
  local dot, root = false, nil
  for _, a in ipairs(arg) do
    if a == "--help" or a == "-h" then
      print("usage: lua5.4 tools/include_graph.lua [--dot] [ROOT]\n" ..
        "Checks the include graph of csrc/ between folders against the layers; --dot prints it for Graphviz.")
      os.exit(0)
    end
    if a == "--dot" then dot = true else root = a end
  end
  local edges, problems = M.scan(root)
  if dot then print(M.dot(edges)) os.exit(0) end
  for _, p in ipairs(problems) do io.stderr:write(p, "\n") end
  if #problems > 0 then os.exit(1) end
  print("csrc include graph: layered, no cycle between folders")
end

return M
