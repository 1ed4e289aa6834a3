-- Dependencies by need: `make test` and `make demo` install only what they
-- use (tools/deps.sh test, demo), `make deps` everything; a spec that needs
-- an optional tool skips, pending with the command that installs it, where
-- the tool is missing (spec/support/optional.lua).  tools/deps.sh runs here
-- against a stand-in dpkg-query, apt-get, npm and luarocks that only record
-- what they were asked to do.
local optional = require("spec.support.optional")
local tmpdir = require("spec.support.tmpdir")

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function sh(cmd)
  local f = io.popen(cmd .. " 2>&1")
  local out = f:read("a")
  local ok, _, code = f:close()
  return out, ok and 0 or code
end

local function write(path, text, mode)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  if mode then assert(os.execute("chmod " .. mode .. " " .. q(path))) end
end


local BUILD = {"lua5.4", "liblua5.4-dev", "lua-busted", "lua-cjson", "lua-argparse", "libopenblas-dev",
               "libutf8proc-dev", "pkg-config", "gcc", "make"}

describe("tools/deps.sh", function()
  -- a copy of the script in a tree of its own (no .deps), and stand-ins on PATH
  local root, bin, log
  before_each(function()
    root = tmpdir.dir()
    bin, log = root .. "/bin", root .. "/calls.log"
    assert(os.execute(string.format("mkdir -p %s/tools %s && cp tools/deps.sh %s/tools/", q(root), q(bin), q(root))))
    -- dpkg-query lists as installed the packages named in $INSTALLED and, as
    -- the real one does on a fresh machine for a package it has never heard
    -- of, complains about the others and exits 1
    write(bin .. "/dpkg-query", [[#!/bin/sh
status=0
for p in "$@"; do
  case "$p" in -*) continue ;; esac
  case " $INSTALLED " in
    *" $p "*) printf '%s:installed ' "$p" ;;
    *) echo "dpkg-query: no packages found matching $p" >&2; status=1 ;;
  esac
done
exit $status
]], "+x")
    for _, tool in ipairs({"apt-get", "npm", "luarocks", "sudo"}) do
      write(bin .. "/" .. tool, "#!/bin/sh\necho " .. tool .. ' "$@" >> ' .. q(log) .. "\n", "+x")
    end
  end)
  after_each(function() os.execute("rm -rf " .. q(root)) end)

  local function deps(set, installed)
    local out, code = sh(string.format("cd %s && PATH=%s:$PATH INSTALLED=%s sh tools/deps.sh %s", q(root), q(bin),
      q(table.concat(installed, " ")), set))
    return out, code, require("bert.fs").read_file(log) or ""
  end

  it("test: does nothing, quietly, when the packages it needs are there, though the optional ones are not", function()
    local out, code, calls = deps("test", BUILD)
    assert.equal(0, code, out)
    assert.equal("", out)
    assert.equal("", calls)
  end)

  it("test: installs only the missing packages it needs, and no npm package", function()
    local out, code, calls = deps("test", {"lua5.4", "gcc", "make"})
    assert.equal(0, code, out)
    assert.matches("apt-get install -y -qq --no-install-recommends liblua5.4-dev lua-busted", calls, 1, true)
    assert.is_nil(calls:find("npm", 1, true), calls)
    assert.is_nil(calls:find("nodejs", 1, true), calls)
    assert.is_nil(calls:find("gnuplot", 1, true), calls)
  end)

  it("demo: the data fetcher's tools and gnuplot, not the npm packages it does not use", function()
    local out, code, calls = deps("demo", BUILD)
    assert.equal(0, code, out)
    assert.matches("--no-install-recommends curl xz-utils unzip gnuplot-nox\n", calls, 1, true)
    assert.is_nil(calls:find("npm", 1, true), calls)
  end)

  it("all (make deps): every package and both npm packages", function()
    local out, code, calls = deps("all", {})
    assert.equal(0, code, out)
    for _, p in ipairs({"gnuplot-nox", "openmpi-bin", "mesa-vulkan-drivers", "nodejs", "sentencepiece"}) do
      assert.matches(" " .. p:gsub("%-", "%%-") .. "[ \n]", calls)
    end
    assert.matches("npm install --prefix " .. root .. "/.deps/node", calls, 1, true)
    assert.matches("npm install --prefix " .. root .. "/.deps/tok", calls, 1, true)
    assert.matches("onnxruntime-node\n", calls, 1, true)
    assert.matches("@anush008/tokenizers\n", calls, 1, true)
  end)

  it("installs one optional npm package by name, as the pending specs say", function()
    local _, code, calls = deps("onnxruntime-node", {"nodejs"})
    assert.equal(0, code)
    assert.matches("^npm install .*onnxruntime%-node\n$", calls)
    local out, bad = deps("nonsense", {})
    assert.equal(2, bad)
    assert.matches("deps: unknown set 'nonsense'", out, 1, true)
  end)
