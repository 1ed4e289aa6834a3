-- Predictions from a model directory: a pretraining checkpoint fills
-- [MASK]s (fill-mask) or gives sentence embeddings (feature-extraction); a
-- fine-tuned run (experiments/finetune_*.lua: the run directory, its best/,
-- or any directory with a fine-tuned head) gives the label with its
-- probabilities, the tags per word, or the answer span.  From Lua:
-- bert.pipeline(task, dir).
--
--   lua5.4 experiments/predict.lua --model runs/demo/checkpoint --text "The [MASK] sat on the mat."
--   lua5.4 experiments/predict.lua --model runs/demo/checkpoint --task feature-extraction --text "..." --json
--   lua5.4 experiments/predict.lua --model runs/finetune/spam-checkpoint --text "WIN a FREE cruise!!!"
--   lua5.4 experiments/predict.lua --model runs/ft-pos --text "The jury said it was pleased ."
--   lua5.4 experiments/predict.lua --model runs/ft-qa --question "Who wrote it ?" --context "..."
--   lua5.4 experiments/predict.lua --model runs/ft-spam --file mails.txt --json   # one text per line
--   lua5.4 experiments/predict.lua --model runs/ft-spam --file mails.txt --int8   # int8 linear layers
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cli = require("bert.cli")

local p = cli.parser("predict.lua", "Predict with a BERT model: fill-mask or embeddings from a pretraining " ..
  "checkpoint; classification, tagging or QA from a fine-tuned one.")
p:option("--model", "Model directory (a run directory's best/ or checkpoint/ is used)"):count(1)
p:option("--task", "What to do (default: fill-mask for a pretraining checkpoint, else the fine-tuned task)")
  :choices({"fill-mask", "feature-extraction", "text-classification", "token-classification", "question-answering"})
cli.add(p, "tokenizer", {help = "Tokenizer file or directory (default: the one with the model)"})
p:option("--text", "Text to fill, embed, classify or tag (words split on spaces for tagging); @FILE reads a file")
p:option("--text-pair", "Second text of a sentence pair (classification)")
p:option("--question", "Question (QA; --text works too)")
p:option("--context", "Context passage (QA); --context @FILE reads a file")
p:option("--file", "Predict for every line of a file (QA: JSON lines {\"question\", \"context\"})")
p:option("--seq-len", "Maximum sequence length (default: as in training)"):convert(cli.integer("--seq-len", 8))
p:option("--top", "Tokens (fill-mask), labels (classification) or n-best answers (QA) to show", "5")
  :convert(cli.integer("--top", 1))
p:option("--pooling", "feature-extraction: mean or cls", "mean"):choices({"mean", "cls"})
p:flag("--normalize", "feature-extraction: unit-length embeddings")
cli.add(p, "batch_size", {default = 32, help = "Inputs per forward pass"}, "device", "threads")
p:flag("--int8", "Run every linear layer in int8 (dynamic quantisation, CPU only; see bert.quantize)")
p:flag("--json", "Print one JSON object per prediction")
local args = p:parse()

