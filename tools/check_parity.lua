-- Compares our model with a reference on a fixture directory written by
-- tools/gen_parity_fixtures.py (BERT: the PyTorch peer; other families:
-- tools/parity_refs.py), printing the largest differences:
--   python3 tools/gen_parity_fixtures.py ../shared/peer /tmp/parity-base --size base --vocab 30522 --max-pos 512 --batch 2 --seq 64
--   python3 tools/gen_parity_fixtures.py ../shared/peer /tmp/parity-albert --family albert
--   lua5.4 tools/check_parity.lua /tmp/parity-base
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
require("bert.cli").help(arg, [[
usage: lua5.4 tools/check_parity.lua FIXTURE_DIR
Compares our BERT with the PyTorch peer on fixtures written by tools/gen_parity_fixtures.py.]])
local bert = require("bert")

local dir = arg[1] or error("usage: lua5.4 tools/check_parity.lua FIXTURE_DIR")
local io_t = assert(bert.load_safetensors(dir .. "/io.safetensors"))
for _, k in ipairs({"input_ids", "token_type_ids", "attention_mask", "labels", "next_sentence_label", "sentence_order_label"}) do
  if io_t[k] then io_t[k] = io_t[k]:int() end
end
local model, info = bert.from_pretrained(dir)
model:evaluate()
local inputs = {input_ids = io_t.input_ids, token_type_ids = io_t.token_type_ids, attention_mask = io_t.attention_mask}
local out = bert.no_grad(function() return model:forward(inputs) end)
local keep = io_t.attention_mask:float()
local function diff(a, b) return (a - b):abs():max():item() end
-- every output the fixture holds that this class produces; per-token ones on real tokens only
local report, ok = {}, true
for _, k in ipairs({"last_hidden_state", "pooler_output", "prediction_logits", "seq_relationship_logits",
                    "sop_logits", "logits"}) do
  if io_t[k] and out[k] then
    local a, b = out[k], io_t[k]
    if a:dim() >= 2 and a:size(1) == keep:size(1) and a:size(2) == keep:size(2) then
      local m = a:dim() == 3 and keep:unsqueeze(3) or keep
      a, b = a * m, b * m
    end
    local d = diff(a, b)
    report[#report + 1] = string.format("%s %.2e", k, d)
    ok = ok and d < 1e-4
  end
end
inputs.labels, inputs.next_sentence_label, inputs.sentence_order_label =
  io_t.labels, io_t.next_sentence_label, io_t.sentence_order_label
model:zero_grad()
local o = model:forward(inputs)
local loss_err = math.abs(o.loss:item() - io_t.loss:item())
o.loss:backward()
local params = model:state_dict()
local worst_rel, worst_name, n = 0, nil, 0
for name, expected in pairs(io_t) do
  local pname = name:match("^grad%.(.*)$")
  if pname and params[pname] then
    -- key biases have a zero gradient (softmax ignores a constant per row): an absolute floor
    local rel = diff(params[pname]:grad(), expected) / math.max(expected:abs():max():item(), 1e-3)
    n = n + 1
    if rel > worst_rel then worst_rel, worst_name = rel, pname end
  end
end
print(string.format("%s: max abs error: %s; loss %.2e", info.architecture, table.concat(report, ", "), loss_err))
print(string.format("gradients of %d weights: worst relative error %.2e (%s)", n, worst_rel, tostring(worst_name)))
ok = ok and loss_err < 1e-4 and worst_rel < 1e-3
print(ok and "PASS" or "FAIL")
os.exit(ok and 0 or 1)
