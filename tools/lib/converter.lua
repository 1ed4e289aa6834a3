-- What the multilingual corpus' converters (tools/fortune_text.lua,
-- manpage_text.lua, html_text.lua) share: their LANG=FILE arguments, the
-- JSON-lines output written once at the end, and the per-language counts
-- they print.  Errors name the tool: error(TOOL .. ": ...", 0).
local cjson = require("cjson")
local fs = require("bert.fs")

local M = {}

--- A LANG=FILE argument's language, path and text (UTF-8 checked).
function M.read_lang_file(tool, argument)
  local lang, path = argument:match("^([%a%-]+)=(.+)$")
  if not lang then error(tool .. ": argument " .. argument .. ": expected LANG=FILE", 0) end
  local text, err = fs.read_file(path)
  if not text then error(tool .. ": " .. tostring(err), 0) end
  if not utf8.len(text) then error(tool .. ": " .. path .. ": not UTF-8 text", 0) end
  return lang, path, text
end

--- A list of JSON lines for tools/build_corpus.lua: add(id, lang, sentences).
function M.documents()
  local docs = {lines = {}, per_lang = {}}
  function docs.add(id, lang, sentences)
    docs.lines[#docs.lines + 1] = cjson.encode({id = id, lang = lang, sentences = sentences})
    docs.per_lang[lang] = (docs.per_lang[lang] or 0) + 1
  end
  --- "de 2, zh 1": the documents per language
  function docs.counts()
    local langs = {}
    for l, c in pairs(docs.per_lang) do langs[#langs + 1] = string.format("%s %d", l, c) end
    table.sort(langs)
    return table.concat(langs, ", ")
  end
  --- Writes them to path atomically (a failed run leaves nothing behind).
  function docs.write(tool, path)
    local text = table.concat(docs.lines, "\n") .. (#docs.lines > 0 and "\n" or "")
    local written, err = fs.write_atomic(path, text)
    if not written then error(tool .. ": " .. tostring(err), 0) end
  end
  return docs
end

return M
