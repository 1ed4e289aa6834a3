-- The gradient norm of each loss term of a pretraining model, apart, on
-- batches of its run's own held-out instances: which term drives the
-- update when the terms are summed and the sum's gradient is clipped
-- (e.g. MLM + NSP: the NSP gradient was 2-5x the MLM's in the nsp grid).
--
--   lua5.4 tools/loss_grads.lua --run runs/ablate/nsp/pretrain/objective=mlm-nsp_seed=1 \
--     [--checkpoint snapshot-1250] [--batches 2]
--
-- For each batch, one line per term (the model's outputs named *_loss, and
-- loss, their weighted sum): its value, the norm of its gradient over every
-- parameter and over the encoder layers alone; then the cosine between each
-- two terms' gradients (over every parameter: below 0 the terms pull the
-- shared weights apart).  Training mode (dropout on, the same draw for
-- every term), masks as stored for evaluation.
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
package.cpath = "./" .. (os.getenv("BERT_BUILD") or "build") .. "/?.so;" .. package.cpath
local cli = require("bert.cli")

local p = cli.parser("loss_grads.lua", "Gradient norms of each loss term of a pretraining checkpoint, apart.")
p:option("--run", "A pretraining run directory (args.json, data/eval/, checkpoint/)"):count(1)
p:option("--checkpoint", "The model directory inside the run: checkpoint or snapshot-STEP", "checkpoint")
p:option("--batches", "Held-out batches, each measured apart", "2"):convert(cli.integer("--batches", 1, 1000))
p:option("--batch-size", "Sequences per batch (default: the run's)"):convert(cli.integer("--batch-size", 1, 65536))
cli.add(p, "threads")
local args = p:parse()

cli.main("loss_grads.lua", function()
  local bert = require("bert")
  local fs = require("bert.fs")
  if args.threads then bert.set_num_threads(args.threads) end
  local saved, err = fs.read_json(args.run .. "/args.json", "run settings")
  if not saved then error(err, 0) end
  local dir = args.run .. "/" .. args.checkpoint
  if not fs.exists(dir .. "/config.json") then
    error(string.format("--checkpoint %s: %s/config.json is missing", args.checkpoint, dir), 0)
  end
  local model = bert.from_pretrained(dir, {verbose = false})
  local loader, lerr = require("bert.data.pretraining").Loader{dir = args.run .. "/data/eval",
    batch_size = args.batch_size or saved.batch_size or 32, seq_len = saved.seq_len or 128, masking = "static",
    seed = 0, shuffle = false}
  if not loader then error(lerr, 0) end
  model:training(true)
  -- one term's value, its gradient (a copy per parameter) and their norms
  local function measure(batch, term)
    model:zero_grad()
    bert.manual_seed(1)   -- one dropout draw for every term
    local out = model:forward(batch)
    if not out[term] then return nil end
    out[term]:backward()
    local grads, all, encoder = {}, 0, 0
    for _, np in ipairs(model:named_parameters()) do
      local g = np.param:grad()
      if g then
        grads[np.name] = g:clone()
        local s = g:pow(2):sum():item()
        all = all + s
        if np.name:find("%.encoder%.") or np.name:find("^encoder%.") then encoder = encoder + s end
      end
    end
    return {value = out[term]:item(), grads = grads, norm = math.sqrt(all), encoder = math.sqrt(encoder)}
  end
  local function cosine(a, b)
    local dot = 0
    for name, g in pairs(a.grads) do
      if b.grads[name] then dot = dot + (g * b.grads[name]):sum():item() end
    end
    return (a.norm > 0 and b.norm > 0) and dot / (a.norm * b.norm) or 0
  end
  print(string.format("%s, %s (%s)", args.run, args.checkpoint, model.architecture))
  for b = 1, args.batches do
    local batch = loader:next()
    model:zero_grad()
    bert.manual_seed(1)
    local terms = {}
    for k in pairs(model:forward(batch)) do if k:find("_loss$") then terms[#terms + 1] = k end end
    table.sort(terms)
    terms[#terms + 1] = "loss"
    local measured = {}
    for _, term in ipairs(terms) do
      local m = measure(batch, term)
      if m then
        measured[#measured + 1] = {term = term, m = m}
        print(string.format("batch %d  %-10s value %8.4f  gradient norm %8.4f  (encoder layers %8.4f)", b, term,
          m.value, m.norm, m.encoder))
      end
    end
    for i = 1, #measured do
      for j = i + 1, #measured do
        print(string.format("batch %d  cosine %s, %s  %7.4f", b, measured[i].term, measured[j].term,
          cosine(measured[i].m, measured[j].m)))
      end
    end
  end
  loader:close()
end)
