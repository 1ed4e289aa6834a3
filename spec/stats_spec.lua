-- bert.stats against published table values of Student's t and a Welch
-- interval computed by hand.
local stats = require("bert.stats")

describe("bert.stats", function()
  it("Student's t quantiles and cdf match the tables", function()
    -- two-sided 95% critical values (any statistics table)
    assert.near(12.7062, stats.t_quantile(0.975, 1), 1e-4)
    assert.near(4.3027, stats.t_quantile(0.975, 2), 1e-4)
    assert.near(2.7764, stats.t_quantile(0.975, 4), 1e-4)
    assert.near(2.2281, stats.t_quantile(0.975, 10), 1e-4)
    assert.near(1.95996, stats.t_quantile(0.975, 1e7), 1e-4)   -- the normal limit
    assert.near(-2.7764, stats.t_quantile(0.025, 4), 1e-4)
    assert.near(0.5, stats.t_cdf(0, 3), 1e-12)
    assert.near(0.975, stats.t_cdf(4.302653, 2), 1e-6)
    -- df = 1 is the Cauchy distribution: cdf(t) = 1/2 + atan(t)/pi
    assert.near(0.5 + math.atan(1.7) / math.pi, stats.t_cdf(1.7, 1), 1e-8)
  end)

  it("Welch's interval: unequal variances, Welch-Satterthwaite df", function()
    -- xs var 0.0004/3 per mean, ys var 0.0001/2 per mean
    local w = stats.welch({0.80, 0.82, 0.84}, {0.70, 0.71})
    local vx, vy = 0.0004 / 3, 0.00005 / 2
    local df = (vx + vy) ^ 2 / (vx ^ 2 / 2 + vy ^ 2 / 1)
    assert.near(0.82 - 0.705, w.difference, 1e-12)
    assert.near(math.sqrt(vx + vy), w.se, 1e-12)
    assert.near(df, w.df, 1e-9)
    local q = stats.t_quantile(0.975, df)
    assert.near(w.difference - q * w.se, w.ci[1], 1e-9)
    assert.is_true(w.p > 0 and w.p < 0.05)
    assert.is_nil(stats.welch({1}, {1, 2}))          -- one value: no spread to compare
    assert.is_nil(stats.welch({1, 1}, {2, 2}))       -- no spread at all
  end)

  it("refuses arguments outside the domain, naming them", function()
    local ok, err = pcall(stats.t_quantile, 1.5, 3)
    assert.is_false(ok)
    assert.matches("t_quantile: p must be in %(0, 1%), got 1.5", err)
    ok, err = pcall(stats.t_cdf, 1, 0)
    assert.matches("t_cdf: df must be > 0, got 0", err)
  end)
end)
