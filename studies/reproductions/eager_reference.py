#!/usr/bin/python3
"""An independent reference for eager DiLoCo (Kale, Douillard & Donchev 2025, arXiv 2502.12996),
written from the paper's update, not from Laconic's code, in numpy.

M replicas train the recipes/mlp_fmnist.toml MLP (784-512-256-10, ReLU, uniform(+-1/sqrt(fan_in))
init, SGD momentum 0.9, lr 0.05 with 50 warm-up steps then cosine to 0, weight decay 5e-4 on the
weights, batch 64 per replica) on Fashion-MNIST, each on its own stream of batches, and sync every
H steps with an outer Nesterov SGD step (lr 0.7, momentum 0.9: Laconic's [sync.diloco] defaults).
Every variant sees the same initial weights and the same batches; it prints replica 0's held-out
loss and accuracy on the 10k test images (what Laconic's trainer reports) and the replicas' mean.

Variants (d_m^t = start_m - theta_m: replica m's pseudo-gradient at sync t, from where it last
restarted, its anchor but in `shared`; G^t = mean_m d_m^t):
  allreduce  data parallel: the gradients averaged every step (the same global batch)
  diloco     synchronous DiLoCo: the anchor moves by OuterOpt with G^t, every replica restarts there
  delayed    the paper's naive overlap: the anchor moves with G^(t-1) (d^t is still in flight)
  eager      the paper's eager update: replica m steps its own anchor and its own outer momentum
             with (d_m^t + sum_(m' != m) d_m'^(t-1)) / M, its fresh share standing in for the
             unavailable mean, the others' shares one sync late (G^-1 = d^-1 = 0)
  eager_doc  docs/outer_loop.md's form of the same rule, G^(t-1) + (d_m^t - d_m^(t-1)) / M
             (Laconic's): must equal `eager` up to rounding
  eager_flush  eager, then at the end the last all-reduce is waited for and applied as one more
             eager step with no new local progress (G^T - d_m^T / M): what the in-flight sync costs
  shared     an alternative reading, not the paper's: one shared anchor and momentum that take the
             true mean one sync late (as `delayed`), each replica starting from it minus
             outer_lr * d_m^t / M (its own fresh share, eagerly)

  /usr/bin/python3 studies/reproductions/eager_reference.py                # 60 steps, H = 10, M = 4
  /usr/bin/python3 studies/reproductions/eager_reference.py --steps 240 --seeds 3
  /usr/bin/python3 studies/reproductions/eager_reference.py --stability    # why eager diverges at M = 4
"""
import argparse
import gzip
import math
import os
import sys
import time

import numpy as np

DATA = "/usr/share/datasets/fashion-mnist"


def load(kind):
    with gzip.open(os.path.join(DATA, "%s-images-idx3-ubyte.gz" % kind)) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(os.path.join(DATA, "%s-labels-idx1-ubyte.gz" % kind)) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
    return ((x.astype(np.float32) / 255.0 - 0.2860) / 0.3530).astype(np.float32), y


class Mlp:
    """The parameters are one flat float32 vector (so outer steps are vector arithmetic); `views`
    gives each layer's weight [out, in] and bias [out] inside it."""

    def __init__(self, sizes):
        self.shapes, n = [], 0
        for i, o in zip(sizes[:-1], sizes[1:]):
            self.shapes.append(((o, i), n, n + o * i, n + o * i + o))
            n += o * i + o
        self.size = n
        self.decay = np.zeros(n, np.float32)  # weight decay on the weights, not the biases
        for _, a, b, _ in self.shapes:
            self.decay[a:b] = 1.0

    def init(self, rng):
        p = np.empty(self.size, np.float32)
        for (o, i), a, b, c in self.shapes:
            bound = 1.0 / math.sqrt(i)
            p[a:c] = rng.uniform(-bound, bound, c - a)
        return p

    def views(self, p):
        return [(p[a:b].reshape(shape), p[b:c]) for shape, a, b, c in self.shapes]

    def loss_grad(self, p, x, y, grad=True):
        hs, h = [x], x
        layers = self.views(p)
        for k, (w, b) in enumerate(layers):
            h = h @ w.T + b
            if k + 1 < len(layers):
                h = np.maximum(h, 0.0)
            hs.append(h)
        z = h - h.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        loss = -logp[np.arange(len(y)), y].mean()
        if not grad:
            return loss, logp
        g = np.empty_like(p)
        dz = np.exp(logp)
        dz[np.arange(len(y)), y] -= 1.0
        dz /= len(y)
        for k in range(len(layers) - 1, -1, -1):
            shape, a, b, c = self.shapes[k]
            g[a:b] = (dz.T @ hs[k]).ravel()
            g[b:c] = dz.sum(axis=0)
            if k:
                dz = (dz @ layers[k][0]) * (hs[k] > 0)
        return loss, g

    def evaluate(self, p, x, y):
        loss, logp = self.loss_grad(p, x, y, grad=False)
        return float(loss), float((logp.argmax(axis=1) == y).mean())


