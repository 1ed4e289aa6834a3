-- Writes the unlabeled text of a fine-tuning task's split as a pretraining
-- corpus in BERT's plain format (a sentence per line, a blank line between
-- documents), optionally after other corpora: domain-adaptive pretraining
-- ("Don't Stop Pretraining", Gururangan et al. 2020) without touching the
-- dev and test text.
--
--   lua5.4 tools/task_corpus.lua --task spam [--split train] [--add data/brown.txt]
--          --output data/brown_spam_train.txt
--   lua5.4 experiments/pretrain.lua --corpus data/brown_spam_train.txt ...
--
-- Classification examples become one document each (text, then text_pair),
-- split into sentences; tagging sentences are joined into one document per
-- 50 sentences; QA contexts become documents.  The file is written to a
-- temporary name and renamed.
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath

local cli = require("bert.cli")
local corpus = require("bert.data.corpus")
local tasks = require("bert.finetune.tasks")

local p = cli.parser("task_corpus.lua", "Write a fine-tuning task's text (one split) as a pretraining corpus.")
p:option("--task", "Task name (spam, brown-genre, brown-pos, synthetic-qa) or a path as the fine-tuning scripts take it"):count(1)
p:option("--kind", "For a path: classification, tagging or qa"):choices({"classification", "tagging", "qa"})
p:option("--split", "Which split's text to write", "train"):choices({"train", "dev", "test"})
p:option("--add", "A plain-format corpus to put first (repeatable)"):count("*")
p:option("--data-dir", "Where the built-in tasks' data live", "data")
p:option("--output", "Output file"):count(1)
local args = p:parse()

local docs = {}
for _, path in ipairs(args.add) do
  local d, err = corpus.read(path)
  if not d then io.stderr:write("task_corpus: --add ", path, ": ", tostring(err), "\n") os.exit(1) end
  for _, doc in ipairs(d) do docs[#docs + 1] = doc end
end
local n_added = #docs

local ok, task = pcall(tasks.load, args.task, {data_dir = args.data_dir, kind = args.kind})
if not ok then io.stderr:write("task_corpus: ", tostring(task), "\n") os.exit(1) end
local examples = task[args.split]

local function add_text(doc, text)
  if type(text) ~= "string" then return end
  for _, s in ipairs(corpus.split_sentences(text)) do doc[#doc + 1] = s end
end

if task.kind == "classification" then
  for _, ex in ipairs(examples) do
    local doc = {}
    add_text(doc, ex.text)
    add_text(doc, ex.text_pair)
    if #doc > 0 then docs[#docs + 1] = doc end
  end
elseif task.kind == "tagging" then
  local doc = {}
  for _, s in ipairs(examples) do
    doc[#doc + 1] = table.concat(s.words, " ")
    if #doc == 50 then docs[#docs + 1] = doc; doc = {} end
  end
  if #doc > 0 then docs[#docs + 1] = doc end
else   -- qa: the contexts, each once
  local seen = {}
  for _, ex in ipairs(examples) do
    if ex.context and not seen[ex.context] then
      seen[ex.context] = true
      local doc = {}
      add_text(doc, ex.context)
      if #doc > 0 then docs[#docs + 1] = doc end
    end
  end
end

local wok, err = corpus.write(args.output, docs)
if not wok then io.stderr:write("task_corpus: ", args.output, ": ", tostring(err), "\n") os.exit(1) end
local sentences = 0
for _, d in ipairs(docs) do sentences = sentences + #d end
print(string.format("task_corpus: %s (%s split of %s, %d documents after %d added) -> %s: %d documents, %d sentences",
  args.task, args.split, task.name, #docs - n_added, n_added, args.output, #docs, sentences))
