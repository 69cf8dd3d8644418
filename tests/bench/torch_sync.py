#!/usr/bin/env python3
"""One run of tests/bench/torch_sync.sh: the same torch MLP, data and optimizer trained by several
loops in one process, their steps interleaved (loop a's step s, loop b's step s, ..., the order
rotated every step), so that load from other work on the machine falls on all of them alike.
Each step is timed; rank 0 writes the times and each loop's final parameters. Under mpirun the
ranks meet in a barrier (torch.distributed on gloo, untimed) before every step, so that a step
starts with all ranks together and does not inherit the previous loop's stragglers.

  torch_sync.py LOOP[,LOOP...] --out DIR [--size full|tiny] [--steps N] [--recipe FILE]

LOOP
  plain   a plain torch loop: zero_grad, forward, backward, optimizer.step(); under mpirun each
          process trains alone on its shard (no communication: the ranks' compute alone, the
          floor of any sync's step)
  sync    laconic.torch.Sync around the same loop (sync.step instead of optimizer.step): the
          recipe's allreduce over the MPI backend under mpirun, or one process alone
  ddp     torch.nn.parallel.DistributedDataParallel on gloo (rank and world from
          OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE, rendezvous through a file in DIR)

Model: an MLP IN-H-H-OUT with ReLU (full: 1024-2048-2048-16, 6.33 M parameters, 25.3 MB of
float32 gradients per step; tiny: 64-128-128-16, 26 k parameters), cross-entropy, SGD lr 0.01
momentum 0.9; every loop has its own copy, initialised alike. Each process reads micro-batch B
(full 32, tiny 8) of step s at rank r of W: examples [(s W + r) B, (s W + r + 1) B) of a fixed
synthetic set, so W ranks make the global batch W B, the same for every loop. torch runs with one
thread (torch.set_num_threads(1); the shell script also sets OMP_NUM_THREADS and
OPENBLAS_NUM_THREADS to 1).

Writes DIR/times.json (rank 0): {"world", "params", "step_s": {loop: [seconds per step]}} and
DIR/params.LOOP.npy (rank 0's final parameters, flat, in model.parameters() order).
"""
import argparse
import json
import os
import time

import numpy as np
import torch

SIZES = {  # in, hidden, out, micro-batch, examples in the synthetic set
    "full": (1024, 2048, 16, 32, 4096),
    "tiny": (64, 128, 16, 8, 512),
}
LOSS = torch.nn.functional.cross_entropy


def make_model(size):
    d_in, hidden, d_out = SIZES[size][:3]
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(d_in, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                               torch.nn.ReLU(), torch.nn.Linear(hidden, d_out))


def make_data(size):
    d_in, _, d_out, _, n = SIZES[size]
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(n, d_in, generator=g)
    y = (x[:, :d_out] + 0.5 * torch.randn(n, d_out, generator=g)).argmax(dim=1)
    return x, y


def batch(data, size, step, rank, world):
    b, n = SIZES[size][3], SIZES[size][4]
    start = ((step * world + rank) * b) % n
    rows = torch.arange(start, start + b) % n
    return data[0][rows], data[1][rows]


def sgd(params):
    return torch.optim.SGD(params, lr=0.01, momentum=0.9)


class Plain:
    def __init__(self, a, data, rank, world):
        self.model, self.data, self.a, self.rank, self.world = make_model(a.size), data, a, rank, world
        self.opt = sgd(self.model.parameters())

    def step(self, s):
        self.opt.zero_grad()
        x, y = batch(self.data, self.a.size, s, self.rank, self.world)
        LOSS(self.model(x), y).backward()
        self.opt.step()

    def finish(self):
        pass


class Ddp(Plain):
    def __init__(self, a, data, rank, world):
        super().__init__(a, data, rank, world)
        # Defaults: 25 MB buckets (1 MB first), each reduced as soon as backward has filled it.
        self.ddp = torch.nn.parallel.DistributedDataParallel(self.model)

    def step(self, s):
        self.opt.zero_grad()
        x, y = batch(self.data, self.a.size, s, self.rank, self.world)
        LOSS(self.ddp(x), y).backward()
        self.opt.step()



class Sync:
    def __init__(self, a, data, world):
        import laconic.torch as lt
        self.model, self.data, self.a = make_model(a.size), data, a
        overrides = {"train.steps": a.steps, "distributed.world_size": world}
        if world > 1:
            overrides["distributed.backend"] = "mpi"
        self.sync = lt.Sync(self.model, recipe=a.recipe, overrides=overrides, out=os.path.join(a.out, "run"),
                            log=False)
        self.opt = sgd(self.model.parameters())

    def step(self, s):
        x, y = batch(self.data, self.a.size, s, self.sync.data_rank, self.sync.data_world)
        loss = LOSS(self.model(x), y)
        loss.backward()
        self.sync.step(self.opt, loss=loss)

    def finish(self):
        self.sync.finish()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("loops", help="comma-separated: plain, sync, ddp")
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--recipe", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_sync.toml"))
    a = ap.parse_args()
    names = a.loops.split(",")
    if not names or any(n not in ("plain", "sync", "ddp") for n in names) or len(set(names)) != len(names):
        ap.error(f"loops: expected distinct names among plain, sync, ddp; got {a.loops}")
    torch.set_num_threads(1)
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    data = make_data(a.size)
    barrier = lambda: None  # noqa: E731
    if world > 1:  # the ranks' barrier, and DDP's process group
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="file://" + os.path.join(a.out, "gloo.rendezvous"), rank=rank,
                                world_size=world)
        barrier = dist.barrier
    loops = {n: Plain(a, data, rank, world) if n == "plain" else Ddp(a, data, rank, world) if n == "ddp"
             else Sync(a, data, world) for n in names}
    times = {n: [] for n in names}
    for s in range(a.steps):
        for k in range(len(names)):
            n = names[(s + k) % len(names)]
            barrier()
            t = time.perf_counter()
            loops[n].step(s)
            times[n].append(time.perf_counter() - t)
    for loop in loops.values():
        loop.finish()
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    if rank == 0:
        for n, loop in loops.items():
            flat = torch.cat([p.detach().reshape(-1) for p in loop.model.parameters()]).numpy()
            np.save(os.path.join(a.out, f"params.{n}.npy"), flat)
        with open(os.path.join(a.out, "times.json"), "w") as f:
            json.dump({"world": world, "params": int(flat.size), "step_s": times}, f)


if __name__ == "__main__":
    main()
