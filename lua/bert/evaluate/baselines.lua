--- bert.evaluate.baselines: the floors printed beside every score.
--
-- A fine-tuned model's score means little alone: these are the standard
-- floors it must beat.  Each is fitted on a task's training examples, in
-- the library's formats (bert.finetune.readers), and returns predictions
-- in the form the models' predictions take, for bert.finetune.metrics to
-- score the same way.
--
--   majority(train, test, opts)           the commonest training label for
--       every test example, or the training mean for regression: what class
--       imbalance alone earns (a chance-corrected metric such as MCC gives 0).
--   most_frequent_tag(train, test, opts)  each word's commonest training
--       tag, unknown words the commonest tag overall: the classic tagging
--       floor, what a tagger earns without context.
--   bag_of_words(train, test, opts)       a linear model over lowercased word
--       unigrams and bigrams: L2-regularised multinomial logistic regression
--       (ridge regression for numeric labels) fitted by full-batch L-BFGS:
--       what word identity alone earns, without pretraining.
--
-- Examples: classification {text, text_pair?, label} (label a string, or a
-- number for regression); tagging {words, tags}.  Test examples need no
-- label or tags.  Every function returns predictions (a list parallel to
-- test: labels, numbers or tag lists) and a table describing the fit.
--
-- Deterministic: no random numbers, features numbered in first-seen order,
-- ties broken by the fixed rules documented below.
local M = {}