cli.main("predict.lua", function()
  local bert = require("bert")
  local finetune = require("bert.finetune")
  local util = require("bert.finetune.util")
  if args.threads then bert.set_num_threads(args.threads) end

  local dir = finetune.model_dir(args.model)
  if not dir then error("--model: " .. args.model .. " holds no config.json (nor best/ or checkpoint/)", 0) end
  -- the task the model was trained for (its head); every model gives embeddings
  local config, cerr = require("bert.models.config").read_json(dir .. "/config.json")
  if not config then error(tostring(cerr), 0) end
  local kinds = {classification = "text-classification", tagging = "token-classification", qa = "question-answering"}
  local own
  for _, a in ipairs(config.architectures or {}) do
    if finetune.kinds[a] then own = kinds[finetune.kinds[a]] end
    if a:find("ForPreTraining$") or a:find("ForMaskedLM$") then own = "fill-mask" end
  end
  local task = args.task or own or "feature-extraction"
  if task ~= own and task ~= "feature-extraction" then
    error(string.format("--task %s: %s is a %s model, for %sfeature-extraction", task, dir,
      table.concat(config.architectures or {"bare encoder"}, ", "), own and (own .. " and ") or ""), 0)
  end
  if args.int8 and args.device == "vulkan" then error("--int8 runs on the CPU: drop --device vulkan", 0) end
  local pipe = bert.pipeline(task, dir, {tokenizer = args.tokenizer, max_length = args.seq_len,
    batch_size = args.batch_size, int8 = args.int8})
  if args.device == "vulkan" then
    if not pipe.model.to then error("--device vulkan: this build has no Vulkan support", 0) end
    pipe.model:to("vulkan")
  end

  local function read_arg(v)
    if v and v:sub(1, 1) == "@" then
      local text, err = util.read_file(v:sub(2))
      if not text then error("cannot read " .. v:sub(2) .. ": " .. tostring(err), 0) end
      return text
    end
    return v
  end

  local inputs = {}
  if args.file then
    local text, err = util.read_file(args.file)
    if not text then error("cannot read " .. args.file .. ": " .. tostring(err), 0) end
    local n = 0
    for line in text:gmatch("[^\n]+") do
      n = n + 1
      if task == "question-answering" then
        local obj = util.decode_json(line)
        if type(obj) ~= "table" then error(args.file .. ":" .. n .. ": expected a JSON object {\"question\", \"context\"}", 0) end
        inputs[#inputs + 1] = {question = obj.question, context = obj.context, id = obj.id}
      else
        inputs[#inputs + 1] = line
      end
    end
  elseif task == "question-answering" then
    local question = args.question or args.text
    if not (question and args.context) then error("this is a QA model: give --question (or --text) and --context", 0) end
    inputs[1] = {question = question, context = read_arg(args.context)}
  else
    if not args.text then error("give --text (or --file)", 0) end
    inputs[1] = read_arg(args.text)
  end
  if task == "text-classification" then
    for i, x in ipairs(inputs) do inputs[i] = {text = x, text_pair = read_arg(args.text_pair)} end
  end

  local top = args.top
  if task == "fill-mask" then
    local results = pipe(inputs, {top_k = top})
    for i, r in ipairs(results) do
      local masks = r[1] and r[1].token and {r} or r
      if args.json then
        print(util.json({text = inputs[i], masks = masks}))
      else
        print(inputs[i])
        for m, list in ipairs(masks) do
          if #masks > 1 then print(string.format("  mask %d:", m)) end
          for _, c in ipairs(list) do print(string.format("  %-16s %.4f   %s", c.token_str, c.score, c.sequence)) end
        end
      end
    end
    return
  end
  if task == "feature-extraction" then
    local e = pipe:embed(inputs, {pooling = args.pooling, normalize = args.normalize})
    for i, row in ipairs(e:totable()) do
      if args.json then
        print(util.json({text = inputs[i], embedding = row}))
      else
        local head = {}
        for j = 1, math.min(6, #row) do head[j] = string.format("%.4f", row[j]) end
        local norm = 0
        for _, v in ipairs(row) do norm = norm + v * v end
        print(string.format("%s\n  %d-dim %s embedding, norm %.4f: [%s, ...]", inputs[i], #row, args.pooling,
          math.sqrt(norm), table.concat(head, ", ")))
      end
    end
    return
  end
  for _, input in ipairs(inputs) do
    local r = pipe(input)
    if args.json then
      local out
      if task == "text-classification" then
        out = {label = r.label, score = r.score, probabilities = {}}
        for _, lp in ipairs(r.probabilities) do out.probabilities[tostring(lp.label)] = lp.p end
      elseif task == "token-classification" then
        out = {words = r.words, tags = r.tags}
      else
        out = {answer = r.answer, start = r.start, stop = r.stop, score = r.score, no_answer = r.no_answer, id = input.id}
      end
      print(util.json(out))
    elseif task == "text-classification" then
      local parts = {}
      for i = 1, math.min(top, #r.probabilities) do
        parts[#parts + 1] = string.format("%s %.4f", tostring(r.probabilities[i].label), r.probabilities[i].p)
      end
      print(string.format("%s\t(%s)", tostring(r.label), table.concat(parts, ", ")))
    elseif task == "token-classification" then
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
end)
