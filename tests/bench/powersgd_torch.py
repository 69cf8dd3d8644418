#!/usr/bin/python3
"""The PyTorch peer of tests/bench/powersgd_bench.cpp: PowerSGD's local work on one 4096 x 4096
fp32 gradient at rank 4, world size 1, in PyTorch 1.13. Two rows:
  torch ops   the hook's sequence of tensor ops for one compressed tensor (powerSGD_hook.py):
              M += error, clone, orthogonalize Q (the hook's own _orthogonalize: QR at rank 4),
              P = M Q (bmm), orthogonalize P, Q = M^T P, Q /= world size, M = P Q^T,
              error = copy - M; the P and Q all-reduces are left out (world size 1).
  torch hook  powerSGD_hook itself on a gloo group of one process, with a stand-in bucket object
              (GradBucket has no Python constructor in 1.13; the hook only calls buffer(),
              index(), is_last() and gradients() on it), so futures and no-op all-reduces count.
Rows in the format of powersgd_bench. Usage: powersgd_torch.py [--threads 2] [--reps 10]
"""
import argparse
import os
import shutil
import tempfile
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd

ROWS, COLS, RANK = 4096, 4096, 4


def time_it(reps, setup, body):
    setup()
    body()
    secs = []
    for _ in range(reps):
        setup()
        t0 = time.perf_counter()
        body()
        secs.append(time.perf_counter() - t0)
    return sum(secs) / reps, min(secs)


class Ops:
    def __init__(self, grad):
        self.grad = grad
        self.m = grad.clone()
        self.error = torch.zeros_like(grad)
        self.p = torch.empty(1, ROWS, RANK)
        self.q = torch.randn(1, COLS, RANK, generator=torch.Generator().manual_seed(2))

    def reset(self):
        self.m.copy_(self.grad)

    def step(self):
        m = self.m
        m.add_(self.error)
        copy = torch.clone(m).detach()
        mat = m.view(1, ROWS, COLS)
        psgd._orthogonalize(self.q, 0)
        torch.bmm(mat, self.q, out=self.p)
        psgd._orthogonalize(self.p, 0)
        torch.bmm(mat.transpose(1, 2), self.p, out=self.q)
        self.q.div_(1)
        torch.bmm(self.p, self.q.transpose(1, 2), out=mat)
        self.error = copy - m


class Bucket:
    """What powerSGD_hook uses of a GradBucket: one flat buffer holding one 2-D gradient."""

    def __init__(self, flat):
        self.flat = flat

    def buffer(self):
        return self.flat

    def index(self):
        return 0

    def is_last(self):
        return True

    def gradients(self):
        return [self.flat.view(ROWS, COLS)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    grad = torch.randn(ROWS * COLS, generator=torch.Generator().manual_seed(1)) * 1e-3
    tag = "torch%d" % args.threads

    ops = Ops(grad)
    mean, best = time_it(args.reps, ops.reset, ops.step)
    print("%-8s %-34s %10.2f %10.2f" % (tag, "torch ops (hook's sequence)", mean * 1e3, best * 1e3), flush=True)

    tmp = tempfile.mkdtemp()
    dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "rdv"), rank=0, world_size=1)
    state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=RANK, start_powerSGD_iter=2)
    state.iter = state.start_powerSGD_iter  # compress from the first call
    flat = grad.clone()
    bucket = Bucket(flat)
    mean, best = time_it(args.reps, lambda: flat.copy_(grad), lambda: psgd.powerSGD_hook(state, bucket).wait())
    print("%-8s %-34s %10.2f %10.2f" % (tag, "torch hook (gloo, world size 1)", mean * 1e3, best * 1e3), flush=True)
    shutil.rmtree(tmp)
    # Skip gloo's teardown: in 1.13 it can abort the process ("Resource deadlock avoided").
    os._exit(0)

if __name__ == "__main__":
    main()
