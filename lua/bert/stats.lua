--- bert.stats: the statistics the experiments report, in one place.
--
--   stats.mean_sd(xs)               -> mean, sample sd (nil for one value), n
--   stats.t_cdf(t, df)              -> P(T <= t), Student's t with df degrees of freedom (df > 0, real)
--   stats.t_quantile(p, df)         -> t with t_cdf(t, df) = p
--   stats.welch(xs, ys, level)      -> {difference, se, df, t, p, ci = {lo, hi}, level}: the difference
--                                      of the means (xs - ys) with Welch's interval (unequal variances,
--                                      Welch-Satterthwaite degrees of freedom); nil when a side has
--                                      fewer than two values or both have no spread
--
-- The rule the experiments state: a difference is a finding when its 95%
-- Welch interval excludes 0 (equivalently a two-sided p < 0.05).  With 3
-- seeds a side the interval's half-width is about 2.8-4.3 standard errors.
local M = {}

function M.mean_sd(xs)
  local n = #xs
  if n == 0 then return nil end
  local s = 0
  for _, x in ipairs(xs) do s = s + x end
  local mean = s / n
  if n == 1 then return mean, nil, 1 end
  local ss = 0
  for _, x in ipairs(xs) do ss = ss + (x - mean) ^ 2 end
  return mean, math.sqrt(ss / (n - 1)), n   -- the sample standard deviation
end

-- log Gamma by Lanczos' approximation (g = 7, 9 terms): relative error
-- below 1e-13 for x > 0, enough for the incomplete beta below.
local LANCZOS = {0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
  -176.61503916999185, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7}

local function log_gamma(x)
  if x < 0.5 then return math.log(math.pi / math.abs(math.sin(math.pi * x))) - log_gamma(1 - x) end
  x = x - 1
  local a = LANCZOS[1]
  local t = x + 7.5
  for i = 1, 8 do a = a + LANCZOS[i + 1] / (x + i) end
  return 0.5 * math.log(2 * math.pi) + (x + 0.5) * math.log(t) - t + math.log(a)
end

-- The continued fraction of the regularised incomplete beta function,
-- evaluated by the modified Lentz method.
local function beta_fraction(x, a, b)
  local tiny = 1e-300
  local c, d = 1, 1 - (a + b) * x / (a + 1)
  if math.abs(d) < tiny then d = tiny end
  d = 1 / d
  local h = d
  for m = 1, 300 do
    local m2 = 2 * m
    local num = m * (b - m) * x / ((a + m2 - 1) * (a + m2))
    d = 1 + num * d
    if math.abs(d) < tiny then d = tiny end
    c = 1 + num / c
    if math.abs(c) < tiny then c = tiny end
    d = 1 / d
    h = h * d * c
    num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1))
    d = 1 + num * d
    if math.abs(d) < tiny then d = tiny end
    c = 1 + num / c
    if math.abs(c) < tiny then c = tiny end
    d = 1 / d
    local step = d * c
    h = h * step
    if math.abs(step - 1) < 1e-15 then break end
  end
  return h
end

-- I_x(a, b), the regularised incomplete beta function.
local function incomplete_beta(x, a, b)
  if x <= 0 then return 0 end
  if x >= 1 then return 1 end
  local front = math.exp(log_gamma(a + b) - log_gamma(a) - log_gamma(b) + a * math.log(x) + b * math.log(1 - x))
  if x < (a + 1) / (a + b + 2) then return front * beta_fraction(x, a, b) / a end
  return 1 - front * beta_fraction(1 - x, b, a) / b
end

function M.t_cdf(t, df)
  if not (df > 0) then error(string.format("stats.t_cdf: df must be > 0, got %s", tostring(df)), 2) end
  if t ~= t then return t end
  local tail = 0.5 * incomplete_beta(df / (df + t * t), df / 2, 0.5)   -- P(T > |t|)
  return t >= 0 and 1 - tail or tail
end

function M.t_quantile(p, df)
  if not (p > 0 and p < 1) then error(string.format("stats.t_quantile: p must be in (0, 1), got %s", tostring(p)), 2) end
  if not (df > 0) then error(string.format("stats.t_quantile: df must be > 0, got %s", tostring(df)), 2) end
  -- bisection on the monotone cdf: 200 halvings of [-1e6, 1e6] reach double precision
  local lo, hi = -1e6, 1e6
  for _ = 1, 200 do
    local mid = (lo + hi) / 2
    if M.t_cdf(mid, df) < p then lo = mid else hi = mid end
    if hi - lo < 1e-12 * math.max(1, math.abs(mid)) then break end
  end
  return (lo + hi) / 2
end

function M.welch(xs, ys, level)
  level = level or 0.95
  local mx, sx, nx = M.mean_sd(xs)
  local my, sy, ny = M.mean_sd(ys)
  if not (sx and sy) then return nil end
  local vx, vy = sx * sx / nx, sy * sy / ny
  local se = math.sqrt(vx + vy)
  local d = mx - my
  if se == 0 then return nil end
  local df = (vx + vy) ^ 2 / (vx * vx / (nx - 1) + vy * vy / (ny - 1))
  local q = M.t_quantile(1 - (1 - level) / 2, df)
  local t = d / se
  return {difference = d, se = se, df = df, t = t, p = 2 * (1 - M.t_cdf(math.abs(t), df)),
    ci = {d - q * se, d + q * se}, level = level}
end

return M
