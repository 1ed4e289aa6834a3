"""PyTorch's nn.LSTM on the cases of tools/bench_lstm.lua (the peer of its --peer 1).

Usage: /usr/bin/python3 tools/bench_lstm_peer.py [--cases all | small,small-ragged,original]
           [--mode train|infer] [--reps 3] [--threads 2]

One layer, one direction, proj_size as ELMo's LSTM-with-projection, batch_first; ragged
cases run as packed sequences (pack_padded_sequence, as bert.nn.LSTM's lengths).  The
step: forward, and for train the backward of sum(y * R).  Prints per case one JSON line
with the same fields as tools/bench_lstm.lua: ms of the best repetition, effective
GFLOP/s (the GEMM work of the real steps, backward counted as twice forward).
"""
import argparse, json, math, time

# the same table as tools/bench_lstm.lua
CASES = [
    dict(name="small", B=32, T=64, I=128, H=512, P=128),
    dict(name="small-ragged", B=32, T=64, I=128, H=512, P=128, ragged=16),
    dict(name="original", B=4, T=20, I=512, H=4096, P=512),
]


def lengths_of(c):
    if not c.get("ragged"):
        return [c["T"]] * c["B"]
    r, T, B = c["ragged"], c["T"], c["B"]
    return [r + ((b * (T - r)) // max(B - 1, 1)) for b in range(B)]


def forward_flops(c):
    steps = sum(lengths_of(c))
    return 2 * steps * (4 * c["H"] * (c["I"] + c["P"]) + c["H"] * c["P"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="all")
    ap.add_argument("--mode", default="train", choices=["train", "infer"])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    if a.reps < 1 or a.threads < 1:
        ap.error("--reps and --threads must be >= 1")
    names = None if a.cases == "all" else set(a.cases.split(","))
    chosen = [c for c in CASES if names is None or c["name"] in names]
    if not chosen:
        ap.error("--cases: all, or some of %s; got %s" % (", ".join(c["name"] for c in CASES), a.cases))

    import torch
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    for c in chosen:
        lstm = torch.nn.LSTM(c["I"], c["H"], proj_size=c["P"], batch_first=True)
        x = torch.randn(c["B"], c["T"], c["I"])
        R = torch.randn(c["B"], c["T"], c["P"])
        lens = torch.tensor(lengths_of(c))
        ragged = bool(c.get("ragged"))

        def once():
            with torch.set_grad_enabled(a.mode == "train"):
                if ragged:
                    packed = pack_padded_sequence(x, lens, batch_first=True, enforce_sorted=False)
                    y, _ = pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=c["T"])
                else:
                    y = lstm(x)[0]
                if a.mode == "train":
                    lstm.zero_grad(set_to_none=False)
                    (y * R).sum().backward()

        once()  # warm up
        best = math.inf
        for _ in range(a.reps):
            t0 = time.perf_counter()
            once()
            best = min(best, time.perf_counter() - t0)
        flops = forward_flops(c) * (3 if a.mode == "train" else 1)
        print(json.dumps(dict(case=c["name"], mode=a.mode, threads=a.threads, batch=c["B"], steps=c["T"],
                              input=c["I"], hidden=c["H"], proj=c["P"], ms=best * 1e3,
                              gflops=flops / best / 1e9, peer="torch " + torch.__version__)), flush=True)


if __name__ == "__main__":
    main()
