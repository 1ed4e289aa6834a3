-- The include graph of csrc/ between folders, checked against the layers.
--   lua5.4 tools/include_graph.lua [--dot] [--objects BUILD/obj] [ROOT]
-- Reads every csrc/<folder>/*.c and *.h, collects `#include "folder/file"`
-- edges between folders, and fails (exit 1, one line per problem) when a
-- folder includes one it may not (a lower layer reaching up), when the
-- folder graph has a cycle, or when csrc/core names a device (the core knows
-- no backend).  --dot prints the folder graph for Graphviz instead.
--
-- Inside a folder files share one header, so the include graph cannot show
-- which file needs which; the object files can.  With --objects DIR (a
-- build's obj/ folder) the check also reads each DIR/<folder>/*.o's symbols
-- with nm (a file needs the file that defines a symbol it leaves undefined)
-- and fails on a cycle between the files of M.acyclic's folders.
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

-- Folders whose files must not need each other in a cycle (object level).
M.acyclic = {"vulkan", "lua", "tokenize"}

-- Words that only a device backend may say.
M.device_words = {"vulkan", "bert_vk_", "vk%.h", "VkDevice", "BERT_STORAGE_VULKAN"}

-- Depth-first search of graph[node] = {other = ...} from each of nodes in
-- turn; report(path, other, node) for each edge that closes a cycle.
function M.cycles(nodes, graph, report)
  local state = {}
  local function visit(node, stack)
    state[node] = "open"
    stack[#stack + 1] = node
    local others = {}
    for o in pairs(graph[node] or {}) do others[#others + 1] = o end
    table.sort(others)
    for _, other in ipairs(others) do
      if state[other] == "open" then report(stack, other, node)
      elseif not state[other] then visit(other, stack) end
    end
    stack[#stack] = nil
    state[node] = "done"
  end
  for _, n in ipairs(nodes) do if not state[n] then visit(n, {}) end end
end

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
  local names = {}
  for k in pairs(edges) do names[#names + 1] = k end
  table.sort(names)
  M.cycles(names, edges, function(path, other)
    problems[#problems + 1] = "cycle between folders: " .. table.concat(path, " -> ") .. " -> " .. other
  end)
  return edges, problems
end

-- The "needs" graph of the object files of one folder: {file = {other = symbol}};
-- only objects whose source srcdir/NAME.c still exists (a build keeps stale ones).
function M.object_graph(objdir, srcdir)
  local defined, needs = {}, {}
  local files = {}
  for _, f in ipairs(list(objdir, "%.o$")) do
    local src = io.open(srcdir .. "/" .. f:gsub("%.o$", ".c"))
    if src then src:close() files[#files + 1] = f end
  end
  for _, file in ipairs(files) do
    needs[file] = {}
    local p = io.popen('nm "' .. objdir .. "/" .. file .. '" 2>/dev/null')
    for line in p:lines() do
      local kind, sym = line:match("^%x*%s+(%a)%s+(%S+)$")
      if kind == "U" then needs[file][sym] = true
      elseif kind and kind:match("[TDBRC]") then defined[sym] = file end
    end
    p:close()
  end
  local graph = {}
  for _, file in ipairs(files) do
    graph[file] = {}
    for sym in pairs(needs[file]) do
      local other = defined[sym]
      if other and other ~= file and not graph[file][other] then graph[file][other] = sym end
    end
  end
  return graph, files
end

-- Cycles between the object files of each acyclic folder under objroot:
-- problems, one line per cycle found (depth-first, each closing edge once).
function M.object_cycles(objroot, folders, root)
  local problems = {}
  for _, folder in ipairs(folders or M.acyclic) do
    local graph, files = M.object_graph(objroot .. "/" .. folder, (root or "csrc") .. "/" .. folder)
    M.cycles(files, graph, function(path, other, node)
      problems[#problems + 1] = string.format("cycle between the files of csrc/%s: %s -> %s (%s)", folder,
        table.concat(path, " -> "), other, graph[node][other])
    end)
  end
  return problems
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
  local dot, root, objects = false, nil, nil
  local i = 1
  while arg[i] do
    local a = arg[i]
    if a == "--help" or a == "-h" then
      print("usage: lua5.4 tools/include_graph.lua [--dot] [--objects BUILD/obj] [ROOT]\n" ..
        "Checks the include graph of csrc/ between folders against the layers; --dot prints it for Graphviz;\n" ..
        "--objects also checks that the files of csrc/{" .. table.concat(M.acyclic, ",") .. "} need each other " ..
        "in no cycle (nm on the build's object files).")
      os.exit(0)
    end
    if a == "--dot" then dot = true
    elseif a == "--objects" then i = i + 1 objects = arg[i]
    else root = a end
    i = i + 1
  end
  local edges, problems = M.scan(root)
  if dot then print(M.dot(edges)) os.exit(0) end
  if objects then for _, p in ipairs(M.object_cycles(objects, nil, root)) do problems[#problems + 1] = p end end
  for _, p in ipairs(problems) do io.stderr:write(p, "\n") end
  if #problems > 0 then os.exit(1) end
  print("csrc include graph: layered, no cycle between folders")
end

return M
