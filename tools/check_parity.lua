-- Compares our BERT with the PyTorch peer on a fixture directory written by
-- tools/gen_parity_fixtures.py, printing the largest differences:
--   python3 tools/gen_parity_fixtures.py ../shared/peer /tmp/parity-base --size base --vocab 30522 --max-pos 512 --batch 2 --seq 64
--   lua5.4 tools/check_parity.lua /tmp/parity-base
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
require("bert.cli").help(arg, [[
usage: lua5.4 tools/check_parity.lua FIXTURE_DIR
Compares our BERT with the PyTorch peer on fixtures written by tools/gen_parity_fixtures.py.]])
local bert = require("bert")

local dir = arg[1] or error("usage: lua5.4 tools/check_parity.lua FIXTURE_DIR")
local io_t = assert(bert.load_safetensors(dir .. "/io.safetensors"))
for _, k in ipairs({"input_ids", "token_type_ids", "attention_mask", "labels", "next_sentence_label"}) do
  io_t[k] = io_t[k]:int()
end
local model = bert.from_pretrained(dir)
model:evaluate()
local inputs = {input_ids = io_t.input_ids, token_type_ids = io_t.token_type_ids, attention_mask = io_t.attention_mask}
local out = bert.no_grad(function() return model:forward(inputs) end)
local keep = io_t.attention_mask:float():unsqueeze(3)
local function diff(a, b) return (a - b):abs():max():item() end
local report = {
  last_hidden_state = diff(out.last_hidden_state * keep, io_t.last_hidden_state * keep),
  pooler_output = diff(out.pooler_output, io_t.pooler_output),
  prediction_logits = diff(out.prediction_logits * keep, io_t.prediction_logits * keep),
  seq_relationship_logits = diff(out.seq_relationship_logits, io_t.seq_relationship_logits),
}
inputs.labels, inputs.next_sentence_label = io_t.labels, io_t.next_sentence_label
model:zero_grad()
local o = model:forward(inputs)
report.loss = math.abs(o.loss:item() - io_t.loss:item())
o.loss:backward()
local params = {}
for _, np in ipairs(model:named_parameters()) do params[np.name] = np.param end
local worst_rel, worst_name = 0, nil
for name, expected in pairs(io_t) do
  local pname = name:match("^grad%.(.*)$")
  if pname then
    local rel = diff(params[pname]:grad(), expected) / math.max(expected:abs():max():item(), 1e-12)
    if rel > worst_rel then worst_rel, worst_name = rel, pname end
  end
end
print(string.format("max abs error: last_hidden_state %.2e, pooler_output %.2e, prediction_logits %.2e, seq_relationship_logits %.2e; loss %.2e",
  report.last_hidden_state, report.pooler_output, report.prediction_logits, report.seq_relationship_logits, report.loss))
print(string.format("gradients: worst relative error %.2e (%s)", worst_rel, tostring(worst_name)))
local ok = report.last_hidden_state < 1e-4 and report.pooler_output < 1e-4 and report.prediction_logits < 1e-4
  and report.seq_relationship_logits < 1e-4 and worst_rel < 1e-3
print(ok and "PASS" or "FAIL")
os.exit(ok and 0 or 1)
