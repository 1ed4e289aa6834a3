package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path; package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
-- Predictions from a fine-tuned model (a run directory of
-- experiments/finetune_*.lua, its best/, or any directory with a
-- config.json of a fine-tuned head): the label with its probabilities, the
-- tags per word, or the answer span.  `--help` lists the flags.
--
--   lua5.4 experiments/predict.lua --model runs/finetune/spam-checkpoint --text "WIN a FREE cruise!!!"
--   lua5.4 experiments/predict.lua --model runs/ft-pos --text "The jury said it was pleased ."
--   lua5.4 experiments/predict.lua --model runs/ft-qa --question "Who wrote it ?" --context "..."
--   lua5.4 experiments/predict.lua --model runs/ft-spam --file mails.txt --json   # one text per line
local argparse = require("argparse")
local bert = require("bert")
local finetune = require("bert.finetune")
local util = require("bert.finetune.util")

local p = argparse("predict.lua", "Predict with a fine-tuned BERT model (classification, tagging or QA).")
p:option("--model", "Fine-tuned model: a run directory (its best/ is used) or a model directory"):args(1)
p:option("--tokenizer", "Tokenizer file or directory (default: next to the model)")
p:option("--text", "Text to classify or tag (words split on spaces for tagging)")
p:option("--text-pair", "Second text of a sentence pair (classification)")
p:option("--question", "Question (QA; --text works too)")
p:option("--context", "Context passage (QA); --context @FILE reads a file")
p:option("--file", "Predict for every line of a file (QA: JSON lines {\"question\", \"context\"})")
p:option("--seq-len", "Maximum sequence length (default: as in training)"):convert(tonumber)
p:option("--top", "Labels (classification) or n-best answers (QA) to show", "3"):convert(tonumber)
p:option("--device", "cpu or vulkan", "cpu"):choices({"cpu", "vulkan"})
p:option("--threads", "CPU threads"):convert(tonumber)
p:flag("--json", "Print one JSON object per prediction")
-- accepted for symmetry with the training scripts
p:option("--task", "Ignored: the task comes from the model's config.json")
local args = p:parse()

local function die(msg) io.stderr:write("predict.lua: ", tostring(msg), "\n") os.exit(1) end
if not args.model then die("--model DIR is required") end
if args.threads then bert.set_num_threads(math.tointeger(args.threads)) end

local ok, pipe = pcall(finetune.pipeline, args.model, {tokenizer = args.tokenizer,
  max_length = args.seq_len and math.tointeger(args.seq_len)})
if not ok then die(pipe) end
if args.device == "vulkan" then
  if not pipe.model.to then die("--device vulkan: this build has no Vulkan support") end
  pipe.model:to("vulkan")
end

local function read_arg(v)
  if v and v:sub(1, 1) == "@" then
    local text, err = util.read_file(v:sub(2))
    if not text then die("cannot read " .. v:sub(2) .. ": " .. tostring(err)) end
    return text
  end
  return v
end

local inputs = {}
if args.file then
  local text, err = util.read_file(args.file)
  if not text then die("cannot read " .. args.file .. ": " .. tostring(err)) end
  local n = 0
  for line in text:gmatch("[^\n]+") do
    n = n + 1
    if pipe.kind == "qa" then
      local obj = util.decode_json(line)
      if type(obj) ~= "table" then die(args.file .. ":" .. n .. ": expected a JSON object {\"question\", \"context\"}") end
      inputs[#inputs + 1] = {question = obj.question, context = obj.context, id = obj.id}
    else
      inputs[#inputs + 1] = {text = line}
    end
  end
elseif pipe.kind == "qa" then
  local question = args.question or args.text
  if not (question and args.context) then die("this is a QA model: give --question (or --text) and --context") end
  inputs[1] = {question = question, context = read_arg(args.context)}
else
  if not args.text then die("give --text (or --file)") end
  inputs[1] = {text = read_arg(args.text), text_pair = read_arg(args.text_pair)}
end

local top = math.tointeger(args.top) or 3
for _, input in ipairs(inputs) do
  local okp, r = pcall(pipe.predict, pipe, input)
  if not okp then die(r) end
  if args.json then
    local out = {}
    if pipe.kind == "classification" then
      out = {label = r.label, score = r.score, probabilities = {}}
      for _, lp in ipairs(r.probabilities) do out.probabilities[tostring(lp.label)] = lp.p end
    elseif pipe.kind == "tagging" then
      out = {words = r.words, tags = r.tags}
    else
      out = {answer = r.answer, start = r.start, stop = r.stop, score = r.score, no_answer = r.no_answer, id = input.id}
    end
    print(util.json(out))
  elseif pipe.kind == "classification" then
    local parts = {}
    for i = 1, math.min(top, #r.probabilities) do
      parts[#parts + 1] = string.format("%s %.4f", tostring(r.probabilities[i].label), r.probabilities[i].p)
    end
    print(string.format("%s\t(%s)", tostring(r.label), table.concat(parts, ", ")))
  elseif pipe.kind == "tagging" then
    local parts = {}
    for i, w in ipairs(r.words) do parts[i] = w .. "/" .. tostring(r.tags[i]) end
    print(table.concat(parts, " "))
  else
    if r.no_answer then
      print("(no answer)")
    else
      print(string.format("%s\t(characters %d-%d, probability %.4f, %d window%s)", r.answer, r.start, r.stop,
        r.score, r.windows, r.windows == 1 and "" or "s"))
    end
    for i = 2, math.min(top, #r.nbest) do
      print(string.format("  #%d %s (%.4f)", i, r.nbest[i].text, r.nbest[i].probability))
    end
  end
end
