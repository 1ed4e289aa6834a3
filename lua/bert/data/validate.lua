--- bert.data.validate: checks on text data before anything is built from
-- it, with errors that name the file and the line.
--
--   validate.text(text, path[, opts])      -> text (maybe repaired), or nil, msg
--   validate.corpus(path[, opts])          -> documents, or nil, msg
--
-- A corpus (BERT's plain format: a sentence per line, blank lines between
-- documents) must be UTF-8 without NUL bytes, have lines of at most
-- opts.max_line_bytes (default 65536: a longer "sentence" is a binary or a
-- file without line breaks, and only its first max_seq_length tokens would
-- ever be used), and hold at least 2 documents (next-sentence pairs and the
-- held-out split need two).  opts.allow_invalid_utf8 = true replaces each
-- invalid byte with U+FFFD instead of refusing the file.
--
-- Files are read with bert.fs.
local read_all = require("bert.fs").read_file

local M = {}

M.MAX_LINE_BYTES = 65536
local REPLACEMENT = "\239\191\189"   -- U+FFFD

-- Line number and byte column (1-based) of byte position pos in text.
local function where(text, pos)
  local line, start = 1, 1
  for nl in text:sub(1, pos - 1):gmatch("()\n") do line, start = line + 1, nl + 1 end
  return line, pos - start + 1
end
M.where = where

-- Replaces every byte that is not part of well-formed UTF-8 with U+FFFD.
local function repair_utf8(text)
  local out, i, n = {}, 1, #text
  while i <= n do
    local len, bad = utf8.len(text, i)
    if len then out[#out + 1] = text:sub(i) break end
    out[#out + 1] = text:sub(i, bad - 1)
    out[#out + 1] = REPLACEMENT
    i = bad + 1
  end
  return table.concat(out)
end

--- Checks text read from path: no NUL byte, well-formed UTF-8 (or
-- repaired), no line longer than max_line_bytes (opts; nil: no limit).
-- Returns the text, or nil and "path:line: message".
function M.text(text, path, opts)
  opts = opts or {}
  local nul = text:find("\0", 1, true)
  if nul then
    local l, c = where(text, nul)
    return nil, string.format("%s:%d: NUL byte at column %d (a binary file, or UTF-16 text?)", path, l, c)
  end
  local ok, bad = utf8.len(text)
  if not ok then
    if opts.allow_invalid_utf8 then
      text = repair_utf8(text)
    else
      local l, c = where(text, bad)
      -- only a caller that has the flag offers it (opts.offer_repair = false: the fine-tuning readers)
      return nil, string.format("%s:%d: invalid UTF-8 (byte 0x%02X at column %d); convert the file " ..
        "to UTF-8 (e.g. iconv -f latin1 -t utf-8)%s", path, l, text:byte(bad), c,
        opts.offer_repair == false and "" or
        ", or allow it with --allow-invalid-utf8, which replaces bad bytes with U+FFFD")
    end
  end
  local limit = opts.max_line_bytes
  if limit then
    local pos = 1
    for stop in (text .. "\n"):gmatch("()\n") do
      if stop - pos > limit then
        local l = where(text, pos)
        return nil, string.format("%s:%d: line of %d bytes, over the limit of %d (--max-line-bytes); " ..
          "a corpus holds one sentence per line", path, l, stop - pos, limit)
      end
      pos = stop + 1
    end
  end
  return text
end

--- Reads and checks a corpus in the plain format; returns its documents
-- (lists of sentences), or nil and a message naming the file (and line).
function M.corpus(path, opts)
  opts = opts or {}
  local text, err = read_all(path)
  if not text then return nil, tostring(err) end
  local checked, cerr = M.text(text, path, {allow_invalid_utf8 = opts.allow_invalid_utf8,
    max_line_bytes = opts.max_line_bytes or M.MAX_LINE_BYTES})
  if not checked then return nil, cerr end
  local docs, cur, n = {}, {}, 0
  for line in (checked .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    line = line:match("^%s*(.-)%s*$")
    if line ~= "" and not line:find("[^%c%s]") then
      return nil, string.format("%s:%d: a line of control characters only (a binary file?)", path, n)
    end
    if line == "" then
      if #cur > 0 then docs[#docs + 1] = cur; cur = {} end
    else
      cur[#cur + 1] = line
    end
  end
  if #cur > 0 then docs[#docs + 1] = cur end
  local min_docs = opts.min_documents or 2
  if #docs < min_docs then
    return nil, string.format("%s: %d document%s, at least %d needed (one sentence per line, " ..
      "a blank line between documents)", path, #docs, #docs == 1 and "" or "s", min_docs)
  end
  return docs
end

return M
