-- The layers of csrc/ (tools/include_graph.lua): the real tree passes, and
-- the check catches a lower layer reaching up, a cycle, and a device named
-- in the core.
local graph = dofile("tools/include_graph.lua")

local function tree(files)
  local root = os.tmpname()
  os.remove(root)
  for path, text in pairs(files) do
    local dir = root .. "/" .. path:match("^(.*)/")
    os.execute('mkdir -p "' .. dir .. '"')
    local f = assert(io.open(root .. "/" .. path, "w"))
    f:write(text)
    f:close()
  end
  return root
end

describe("csrc include graph", function()
  it("is layered with no cycle between folders", function()
    local edges, problems = graph.scan("csrc")
    assert.same({}, problems)
    assert.truthy(edges.cpu.core)
    assert.is_nil(edges.core.vulkan)
    assert.is_nil(edges.core.cpu)
  end)

  it("reports a lower layer including a higher one", function()
    local root = tree({["core/tensor.c"] = '#include "vulkan/vk.h"\n', ["vulkan/vk.h"] = "\n"})
    local _, problems = graph.scan(root)
    os.execute('rm -rf "' .. root .. '"')
    assert.truthy(table.concat(problems, "\n"):find("core/tensor.c:1: core includes vulkan", 1, true))
  end)

  it("reports a cycle between folders", function()
    local root = tree({["cpu/a.c"] = '#include "vulkan/b.h"\n', ["vulkan/b.h"] = '#include "cpu/a.h"\n',
                       ["cpu/a.h"] = "\n"})
    local _, problems = graph.scan(root)
    os.execute('rm -rf "' .. root .. '"')
    assert.truthy(table.concat(problems, "\n"):find("cycle between folders", 1, true))
  end)

  it("reports a device named in the core's code", function()
    local root = tree({["core/autograd.c"] = "int f(void) { return bert_vk_sync(); }\n"})
    local _, problems = graph.scan(root)
    os.execute('rm -rf "' .. root .. '"')
    assert.truthy(table.concat(problems, "\n"):find("the core names a device", 1, true))
  end)
end)
