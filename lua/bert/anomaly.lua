--- bert.anomaly: what training does when a loss or a gradient is NaN or Inf.
--
-- By default the Trainer STOPS at the first non-finite loss or gradient
-- norm, before the optimizer update, so the weights (and the last
-- checkpoint) stay as they were; `on_nonfinite = "skip"` instead drops that
-- step's update and goes on, stopping after `max_skipped` (10) skipped steps
-- in a row.  With bert.set_detect_anomaly(true) the message also names the
-- parameter whose gradient went bad first and the op behind it (the C
-- autograd checks every gradient during backward, and walks the forward
-- graph for the op that turned finite inputs into NaN/Inf).
local bert = require("bert.core")

local M = {}

local function finite(x) return x == x and x ~= math.huge and x ~= -math.huge end
M.finite = finite

-- First parameter (in model order) whose gradient holds NaN/Inf: name, value.
function M.first_bad_gradient(model)
  for _, np in ipairs(model:named_parameters()) do
    local g = np.param:grad()
    if g ~= nil then
      local s = (g - g):sum():item()   -- NaN exactly when g holds NaN or Inf
      if s ~= 0 then return np.name, g:abs():max():item() end
    end
  end
  return nil
end

local function fail(trainer, what)
  local hint = bert.is_anomaly_enabled() and "" or
    " (bert.set_detect_anomaly(true), or --detect-anomaly, names the parameter and the op)"
  local kept = trainer.output and "; the weights and " .. trainer.output .. "/checkpoint are unchanged" or
               "; the weights are unchanged"
  error(string.format("training stopped at step %d: %s%s%s", trainer.step + 1, what, kept, hint), 0)
end

--- Called by the Trainer with a non-finite loss value (loss_tensor is the
-- loss whose graph is still alive).  Raises (stop), or returns true when
-- the step is to be skipped.
function M.bad_loss(trainer, value, loss_tensor)
  local what = "the loss is " .. tostring(value)
  if bert.is_anomaly_enabled() then
    local origin = loss_tensor:nonfinite_origin()
    if origin then what = what .. "; first op to go non-finite: " .. origin end
  end
  return M.handle(trainer, what)
end

--- After backward (anomaly mode) or when the gradient norm is not finite.
function M.bad_gradient(trainer, norm)
  local what = "the gradient norm is " .. tostring(norm)
  local name, value = M.first_bad_gradient(trainer.model)
  if name then what = string.format("the gradient of %s holds %s", name, tostring(value)) end
  local op = bert.anomaly_report()
  if op then what = what .. "; first op: " .. op end
  return M.handle(trainer, what)
end

function M.handle(trainer, what)
  if (trainer.on_nonfinite or "stop") == "stop" or bert.is_anomaly_enabled() then fail(trainer, what) end
  trainer.skipped = (trainer.skipped or 0) + 1
  local limit = trainer.max_skipped or 10
  if trainer.skipped > limit then
    fail(trainer, what .. string.format(" (%d steps in a row skipped)", trainer.skipped))
  end
  io.stderr:write(string.format("step %d skipped: %s\n", trainer.step + 1, what))
  return true
end

return M
