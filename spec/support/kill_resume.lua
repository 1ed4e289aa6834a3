-- The kill -9 check of a pretraining command: the command runs once
-- straight into `straight`; again into `killed`, killed with SIGKILL once
-- its metrics.jsonl has logged step `at`; then `--resume killed` must
-- finish with every step's loss equal to the straight run's.  command(dir)
-- returns the shell command that trains into dir.
local losses = require("spec.support.losses")

return function(command, straight, killed, steps, at)
  assert(os.execute(command(straight) .. " >/dev/null 2>" .. straight .. ".err"), "the straight run failed")
  os.execute(string.format([[
    %s >/dev/null 2>&1 & pid=$!
    for i in $(seq 1 3000); do
      if grep -q '"step":%d[,}]' %s/metrics.jsonl 2>/dev/null; then break; fi
      sleep 0.02
    done
    kill -9 $pid; wait $pid 2>/dev/null]], command(killed), at, killed))
  local partial = losses(killed)
  assert(partial[at], "the run was not killed after step " .. at)
  assert(partial[steps] == nil, "the run finished before it was killed")
  assert(os.execute(string.format("lua5.4 experiments/pretrain.lua --resume %s >/dev/null 2>&1", killed)),
    "the resumed run failed")
  local a, b = losses(straight), losses(killed)
  for s = 1, steps do
    assert(a[s] and b[s], "missing step " .. s)
    assert(a[s] == b[s], string.format("loss differs at step %d: %.17g vs %.17g", s, a[s], b[s]))
  end
  return a
end
