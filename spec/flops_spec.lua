-- bert.models.flops against the count by hand, and a pretraining run's
-- stated compute.
local bert = require("bert")
local flops = require("bert.models.flops")
local tmpdir = require("spec.support.tmpdir").dir

describe("bert.models.flops", function()
  it("counts BERT-tiny's forward GEMMs by hand", function()
    local model = bert.model("BertForPreTraining", "tiny")
    local c = model.arch or model.config
    local H, I, L, V = c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.vocab_size
    assert.same({128, 512, 2}, {H, I, L})
    local B, T = 3, 11
    -- per layer: Q, K, V, output (4 H x H) and the two FFN GEMMs (H x I each) on B*T rows,
    -- QK^T and PV (B*T*T*H each); the MLM transform (H x H) and decoder (H x V) on 5 rows; the pair head
    local expect = L * (2 * B * T * (4 * H * H + 2 * H * I) + 2 * 2 * B * T * T * H) + 2 * 5 * (H * H + H * V) +
      2 * B * H * H
    assert.equals(expect, flops.forward(model, B, T, {mlm_rows = 5, pair_head = true}))
  end)

  it("states a pretraining run's compute from its directory", function()
    local d = tmpdir()
    local model = bert.model("BertForPreTraining", "tiny")
    assert(require("bert.checkpoint").save_pretrained(model, d .. "/checkpoint"))
    local f = assert(io.open(d .. "/args.json", "w"))
    f:write('{"batch_size": 8, "accum": 2, "seq_len": 32, "mask_prob": 0.15, "objective": "mlm-nsp", "steps": 10}')
    f:close()
    local r = assert(flops.pretraining(d))
    assert.equals(10 * 16 * 32, r.token_slots)   -- 10 steps of 2 micro-batches of 8 x 32
    local per_micro = 3 * flops.forward(model, 8, 32, {mlm_rows = math.floor(8 * 32 * 0.15 + 0.5), pair_head = true})
    assert.equals(20 * per_micro, r.flops)
    -- a batch ramp (--batch-ramp) took fewer micro-batches than steps x accum: the run's count
    f = assert(io.open(d .. "/summary.json", "w"))
    f:write('{"steps": 10, "micro_batches": 14}')
    f:close()
    r = assert(flops.pretraining(d))
    assert.equals(14 * 8 * 32, r.token_slots)
    assert.equals(14 * per_micro, r.flops)
    local none, err = flops.pretraining(d .. "/nope")
    assert.is_nil(none)
    assert.truthy(err:find("args.json: not found", 1, true))
  end)
end)

describe("bert.models.flops for ELMo", function()
  it("counts the character CNN, highways, projection, both directions' LSTMs and softmax by hand", function()
    local model = bert.model("ElmoModel", "tiny")
    local a = model.arch
    -- tiny: filters {1,16},{2,16},{3,32} over 16 characters of width 8; one highway over 64; projection 64;
    -- 2 layers of 256 cells per direction
    assert.same({64, 256, 2, 16, 8}, {a.projection_dim, a.cell_size, a.num_hidden_layers,
      a.max_characters_per_token, a.char_embedding_dim})
    local conv = 2 * (16 * 1 * 8 * 16 + 15 * 2 * 8 * 16 + 14 * 3 * 8 * 32)
    local encoder = conv + 2 * 64 * 128 + 2 * 64 * 64
    local lstm = 2 * 2 * (2 * 1024 * 64 + 2 * 1024 * 64 + 2 * 256 * 64)
    local per_token = encoder + lstm + 2 * 2 * 64 * a.vocab_size
    assert.equals(3 * 5 * per_token, flops.forward(model, 3, 5))
  end)
end)
