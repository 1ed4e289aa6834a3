--- bert.finetune.readers: data files for fine-tuning.  Every problem in a
-- file is an error that names the file and the line:
--   data.tsv:17: label 'foo' is not in the label set {neg, pos}
--   x.jsonl:3: invalid JSON (Expected value but found invalid token at character 1)
--   squad.json:42: question 'q7': answer 'Paris' at answer_start 10 does not match its context (found 'Lyon,')
--
-- Classification (TSV or JSONL): text[, text_pair], label.
-- CoNLL column format: word ... tag, blank lines between sentences.
-- CoNLL-U (Universal Dependencies): FORM and UPOS.
-- SQuAD v1.1 / v2.0 JSON.
local util = require("bert.finetune.util")

local M = {}

local function fail(path, line, fmt, ...)
  local where = line and (path .. ":" .. line) or path
  error(where .. ": " .. string.format(fmt, ...), 0)
end
M.fail = fail

-- Labels and texts end up in config.json and reports: the file must be
-- UTF-8 without NUL bytes (bert.data.validate names the line).
local function open_text(path)
  local text, err = util.read_file(path)
  if not text then error(path .. ": cannot read (" .. tostring(err) .. ")", 0) end
  if text:sub(1, 3) == "\239\187\191" then text = text:sub(4) end   -- UTF-8 BOM
  local ok, verr = require("bert.data.validate").text(text, path, {offer_repair = false})
  if not ok then error(verr, 0) end
  return text
end

-- A JSON array (cjson decodes arrays and objects alike to tables): keys
-- 1..n and nothing else.
local function is_list(v)
  if type(v) ~= "table" then return false end
  local n = 0
  for _ in pairs(v) do n = n + 1 end
  return n == #v
end

-- Lines with their numbers; a final line without "\n" counts, "\r" is dropped.
local function lines(text)
  local pos, n = 1, 0
  return function()
    if pos > #text then return nil end
    local stop = text:find("\n", pos, true)
    local line
    if stop then line = text:sub(pos, stop - 1) pos = stop + 1 else line = text:sub(pos) pos = #text + 1 end
    n = n + 1
    return n, (line:gsub("\r$", ""))
  end
end
M.lines = lines

local function label_string(v)
  if math.type(v) == "float" and v == math.floor(v) and math.abs(v) < 2^53 then return tostring(math.tointeger(v)) end
  if type(v) == "number" or type(v) == "boolean" then return tostring(v) end
  return v
end

-- Checks a label against an optional set; returns the label.
local function check_label(path, line, label, set, set_list)
  if set and not set[label] then
    fail(path, line, "label '%s' is not in the label set %s", tostring(label), util.format_set(set_list))
  end
  return label
end

local function label_lookup(labels)
  if not labels then return nil end
  local set = {}
  for _, l in ipairs(labels) do set[l] = true end
  return set
end