-- {============================================================ arguments

local function show(v)
  if type(v) == "string" then
    return "'" .. (#v > 40 and v:sub(1, 40) .. "..." or v) .. "'"
  end
  if type(v) == "table" then return "a table" end
  return tostring(v)
end

local function bad(fn, what, v, expected)
  error(string.format("baselines.%s: %s must be %s, got %s", fn, what, expected, show(v)), 0)
end

local function check_opts(fn, opts)
  if opts == nil then return {} end
  if type(opts) ~= "table" then bad(fn, "opts", opts, "a table or nil") end
  return opts
end

local function check_list(fn, name, list, nonempty)
  if type(list) ~= "table" or (nonempty and #list == 0) then
    bad(fn, name, list, nonempty and "a non-empty list of examples" or "a list of examples")
  end
  for i = 1, #list do
    if type(list[i]) ~= "table" then bad(fn, name .. "[" .. i .. "]", list[i], "an example table") end
  end
end

local function check_texts(fn, name, list)
  for i, ex in ipairs(list) do
    if type(ex.text) ~= "string" then bad(fn, name .. "[" .. i .. "].text", ex.text, "a string") end
    if ex.text_pair ~= nil and type(ex.text_pair) ~= "string" then
      bad(fn, name .. "[" .. i .. "].text_pair", ex.text_pair, "a string or nil")
    end
  end
end

local function check_words(fn, name, list, with_tags)
  for i, ex in ipairs(list) do
    local w = ex.words
    if type(w) ~= "table" then bad(fn, name .. "[" .. i .. "].words", w, "a list of strings") end
    for j = 1, #w do
      if type(w[j]) ~= "string" then bad(fn, name .. "[" .. i .. "].words[" .. j .. "]", w[j], "a string") end
    end
    if with_tags then
      local t = ex.tags
      if type(t) ~= "table" or #t ~= #w then
        bad(fn, name .. "[" .. i .. "].tags", t, "a list of " .. #w .. " tags (one per word)")
      end
      for j = 1, #t do
        if type(t[j]) ~= "string" then bad(fn, name .. "[" .. i .. "].tags[" .. j .. "]", t[j], "a string") end
      end
    end
  end
end

-- Regression when opts.regression says so, else when every training label
-- is a number.  Returns true/false and, for regression, the numeric targets.
local function regression_targets(fn, name, list, opts)
  local reg = opts.regression
  if reg ~= nil and type(reg) ~= "boolean" then bad(fn, "opts.regression", reg, "true, false or nil") end
  if reg == nil then
    reg = true
    for _, ex in ipairs(list) do if type(ex.label) ~= "number" then reg = false break end end
  end
  if not reg then
    for i, ex in ipairs(list) do
      if type(ex.label) ~= "string" and type(ex.label) ~= "number" then
        bad(fn, name .. "[" .. i .. "].label", ex.label, "a string or a number")
      end
    end
    return false
  end
  local y = {}
  for i, ex in ipairs(list) do
    local v = tonumber(ex.label)
    if v == nil or v ~= v or v == math.huge or v == -math.huge then
      bad(fn, name .. "[" .. i .. "].label", ex.label, "a finite number (a regression target)")
    end
    y[i] = v
  end
  return true, y
end

-- The label order: opts.labels first, then training labels they miss, in
-- first-seen order.  Labels are compared as strings ("1" and 1 alike).
local function label_order(fn, train, opts)
  local labels, index = {}, {}
  if opts.labels ~= nil then
    if type(opts.labels) ~= "table" then bad(fn, "opts.labels", opts.labels, "a list of labels") end
    for _, l in ipairs(opts.labels) do
      l = tostring(l)
      if not index[l] then labels[#labels + 1] = l index[l] = #labels end
    end
  end
  for _, ex in ipairs(train) do
    local l = tostring(ex.label)
    if not index[l] then labels[#labels + 1] = l index[l] = #labels end
  end
  return labels, index
end
-- }============================================================

-- {============================================================ majority

--- The commonest training label for every test example.  A tie goes to
-- the label that comes first in opts.labels (e.g. task.labels), else to
-- the one seen first in train.  For regression (every training label a
-- number, or opts.regression = true) every prediction is the training
-- mean.  Returns predictions, {label, counts} or {mean}.
function M.majority(train, test, opts)
  opts = check_opts("majority", opts)
  check_list("majority", "train", train, true)
  check_list("majority", "test", test)
  local reg, y = regression_targets("majority", "train", train, opts)
  local pred = {}
  if reg then
    local sum = 0
    for i = 1, #y do sum = sum + y[i] end
    local mean = sum / #y
    for i = 1, #test do pred[i] = mean end
    return pred, {mean = mean}
  end
  local labels = label_order("majority", train, opts)
  local counts = {}
  for _, l in ipairs(labels) do counts[l] = 0 end
  for _, ex in ipairs(train) do
    local l = tostring(ex.label)
    counts[l] = counts[l] + 1
  end
  local best = labels[1]
  for _, l in ipairs(labels) do if counts[l] > counts[best] then best = l end end
  for i = 1, #test do pred[i] = best end
  return pred, {label = best, counts = counts}
end
-- }============================================================

-- {============================================================ most frequent tag

--- Each test word gets the tag it carried most often in training (the word
-- form compared exactly); a tie goes to the tag commoner in the whole
-- training set, then to the one seen first.  A word never seen in training
-- gets the commonest tag overall (ties: seen first); with opts.lowercase
-- it first tries the tags of its lowercased form among the lowercased
-- training words ("The" at a sentence start from "the").  Off by default:
-- the standard baseline knows only exact forms.
-- Returns predictions (a list of tag lists) and {default, unknown (test
-- tokens never seen in training), tokens}.
function M.most_frequent_tag(train, test, opts)
  opts = check_opts("most_frequent_tag", opts)
  check_list("most_frequent_tag", "train", train, true)
  check_list("most_frequent_tag", "test", test)
  check_words("most_frequent_tag", "train", train, true)
  check_words("most_frequent_tag", "test", test, false)
  if opts.lowercase ~= nil and type(opts.lowercase) ~= "boolean" then
    bad("most_frequent_tag", "opts.lowercase", opts.lowercase, "true, false or nil")
  end
  local global, rank, ntags = {}, {}, 0
  local by_word, by_lower = {}, {}
  local function add(tbl, w, t)
    local c = tbl[w]
    if not c then c = {} tbl[w] = c end
    c[t] = (c[t] or 0) + 1
  end
  for _, ex in ipairs(train) do
    for j, w in ipairs(ex.words) do
      local t = ex.tags[j]
      if not rank[t] then ntags = ntags + 1 rank[t] = ntags global[t] = 0 end
      global[t] = global[t] + 1
      add(by_word, w, t)
      if opts.lowercase then add(by_lower, w:lower(), t) end
    end
  end
  -- a beats b: more often for this word, then commoner overall, then seen first
  local function better(c, a, b)
    if c[a] ~= c[b] then return c[a] > c[b] end
    if global[a] ~= global[b] then return global[a] > global[b] end
    return rank[a] < rank[b]
  end
  local function best_of(c)
    local best
    for t in pairs(c) do if best == nil or better(c, t, best) then best = t end end
    return best   -- a total order: the result does not depend on pairs()'s order
  end
  local default = best_of(global)
  local memo, memo_lower = {}, {}
  local pred, unknown, tokens = {}, 0, 0
  for i, ex in ipairs(test) do
    local tags = {}
    for j, w in ipairs(ex.words) do
      tokens = tokens + 1
      local t = memo[w]
      if t == nil and by_word[w] then t = best_of(by_word[w]) memo[w] = t end
      if t == nil then
        unknown = unknown + 1
        if opts.lowercase then
          local lw = w:lower()
          t = memo_lower[lw]
          if t == nil and by_lower[lw] then t = best_of(by_lower[lw]) memo_lower[lw] = t end
        end
        t = t or default
      end
      tags[j] = t
    end
    pred[i] = tags
  end
  return pred, {default = default, unknown = unknown, tokens = tokens}
end
-- }============================================================

-- {============================================================ bag of words: features

--- Lowercased tokens of a text: runs of characters that are neither
-- whitespace nor ASCII punctuation (letters, digits, UTF-8 bytes), and
-- each ASCII punctuation mark alone: "Don't stop!" -> don ' t stop !.
-- Lowercasing is ASCII only.
function M.tokens(text)
  local out = {}
  for t in (text:lower():gsub("%p", " %0 ")):gmatch("%S+") do out[#out + 1] = t end
  return out
end

-- Presence (value 1) of every unigram and, with bigrams, every pair of
-- adjacent tokens ("w1 w2"), under a prefix.  Tokens hold no space and no
-- ':', so neither kind nor namespace can collide with another.
local function text_features(toks, prefix, bigrams, names, values, seen)
  for i, t in ipairs(toks) do
    local f = prefix .. t
    if not seen[f] then seen[f] = true names[#names + 1] = f values[#values + 1] = 1 end
    if bigrams and i > 1 then
      f = prefix .. toks[i - 1] .. " " .. t
      if not seen[f] then seen[f] = true names[#names + 1] = f values[#values + 1] = 1 end
    end
  end
end

-- Word types of a token list, punctuation marks left out.
local function word_set(toks)
  local set, n = {}, 0
  for _, t in ipairs(toks) do
    if not set[t] and not t:match("^%p$") then set[t] = true n = n + 1 end
  end
  return set, n
end

--- The features of one example: two lists, names and values, in order of
-- first appearance.  A single text: "word" and "word word" (opts.bigrams,
-- on unless false).  A pair: each text's features in its own namespace,
-- "a:word" and "b:word", plus four overlap features over the word types of
-- the two texts (punctuation marks left out), S the types they share:
--   overlap:frac_a = |S|/|A|, overlap:frac_b = |S|/|B|,
--   overlap:jaccard = |S|/|A u B|, overlap:log_shared = log(1 + |S|)
-- (a fraction of an empty set is 0).  Word features are presence, 1 however
-- often the word occurs.  pair: treat the example as a pair even without
-- text_pair (taken as "").
function M.features(ex, opts, pair)
  opts = opts or {}
  local bigrams = opts.bigrams ~= false
  local names, values, seen = {}, {}, {}
  if not (pair or ex.text_pair ~= nil) then
    text_features(M.tokens(ex.text), "", bigrams, names, values, seen)
    return names, values
  end
  local ta, tb = M.tokens(ex.text), M.tokens(ex.text_pair or "")
  text_features(ta, "a:", bigrams, names, values, seen)
  text_features(tb, "b:", bigrams, names, values, seen)
  local sa, na = word_set(ta)
  local sb, nb = word_set(tb)
  local shared = 0
  for _, t in ipairs(ta) do
    if sa[t] and sb[t] then shared = shared + 1 sa[t] = false end   -- count each type once
  end
  local union = na + nb - shared
  local extra = {
    {"overlap:frac_a", na > 0 and shared / na or 0},
    {"overlap:frac_b", nb > 0 and shared / nb or 0},
    {"overlap:jaccard", union > 0 and shared / union or 0},
    {"overlap:log_shared", math.log(1 + shared)},
  }
  for _, e in ipairs(extra) do names[#names + 1] = e[1] values[#values + 1] = e[2] end
  return names, values
end

-- Encodes examples as compressed sparse rows.  Row i holds the columns
-- idx[start[i] .. mid[i] - 1], each of value 1 (no multiplication needed),
-- then idx/val[mid[i] .. start[i + 1] - 1].  vocab maps a feature name to
-- its column; with grow, unseen names get the next column (first-seen
-- order), else are dropped.
local function encode(examples, opts, pair, vocab, grow)
  local start, mid, idx, val = {}, {}, {}, {}
  local nf, p = #vocab, 1
  local rest_j, rest_v = {}, {}
  for i, ex in ipairs(examples) do
    start[i] = p
    local names, values = M.features(ex, opts, pair)
    local nrest = 0
    for k, name in ipairs(names) do
      local j = vocab[name]
      if not j and grow then
        nf = nf + 1
        vocab[nf] = name
        vocab[name] = nf
        j = nf
      end
      local v = values[k]
      if j and v == 1 then idx[p] = j p = p + 1
      elseif j and v ~= 0 then nrest = nrest + 1 rest_j[nrest] = j rest_v[nrest] = v end
    end
    mid[i] = p
    for k = 1, nrest do idx[p] = rest_j[k] val[p] = rest_v[k] p = p + 1 end
  end
  start[#examples + 1] = p
  return {start = start, mid = mid, idx = idx, val = val, n = #examples}
end
-- }============================================================

-- {============================================================ bag of words: fitting

-- Parameters: C score columns (1 for two classes, where column 1 is the
-- score of class 2 against class 1, or for regression; else one per
-- class); feature f, column c at (f - 1) * C + c; the C biases last, not
-- regularised.  Loss summed over examples (not averaged), so lambda = 1
-- weighs as scikit-learn's default C = 1.

-- Logistic (C == 1), softmax (C > 1) or squared ("ridge") loss + lambda/2
-- |w|^2, and its gradient (written into g).
local function objective(X, y, C, F, lambda, kind)
  local start, mid, idx, val, n = X.start, X.mid, X.idx, X.val, X.n
  local nw = F * C
  local exp, log = math.exp, math.log
  local ridge = kind == "ridge"
  local z, r = {}, {}
  return function(x, g)
    local reg = 0
    for j = 1, nw do
      local w = x[j]
      reg = reg + w * w
      g[j] = lambda * w
    end
    for c = 1, C do g[nw + c] = 0 end
    local loss = 0
    if C == 1 then
      local b, gb = x[nw + 1], 0
      for i = 1, n do
        local s, m, e1 = b, mid[i], start[i + 1] - 1
        for p = start[i], m - 1 do s = s + x[idx[p]] end
        for p = m, e1 do s = s + x[idx[p]] * val[p] end
        local d
        if ridge then
          d = s - y[i]
          loss = loss + 0.5 * d * d
        else
          local t = y[i] == 2 and 1 or 0
          if s >= 0 then
            local e = exp(-s)
            loss = loss + (1 - t) * s + log(1 + e)
            d = 1 / (1 + e) - t
          else
            local e = exp(s)
            loss = loss - t * s + log(1 + e)
            d = e / (1 + e) - t
          end
        end
        if d ~= 0 then
          for p = start[i], m - 1 do
            local j = idx[p]
            g[j] = g[j] + d
          end
          for p = m, e1 do
            local j = idx[p]
            g[j] = g[j] + d * val[p]
          end
          gb = gb + d
        end
      end
      g[nw + 1] = gb
    else
      for i = 1, n do
        local m, e1 = mid[i], start[i + 1] - 1
        for c = 1, C do z[c] = x[nw + c] end
        for p = start[i], e1 do
          local base, v = (idx[p] - 1) * C, p < m and 1 or val[p]
          for c = 1, C do z[c] = z[c] + x[base + c] * v end
        end
        local zmax = z[1]
        for c = 2, C do if z[c] > zmax then zmax = z[c] end end
        local sum = 0
        for c = 1, C do local e = exp(z[c] - zmax) r[c] = e sum = sum + e end
        local yi = y[i]
        loss = loss + zmax + log(sum) - z[yi]
        for c = 1, C do r[c] = r[c] / sum end
        r[yi] = r[yi] - 1
        for p = start[i], e1 do
          local base, v = (idx[p] - 1) * C, p < m and 1 or val[p]
          for c = 1, C do g[base + c] = g[base + c] + r[c] * v end
        end
        for c = 1, C do g[nw + c] = g[nw + c] + r[c] end
      end
    end
    return loss + 0.5 * lambda * reg
  end
end

local function dot(a, b, n)
  local s = 0
  for j = 1, n do s = s + a[j] * b[j] end
  return s
end

-- Minimises fg (f, gradient) from x by L-BFGS (7 correction pairs) with a
-- backtracking (Armijo) line search.  Stops when an iteration lowers f by
-- less than tol * max(1, |f|), or after max_iter iterations.  The
-- two-loop recursion's updates and dot products share passes over memory.
-- Returns the final f, the number of iterations and the minimiser (x or a
-- vector that replaces it).
local function lbfgs(fg, x, max_iter, tol)
  local n, mem = #x, 7
  local g, gn, xn, q = {}, {}, {}, {}
  local f = fg(x, g)
  local S, Y, rho, yy, alpha = {}, {}, {}, {}, {}
  local iter = 0
  while iter < max_iter do
    iter = iter + 1
    -- two-loop recursion: q = H g, the step is -q
    local m = #S
    for j = 1, n do q[j] = g[j] end
    if m > 0 then
      local a = rho[m] * dot(S[m], q, n)
      for k = m, 1, -1 do
        alpha[k] = a
        local yk = Y[k]
        if k > 1 then
          local sp, acc = S[k - 1], 0
          for j = 1, n do local v = q[j] - a * yk[j] q[j] = v acc = acc + sp[j] * v end
          a = rho[k - 1] * acc
        else
          for j = 1, n do q[j] = q[j] - a * yk[j] end
        end
      end
      local gamma, y1, acc = 1 / (rho[m] * yy[m]), Y[1], 0   -- s'y / y'y
      for j = 1, n do local v = gamma * q[j] q[j] = v acc = acc + y1[j] * v end
      for k = 1, m do
        local b, sk = alpha[k] - rho[k] * acc, S[k]
        if k < m then
          local yn = Y[k + 1]
          acc = 0
          for j = 1, n do local v = q[j] + b * sk[j] q[j] = v acc = acc + yn[j] * v end
        else
          for j = 1, n do q[j] = q[j] + b * sk[j] end
        end
      end
    else
      local gamma = 1 / math.max(math.sqrt(dot(g, g, n)), 1e-300)
      for j = 1, n do q[j] = gamma * q[j] end
    end
    local gd = -dot(g, q, n)
    if not (gd < 0) then   -- not a descent direction: restart from steepest descent
      S, Y, rho, yy = {}, {}, {}, {}
      local norm = math.max(math.sqrt(dot(g, g, n)), 1e-300)
      for j = 1, n do q[j] = g[j] / norm end
      gd = -dot(g, q, n)
      if not (gd < 0) then break end   -- zero gradient: at the minimum
    end
    local t, fnew = 1, nil
    for _ = 1, 40 do
      for j = 1, n do xn[j] = x[j] - t * q[j] end
      fnew = fg(xn, gn)
      if fnew <= f + 1e-4 * t * gd then break end
      t = t * 0.5
      fnew = nil
    end
    if fnew == nil then break end   -- no decrease found: as good as it gets
    local s, yv
    if #S == mem then   -- reuse the oldest pair's vectors
      s, yv = table.remove(S, 1), table.remove(Y, 1)
      table.remove(rho, 1) table.remove(yy, 1)
    else
      s, yv = {}, {}
    end
    local sy, yy_ = 0, 0
    for j = 1, n do
      local a, b = xn[j] - x[j], gn[j] - g[j]
      s[j], yv[j] = a, b
      sy, yy_ = sy + a * b, yy_ + b * b
    end
    if sy > 1e-12 * yy_ then
      S[#S + 1], Y[#Y + 1], rho[#rho + 1], yy[#yy + 1] = s, yv, 1 / sy, yy_
    end
    x, xn = xn, x
    g, gn = gn, g
    local drop = f - fnew
    f = fnew
    if drop <= tol * math.max(1, math.abs(f)) then break end
  end
  return f, iter, x
end

-- Predictions for every row of X under parameters x: labels, or the
-- scores themselves for regression.
local function predict(X, x, C, F, labels)
  local start, mid, idx, val = X.start, X.mid, X.idx, X.val
  local nw = F * C
  local out, z = {}, {}
  for i = 1, X.n do
    for c = 1, C do z[c] = x[nw + c] end
    local m = mid[i]
    for p = start[i], start[i + 1] - 1 do
      local base, v = (idx[p] - 1) * C, p < m and 1 or val[p]
      for c = 1, C do z[c] = z[c] + x[base + c] * v end
    end
    if not labels then
      out[i] = z[1]
    elseif C == 1 then
      out[i] = z[1] > 0 and labels[2] or labels[1]   -- a tie (0) goes to the first label
    else
      local best = 1
      for c = 2, C do if z[c] > z[best] then best = c end end
      out[i] = labels[best]
    end
  end
  return out
end

-- Pearson's r for choosing the L2 strength; a constant prediction scores 0
local function pearson(a, b)
  local r = require("bert.finetune.metrics").pearson(a, b)
  return r == r and r or 0
end

local function accuracy(pred, gold)
  local right = 0
  for i = 1, #gold do if pred[i] == gold[i] then right = right + 1 end end
  return #gold > 0 and right / #gold or 0
end

M.DEFAULT_L2 = 1
M.DEFAULT_GRID = {0.1, 1, 10, 100, 1000}

--- A linear model over bag-of-words features (see M.features): for string
-- labels multinomial logistic regression (binary logistic regression for
-- two classes), for numeric labels (STS-B) ridge regression, each with an
-- L2 penalty lambda/2 |w|^2 on the word weights (not the biases) and the
-- loss summed over the training examples; fitted from zero weights (biases
-- at the log prior or the mean) by full-batch L-BFGS, which needs no
-- random numbers and reaches the one optimum of these convex objectives.
-- opts:
--   labels     label order (e.g. task.labels): a tie between scores goes
--              to the label that comes first; default first seen in train
--   regression force (true) or forbid (false) regression; default: when
--              every training label is a number
--   bigrams    adjacent-token pairs as features too (default true)
--   min_count  keep the features of at least this many training examples
--              (default 1: all).  The model holds features x classes
--              weights (x 1 for two classes), and L-BFGS about 20 vectors
--              of that size: raise it for many classes and long texts
--   l2         lambda (default M.DEFAULT_L2 = 1, scikit-learn's C = 1)
--   dev        labelled examples to pick lambda on: every value of grid is
--              fitted, strongest first, each started from the previous
--              optimum, and the best dev score wins (a tie: the stronger)
--   grid       the lambdas tried with dev (default M.DEFAULT_GRID)
--   score      function(pred, gold) -> number, higher better: the dev
--              metric (default accuracy; Pearson r for regression)
--   max_iter   L-BFGS iterations per fit (default 200); tol (default 1e-6):
--              stop when an iteration lowers the objective by less than
--              tol * max(1, |objective|)
-- Regression predictions are not clipped to the training range.
-- Returns predictions and {l2, dev_score, fits = {{l2, dev_score,
-- iterations, objective}, ...}, features, labels}.
function M.bag_of_words(train, test, opts)
  local fn = "bag_of_words"
  opts = check_opts(fn, opts)
  check_list(fn, "train", train, true)
  check_list(fn, "test", test)
  check_texts(fn, "train", train)
  check_texts(fn, "test", test)
  if opts.bigrams ~= nil and type(opts.bigrams) ~= "boolean" then bad(fn, "opts.bigrams", opts.bigrams, "true, false or nil") end
  local function positive(name, v)
    if type(v) ~= "number" or not (v > 0) or v == math.huge then bad(fn, name, v, "a positive number") end
  end
  local lambda = opts.l2 == nil and M.DEFAULT_L2 or opts.l2
  positive("opts.l2", lambda)
  local max_iter = opts.max_iter or 200
  if math.type(max_iter) ~= "integer" or max_iter < 1 then bad(fn, "opts.max_iter", max_iter, "a positive integer") end
  local tol = opts.tol or 1e-6
  if type(tol) ~= "number" or tol < 0 then bad(fn, "opts.tol", tol, "a number >= 0") end
  local min_count = opts.min_count or 1
  if math.type(min_count) ~= "integer" or min_count < 1 then
    bad(fn, "opts.min_count", min_count, "a positive integer")
  end
  if opts.score ~= nil and type(opts.score) ~= "function" then bad(fn, "opts.score", opts.score, "a function or nil") end
  local grid = {lambda}
  if opts.dev ~= nil then
    check_list(fn, "opts.dev", opts.dev, true)
    check_texts(fn, "opts.dev", opts.dev)
    local g = opts.grid or M.DEFAULT_GRID
    if type(g) ~= "table" or #g == 0 then bad(fn, "opts.grid", g, "a non-empty list of positive numbers") end
    grid = {}
    for i, v in ipairs(g) do positive("opts.grid[" .. i .. "]", v) grid[i] = v end
    table.sort(grid, function(a, b) return a > b end)   -- strongest first
  elseif opts.grid ~= nil then
    bad(fn, "opts.grid", opts.grid, "nil without opts.dev (the grid is searched on dev)")
  end

  local reg, yreg = regression_targets(fn, "train", train, opts)
  local labels, index, y, C
  if reg then
    y, C = yreg, 1
  else
    labels, index = label_order(fn, train, opts)
    y = {}
    for i, ex in ipairs(train) do y[i] = index[tostring(ex.label)] end
    C = #labels == 2 and 1 or #labels
  end
  local dev_gold
  if opts.dev then
    local dreg, dy = regression_targets(fn, "opts.dev", opts.dev, {regression = reg})
    assert(dreg == reg)
    if reg then dev_gold = dy
    else
      dev_gold = {}
      for i, ex in ipairs(opts.dev) do dev_gold[i] = tostring(ex.label) end
    end
  end
  local score = opts.score or (reg and pearson or accuracy)

  local pair = false
  for _, ex in ipairs(train) do if ex.text_pair ~= nil then pair = true break end end
  local vocab = {}
  if min_count > 1 then   -- the vocabulary first: features of min_count training examples
    local df, order = {}, {}
    for _, ex in ipairs(train) do
      for _, name in ipairs((M.features(ex, opts, pair))) do
        local c = df[name]
        if c then df[name] = c + 1 else df[name] = 1 order[#order + 1] = name end
      end
    end
    for _, name in ipairs(order) do
      if df[name] >= min_count then vocab[#vocab + 1] = name vocab[name] = #vocab end
    end
  end
  local X = encode(train, opts, pair, vocab, min_count == 1)
  local F = #vocab
  local info = {features = F, labels = labels, fits = {}}

  if not reg and #labels == 1 then   -- one class: nothing to fit
    local pred = {}
    for i = 1, #test do pred[i] = labels[1] end
    info.l2 = lambda
    return pred, info
  end

  -- start: zero weights, biases at the log prior (classes) or the mean
  local x = {}
  for j = 1, F * C + C do x[j] = 0 end
  if reg then
    local sum = 0
    for i = 1, #y do sum = sum + y[i] end
    x[F + 1] = sum / #y
  else
    local counts = {}
    for c = 1, #labels do counts[c] = 0.5 end   -- smoothed: a class without examples stays finite
    for i = 1, #y do counts[y[i]] = counts[y[i]] + 1 end
    if C == 1 then x[F + 1] = math.log(counts[2] / counts[1])
    else for c = 1, C do x[F * C + c] = math.log(counts[c] / (#y + 0.5 * C)) end end
  end

  local Xdev = opts.dev and encode(opts.dev, opts, pair, vocab, false)
  local Xtest = encode(test, opts, pair, vocab, false)
  local best_pred, best_score, best_l2
  for _, l2 in ipairs(grid) do
    local f, iters
    f, iters, x = lbfgs(objective(X, y, C, F, l2, reg and "ridge" or "logistic"), x, max_iter, tol)
    local fit = {l2 = l2, iterations = iters, objective = f}
    info.fits[#info.fits + 1] = fit
    if Xdev then
      fit.dev_score = score(predict(Xdev, x, C, F, labels), dev_gold)
      if best_score == nil or fit.dev_score > best_score then
        best_score, best_l2 = fit.dev_score, l2
        best_pred = predict(Xtest, x, C, F, labels)
      end
    else
      best_l2, best_pred = l2, predict(Xtest, x, C, F, labels)
    end
  end
  info.l2, info.dev_score = best_l2, best_score
  return best_pred, info
end
-- }============================================================

return M
