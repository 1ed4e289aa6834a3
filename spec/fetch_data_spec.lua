-- tools/fetch_data.sh, the evaluation sets: a mirror archive unpacked and
-- checked against the checksum list, a damaged or missing one refused with
-- nothing left in the data folder, a download through a file:// base with
-- the XTREME conversions.  Every fixture is made here (tiny archives, a
-- checksum list of their own through BERT_DATA_SHA256), so the spec needs
-- neither the network nor ../shared/data.
local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function sh(cmd)
  local f = io.popen(cmd .. " 2>&1")
  local out = f:read("a")
  local ok, _, code = f:close()
  return out, ok and 0 or code
end

local function has(cmd) return (sh("command -v " .. cmd)) ~= "" end

local function write(path, text)
  assert(os.execute("mkdir -p " .. q(path:match("^(.*)/"))))
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function sha256(path) return (sh("sha256sum < " .. q(path))):match("^(%x+)") end

local function sha256_of(text)
  local tmp = os.tmpname()
  write(tmp, text)
  local h = sha256(tmp)
  os.remove(tmp)
  return h
end

local function listing(dir) return (sh("ls -A " .. q(dir))) end

describe("tools/fetch_data.sh", function()
  local root = os.tmpname()
  os.remove(root)
  local sums = root .. "/data_sha256.txt"
  local mirror = root .. "/mirror"
  local squad = '{"data": [], "version": "1.1"}\n'
  local n = 0
  local function fresh_dir()     -- an empty data folder for one run
    n = n + 1
    local d = root .. "/data" .. n
    assert(os.execute("mkdir -p " .. q(d)))
    return d
  end
  -- Runs the fetcher with its data folder in `data`, the fixtures' checksum
  -- list, and `env` ("VAR=value ..."), the mirror and base variables cleared.
  local function fetch(data, args, env)
    return sh(string.format("env -u BERT_DATA_MIRROR -u BERT_FETCH_BASE BERT_DATA=%s BERT_DATA_SHA256=%s %s sh tools/fetch_data.sh %s",
      q(data), q(sums), env or "", args))
  end
  local function make_archive(dir, folder, files)   -- dir/folder.tar.xz holding folder/files
    local src = root .. "/src-" .. folder .. "-" .. dir:gsub("%W", "")
    for name, text in pairs(files) do write(src .. "/" .. folder .. "/" .. name, text) end
    assert(os.execute(string.format("mkdir -p %s && tar cJf %s/%s.tar.xz -C %s %s", q(dir), q(dir), folder, q(src), folder)))
  end

  -- PAWS-X as released (id, sentence1, sentence2, label; a header; CRLF)
  -- and what XTREME's utils_preprocess.py makes of it.
  local paws_in = "id\tsentence1\tsentence2\tlabel\r\n" ..
    '1\tHe said "hi" twice.\tHe said hi.\t1\r\n' ..
    "2\t  padded\u{a0} \tNS\t0  \r\n" ..
    "3\tA\tB\t1"
  local paws_out = '"He said ""hi"" twice."\tHe said hi.\t1\r\n' .. "padded\tNS\t0\r\n" .. "A\tB\t1\r\n"
  -- XNLI-1.0/xnli.dev.tsv (18 columns, languages interleaved) and XTREME's files.
  local function xnli_row(lang, label, s1, s2)
    return table.concat({lang, label, "(a)", "(b)", "(a)", "(b)", s1, s2, "1", "2", "fiction",
      label, "", "", "", "", "a", "b"}, "\t") .. "\n"
  end
  local xnli_in = "language\tgold_label\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t" ..
    "sentence2_parse\tsentence1\tsentence2\tpromptID\tpairID\tgenre\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\t" ..
    "sentence1_tokenized\tsentence2_tokenized\n" ..
    xnli_row("en", "contradictory", 'The "cat" sat.', "A dog sat. ") ..
    xnli_row("de", "entailment", "Ein Hund.", "Ein Tier.") ..
    xnli_row("en", "neutral", "One.", "Two.")
  local xnli_en = '"The ""cat"" sat."\tA dog sat.\tcontradiction\r\n' .. "One.\tTwo.\tneutral\r\n"
  local xnli_de = "Ein Hund.\tEin Tier.\tentailment\r\n"

  setup(function()
    assert(os.execute("mkdir -p " .. q(mirror)))
    write(sums, table.concat({
      sha256_of(squad) .. "  squad/dev-v1.1.json",
      string.rep("0", 64) .. "  wnut17/README.md",
      sha256_of(paws_out) .. "  pawsx/dev-en.tsv",
      sha256_of(xnli_de) .. "  xnli/dev-de.tsv",
      sha256_of(xnli_en) .. "  xnli/dev-en.tsv",
    }, "\n") .. "\n")
    if has("xz") then
      make_archive(mirror, "squad-v1.1", {["dev-v1.1.json"] = squad, ["SOURCE.txt"] = "made by the spec\n"})
    end
  end)
  teardown(function() os.execute("rm -rf " .. q(root)) end)

  local function need(...)
    for _, cmd in ipairs({...}) do
      if not has(cmd) then pending(require("spec.support.optional").missing(cmd)); return false end
    end
    return true
  end

  it("answers --help with its usage, naming every set", function()
    local out, code = sh("sh tools/fetch_data.sh --help")
    assert.equal(0, code)
    for _, name in ipairs({"glue", "blimp", "squad", "wnut17", "ud", "xnli", "pawsx", "english", "--mirror"}) do
      assert.truthy(out:find(name, 1, true), name .. " missing from:\n" .. out)
    end
  end)

  it("refuses an unknown name with its usage and exit status 2", function()
    local out, code = sh("sh tools/fetch_data.sh no-such-set")
    assert.equal(2, code)
    assert.matches("no%-such%-set", out)
    assert.matches("usage", out)
  end)

  it("unpacks a mirror archive into data/NAME, the file's hash checked, then finds it up to date", function()
    if not need("xz", "sha256sum") then return end
    local d = fresh_dir()
    local out, code = fetch(d, "--mirror " .. q(mirror) .. " squad")
    assert.equal(0, code, out)
    assert.equal(squad, read(d .. "/squad/dev-v1.1.json"))
    assert.equal(sha256_of(squad), sha256(d .. "/squad/dev-v1.1.json"))
    assert.equal("made by the spec\n", read(d .. "/squad/SOURCE.txt"))
    assert.equal("squad\n", listing(d))          -- no staging folder left
    out, code = fetch(d, "--mirror " .. q(mirror) .. " squad")
    assert.equal(0, code, out)
    assert.matches("squad: up to date", out)
  end)

  it("takes the mirror from BERT_DATA_MIRROR, and fetches a changed set again", function()
    if not need("xz", "sha256sum") then return end
    local d = fresh_dir()
    local out, code = fetch(d, "squad", "BERT_DATA_MIRROR=" .. q(mirror))
    assert.equal(0, code, out)
    write(d .. "/squad/dev-v1.1.json", squad .. "edited\n")
    out, code = fetch(d, "squad", "BERT_DATA_MIRROR=" .. q(mirror))
    assert.equal(0, code, out)
    assert.matches("differs", out)
    assert.equal(squad, read(d .. "/squad/dev-v1.1.json"))
    assert.equal("squad\n", listing(d))
  end)

  it("refuses a file whose hash differs, naming it and both hashes, and writes nothing", function()
    if not need("xz", "sha256sum") then return end
    local bad = root .. "/mirror-bad"
    local changed = squad:gsub("1%.1", "1.2")       -- one byte changed
    make_archive(bad, "squad-v1.1", {["dev-v1.1.json"] = changed})
    local d = fresh_dir()
    local out, code = fetch(d, "--mirror " .. q(bad) .. " squad")
    assert.is_not.equal(0, code)
    assert.matches("squad/dev%-v1%.1%.json", out)
    assert.truthy(out:find(sha256_of(squad), 1, true), out)
    assert.truthy(out:find(sha256_of(changed), 1, true), out)
    assert.truthy(out:find(bad .. "/squad-v1.1.tar.xz", 1, true), out)
    assert.equal("", listing(d))
  end)

  it("refuses an archive with a damaged byte and writes nothing", function()
    if not need("xz") then return end
    local bad = root .. "/mirror-flipped"
    assert(os.execute("mkdir -p " .. q(bad)))
    local bytes = read(mirror .. "/squad-v1.1.tar.xz")
    local at = #bytes // 2
    write(bad .. "/squad-v1.1.tar.xz", bytes:sub(1, at - 1) .. string.char((bytes:byte(at) + 1) % 256) .. bytes:sub(at + 1))
    local d = fresh_dir()
    local out, code = fetch(d, "--mirror " .. q(bad) .. " squad")
    assert.is_not.equal(0, code, out)
    assert.matches("squad", out)
    assert.equal("", listing(d))
  end)

  it("names the archive a mirror lacks, and a mirror folder that does not exist", function()
    local d = fresh_dir()
    local out, code = fetch(d, "--mirror " .. q(mirror) .. " wnut17")
    assert.is_not.equal(0, code)
    assert.truthy(out:find(mirror .. "/wnut17.tar.xz", 1, true), out)
    out, code = fetch(d, "--mirror " .. q(root .. "/nowhere") .. " wnut17")
    assert.is_not.equal(0, code)
    assert.truthy(out:find(root .. "/nowhere", 1, true), out)
    assert.equal("", listing(d))
  end)

  it("downloads through a file:// base (BERT_FETCH_BASE): SQuAD as released, PAWS-X converted as XTREME does", function()
    if not need("curl", "sha256sum") then return end
    local base = root .. "/base"
    write(base .. "/rajpurkar.github.io/SQuAD-explorer/dataset/dev-v1.1.json", squad)
    write(base .. "/x-final/en/dev_2k.tsv", paws_in)
    assert(os.execute(string.format("mkdir -p %s/storage.googleapis.com/paws/pawsx && tar czf %s/storage.googleapis.com/paws/pawsx/x-final.tar.gz -C %s x-final",
      q(base), q(base), q(base))))
    local d = fresh_dir()
    local out, code = fetch(d, "squad pawsx", "BERT_FETCH_BASE=file://" .. q(base))
    assert.equal(0, code, out)
    assert.equal(squad, read(d .. "/squad/dev-v1.1.json"))
    assert.equal(paws_out, read(d .. "/pawsx/dev-en.tsv"))
    assert.matches("converting x%-final/en/dev_2k%.tsv", out)   -- the conversion is announced
    assert.truthy(read(d .. "/squad/SOURCE.txt"):find("file://" .. base, 1, true))
    assert.equal("pawsx\nsquad\n", listing(d))
  end)

  it("converts XNLI-1.0's xnli.dev.tsv into XTREME's per-language files", function()
    if not need("curl", "sha256sum", "zip", "unzip") then return end
    local base = root .. "/base-xnli"
    write(base .. "/XNLI-1.0/xnli.dev.tsv", xnli_in)
    assert(os.execute(string.format("mkdir -p %s/dl.fbaipublicfiles.com/XNLI && cd %s && zip -qr dl.fbaipublicfiles.com/XNLI/XNLI-1.0.zip XNLI-1.0",
      q(base), q(base))))
    local d = fresh_dir()
    local out, code = fetch(d, "xnli", "BERT_FETCH_BASE=file://" .. q(base))
    assert.equal(0, code, out)
    assert.equal(xnli_en, read(d .. "/xnli/dev-en.tsv"))
    assert.equal(xnli_de, read(d .. "/xnli/dev-de.tsv"))
  end)

  it("names the URL and the mirror options when a download fails, and writes nothing", function()
    if not need("curl") then return end
    local d = fresh_dir()
    local out, code = fetch(d, "squad", "BERT_FETCH_BASE=file://" .. q(root .. "/offline"))
    assert.is_not.equal(0, code)
    assert.truthy(out:find(root .. "/offline/rajpurkar.github.io/SQuAD-explorer/dataset/dev-v1.1.json", 1, true), out)
    assert.matches("%-%-mirror", out)
    assert.matches("BERT_DATA_MIRROR", out)
    assert.equal("", listing(d))
  end)

  it("has a checksum list covering every evaluation set's files", function()
    local list = assert(read("tools/data_sha256.txt"))
    local count, blimp = {}, 0
    for line in list:gmatch("[^\n]+") do
      local hash, path = line:match("^(%x+)  (%S+)$")
      assert.is_truthy(hash and #hash == 64, "malformed line: " .. line)
      local set = path:match("^([^/]+)/")
      count[set] = (count[set] or 0) + 1
      if path:find("^blimp/data/.*%.jsonl$") then blimp = blimp + 1 end
    end
    assert.equal(67, blimp)
    for _, p in ipairs({"glue/CoLA/train.tsv", "glue/MRPC/dev.tsv", "glue/QNLI/dev.tsv", "blimp/models_summary.jsonl",
                        "squad/dev-v1.1.json", "wnut17/emerging.test.annotated",
                        "ud/UD_English-EWT/en_ewt-ud-test.conllu", "xnli/dev-sw.tsv", "pawsx/dev-zh.tsv"}) do
      assert.truthy(list:find("  " .. p .. "\n", 1, true), p .. " is not listed")
    end
    assert.same({glue = 14, blimp = 68, squad = 1, wnut17 = 4, ud = 20, xnli = 15, pawsx = 7}, count)
  end)
end)
