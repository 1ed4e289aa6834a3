-- A tiny training run for the kill-and-resume spec:
--   lua5.4 spec/support/resume_run.lua OUTPUT_DIR STEPS [resume]
-- Batches are a pure function of the batch index (the loader state), so a
-- resumed run must reproduce every loss of an uninterrupted one.
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local bert = require("bert")

local out, steps, resume = arg[1], tonumber(arg[2]), arg[3] == "resume"
bert.manual_seed(7)
local model = bert.model("BertForPreTraining", {
  vocab_size = 60, hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 2,
  intermediate_size = 64, max_position_embeddings = 16,
})
local opt = bert.optim.AdamW(model, {lr = 1e-3})
local index = 0
local function next_batch()
  index = index + 1
  local ids = bert.randint(1, 60, {4, 12}, {seed = 1000 + index})
  local labels = bert.where(bert.rand({4, 12}, {seed = 2000 + index}):lt(0.2), ids, -100):int()
  labels:set(ids:get(1, 2), 1, 2)   -- at least one target per batch
  return {input_ids = ids, attention_mask = bert.ones({4, 12}, "int32"), labels = labels,
          next_sentence_label = bert.randint(0, 2, {4}, {seed = 3000 + index})}
end
local trainer = bert.train.Trainer{
  model = model, optimizer = opt, next_batch = next_batch, steps = steps, output = out,
  save_every = 2, log_every = 1, clip = 1.0, progress = false,
  schedule = bert.optim.schedule{kind = "linear", warmup = 3, total = steps, lr = 1e-3},
  get_state = function() return {index = index} end,
  set_state = function(s) index = s.index end,
}
if resume then assert(trainer:resume(), "nothing to resume") end
-- slow the run down a little so the spec can kill it mid-way
trainer.forward = function(m, b) os.execute("sleep 0.05") return m:forward(b) end
trainer:run()
