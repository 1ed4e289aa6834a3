-- Float to int32 conversion: truncation toward zero, saturation at the
-- int32 range, NaN to 0, as docs/api.md states (issue 30 item 9).
local bert = require("bert")

describe("float to int32", function()
  it("truncates, saturates and sends NaN to 0", function()
    local t = bert.tensor({1e30, -1e30, 0 / 0, 2.7, -2.7, 1 / 0, -1 / 0, 2147483520})
    assert.same({2147483647, -2147483648, 0, 2, -2, 2147483647, -2147483648, 2147483520}, t:int():totable())
    local dst = bert.zeros({8}, "int32")
    dst:copy_(t)
    assert.same(t:int():totable(), dst:totable())
  end)
end)
