"""One rank of studies/ddp's side-by-side: torchvision's ResNet-18 (BatchNorm) trained on the same
seeded images by torch's DistributedDataParallel (--impl ddp) or by lt.Sync's allreduce
(--impl laconic), both under torchrun over gloo. Saves the rank's parameters, its BatchNorm running
statistics, the held-out loss its own model gives in eval mode, and its step times, as JSON.

    torchrun --nproc_per_node 2 _replica.py --impl ddp|laconic --out F [--steps N]
"""
import argparse
import json
import os
import time

import torch
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
MICRO, CLASSES = 8, 10


def batch(step, rank, n=MICRO):
    """Rank r's images of step s: a fixed function of (s, r); class c brightens channel c % 3."""
    g = torch.Generator().manual_seed(1_000_003 * step + rank)
    y = torch.randint(0, CLASSES, (n,), generator=g)
    x = torch.randn(n, 3, 32, 32, generator=g)
    x[torch.arange(n), y % 3] += 0.5 + 0.1 * y.float().view(-1, 1, 1)
    return x, y


def buffers(model):
    return torch.cat([b.detach().reshape(-1).float() for name, b in model.named_buffers() if "running" in name])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=("ddp", "laconic"), required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--out", required=True, help="JSON of this rank's results (RANK substituted)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)  # every rank, both implementations: the same start
    model = torchvision.models.resnet18(num_classes=CLASSES)
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    rank = int(os.environ["RANK"])
    times = []
    if a.impl == "ddp":
        torch.distributed.init_process_group("gloo")
        net = torch.nn.parallel.DistributedDataParallel(model)  # broadcast_buffers=True, its default
        for step in range(a.steps):
            t = time.perf_counter()
            x, y = batch(step, rank)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
            times.append(time.perf_counter() - t)
        torch.distributed.destroy_process_group()
    else:
        import laconic.torch as lt
        sync = lt.Sync(model, recipe=os.path.join(HERE, "allreduce.toml"), log=False,
                       overrides={"train.steps": a.steps})
        while not sync.done:
            t = time.perf_counter()
            x, y = batch(sync.step_count, rank)
            torch.nn.functional.cross_entropy(model(x), y).backward()
            sync.step(opt)
            times.append(time.perf_counter() - t)
        sync.finish()
    model.eval()
    with torch.no_grad():
        x, y = batch(10_000, 0, 64)  # one held-out batch, the same for every rank
        held_out = torch.nn.functional.cross_entropy(model(x), y).item()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    with open(a.out.replace("RANK", str(rank)), "w") as f:
        json.dump({"params": flat.tolist(), "buffers": buffers(model).tolist(), "held_out": held_out,
                   "step_s": times}, f)


if __name__ == "__main__":
    main()
