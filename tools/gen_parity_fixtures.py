"""Writes parity fixtures from the plain-PyTorch peer (shared/peer/torch_bert.py)
and, for the other families, from tools/parity_refs.py (written from the spec).

    python3 tools/gen_parity_fixtures.py PEER_DIR OUT_DIR [--size tiny] [--vocab 200]
        [--max-pos 64] [--batch 3] [--seq 12] [--all-grads]
    python3 tools/gen_parity_fixtures.py PEER_DIR OUT_DIR --family roberta|albert|electra|distilbert|deberta-v2
    python3 tools/gen_parity_fixtures.py PEER_DIR spec/fixtures/lstm --family lstm

The families' fixtures are at an odd shape (hidden 20, 4 heads of 5, 11
tokens, a padded batch of 3) with every weight perturbed so that no term
hides; their io.safetensors holds the outputs of each head the weights
carry (seqcls_logits, qa_*_logits...), the main class's training loss and
the gradient of every weight.

OUT_DIR gets config.json + model.safetensors (HF names, as Hugging Face
writes them) and io.safetensors: the inputs (ids, token types, a padded
attention mask, MLM labels, NSP labels), the peer's outputs in eval mode
(last hidden state, pooled output, MLM logits for every position, NSP
logits), the pretraining loss on the masked positions and its gradients.
Run once; the specs read the files and never need torch.

--family lstm writes torch.nn.LSTM's outputs and gradients on a padded batch
(B=3, T=5, lengths 5, 3, 1, input 7, hidden 6) as packed sequences: OUT_DIR
gets model.safetensors (the state dicts, "proj." a 2-layer bidirectional
LSTM with proj_size 4, "plain." a 1-layer bidirectional one without) and
io.safetensors (x, lengths, the initial states, each model's output, h_n,
c_n, the weights R* of the loss sum(output*R) + sum(h_n*Rh) + sum(c_n*Rc)
and the gradient of x, h0, c0 and every weight).
"""
import argparse, json, sys

ap = argparse.ArgumentParser()
ap.add_argument("peer_dir"); ap.add_argument("out_dir")
ap.add_argument("--size", default="tiny"); ap.add_argument("--vocab", type=int, default=200)
ap.add_argument("--max-pos", type=int, default=64); ap.add_argument("--batch", type=int, default=3)
ap.add_argument("--seq", type=int, default=12); ap.add_argument("--all-grads", action="store_true")
ap.add_argument("--family", default="bert")
ap.add_argument("--family-seq", type=int, default=11, help="families: sequence length")
ap.add_argument("--buckets", type=int, default=8, help="deberta-v2: position_buckets (256 as released)")
args = ap.parse_args()
sys.path.insert(0, args.peer_dir)
import os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch, torch.nn.functional as F
import torch_bert as peer

SMALL = dict(vocab_size=53, max_position_embeddings=40, initializer_range=0.02,
             id2label={"0": "a", "1": "b", "2": "c"}, label2id={"a": 0, "b": 1, "c": 2})
