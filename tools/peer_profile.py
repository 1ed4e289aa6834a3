"""Where the PyTorch peer's training step spends its time: its matrix products against the rest.

Usage: /usr/bin/python3 tools/peer_profile.py [--task pretrain|classify] [--batch 8] [--seq 128]
           [--lengths FILE] [--batches 1] [--threads 2] [--peer PATH]

--task pretrain: the step of tools/bench.lua's peer run (torch_bert.py --mode train --gather:
MLM on the masked positions + NSP, AdamW, clipping) at --batch x --seq.
--task classify: the padded fine-tuning step of tools/bench_varlen_peer.py on the lengths in
FILE (--batch 32 by default there).

The step runs once to warm up, once timed, then once under torch.profiler.  Prints one JSON
line: the timed step, the profiled one, the self time of aten::mm/addmm/bmm/baddbmm (the
GEMMs), and the most expensive ops.  The GEMM share bounds any speed-up over the peer that
keeps the GEMMs as fast as the peer's: peer_step / peer_gemm_time, whatever the rest costs.
"""
import argparse, json, os, sys, time

import bench_varlen_peer as bvp   # the script's own folder is on sys.path

GEMMS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def pretrain_setup(batch, seq, threads, peer):
    sys.path.insert(0, os.path.dirname(bvp.find_peer(peer)))
    import torch
    import torch.nn.functional as F
    import torch_bert

    torch.manual_seed(0)
    torch.set_num_threads(threads)
    c = torch_bert.full_config("base")
    m = torch_bert.Bert(c)
    ids = torch.randint(0, c["vocab_size"], (batch, seq))
    tt = torch.zeros(batch, seq, dtype=torch.long)
    mask = torch.ones(batch, seq, dtype=torch.long)
    labels = torch.full((batch, seq), -100)
    sel = torch.rand(batch, seq) < 0.15
    labels[sel] = ids[sel]
    nsp = torch.randint(0, 2, (batch,))
    m.train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.01)
    positions = sel.view(-1).nonzero().squeeze(1)

    def step():
        _, _, mlm, nsp_logits = m(ids, tt, mask, positions)
        loss = F.cross_entropy(mlm.view(-1, c["vocab_size"]), labels.view(-1)[positions]) + \
            F.cross_entropy(nsp_logits, nsp)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
    return step


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", choices=("pretrain", "classify"), default="pretrain")
    ap.add_argument("--batch", type=int)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--lengths")
    ap.add_argument("--batches", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--peer")
    args = ap.parse_args()
    if args.task == "pretrain":
        batch = args.batch or 8
        step = pretrain_setup(batch, args.seq, args.threads, args.peer)
        what = {"batch": batch, "seq": args.seq}
    else:
        if not args.lengths:
            sys.exit("peer_profile: --task classify needs --lengths FILE")
        batch = args.batch or 32
        one, batches, real, padded = bvp.classify_setup(bvp.read_lengths(args.lengths), "base", batch,
                                                        args.batches, args.threads, 42, args.peer)

        def step():
            for b in batches:
                one(b)
        what = {"batch": batch, "batches": args.batches, "real_tokens": real, "padded_tokens": padded}
    from torch.profiler import profile, ProfilerActivity

    step()                                   # warm up
    t0 = time.perf_counter()
    step()
    plain = time.perf_counter() - t0
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        step()
        profiled = time.perf_counter() - t0
    self_ms = {e.key: e.self_cpu_time_total / 1e3 for e in prof.key_averages()}
    gemm_ms = sum(v for k, v in self_ms.items() if k in GEMMS)
    top = sorted(self_ms.items(), key=lambda kv: -kv[1])[:12]
    out = {"task": args.task, "threads": args.threads, "step_s": plain, "profiled_step_s": profiled,
           "gemm_ms": gemm_ms, "gemm_share": gemm_ms / 1e3 / profiled,
           "speedup_bound_at_equal_gemms": profiled / (gemm_ms / 1e3),
           "top_self_ms": [[k, round(v, 1)] for k, v in top],
           "loadavg": open("/proc/loadavg").read().strip()}
    out.update(what)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
