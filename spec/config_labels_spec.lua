-- A config.json whose num_labels disagrees with its id2label: id2label
-- wins with a warning, as Hugging Face's PretrainedConfig (before: a shape
-- error naming neither).
local bert = require("bert")
local cjson = require("cjson")
local checkpoint = require("bert.checkpoint")
local tmpdir = require("spec.support.tmpdir").dir

describe("num_labels against id2label", function()
  it("lets id2label win and says so", function()
    local d = tmpdir()
    local m = bert.model("BertForSequenceClassification", "tiny", {num_labels = 2, id2label = {["0"] = "neg", ["1"] = "pos"}})
    assert(checkpoint.save_pretrained(m, d))
    local f = assert(io.open(d .. "/config.json"))
    local cfg = cjson.decode(f:read("a"))
    f:close()
    cfg.num_labels = 3
    f = assert(io.open(d .. "/config.json", "w"))
    f:write(cjson.encode(cfg))
    f:close()
    local err_file = d .. "/stderr"
    local code = string.format([[package.path = './lua/?.lua;./lua/?/init.lua;' .. package.path
      package.cpath = './%s/?.so;' .. package.cpath
      local m = require('bert.checkpoint').from_pretrained('%s')
      io.write(m.config.num_labels)]], os.getenv("BERT_BUILD") or "build", d)
    local p = io.popen("lua5.4 -e \"" .. code .. "\" 2>" .. err_file)
    local out = p:read("a")
    p:close()
    assert.equals("2", out)
    local err = assert(io.open(err_file)):read("a")
    assert.truthy(err:find("num_labels 3 disagrees with id2label's 2 labels: id2label wins", 1, true), err)
  end)
end)
