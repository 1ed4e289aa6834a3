-- Builds a SYNTHETIC SQuAD-format span-extraction set from corpus
-- sentences (there is no SQuAD on these machines):
--
--   lua5.4 tools/make_synthetic_qa.lua [--corpus data/brown/docs.jsonl | FILE.txt]
--          [--out data/synthetic_qa] [--version-2] [--seed N]
--
-- Contexts are runs of 3-12 consecutive sentences of one document; each
-- question is one of the context's sentences with a span (a run of proper
-- nouns or numbers, else a noun) replaced by "what"; the answer is that
-- span at its character position in the context.  With --version-2 about a
-- third of the questions come from a sentence of another document and have
-- no answer (is_impossible).  Train/dev/test are split by document.  The
-- JSON's "metadata" says "synthetic": true.  experiments/finetune_qa.lua
-- --task synthetic-qa writes the same files on first use.
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath

local cli = require("bert.cli")
local gen = require("bert.finetune.synthetic_qa")
local tasks = require("bert.finetune.tasks")

local p = cli.parser("make_synthetic_qa.lua", "Generate a SYNTHETIC cloze-style extractive QA set (SQuAD format).")
p:option("--corpus", "data/brown/docs.jsonl (tagged documents) or a text file with one sentence per line",
  "data/brown/docs.jsonl")
p:option("--out", "Output directory (train.json, dev.json, test.json)")
p:flag("--version-2", "SQuAD v2.0: add unanswerable questions")
p:option("--seed", "Random seed", tostring(tasks.SPLIT_SEED)):convert(cli.integer("--seed", 0))
p:option("--questions-per-context", "Questions per context", "2"):convert(cli.integer("--questions-per-context", 1, 1000))
local args = p:parse()

local out = args.out or (args.version_2 and "data/synthetic_qa_v2" or "data/synthetic_qa")
local docs
local ok, err = pcall(function()
  if args.corpus:match("%.jsonl$") then
    local dir, rel = args.corpus:match("^(.*)/(brown/docs%.jsonl)$")
    if dir then
      docs = tasks.brown_docs(dir)
    else
      -- any JSONL of {"id", "sentences": [[[word, tag], ...] or [word, ...], ...]}
      local util = require("bert.finetune.util")
      docs = {}
      for line in io.lines(args.corpus) do
        if line:match("%S") then docs[#docs + 1] = assert(util.decode_json(line)) end
      end
    end
  else
    docs = gen.docs_from_text(args.corpus)
  end
end)
if not ok then
  io.stderr:write("make_synthetic_qa: ", tostring(err), "\n")
  os.exit(1)
end

local set = gen.generate(docs, {version_2 = args.version_2, seed = args.seed,
  questions_per_context = args.questions_per_context})
gen.write(out, set, {version_2 = args.version_2})

local function count(list)
  local n, none = #list, 0
  for _, ex in ipairs(list) do if ex.is_impossible then none = none + 1 end end
  return n, none
end
print("SYNTHETIC data, not SQuAD: " .. gen.DESCRIPTION)
for _, split in ipairs({"train", "dev", "test"}) do
  local n, none = count(set[split])
  print(string.format("  %s/%s.json: %d questions%s", out, split, n,
    args.version_2 and string.format(" (%d unanswerable)", none) or ""))
end
local ex = set.train[1]
if ex then
  print(string.format("  e.g. Q: %s\n       A: %s", ex.question, ex.answers[1] and ex.answers[1].text or "(none)"))
end