end)

describe("make", function()
  it("test and demo ask tools/deps.sh for their own sets; deps, test-all and CI=true for everything", function()
    -- CI's own CI=true would make every target ask for everything: unset unless the case sets it
    local function dry(target, env) return (sh("env -u CI " .. (env or "") .. " make -n " .. target .. " | grep 'tools/deps.sh'")) end
    assert.equal("sh tools/deps.sh test\n", dry("test"))
    assert.equal("sh tools/deps.sh demo\n", dry("demo"))
    assert.equal("sh tools/deps.sh all\n", dry("deps"))
    assert.equal("sh tools/deps.sh all\n", dry("test-all"))
    assert.equal("sh tools/deps.sh all\n", dry("test", "CI=true"))
  end)
end)

describe("a spec whose optional tool is missing", function()
  -- busted on one spec file in a subprocess: the summary line and the output
  local function busted(env, file)
    local out = sh(string.format("%s OMP_NUM_THREADS=1 lua5.4 /usr/bin/busted -o plainTerminal %s", env, file))
    local ok, failures, errors, pending = out:match("(%d+) success%a* / (%d+) failures? / (%d+) errors? / (%d+) pending")
    assert(ok, out)
    return tonumber(failures) + tonumber(errors), tonumber(pending), out
  end

  it("names the tool and the command that installs it", function()
    local empty = tmpdir.dir()
    local function missing(...)
      local names = {}
      for i, n in ipairs({...}) do names[i] = string.format("%q", n) end
      return (sh(string.format("PATH=%s \"$(command -v lua5.4)\" -e 'package.path = \"./?.lua;\" .. package.path; " ..
        "io.write(tostring(require(\"spec.support.optional\").missing(%s)))'", q(empty), table.concat(names, ", "))))
    end
    assert.equal("gnuplot is not installed: skipped (install: sudo apt-get install gnuplot-nox)", missing("gnuplot"))
    assert.equal("node is not installed: skipped (install: sudo apt-get install nodejs)", missing("node", "gnuplot"))
    assert.equal("nil", (sh("lua5.4 -e 'package.path = \"./?.lua;\" .. package.path; " ..
      "io.write(tostring(require(\"spec.support.optional\").missing(\"sha256sum\")))'")))
    os.execute("rm -rf " .. q(empty))
  end)

  for _, case in ipairs({
    {"spec/onnx_spec.lua", "BERT_NODE_MODULES=/nonexistent",
     "onnxruntime-node is not installed: skipped (install: sh tools/deps.sh onnxruntime-node)"},
    {"spec/tokenizer_hf_spec.lua", "BERT_TOK_NODE_MODULES=/nonexistent",
     "@anush008/tokenizers is not installed: skipped (install: sh tools/deps.sh tokenizers)"},
    {"spec/plot_spec.lua", {"gnuplot"}, "gnuplot is not installed: skipped (install: sudo apt-get install gnuplot-nox)"},
  }) do
    local file, env, says = case[1], case[2], case[3]
    it(file .. " skips, pending: " .. says, function()
      local path = type(env) == "table" and optional.path_without(env)
      local bad, pending, out = busted(path and "PATH=" .. q(path) or env, file)
      if path then os.execute("rm -rf " .. q(path)) end
      assert.equal(0, bad, out)
      assert.is_true(pending >= 1, out)
      assert.matches(says, out, 1, true)
    end)
  end
end)
