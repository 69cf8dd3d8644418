#!/usr/bin/python3
"""The PyTorch peer of tests/bench/topk_bench.cpp: torch.topk(x.abs(), k) for k = 1% of 25M random
normal floats (the usual top-k compressor's selection, e.g. GRACE's), timed the same way (one
untimed call, then REPS). Prints rows in the same format; %memcpy is relative to the memcpy GB/s
the C++ bench measured (--memcpy-gbs), so both sides share one yardstick.
Usage: topk_torch.py [--threads 2] [--reps 5] [--n 25000000] [--ratio 0.01] [--memcpy-gbs G]
"""
import argparse
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--n", type=int, default=25_000_000)
    ap.add_argument("--ratio", type=float, default=0.01)
    ap.add_argument("--memcpy-gbs", type=float, default=0.0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    n = a.n
    k = min(n, max(1, int(a.ratio * n + 0.5)))  # topk_count: nearest, halves up, in [1, n]
    x = torch.randn(n, generator=torch.Generator().manual_seed(1))

    def call():
        return torch.topk(x.abs(), k)  # sorted=False measured no faster

    call()
    secs = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        call()
        secs.append(time.perf_counter() - t0)
    mean = sum(secs) / len(secs)
    gbs = 4 * n / mean / 1e9
    frac = "%8.0f%%" % (100 * gbs / a.memcpy_gbs) if a.memcpy_gbs > 0 else "%9s" % "-"
    print("%-8s %-12s %10d %8d %10.2f %10.2f %8.2f %s" % ("torch/%dt" % a.threads, "topk(abs)", n, k, mean * 1e3,
                                                          min(secs) * 1e3, gbs, frac), flush=True)


if __name__ == "__main__":
    main()