BERTISH = dict(hidden_size=20, num_hidden_layers=2, num_attention_heads=4, intermediate_size=36,
               hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
CONFIGS = {
    "roberta": dict(SMALL, **BERTISH, model_type="roberta", architectures=["RobertaForMaskedLM"], type_vocab_size=1,
                    layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2, hidden_act="gelu"),
    "albert": dict(SMALL, **dict(BERTISH, num_hidden_layers=3), model_type="albert", architectures=["AlbertForPreTraining"],
                   embedding_size=12, num_hidden_groups=1, inner_group_num=2, type_vocab_size=2, layer_norm_eps=1e-12,
                   pad_token_id=0, hidden_act="gelu_new", classifier_dropout_prob=0.1),
    "electra": dict(SMALL, **BERTISH, model_type="electra", architectures=["ElectraForPreTraining"], embedding_size=12,
                    type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=0, hidden_act="gelu"),
    "distilbert": dict(SMALL, model_type="distilbert", architectures=["DistilBertForMaskedLM"], dim=20, n_layers=2,
                       n_heads=4, hidden_dim=36, dropout=0.1, attention_dropout=0.1, activation="gelu",
                       sinusoidal_pos_embds=False, pad_token_id=0, qa_dropout=0.1, seq_classif_dropout=0.2),
    "deberta-v2": dict(SMALL, **BERTISH, model_type="deberta-v2", architectures=["DebertaV2ForMaskedLM"],
                       embedding_size=12, type_vocab_size=0, layer_norm_eps=1e-7, pad_token_id=0, hidden_act="gelu",
                       relative_attention=True, position_buckets=8, max_relative_positions=-1,
                       position_biased_input=False, pos_att_type=["p2c", "c2p"], norm_rel_ebd="layer_norm",
                       share_att_key=True, pooler_hidden_act="gelu", pooler_dropout=0),
}


def family_fixture(family):
    import parity_refs as refs
    torch.manual_seed(4321)
    c = CONFIGS[family]
    c["num_labels"] = 3
    if family == "deberta-v2": c["position_buckets"] = args.buckets
    c["max_position_embeddings"] = max(c["max_position_embeddings"], args.family_seq + 4)
    names, forward = refs.FAMILIES[family]
    P = {}
    for name, shape, kind in names(c).items:
        if kind == "w": t = torch.randn(shape) * 0.2
        elif kind == "g": t = 1 + torch.randn(shape) * 0.1
        else: t = torch.randn(shape) * 0.1
        P[name] = t.requires_grad_(True)
    B, T, V = 3, args.family_seq, c["vocab_size"]
    pad = c["pad_token_id"]
    ids = torch.randint(3, V, (B, T))
    lengths = [T, T - 3, T - 6]
    mask = torch.zeros(B, T, dtype=torch.long)
    tt = torch.zeros(B, T, dtype=torch.long)
    two_types = c.get("type_vocab_size", 0) > 1
    for b, n in enumerate(lengths):
        mask[b, :n] = 1; ids[b, n:] = pad
        if two_types: tt[b, n // 2:n] = 1
    labels = torch.full((B, T), -100)
    for b, n in enumerate(lengths):
        for t in range(1, n - 1, 3): labels[b, t] = int(ids[b, t])
    io = {"input_ids": ids, "token_type_ids": tt, "attention_mask": mask}
    out = forward(P, c, ids, tt, mask)
    mlm = out.get("logits") if family != "albert" else out["prediction_logits"]
    if family == "electra":   # the discriminator: replaced? per real token
        rtd = torch.randint(0, 2, (B, T))
        active = mask.view(-1) == 1
        loss = F.binary_cross_entropy_with_logits(out["logits"].reshape(-1)[active], rtd.view(-1)[active].float())
        io["labels"] = rtd
    else:
        loss = F.cross_entropy(mlm.reshape(B * T, V), labels.view(-1), ignore_index=-100)
        io["labels"] = labels
        if family == "albert":
            sop = torch.tensor([0, 1, 1])
            loss = loss + F.cross_entropy(out["sop_logits"], sop)
            io["sentence_order_label"] = sop
    loss.backward()
    os.makedirs(args.out_dir, exist_ok=True)
    peer.save_safetensors(f"{args.out_dir}/model.safetensors", P)
    with open(f"{args.out_dir}/config.json", "w") as f: json.dump(c, f, indent=2)
    for k, v in out.items(): io[k] = v.detach()
    io["loss"] = loss.detach().reshape(1)
    for n, t in P.items():
        if t.grad is not None: io["grad." + n] = t.grad   # the main class's weights
    peer.save_safetensors(f"{args.out_dir}/io.safetensors", {k: v.float() for k, v in io.items()})
    print(json.dumps({"family": family, "loss": float(loss), "params": sum(t.numel() for t in P.values())}))


def lstm_fixture():
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    torch.manual_seed(2468)
    B, T, I, H = 3, 5, 7, 6
    lengths = torch.tensor([5, 3, 1])
    x = torch.randn(B, T, I)
    io, state = {"x": x.clone(), "lengths": lengths}, {}
    for name, kw in (("proj", dict(num_layers=2, proj_size=4)), ("plain", dict(num_layers=1))):
        m = torch.nn.LSTM(I, H, bidirectional=True, batch_first=True, **kw)
        L, O = kw["num_layers"] * 2, kw.get("proj_size", 0) or H
        h0, c0 = (torch.randn(L, B, O) * 0.5).requires_grad_(), (torch.randn(L, B, H) * 0.5).requires_grad_()
        xg = x.clone().requires_grad_()
        packed, (hn, cn) = m(pack_padded_sequence(xg, lengths, batch_first=True), (h0, c0))
        out, _ = pad_packed_sequence(packed, batch_first=True, total_length=T)
        R, Rh, Rc = torch.randn(out.shape), torch.randn(hn.shape), torch.randn(cn.shape)
        ((out * R).sum() + (hn * Rh).sum() + (cn * Rc).sum()).backward()
        got = {"output": out, "h_n": hn, "c_n": cn, "R": R, "Rh": Rh, "Rc": Rc,
               "h0": h0, "c0": c0, "grad.x": xg.grad, "grad.h0": h0.grad, "grad.c0": c0.grad}
        for k, p in m.named_parameters():
            state[name + "." + k] = p
            got["grad." + k] = p.grad
        io.update({name + "." + k: v.detach() for k, v in got.items()})
    os.makedirs(args.out_dir, exist_ok=True)
    peer.save_safetensors(f"{args.out_dir}/model.safetensors", state)
    peer.save_safetensors(f"{args.out_dir}/io.safetensors", {k: v.float() for k, v in io.items()})
    print(json.dumps({"family": "lstm", "tensors": len(io)}))


if args.family == "lstm":
    lstm_fixture()
    sys.exit(0)
if args.family != "bert":
    family_fixture(args.family)
    sys.exit(0)

torch.manual_seed(1234)
c = peer.full_config(args.size, vocab_size=args.vocab)
c["max_position_embeddings"] = args.max_pos
m = peer.Bert(c)
with torch.no_grad():   # non-trivial biases and LayerNorm parameters
    for name, p in m.named_parameters():
        if p.dim() == 1: p.add_(torch.randn_like(p) * 0.1)
m.eval()
B, T, V = args.batch, args.seq, c["vocab_size"]
ids = torch.randint(1, V, (B, T))
lengths = [T, T - 3, T // 2][:B] + [T] * max(0, B - 3)
mask = torch.zeros(B, T, dtype=torch.long)
tt = torch.zeros(B, T, dtype=torch.long)
for b, n in enumerate(lengths):
    mask[b, :n] = 1; ids[b, n:] = 0; tt[b, n // 2:n] = 1
labels = torch.full((B, T), -100)
for b, n in enumerate(lengths):
    for t in range(1, n - 1, 3): labels[b, t] = int(ids[b, t])
nsp = torch.tensor([0, 1, 1][:B] + [0] * max(0, B - 3))

with torch.no_grad():
    hidden, pooled, mlm, nsp_logits = m(ids, tt, mask)
pos = (labels.view(-1) != -100).nonzero().squeeze(1)
_, _, mlm_sel, nsp_l = m(ids, tt, mask, pos)
loss = F.cross_entropy(mlm_sel, labels.view(-1)[pos]) + F.cross_entropy(nsp_l, nsp)
loss.backward()

state = m.hf_state()
peer.save_safetensors(f"{args.out_dir}/model.safetensors", state)
cfg = dict(c); cfg["architectures"] = ["BertForPreTraining"]
with open(f"{args.out_dir}/config.json", "w") as f: json.dump(cfg, f, indent=2)

grad_names = list(state) if args.all_grads else [
    "bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
    "bert.embeddings.LayerNorm.weight", "bert.encoder.layer.0.attention.self.query.weight",
    "bert.encoder.layer.0.attention.self.value.bias", "bert.encoder.layer.1.intermediate.dense.weight",
    "bert.encoder.layer.1.output.LayerNorm.bias", "bert.pooler.dense.weight",
    "cls.predictions.transform.dense.weight", "cls.predictions.bias", "cls.seq_relationship.weight"]
io = {"input_ids": ids, "token_type_ids": tt, "attention_mask": mask, "labels": labels,
      "next_sentence_label": nsp, "last_hidden_state": hidden, "pooler_output": pooled,
      "prediction_logits": mlm, "seq_relationship_logits": nsp_logits, "loss": loss.detach().reshape(1)}
for n in grad_names: io["grad." + n] = state[n].grad
ints = {k: v.int() for k, v in io.items() if v.dtype == torch.long}
io.update(ints)
# the peer writes F32 only: keep ints exact by storing them as float32 and converting in the spec
peer.save_safetensors(f"{args.out_dir}/io.safetensors", {k: v.float() for k, v in io.items()})
print(json.dumps({"loss": float(loss), "params": sum(p.numel() for p in m.parameters())}))
