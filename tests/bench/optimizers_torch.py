#!/usr/bin/python3
"""The PyTorch peer of tests/bench/optimizers_bench.cpp: one LAMB and one LARS step over the same
~25M parameters (24 x (1024 x 1024 weight + 1024 bias)), written with torch tensor ops from the
same formulas (optimizers/lamb.h, optimizers/lars.h; per tensor, in place where torch allows).
Prints rows in the same format. Usage: optimizers_torch.py [--threads 2] [--reps 5]
"""
import argparse
import time

import torch

LAYERS, WIDTH = 24, 1024


def make():
    g = torch.Generator().manual_seed(1)
    shapes = [(WIDTH, WIDTH) if k % 2 == 0 else (WIDTH,) for k in range(2 * LAYERS)]
    params = [torch.randn(s, generator=g) * 0.02 for s in shapes]
    grads = [torch.randn(s, generator=g) * 1e-3 for s in shapes]
    decay = [len(s) == 2 for s in shapes]
    return params, grads, decay


class Lamb:
    def __init__(self, params, b1=0.9, b2=0.999, eps=1e-6, wd=0.01):
        self.b1, self.b2, self.eps, self.wd, self.t = b1, b2, eps, wd, 0
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]

    def step(self, params, grads, decay, lr):
        self.t += 1
        bc1, bc2 = 1 - self.b1 ** self.t, 1 - self.b2 ** self.t
        for w, g, m, v, d in zip(params, grads, self.m, self.v, decay):
            m.mul_(self.b1).add_(g, alpha=1 - self.b1)
            v.mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
            u = (m / bc1).div_((v / bc2).sqrt_().add_(self.eps))
            trust = 1.0
            if d:
                u.add_(w, alpha=self.wd)
                wn, un = w.norm().item(), u.norm().item()
                if wn > 0 and un > 0:
                    trust = wn / un
            w.add_(u, alpha=-lr * trust)


class Lars:
    def __init__(self, params, mu=0.9, eta=0.001, wd=1e-4, eps=0.0):
        self.mu, self.eta, self.wd, self.eps = mu, eta, wd, eps
        self.m = [torch.zeros_like(p) for p in params]

    def step(self, params, grads, decay, lr):
        for w, g, m, d in zip(params, grads, self.m, decay):
            trust, wd = 1.0, 0.0
            if d:
                wd = self.wd
                wn, gn = w.norm().item(), g.norm().item()
                if wn > 0 and gn > 0:
                    trust = self.eta * wn / (gn + wd * wn + self.eps)
            m.mul_(self.mu).add_(g.add(w, alpha=wd), alpha=lr * trust)
            w.sub_(m)


def bench(name, cls, reps, threads):
    params, grads, decay = make()
    opt = cls(params)
    opt.step(params, grads, decay, 1e-3)  # warm-up, as ours
    secs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        opt.step(params, grads, decay, 1e-3)
        secs.append(time.perf_counter() - t0)
    n = sum(p.numel() for p in params)
    mean = sum(secs) / reps
    label = "torch/%dt" % threads
    print("%-8s %-10s %10d %12.2f %12.2f %14.1f" % (label, name, n, mean * 1e3, min(secs) * 1e3, n / mean / 1e6),
          flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--header", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.header:
        print("%-8s %-10s %10s %12s %12s %14s" % ("impl", "optimizer", "params", "ms/step", "min ms", "Mparams/s"))
    bench("lamb", Lamb, a.reps, a.threads)
    bench("lars", Lars, a.reps, a.threads)


if __name__ == "__main__":
    main()
