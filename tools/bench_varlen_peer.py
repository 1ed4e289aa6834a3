"""The PyTorch peer (shared/peer/torch_bert.py) on the batches of tools/bench_varlen.lua, padded.

Usage: /usr/bin/python3 tools/bench_varlen_peer.py --lengths FILE [--size base] [--batch 32]
           [--batches 4] [--reps 3] [--threads 2] [--peer PATH]

FILE holds one token count per line (tools/bench_varlen.lua --write-lengths FILE).
Batch b takes lengths (b-1)*batch+1 .. b*batch, padded to the longest rounded up to
16 (bert.finetune.batch.collate's rule), with a key-padding mask.  The step is
sequence classification as BertForSequenceClassification does it: the peer's encoder
and pooler, dropout, Linear(H, 2), cross-entropy, backward, global-norm clipping at
1.0, AdamW (the peer's MLM head is given no positions, so it costs nothing).
Prints one JSON line: real (non-pad) tokens/s of the best repetition.
"""
import argparse, json, math, os, sys, time


def find_peer(explicit):
    here = os.path.dirname(os.path.abspath(__file__))
    tried = [explicit] if explicit else [
        os.path.join(here, "..", "..", "shared", "peer", "torch_bert.py"),
        os.path.join(here, "..", "..", "..", "shared", "peer", "torch_bert.py"),
        "/work/shared/peer/torch_bert.py",
    ]
    for p in tried:
        if p and os.path.exists(p):
            return os.path.abspath(p)
    sys.exit("bench_varlen_peer: torch_bert.py not found (tried %s): pass --peer PATH" % ", ".join(map(str, tried)))


def read_lengths(path):
    out = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    v = int(line)
                except ValueError:
                    sys.exit("%s:%d: expected a token count, got %r" % (path, n, line.strip()))
                if v < 1:
                    sys.exit("%s:%d: a token count must be at least 1, got %d" % (path, n, v))
                out.append(v)
    return out


def classify_setup(lengths, size="base", batch=32, batches=4, threads=2, seed=42, peer=None):
    """The peer's model, optimizer and padded batches; returns (step, batches, real, padded)."""
    peer_path = find_peer(peer)
    sys.path.insert(0, os.path.dirname(peer_path))
    import torch
    import torch.nn.functional as F
    import torch_bert

    if len(lengths) < batch * batches:
        sys.exit("bench_varlen_peer: %d lengths make fewer than --batches %d of --batch %d"
                 % (len(lengths), batches, batch))
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    c = torch_bert.full_config(size)
    model = torch_bert.Bert(c)
    classifier = torch.nn.Linear(c["hidden_size"], 2)
    torch.nn.init.normal_(classifier.weight, 0, 0.02)
    torch.nn.init.zeros_(classifier.bias)
    params = list(model.parameters()) + list(classifier.parameters())
    opt = torch.optim.AdamW(params, lr=2e-5, weight_decay=0.01)
    no_positions = torch.zeros(0, dtype=torch.long)

    out, real, padded = [], 0, 0
    g = torch.Generator().manual_seed(seed + 1)
    for b in range(batches):
        rows = lengths[b * batch:(b + 1) * batch]
        width = (max(rows) + 15) // 16 * 16
        ids = torch.randint(5, c["vocab_size"] - 1, (batch, width), generator=g)
        mask = torch.zeros(batch, width, dtype=torch.long)
        for k, n in enumerate(rows):
            mask[k, :n] = 1
            ids[k, n:] = 0
            ids[k, 0] = 2
        labels = torch.randint(0, 2, (batch,), generator=g)
        out.append((ids, torch.zeros_like(ids), mask, labels))
        real += sum(rows)
        padded += batch * width

    model.train()
    classifier.train()

    def step(b):
        ids, tt, mask, labels = b
        _, pooled, _, _ = model(ids, tt, mask, no_positions)
        loss = F.cross_entropy(classifier(F.dropout(pooled, 0.1, True)), labels)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return loss.item()

    return step, out, real, padded


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lengths", required=True)
    ap.add_argument("--size", default="base")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--peer")
    args = ap.parse_args()
    import torch
    step, batches, real, padded = classify_setup(read_lengths(args.lengths), args.size, args.batch,
                                                 args.batches, args.threads, args.seed, args.peer)

    step(batches[0])   # warm up
    times, cpu = [], []
    for _ in range(args.reps):
        t0, c0 = time.perf_counter(), time.process_time()
        for b in batches:
            step(b)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    best = min(times)
    print(json.dumps({"peer": "torch_bert.py", "torch": torch.__version__, "size": args.size, "batch": args.batch,
                      "batches": args.batches, "reps": args.reps, "threads": args.threads,
                      "real_tokens": real, "padded_tokens": padded, "seconds": times, "best_seconds": best,
                      "sec_per_step": best / args.batches, "real_tokens_per_s": real / best,
                      "best_cpu_seconds": min(cpu),
                      "loadavg": open("/proc/loadavg").read().strip()}))


if __name__ == "__main__":
    main()
