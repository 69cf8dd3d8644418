"""One replica of studies/torchft's side-by-side: the same MLP, data and inner AdamW trained with
DiLoCo by torchft (--impl torchft: a Manager on the lighthouse given, local_sgd.DiLoCo) or by
Laconic (--impl laconic: lt.Sync with diloco.toml, under torchrun). Saves the final parameters,
the wall time of every outer period and the bytes the sync sent, as JSON.

    _replica.py --impl torchft --replica R --lighthouse ADDR --store-port P --out F [--steps N --period H]
                [--no-init-sync] [--fragments 2 --delay TAU --alpha A]
    torchrun --nproc_per_node 2 _replica.py --impl laconic --out F [--steps N --period H] [--fragments ...]

--fragments 2: streaming DiLoCo, torchft's DiLoCo over model fragments (fragment_sync_delay TAU,
fragment_update_alpha A) against Laconic's streaming_diloco (overlap_steps TAU, mixing A).
"""
import argparse
import json
import os
import time
from datetime import timedelta

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
FEATURES, HIDDEN, CLASSES, MICRO = 32, 64, 10, 16
OUTER = {"lr": 0.7, "momentum": 0.9, "nesterov": True}  # diloco.toml's outer Nesterov SGD


def model():
    torch.manual_seed(0)  # both replicas, both implementations: the same start
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, CLASSES))


def batch(step, replica):
    """Replica r's micro-batch of step s: a fixed function of (s, r), separable classes."""
    g = torch.Generator().manual_seed(1_000_003 * step + replica)
    y = torch.randint(0, CLASSES, (MICRO,), generator=g)
    x = torch.randn(MICRO, FEATURES, generator=g) * 0.7
    x[torch.arange(MICRO), y] += 1.0
    return x, y


def inner_optimizer(m):
    return torch.optim.AdamW(m.parameters(), lr=3e-3, weight_decay=0.01)


def train(m, opt, steps, replica, step_hook):
    """Inner steps; step_hook(opt) after each backward does the optimizer's step (and the sync)."""
    marks = []
    for step in range(steps):
        x, y = batch(step, replica)
        torch.nn.functional.cross_entropy(m(x), y).backward()
        step_hook(opt)
        marks.append(time.perf_counter())
    return marks


def fragments(m, count):
    """torchft's model fragments as Laconic cuts this model into `count` (periodic.h's
    fragment_bounds: contiguous whole tensors, the largest as small as they allow; for 32-64-10 and 2:
    [W1] and [b1, W2, b2]), in the order torchft syncs them: its fragment i syncs at H/F (i + 1)
    steps, Laconic's fragment i at H/F i (fragment 0 at H), so torchft's i is Laconic's i + 1 mod F."""
    assert count == 2, "the study's fragments are those of F = 2"
    w1, b1, w2, b2 = m.parameters()
    laconic = [[w1], [b1, w2, b2]]
    out = []
    for tensors in laconic[1:] + laconic[:1]:
        holder = torch.nn.Module()  # shares the model's parameters: torchft updates them in place
        for i, p in enumerate(tensors):
            holder.register_parameter(f"p{i}", p)
        out.append(holder)
    return out


def run_torchft(a):
    from torchft.local_sgd import DiLoCo
    from torchft.manager import Manager
    from torchft.process_group import ProcessGroupGloo
    m = model()
    opt = inner_optimizer(m)
    frags = fragments(m, a.fragments) if a.fragments > 1 else [m]
    outer = [torch.optim.SGD(f.parameters(), **OUTER) for f in frags] if a.fragments > 1 else \
        torch.optim.SGD(m.parameters(), **OUTER)
    sent = [0]
    pg = ProcessGroupGloo(timeout=timedelta(seconds=60))
    manager = Manager(pg=pg, min_replica_size=2, use_async_quorum=False, load_state_dict=m.load_state_dict,
                      state_dict=m.state_dict, replica_id=f"replica{a.replica}", store_addr="127.0.0.1",
                      store_port=a.store_port, rank=0, world_size=1, lighthouse_addr=a.lighthouse, port=0,
                      timeout=timedelta(seconds=60), quorum_timeout=timedelta(seconds=60),
                      connect_timeout=timedelta(seconds=60), init_sync=a.init_sync)
    allreduce = manager.allreduce

    def counted(tensor, *args, **kwargs):  # the pseudo-gradients handed to the replicas' all-reduce
        sent[0] += tensor.numel() * tensor.element_size()
        return allreduce(tensor, *args, **kwargs)

    manager.allreduce = counted

    def step(o):
        o.step()
        o.zero_grad()

    with DiLoCo(manager, frags, opt, outer, sync_every=a.period, backup_device=torch.device("cpu"),
                fragment_sync_delay=a.delay, fragment_update_alpha=a.alpha):
        marks = train(m, opt, a.steps, a.replica, step)
    manager.shutdown()
    return m, marks, sent[0], "handed to Manager.allreduce (fp32 pseudo-gradients); gloo's own bytes not counted"


def run_laconic(a):
    import laconic.torch as lt
    m = model()
    opt = inner_optimizer(m)
    overrides = {"train.steps": a.steps, "sync.diloco.period": a.period}
    if a.fragments > 1:  # streaming DiLoCo with diloco.toml's outer step
        s = "sync.streaming_diloco."
        overrides = {"train.steps": a.steps, "sync.strategy": "streaming_diloco", s + "period": a.period,
                     s + "fragments": a.fragments, s + "overlap_steps": a.delay, s + "mixing": a.alpha,
                     s + "outer_lr": OUTER["lr"], s + "outer_momentum": OUTER["momentum"], s + "nesterov": True}
    sync = lt.Sync(m, recipe=os.path.join(HERE, "diloco.toml"), log=False, out=a.run_dir or None, overrides=overrides)
    marks = train(m, opt, a.steps, sync.data_rank, lambda o: sync.step(o))
    run = sync.finish()  # rank 0's run directory
    sent = run.summary["bytes_sent"] if run is not None else 0
    return m, marks, sent, "sent by rank 0, counted by Laconic's transport (the start's broadcast included)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", choices=("torchft", "laconic"), required=True)
    ap.add_argument("--replica", type=int, default=0)
    ap.add_argument("--lighthouse", default="")
    ap.add_argument("--store-port", type=int, default=0)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--period", type=int, default=4)
    ap.add_argument("--run-dir", default="")
    ap.add_argument("--no-init-sync", dest="init_sync", action="store_false",
                    help="torchft: Manager(init_sync=False), the replicas keep their own weights at the first quorum")
    ap.add_argument("--fragments", type=int, default=1, help="streaming DiLoCo over this many fragments")
    ap.add_argument("--delay", type=int, default=0, help="streaming: torchft's fragment_sync_delay, Laconic's tau")
    ap.add_argument("--alpha", type=float, default=0.0, help="streaming: torchft's fragment_update_alpha, Laconic's mixing")
    ap.add_argument("--out", required=True, help="JSON of this replica's results (RANK substituted)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    m, marks, sent, what = (run_torchft if a.impl == "torchft" else run_laconic)(a)
    replica = a.replica if a.impl == "torchft" else int(os.environ.get("RANK", "0"))
    flat = torch.cat([p.detach().reshape(-1) for p in m.parameters()])
    periods = [marks[i + a.period - 1] - marks[i - 1] for i in range(a.period, len(marks) - a.period + 1, a.period)]
    with open(a.out.replace("RANK", str(replica)), "w") as f:
        json.dump({"params": flat.tolist(), "period_s": periods, "bytes": sent, "bytes_are": what}, f)


if __name__ == "__main__":
    main()
