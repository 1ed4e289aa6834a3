"""Writes parity fixtures from the plain-PyTorch peer (shared/peer/torch_bert.py).

    python3 tools/gen_parity_fixtures.py PEER_DIR OUT_DIR [--size tiny] [--vocab 200]
        [--max-pos 64] [--batch 3] [--seq 12] [--all-grads]

OUT_DIR gets config.json + model.safetensors (HF names, as Hugging Face
writes them) and io.safetensors: the inputs (ids, token types, a padded
attention mask, MLM labels, NSP labels), the peer's outputs in eval mode
(last hidden state, pooled output, MLM logits for every position, NSP
logits), the pretraining loss on the masked positions and its gradients.
Run once; the specs read the files and never need torch.
"""
import argparse, json, sys

ap = argparse.ArgumentParser()
ap.add_argument("peer_dir"); ap.add_argument("out_dir")
ap.add_argument("--size", default="tiny"); ap.add_argument("--vocab", type=int, default=200)
ap.add_argument("--max-pos", type=int, default=64); ap.add_argument("--batch", type=int, default=3)
ap.add_argument("--seq", type=int, default=12); ap.add_argument("--all-grads", action="store_true")
args = ap.parse_args()
sys.path.insert(0, args.peer_dir)
import torch, torch.nn.functional as F
import torch_bert as peer

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