-- {============================================================ classification

local TEXT_NAMES = {text = true, sentence = true, sentence1 = true, question = true, question1 = true,
  premise = true, ["#1 string"] = true, content = true}
local PAIR_NAMES = {text_pair = true, sentence2 = true, question2 = true, hypothesis = true,
  ["#2 string"] = true, pair = true}
local LABEL_NAMES = {label = true, labels = true, gold_label = true, quality = true, class = true}

local function pick_column(header, names, explicit)
  if explicit then
    if math.type(explicit) == "integer" then return explicit end
    for i, h in ipairs(header) do if h == explicit then return i end end
    return nil
  end
  for i, h in ipairs(header) do if names[h:lower()] then return i end end
  return nil
end

local function split_tabs(line)
  local cols = {}
  for c in (line .. "\t"):gmatch("([^\t]*)\t") do cols[#cols + 1] = c end
  return cols
end

--- Reads a classification file: TSV (a header naming the columns, e.g.
-- GLUE's `sentence\tlabel` or `sentence1\tsentence2\tlabel`, or no header:
-- `text\tlabel` / `text\ttext_pair\tlabel`) or JSON lines (keys text or
-- sentence/sentence1, text_pair or sentence2, label).  opts: labels (a
-- list: every label must be in it), format ("tsv" | "jsonl", else by
-- extension), text_column / pair_column / label_column (names or 1-based
-- indices), header (true/false: force), text_fields (JSONL: a list of
-- keys joined by newlines, e.g. {"subject", "body"}).
-- Returns a list of {text, text_pair, label, line}.
function M.read_classification(path, opts)
  opts = opts or {}
  local text = open_text(path)
  local format = opts.format or ((path:match("%.jsonl$") or path:match("%.json$") or path:match("%.ndjson$")) and "jsonl" or "tsv")
  local set = label_lookup(opts.labels)
  local out = {}
  if format == "jsonl" then
    local tkeys = opts.text_fields
    for n, line in lines(text) do
      if line:match("%S") then
        local obj, err = util.decode_json(line)
        if obj == nil then fail(path, n, "invalid JSON (%s)", tostring(err)) end
        if type(obj) ~= "table" then fail(path, n, "expected a JSON object") end
        local t, pair
        if tkeys then
          local parts = {}
          for _, k in ipairs(tkeys) do
            local v = obj[k]
            if type(v) == "string" and v ~= "" then parts[#parts + 1] = v end
          end
          t = table.concat(parts, "\n")
        else
          t = obj[opts.text_column or "text"] or obj.sentence or obj.sentence1 or obj.question
          pair = obj[opts.pair_column or "text_pair"] or obj.sentence2
        end
        local label = obj[opts.label_column or "label"]
        if label == nil or label == util.null then fail(path, n, "missing 'label'") end
        if type(t) ~= "string" then fail(path, n, "missing 'text' (a string)") end
        if pair == util.null then pair = nil end
        if pair ~= nil and type(pair) ~= "string" then fail(path, n, "'text_pair' must be a string") end
        if type(label) == "number" and (label ~= label or label == math.huge or label == -math.huge) then
          fail(path, n, "'label' %s is not a finite number (a number too large for JSON's doubles?)", tostring(label))
        end
        label = label_string(label)
        if type(label) ~= "string" then fail(path, n, "'label' must be a string or a number") end
        check_label(path, n, label, set, opts.labels)
        out[#out + 1] = {text = t, text_pair = pair, label = label, line = n, id = obj.id}
      end
    end
  else
    local decided, ti, pi, li = false, nil, nil, nil
    local function explicit(v, default)
      if math.type(v) == "integer" then return v end
      return default
    end
    for n, line in lines(text) do
      if line ~= "" then
        local cols = split_tabs(line)
        local is_header = false
        if not decided then
          decided = true
          local lower = {}
          for i, c in ipairs(cols) do lower[i] = c:lower() end
          local function named(v) return type(v) == "string" and v:lower() or nil end
          is_header = opts.header
          if is_header == nil then
            is_header = pick_column(lower, LABEL_NAMES, named(opts.label_column)) ~= nil
              and pick_column(lower, TEXT_NAMES, named(opts.text_column)) ~= nil
          end
          if is_header then
            ti = explicit(opts.text_column, pick_column(lower, TEXT_NAMES, named(opts.text_column)))
            pi = explicit(opts.pair_column, pick_column(lower, PAIR_NAMES, named(opts.pair_column)))
            li = explicit(opts.label_column, pick_column(lower, LABEL_NAMES, named(opts.label_column)))
            if not ti or not li then fail(path, n, "the header names no text or no label column") end
            if not pi then   -- QNLI-style: question, sentence
              for i, h in ipairs(lower) do
                if i ~= ti and i ~= li and TEXT_NAMES[h] then pi = i break end
              end
            end
          elseif #cols == 2 then
            ti, li = 1, 2
          elseif #cols == 3 then
            ti, pi, li = 1, 2, 3
          elseif not (opts.text_column and opts.label_column) then
            fail(path, n, "expected 2 columns (text, label) or 3 (text, text_pair, label), got %d", #cols)
          end
          if not is_header then
            ti = explicit(opts.text_column, ti)
            pi = explicit(opts.pair_column, pi)
            li = explicit(opts.label_column, li)
          end
        end
        if not is_header then
          local need = math.max(ti, li, pi or 0)
          if #cols < need then fail(path, n, "expected at least %d tab-separated columns, got %d", need, #cols) end
          local label = cols[li]
          if label == "" then fail(path, n, "empty label") end
          check_label(path, n, label, set, opts.labels)
          out[#out + 1] = {text = cols[ti], text_pair = pi and cols[pi] or nil, label = label, line = n}
        end
      end
    end
  end
  if #out == 0 then fail(path, nil, "no examples") end
  return out
end
-- }============================================================

-- {============================================================ CoNLL

-- Entity tags (a file with an "O" tag and B-/I-/E-/S- tags) must all be O
-- or PREFIX-TYPE.  The scheme, from opts.scheme or the extension (.iob1,
-- .iob2, .iobes; else only the tags' form is checked), fixes which
-- sequences are well formed: IOB2 opens every entity with B-X; IOB1 uses
-- B-X only right after an entity of type X; IOBES closes each with E-X
-- or S-X.
local SCHEMES = {iob1 = true, iob2 = true, iobes = true}

local function check_entity_tags(path, sentences, scheme)
  local has_o, has_prefix = false, false
  for _, s in ipairs(sentences) do
    for _, t in ipairs(s.tags) do
      if t == "O" then has_o = true elseif t:match("^[BIES]%-") then has_prefix = true end
    end
  end
  if not (has_o and has_prefix) and not scheme then return end
  for _, s in ipairs(sentences) do
    local prev, prev_type = "O", nil
    for i, t in ipairs(s.tags) do
      local line = s.lines[i]
      local prefix, ty = t:match("^([BIES])%-(.+)$")
      if t ~= "O" and not prefix then
        fail(path, line, "tag '%s' is neither O nor B-/I-/E-/S- followed by a type (the file uses entity tags)", t)
      end
      if t == "O" then prefix = "O" end
      local continues = (prev == "B" or prev == "I") and prev_type == ty
      if scheme == "iob2" and prefix == "I" and not continues then
        fail(path, line, "tag '%s' does not continue a B-%s or I-%s (IOB2 opens every entity with B-)", t, ty, ty)
      elseif scheme == "iob1" and prefix == "B" and not ((prev == "B" or prev == "I") and prev_type == ty) then
        fail(path, line, "tag '%s' does not follow an entity of type %s (IOB1 uses B- only between two)", t, ty)
      elseif scheme == "iob1" and (prefix == "E" or prefix == "S") then
        fail(path, line, "tag '%s': IOB1 has no E- or S- tags", t)
      elseif scheme == "iob2" and (prefix == "E" or prefix == "S") then
        fail(path, line, "tag '%s': IOB2 has no E- or S- tags", t)
      elseif scheme == "iobes" then
        if (prefix == "I" or prefix == "E") and not continues then
          fail(path, line, "tag '%s' does not continue a B-%s or I-%s (IOBES)", t, ty, ty)
        elseif (prefix == "B" or prefix == "S" or prefix == "O") and (prev == "B" or prev == "I") then
          fail(path, line, "tag '%s' follows an entity left open (IOBES closes each with E- or S-)", t)
        end
      end
      prev, prev_type = prefix, ty
    end
    if scheme == "iobes" and (prev == "B" or prev == "I") then
      fail(path, s.lines[#s.lines], "the sentence ends inside an entity (IOBES closes each with E- or S-)")
    end
  end
end

--- Reads the CoNLL column format: one token per line, `word ... tag`
-- (whitespace-separated columns, the word first and the tag last, or
-- opts.column), a blank line between sentences, `-DOCSTART-` lines
-- skipped.  opts.labels: every tag must be in it.  opts.scheme ("iob1",
-- "iob2", "iobes"; default from the extension): see check_entity_tags.
-- Returns a list of {words = {...}, tags = {...}, line = first line}.
function M.read_conll(path, opts)
  opts = opts or {}
  local text = open_text(path)
  local set = label_lookup(opts.labels)
  local scheme = opts.scheme or path:match("%.(iob[12])$") or path:match("%.(iobes)$")
  if scheme ~= nil and not SCHEMES[scheme] then
    error("read_conll: option 'scheme' must be 'iob1', 'iob2' or 'iobes', got " .. tostring(scheme), 2)
  end
  local out, words, tags, start, tag_lines = {}, {}, {}, nil, {}
  local function flush()
    if #words > 0 then out[#out + 1] = {words = words, tags = tags, line = start, source = path, lines = tag_lines} end
    words, tags, start, tag_lines = {}, {}, nil, {}
  end
  for n, line in lines(text) do
    if not line:match("%S") then
      flush()
    else
      local cols = {}
      for c in line:gmatch("%S+") do cols[#cols + 1] = c end
      if cols[1] == "-DOCSTART-" then
        flush()
      else
        if #cols < 2 then fail(path, n, "expected 'word ... tag' (at least 2 columns), got '%s'", line) end
        local tag = cols[opts.column or #cols]
        if tag == nil then fail(path, n, "no column %d", opts.column) end
        check_label(path, n, tag, set, opts.labels)
        start = start or n
        words[#words + 1] = cols[1]
        tags[#tags + 1] = tag
        tag_lines[#tag_lines + 1] = n
      end
    end
  end
  flush()
  if #out == 0 then fail(path, nil, "no sentences") end
  check_entity_tags(path, out, scheme)
  for _, s in ipairs(out) do s.lines = nil end
  return out
end

--- Writes sentences in the CoNLL format (word, gold tag[, predicted tag]).
function M.write_conll(path, sentences, predictions)
  local parts = {}
  for s, sent in ipairs(sentences) do
    for i, w in ipairs(sent.words) do
      local row = {w, sent.tags[i]}
      if predictions then row[3] = predictions[s][i] end
      parts[#parts + 1] = table.concat(row, " ")
    end
    parts[#parts + 1] = ""
  end
  return util.write_file(path, table.concat(parts, "\n") .. "\n")
end
-- }============================================================

--- Reads CoNLL-U (Universal Dependencies): sentences of {words (FORM),
-- tags (UPOS, or column opts.column), line, id (the `# sent_id`), text
-- (the `# text`)}.  Multiword-token lines (ID 1-2) and empty nodes (ID
-- 1.1) are skipped: the tags belong to the syntactic words.
function M.read_conllu(path, opts)
  opts = opts or {}
  local col = opts.column or 4
  local text = open_text(path)
  local out, cur = {}, nil
  local function flush()
    if cur and #cur.words > 0 then out[#out + 1] = cur end
    cur = nil
  end
  for n, line in lines(text) do
    if line == "" then
      flush()
    else
      cur = cur or {words = {}, tags = {}, line = n, source = path}
      if line:sub(1, 1) == "#" then
        local key, value = line:match("^#%s*([%w_]+)%s*=%s*(.-)%s*$")
        if key == "sent_id" then cur.id = value elseif key == "text" then cur.text = value end
      else
        local cols = split_tabs(line)
        if #cols ~= 10 then fail(path, n, "expected 10 tab-separated CoNLL-U columns, got %d", #cols) end
        local id = cols[1]
        if id:match("^%d+$") then
          if cols[col] == "" or cols[col] == "_" then fail(path, n, "word '%s' has no tag in column %d", cols[2], col) end
          cur.words[#cur.words + 1] = cols[2]
          cur.tags[#cur.tags + 1] = cols[col]
        elseif not (id:match("^%d+%-%d+$") or id:match("^%d+%.%d+$")) then
          fail(path, n, "bad CoNLL-U ID '%s' (expected N, N-M or N.M)", id)
        end
      end
    end
  end
  flush()
  if #out == 0 then fail(path, nil, "no sentences") end
  return out
end

-- {============================================================ SQuAD

-- The line of the first occurrence of a question id in the file's text.
local function id_line(text, id)
  local pos = text:find('"id"%s*:%s*"' .. tostring(id):gsub("%p", "%%%0") .. '"')
  if not pos then pos = text:find('"' .. tostring(id) .. '"', 1, true) end
  return pos and util.line_of(text, pos) or nil
end

--- Reads SQuAD v1.1 / v2.0 JSON: {"version", "data": [{"title",
-- "paragraphs": [{"context", "qas": [{"id", "question", "answers":
-- [{"text", "answer_start"}], "is_impossible"}]}]}]}.  Every answer_start
-- (in characters, 0-based) must point at its text inside the context.
-- Returns a list of {id, title, question, context, answers = {{text,
-- answer_start}, ...}, is_impossible}, and the file's version string.
function M.read_squad(path)
  local text = open_text(path)
  local obj, err = util.decode_json(text)
  if obj == nil then
    local at = tostring(err):match("character (%d+)")
    fail(path, at and util.line_of(text, tonumber(at)) or nil, "invalid JSON (%s)", tostring(err))
  end
  if type(obj) ~= "table" or not is_list(obj.data) then
    fail(path, nil, "not SQuAD JSON: expected an object with a 'data' list")
  end
  local out, ids = {}, {}
  for a, article in ipairs(obj.data) do
    if type(article) ~= "table" or not is_list(article.paragraphs) then
      fail(path, nil, "data[%d]: expected an object with a 'paragraphs' list", a)
    end
    if article.title ~= nil and type(article.title) ~= "string" and article.title ~= util.null then
      fail(path, nil, "data[%d]: 'title' must be a string", a)
    end
    for p, para in ipairs(article.paragraphs) do
      if type(para) ~= "table" then fail(path, nil, "data[%d].paragraphs[%d]: expected an object", a, p) end
      local context = para.context
      if type(context) ~= "string" then fail(path, nil, "data[%d].paragraphs[%d]: 'context' must be a string", a, p) end
      if para.qas ~= nil and not is_list(para.qas) then
        fail(path, nil, "data[%d].paragraphs[%d]: 'qas' must be a list", a, p)
      end
      local pos, nchars = util.char_positions(context)
      for q, qa in ipairs(para.qas or {}) do
        if type(qa) ~= "table" then fail(path, nil, "data[%d].paragraphs[%d].qas[%d]: expected an object", a, p, q) end
        local id = qa.id
        if type(id) ~= "string" and type(id) ~= "number" then
          fail(path, nil, "data[%d].paragraphs[%d].qas[%d]: missing 'id'", a, p, q)
        end
        id = tostring(id)
        local function qfail(fmt, ...)
          fail(path, id_line(text, id), "question '%s': " .. fmt, id, ...)
        end
        if ids[id] then qfail("duplicate question id") end
        ids[id] = true
        if type(qa.question) ~= "string" then qfail("'question' must be a string") end
        if qa.is_impossible ~= nil and type(qa.is_impossible) ~= "boolean" then
          qfail("'is_impossible' must be true or false")
        end
        local impossible = qa.is_impossible == true
        local answers = {}
        if not is_list(qa.answers) then qfail("'answers' must be a list") end
        for _, ans in ipairs(qa.answers) do
          if type(ans) ~= "table" or type(ans.text) ~= "string" then qfail("each answer needs a 'text' string") end
          local start = ans.answer_start
          if math.type(start) == "float" and start == math.floor(start) then start = math.tointeger(start) end
          if math.type(start) ~= "integer" then qfail("answer '%s' has no integer answer_start", ans.text) end
          local len = util.char_len(ans.text)
          if start < 0 or start + len > nchars then
            qfail("answer '%s' at answer_start %d lies outside its context (%d characters)", ans.text, start, nchars)
          end
          local found = util.char_sub(context, pos, start, start + len)
          if found ~= ans.text then
            qfail("answer '%s' at answer_start %d does not match its context (found '%s')", ans.text, start, found)
          end
          answers[#answers + 1] = {text = ans.text, answer_start = start}
        end
        if impossible and #answers > 0 then qfail("is_impossible is true but answers are given") end
        if not impossible and #answers == 0 and qa.is_impossible == nil and obj.version ~= "v2.0" then
          qfail("no answers (mark unanswerable questions with \"is_impossible\": true)")
        end
        out[#out + 1] = {
          id = id, title = article.title, question = qa.question, context = context,
          answers = answers, is_impossible = #answers == 0,
        }
      end
    end
  end
  if #out == 0 then fail(path, nil, "no questions") end
  return out, obj.version
end

--- Writes examples back as SQuAD JSON (grouped by context).
function M.write_squad(path, examples, opts)
  opts = opts or {}
  local articles, by_title = {}, {}
  for _, ex in ipairs(examples) do
    local title = ex.title or "untitled"
    local art = by_title[title]
    if not art then
      art = {title = title, paragraphs = {}, last = nil}
      by_title[title] = art
      articles[#articles + 1] = art
    end
    local para = art.last
    if not para or para.context ~= ex.context then
      para = {context = ex.context, qas = {}}
      art.paragraphs[#art.paragraphs + 1] = para
      art.last = para
    end
    local answers = {}
    for _, a in ipairs(ex.answers) do answers[#answers + 1] = {text = a.text, answer_start = a.answer_start} end
    -- this lua-cjson writes an empty table as {}: a marker becomes [] below
    local qa = {id = ex.id, question = ex.question, answers = #answers > 0 and answers or "\1empty\1"}
    if opts.version_2 then qa.is_impossible = ex.is_impossible == true end
    para.qas[#para.qas + 1] = qa
  end
  for _, art in ipairs(articles) do art.last = nil end
  local doc = {version = opts.version_2 and "v2.0" or "1.1", data = articles, metadata = opts.metadata}
  local text = require("cjson").encode(doc):gsub('"answers":"\\u0001empty\\u0001"', '"answers":[]')
  return util.write_file(path, text)
end
-- }============================================================

return M
