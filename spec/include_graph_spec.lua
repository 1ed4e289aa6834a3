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

describe("csrc object files", function()
  it("need each other in no cycle inside csrc/vulkan, csrc/lua and csrc/tokenize", function()
    local build = os.getenv("BERT_BUILD") or "build"
    assert.same({}, graph.object_cycles(build .. "/obj"))
  end)

  it("report a cycle between two files of a folder, naming the symbol", function()
    local root = tree({["tokenize/a.c"] = "int b(void);\nint a(void) { return b(); }\n",
                       ["tokenize/b.c"] = "int a(void);\nint b(void) { return 1 + a(); }\n",
                       ["tokenize/c.c"] = "int a(void);\nint c(void) { return a(); }\n"})
    os.execute(string.format('mkdir -p "%s/obj/tokenize"', root))
    for _, f in ipairs({"a", "b", "c"}) do
      assert(os.execute(string.format('cc -c "%s/tokenize/%s.c" -o "%s/obj/tokenize/%s.o"', root, f, root, f)))
    end
    local problems = graph.object_cycles(root .. "/obj", {"tokenize"}, root)
    os.execute('rm -rf "' .. root .. '"')
    assert.equals(1, #problems, table.concat(problems, "\n"))
    assert.truthy(problems[1]:find("cycle between the files of csrc/tokenize: a.o -> b.o -> a.o (a)", 1, true), problems[1])
  end)
end)
