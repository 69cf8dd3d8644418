#!/usr/bin/python3
"""PyTorch reference for recipes/mlp_fmnist.toml: the same experiment in one process.

Benchmark peer only (docs/benchmarks.md); PyTorch is not a project dependency. Run it with
Debian's interpreter, which has python3-torch 1.13:

    /usr/bin/python3 tests/bench/mlp_fmnist_torch.py [--steps N] [--threads 2]

What it mirrors from the recipe:
  - model 784-512-256-10, ReLU, PyTorch's default nn.Linear init, mean cross-entropy loss;
  - Fashion-MNIST read from the idx .gz files, pixels / 255 normalised with mean 0.2860,
    std 0.3530 (workloads/data/fashion_mnist.h);
  - global batch 256. The recipe runs 4 data-parallel ranks x micro-batch 64 with a mean
    all-reduce of gradients every step; that is mathematically one worker taking a step on the
    same 256-example global batch, which is what this script does (no communication);
  - SGD, momentum 0.9, weight decay 5e-4 on weights only (biases in a no-decay group), like
    optimizers/sgd.cpp (PyTorch's SGD update has the same form: b = mu*b + g + wd*w; w -= lr*b);
  - lr 0.05: linear warmup (step+1)/50 * lr for 50 steps, then cosine to 0 at the last step,
    exactly as optimizers/schedule.cpp;
  - 5 epochs of 60000 // 256 = 234 full batches (drop_last) = 1170 steps, a fresh permutation
    per epoch from a fixed seed (not the same permutation as ours: different generators);
  - evaluation on the 10k test set at the end.

Prints ms/step over the training steps only (the final evaluation is timed separately), the
test accuracy, and as the last line one JSON object.
"""
import argparse
import gzip
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    ndim = magic & 0xFF
    if magic >> 8 != 0x08:  # unsigned byte payload
        raise ValueError(f"{path}: magic {magic:#x} is not an idx ubyte file")
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    return arr.reshape(dims)


def load_split(root, prefix):
    x = read_idx(os.path.join(root, f"{prefix}-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(root, f"{prefix}-labels-idx1-ubyte.gz"))
    x = (x.reshape(x.shape[0], -1).astype(np.float32) / 255.0 - MEAN) / STD
    return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


def lr_at(step, peak, warmup, total):
    """optimizers/schedule.cpp, decay = cosine, min_ratio = 0."""
    if step < warmup:
        return peak * (step + 1) / warmup
    span = max(1, total - 1 - warmup)
    t = min(1.0, (step - warmup) / span)
    return peak * 0.5 * (1.0 + math.cos(math.pi * t))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=0, help="override the step count (0: epochs)")
    ap.add_argument("--batch", type=int, default=256, help="global batch")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--log-every", type=int, default=234)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    x_train, y_train = load_split(args.data, "train")
    x_test, y_test = load_split(args.data, "t10k")
    n = x_train.shape[0]
    steps_per_epoch = n // args.batch  # drop_last
    total = args.steps if args.steps > 0 else args.epochs * steps_per_epoch

    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))
    decay = [p for name, p in model.named_parameters() if name.endswith("weight")]
    no_decay = [p for name, p in model.named_parameters() if name.endswith("bias")]
    opt = torch.optim.SGD([{"params": decay, "weight_decay": args.weight_decay},
                           {"params": no_decay, "weight_decay": 0.0}],
                          lr=args.lr, momentum=args.momentum)

    gen = torch.Generator().manual_seed(args.seed)
    perm = None
    interval_loss, interval_steps, final_loss = 0.0, 0, float("nan")
    model.train()
    t0 = time.perf_counter()
    for step in range(total):
        pos = step % steps_per_epoch
        if pos == 0:
            perm = torch.randperm(n, generator=gen)
        idx = perm[pos * args.batch:(pos + 1) * args.batch]
        xb, yb = x_train[idx], y_train[idx]
        lr = lr_at(step, args.lr, args.warmup, total)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        interval_loss += loss.item()
        interval_steps += 1
        done = step + 1
        if done % args.log_every == 0 or done == total:
            final_loss = interval_loss / interval_steps
            print(f"step {done:4d}/{total} | loss {final_loss:.4f} | lr {lr:.5f} | "
                  f"{(time.perf_counter() - t0) / done * 1e3:.2f} ms/step", flush=True)
            interval_loss, interval_steps = 0.0, 0
    train_s = time.perf_counter() - t0

    t1 = time.perf_counter()
    model.eval()
    with torch.no_grad():
        logits = model(x_test)
        test_loss = F.cross_entropy(logits, y_test).item()
        test_acc = (logits.argmax(1) == y_test).float().mean().item()
    eval_s = time.perf_counter() - t1

    ms = train_s / total * 1e3
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads: {total} steps in {train_s:.2f} s "
          f"= {ms:.2f} ms/step (train only); eval {eval_s:.3f} s; test loss {test_loss:.4f} "
          f"acc {100 * test_acc:.2f}%")
    print(json.dumps({"impl": "torch", "torch_version": torch.__version__, "threads": torch.get_num_threads(),
                      "global_batch": args.batch, "steps": total, "train_s": train_s, "ms_per_step": ms,
                      "eval_s": eval_s, "final_loss": final_loss, "eval_loss": test_loss,
                      "eval_accuracy": test_acc}))


if __name__ == "__main__":
    main()