def lr_at(step, a):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    t = min(1.0, (step - a.warmup) / max(1, a.steps - 1 - a.warmup))
    return a.lr * 0.5 * (1.0 + math.cos(math.pi * t))


def nesterov(anchor, u, delta, a):
    """Outer Nesterov SGD (PyTorch's form, as DiLoCo): u = mu u + delta; anchor -= lr (delta + mu u)."""
    u *= a.outer_momentum
    u += delta
    anchor -= a.outer_lr * (delta + a.outer_momentum * u)


def spectral_radius(rule, lr, mu, m, c):
    """The outer loop linearised: every replica alike, an inner period moves the start a fraction c
    of the way to the optimum (d^t = c x^t; c > 1 when inner momentum overshoots). State (x, u,
    d^(t-1)); the largest |eigenvalue| of one sync, > 1: the outer loop diverges."""
    def sync(state):
        x, u, d_prev = state
        d = c * x
        delta = {"diloco": d, "delayed": d_prev, "eager": d_prev + (d - d_prev) / m}[rule]
        u = mu * u + delta
        return np.array([x - lr * (delta + mu * u), u, d])
    return max(abs(np.linalg.eigvals(np.stack([sync(e) for e in np.eye(3)], axis=1))))


def stability():
    print("| outer lr | Nesterov | M | worst over c in (0, c_max]: DiLoCo | delayed | eager |")
    print("|---|---|---|---|---|---|")
    for lr, mu, m in ((0.7, 0.9, 4), (0.7, 0.9, 2), (0.4, 0.9, 2), (0.4, 0.9, 4), (0.7, 0.5, 4)):
        for c_max in (1.0, 1.5):
            cs = np.linspace(0.01, c_max, 150)
            worst = [max(spectral_radius(r, lr, mu, m, c) for c in cs) for r in ("diloco", "delayed", "eager")]
            print("| %g | %g | %d | c_max %g: %.3f | %.3f | %.3f |" % (lr, mu, m, c_max, *worst))


