--- bert.finetune.synthetic_qa: a SYNTHETIC SQuAD-format span-extraction
-- set built from corpus sentences.  It is not SQuAD and says so in its
-- metadata: there is no SQuAD on these machines.
--
-- Contexts are runs of 3 to 12 consecutive sentences of one document (the
-- longer ones need several windows at a short max_length).  A question is
-- cloze-style: one sentence of the context with a span (a run of proper
-- nouns or numbers, else a noun; chosen by the Brown tags, or by shape
-- when the corpus has no tags) replaced by "what", ending in "?".  The
-- answer is that span, at its character position in the context.  For
-- v2.0 about a third of the questions are made from a sentence of another
-- document and have no answer in the context (is_impossible).
local util = require("bert.finetune.util")
local normalize = require("bert.finetune.metrics").normalize_answer

local M = {}

-- Bumped whenever the generator's output changes: cached files of another
-- version are rebuilt by the synthetic-qa task.
M.VERSION = 2

M.DESCRIPTION = "SYNTHETIC cloze-style extractive QA generated from corpus sentences: each question is a " ..
  "sentence of the context with a span replaced by 'what'; the answer is that span. Not SQuAD."

local function is_punct(w) return not w:find("[%w]") end

-- Candidate answer spans of a sentence: {first, last} word indices.
local function candidates(words, tags)
  local strong, weak = {}, {}
  local i = 1
  local function tag(k) return tags and tags[k] and tags[k]:lower() or nil end
  local function strong_word(k)
    local t = tag(k)
    if t then return (t:match("^np") or t:match("^cd")) and not is_punct(words[k]) end
    local w = words[k]
    return k > 1 and (w:match("^%u%l") or w:match("^%d[%d,.]*$")) ~= nil
  end
  local function weak_word(k)
    local t = tag(k)
    if t then return (t:match("^nns?$") or t:match("^nns?%-")) ~= nil and #words[k] >= 3 end
    return #words[k] >= 5 and words[k]:match("^%l+$") ~= nil
  end
  -- an answer that normalises to nothing ("A", "The") would read as "no answer"
  local function scorable(a, b)
    local parts = {}
    for k = a, b do parts[#parts + 1] = words[k] end
    return normalize(table.concat(parts, " ")) ~= ""
  end
  while i <= #words do
    if strong_word(i) then
      local j = i
      while j + 1 <= #words and strong_word(j + 1) and j - i < 2 do j = j + 1 end
      if scorable(i, j) then strong[#strong + 1] = {i, j} end
      i = j + 1
    else
      if weak_word(i) and scorable(i, i) then weak[#weak + 1] = {i, i} end
      i = i + 1
    end
  end
  return #strong > 0 and strong or weak
end

-- A question from a sentence and a span: the span replaced by "what".
local function question_of(words, span)
  local q = {}
  for k = 1, #words do
    if k == span[1] then q[#q + 1] = "what"
    elseif k < span[1] or k > span[2] then q[#q + 1] = words[k] end
  end
  while #q > 0 and is_punct(q[#q]) do q[#q] = nil end
  return table.concat(q, " ") .. " ?"
end

local function usable(words) return #words >= 6 and #words <= 40 end

local function sentence_parts(s)
  local words, tags = {}, nil
  for i, wt in ipairs(s) do
    if type(wt) == "table" then
      words[i] = wt[1]
      tags = tags or {}
      tags[i] = wt[2]
    else
      words[i] = wt
    end
  end
  return words, tags
end

-- Examples of one split's documents.
local function build(docs, rng, opts, prefix)
  local examples = {}
  local all_sentences = {}   -- for unanswerable questions: {doc index, words, tags}
  for di, d in ipairs(docs) do
    for _, s in ipairs(d.sentences) do
      local w, t = sentence_parts(s)
      if usable(w) then all_sentences[#all_sentences + 1] = {di, w, t} end
    end
  end
  local qn = 0
  for di, d in ipairs(docs) do
    local i = 1
    while i <= #d.sentences do
      local n = opts.min_sentences + rng:int(opts.max_sentences - opts.min_sentences + 1) - 1
      local sents = {}
      for k = i, math.min(i + n - 1, #d.sentences) do sents[#sents + 1] = d.sentences[k] end
      i = i + n
      if #sents >= math.min(opts.min_sentences, 2) then
        -- the context: sentences joined by spaces; each word's character start
        local parts, starts, at = {}, {}, 0
        local sw, st = {}, {}
        for si, s in ipairs(sents) do
          local words, tags = sentence_parts(s)
          sw[si], st[si], starts[si] = words, tags, {}
          for wi, w in ipairs(words) do
            starts[si][wi] = at
            parts[#parts + 1] = w
            at = at + util.char_len(w) + 1
          end
        end
        local context = table.concat(parts, " ")
        local title = tostring(d.id)
        local picked = {}
        for _ = 1, opts.questions_per_context do
          local unanswerable = opts.version_2 and rng:float() < opts.unanswerable_fraction
          if unanswerable and #all_sentences > 1 then
            -- a sentence from another document
            local other
            for _ = 1, 20 do
              local c = all_sentences[rng:int(#all_sentences)]
              if c[1] ~= di then other = c break end
            end
            if other then
              local cands = candidates(other[2], other[3])
              if #cands > 0 then
                local span = cands[rng:int(#cands)]
                qn = qn + 1
                examples[#examples + 1] = {id = prefix .. qn, title = title, context = context,
                  question = question_of(other[2], span), answers = {}, is_impossible = true}
              end
            end
          else
            local order = {}
            for si = 1, #sents do if usable(sw[si]) and not picked[si] then order[#order + 1] = si end end
            if #order > 0 then
              local si = order[rng:int(#order)]
              picked[si] = true
              local cands = candidates(sw[si], st[si])
              if #cands > 0 then
                local span = cands[rng:int(#cands)]
                local words = {}
                for k = span[1], span[2] do words[#words + 1] = sw[si][k] end
                local text = table.concat(words, " ")
                local start = starts[si][span[1]]
                qn = qn + 1
                examples[#examples + 1] = {id = prefix .. qn, title = title, context = context,
                  question = question_of(sw[si], span), answers = {{text = text, answer_start = start}},
                  is_impossible = false}
              end
            end
          end
        end
      end
    end
  end
  return examples
end

--- Generates {train, dev, test, metadata} from documents ({id, sentences =
-- {{{word, tag}, ...} or {word, ...}, ...}}), split by document.  opts:
-- version_2, seed, questions_per_context (2), min_sentences (3),
-- max_sentences (12), unanswerable_fraction (1/3), split = {train, dev,
-- test} lists of documents (else a seeded 80/10/10 document split per genre).
function M.generate(docs, opts)
  opts = opts or {}
  local o = {
    version_2 = opts.version_2 == true, seed = opts.seed or 20181011,
    questions_per_context = opts.questions_per_context or 2,
    min_sentences = opts.min_sentences or 3, max_sentences = opts.max_sentences or 12,
    unanswerable_fraction = opts.unanswerable_fraction or (1 / 3),
  }
  local tr, dv, te
  if opts.split then
    tr, dv, te = opts.split[1], opts.split[2], opts.split[3]
  else
    local tasks = require("bert.finetune.tasks")
    if docs[1] and docs[1].genre then tr, dv, te = tasks.brown_split(docs, o.seed)
    else tr, dv, te = tasks.split(docs, {0.8, 0.1, 0.1}, o.seed) end
  end
  local out = {
    train = build(tr, util.rng(o.seed + 1), o, "train-"),
    dev = build(dv, util.rng(o.seed + 2), o, "dev-"),
    test = build(te, util.rng(o.seed + 3), o, "test-"),
  }
  out.metadata = {
    synthetic = true, description = M.DESCRIPTION, generator = "tools/make_synthetic_qa.lua",
    generator_version = M.VERSION,
    version_2 = o.version_2, seed = o.seed, unanswerable_fraction = o.version_2 and o.unanswerable_fraction or 0,
  }
  return out
end

--- Writes train.json, dev.json, test.json (SQuAD format) into dir.
function M.write(dir, set, opts)
  opts = opts or {}
  local bert_core = require("bert.core")
  local ok, err = bert_core.mkdir(dir)
  if not ok then error("synthetic_qa.write: " .. tostring(err), 2) end
  local readers = require("bert.finetune.readers")
  for _, split in ipairs({"train", "dev", "test"}) do
    local meta = {}
    for k, v in pairs(set.metadata or {}) do meta[k] = v end
    meta.split = split
    local wrote, werr = readers.write_squad(dir .. "/" .. split .. ".json", set[split],
      {version_2 = opts.version_2, metadata = meta})
    if not wrote then error("synthetic_qa.write: " .. tostring(werr), 2) end
  end
  return true
end

--- Documents from a plain text file, one sentence per line (words split
-- on spaces), grouped into pseudo-documents of `lines_per_doc` lines.
function M.docs_from_text(path, lines_per_doc)
  lines_per_doc = lines_per_doc or 40
  local docs, cur = {}, nil
  local n = 0
  for line in io.lines(path) do
    local words = {}
    for w in line:gmatch("%S+") do words[#words + 1] = w end
    if #words > 0 then
      if not cur or #cur.sentences >= lines_per_doc then
        n = n + 1
        cur = {id = "doc" .. n, sentences = {}}
        docs[#docs + 1] = cur
      end
      cur.sentences[#cur.sentences + 1] = words
    end
  end
  return docs
end

return M
