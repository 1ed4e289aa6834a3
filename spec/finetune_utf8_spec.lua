-- A fine-tuning file in Latin-1: the error names the file, line and byte,
-- and suggests what works (converting it), not a flag the fine-tuning
-- scripts do not take (issue 30 item 8).
local readers = require("bert.finetune.readers")
local tmpdir = require("spec.support.tmpdir").dir

describe("a fine-tuning file that is not UTF-8", function()
  it("is refused with the conversion to make, without --allow-invalid-utf8", function()
    local path = tmpdir() .. "/latin1.tsv"
    local f = assert(io.open(path, "wb"))
    f:write("text\tlabel\ncaf\233 good\t1\nbad one\t0\n")
    f:close()
    local ok, err = pcall(readers.read_classification, path)
    assert.is_false(ok)
    assert.truthy(err:find(path .. ":2: invalid UTF-8 (byte 0xE9 at column 4)", 1, true), err)
    assert.truthy(err:find("iconv -f latin1 -t utf-8", 1, true), err)
    assert.is_nil(err:find("--allow-invalid-utf8", 1, true))
  end)
end)