def run(variant, a, net, p0, batches, test):
    m = 1 if variant == "allreduce" else a.replicas
    theta = [p0.copy() for _ in range(m)]
    buf = [np.zeros_like(p0) for _ in range(m)]  # inner SGD momentum, kept across syncs
    per_replica = variant.startswith("eager")
    anchor = [p0.astype(np.float64) for _ in range(m if per_replica else 1)]
    u = [np.zeros(net.size) for _ in anchor]
    start = [p0.astype(np.float64) for _ in range(m)]  # where replica m restarted at its last sync
    prev = [np.zeros(net.size) for _ in range(m)]  # d_m^(t-1)
    g_prev = np.zeros(net.size)  # G^(t-1)
    for step in range(a.steps):
        lr = lr_at(step, a)
        for r in range(m):
            x, y = batches(step, r, variant == "allreduce")
            _, g = net.loss_grad(theta[r], x, y)
            g += a.weight_decay * net.decay * theta[r]
            buf[r] *= a.momentum
            buf[r] += g
            theta[r] -= lr * buf[r]
        if variant == "allreduce" or (step + 1) % a.period:
            continue
        d = [start[r] - theta[r] for r in range(m)]
        g_now = sum(d) / m
        if variant == "diloco":
            nesterov(anchor[0], u[0], g_now, a)
        elif variant in ("delayed", "shared"):
            nesterov(anchor[0], u[0], g_prev, a)
        elif variant in ("eager", "eager_flush"):
            for r in range(m):
                others = sum(prev[q] for q in range(m) if q != r)
                nesterov(anchor[r], u[r], (d[r] + others) / m, a)
        elif variant == "eager_doc":
            for r in range(m):
                nesterov(anchor[r], u[r], g_prev + (d[r] - prev[r]) / m, a)
        for r in range(m):
            if variant == "shared":
                start[r] = anchor[0] - a.outer_lr * d[r] / m
            else:
                start[r] = anchor[r if per_replica else 0].copy()
            theta[r] = start[r].astype(np.float32)
        prev, g_prev = d, g_now
    if variant == "eager_flush" and a.steps % a.period == 0:
        for r in range(m):  # the last mean arrives: an eager step with d_m^(T+1) = 0
            nesterov(anchor[r], u[r], g_prev - prev[r] / m, a)
            theta[r] = anchor[r].astype(np.float32)
    first = net.evaluate(theta[0], *test)
    mean = net.evaluate(sum(t.astype(np.float64) for t in theta).astype(np.float32) / m, *test)
    return first, mean, theta


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--period", type=int, default=10, help="H")
    ap.add_argument("--replicas", type=int, default=4, help="M")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--hidden", default="512,256")
    ap.add_argument("--batch", type=int, default=64, help="per replica")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--outer-lr", type=float, default=0.7)
    ap.add_argument("--outer-momentum", type=float, default=0.9)
    ap.add_argument("--variants", default="allreduce,diloco,delayed,eager,eager_doc,eager_flush,shared")
    ap.add_argument("--stability", action="store_true", help="only the linearised outer loop's spectral radii")
    a = ap.parse_args()
    if a.stability:
        return stability()
    t0 = time.time()
    xtr, ytr = load("train")
    test = load("t10k")
    net = Mlp([784] + [int(h) for h in a.hidden.split(",")] + [10])
    variants = a.variants.split(",")
    print("M = %d replicas, H = %d, %d steps, batch %d per replica, outer lr %g Nesterov %g; replica 0 "
          "(and the replicas' mean) on the 10k test images" % (a.replicas, a.period, a.steps, a.batch,
                                                                 a.outer_lr, a.outer_momentum))
    results = {v: [] for v in variants}
    for seed in range(a.seeds):
        rng = np.random.default_rng(seed)
        p0 = net.init(rng)
        order = rng.permutation(len(ytr))

        def batches(step, r, merged):
            # The same examples every variant: replica r's batch at `step`; all-reduce takes the M
            # replicas' batches at once (its global batch).
            n, b = a.replicas, a.batch
            lo = (step * n + (0 if merged else r)) * b
            idx = order[np.arange(lo, lo + (n if merged else 1) * b) % len(order)]
            return xtr[idx], ytr[idx]

        finals = {}
        for v in variants:
            first, mean, theta = run(v, a, net, p0, batches, test)
            results[v].append((first, mean))
            finals[v] = theta
        if "eager" in finals and "eager_doc" in finals:
            diff = max(float(np.abs(x - y).max()) for x, y in zip(finals["eager"], finals["eager_doc"]))
            print("seed %d: eager (the paper's sum over the others) vs eager_doc (Laconic's form): max |diff| %.2e"
                  % (seed, diff))
    print("| variant | held-out loss | accuracy | replicas' mean: loss | accuracy |")
    print("|---|---|---|---|---|")
    for v in variants:
        r = np.array([[f[0], f[1], m[0], m[1]] for f, m in results[v]])
        mu = r.mean(axis=0)
        sd = r.std(axis=0, ddof=1) if len(r) > 1 else np.zeros(4)
        cell = lambda i, pct: ("%.1f%%" % (100 * mu[i]) if pct else "%.3f" % mu[i]) + \
            ((" ± %.1f" % (100 * sd[i]) if pct else " ± %.3f" % sd[i]) if len(r) > 1 else "")
        print("| %s | %s | %s | %s | %s |" % (v, cell(0, False), cell(1, True), cell(2, False), cell(3, True)))
    print("(%d seed%s, %.1f s)" % (a.seeds, "" if a.seeds == 1 else "s", time.time() - t0), file=sys.stderr)


if __name__ == "__main__":
    main()
