"""One process of the laconic.torch tests (started by them: alone, under mpirun, or as a gloo
rank with LACONIC_RANK / LACONIC_WORLD_SIZE / LACONIC_STORE): trains the small torch MLP of
_torch_model on the deterministic data there, with the recipe and overrides given, and saves the
final parameters (every rank: params.rank-R.npy in --save).

    _torch_worker.py RECIPE --out DIR --save DIR [--set key=value ...] [--micro B] [--resume auto]
                     [--optimizer sgd|adamw] [--stall-at STEP] [--widths 784,32,10] [--device cuda]
                     [--own-group] [--die-at STEP]

--die-at STEP: on torchrun's first attempt (TORCHELASTIC_RESTART_COUNT 0), rank 1 exits 1 at
that step, before its backward: a worker that dies for torchrun's elastic agent to restart.

--own-group: the script has its own torch.distributed process group (gloo, made before lt.Sync,
as a script under torchrun would for its evaluation), used once after training: the mean of the
ranks' final losses, saved as own-group.rank-R.txt.
"""
import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _torch_model as tm  # noqa: E402
import laconic.torch as lt  # noqa: E402


def value(text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text, text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("recipe")
    ap.add_argument("--out", default="")
    ap.add_argument("--save", default="")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--resume", default=None)
    ap.add_argument("--optimizer", default="sgd")
    ap.add_argument("--stall-at", type=int, default=-1, help="sleep at this step (a signal's window)")
    ap.add_argument("--device", default="cpu", help="where the model trains (cpu, cuda)")
    ap.add_argument("--widths", default="", help="the MLP's layer widths, input first (default: _torch_model's)")
    ap.add_argument("--own-group", action="store_true", help="a torch.distributed group of the script's beside lt.Sync")
    ap.add_argument("--die-at", type=int, default=-1, help="rank 1 exits 1 at this step on torchrun's first attempt")
    a = ap.parse_args()
    if a.own_group:
        torch.distributed.init_process_group("gloo")
    overrides = dict((kv.split("=", 1)[0], value(kv.split("=", 1)[1])) for kv in a.set)
    widths = tuple(int(w) for w in a.widths.split(",")) if a.widths else None
    model = (tm.make_model(widths) if widths else tm.make_model()).to(a.device)
    features = widths[0] if widths else tm.FEATURES
    opt = tm.make_optimizer(model, a.optimizer)
    # A run that stalls for a signal stops at the very next step: the test expects that step's
    # checkpoint, which a loaded machine's slow agreements would otherwise move (or skip, past the end).
    sync = lt.Sync(model, recipe=a.recipe, overrides=overrides, out=a.out or None, resume=a.resume, log=False,
                   eval_fn=lambda: tm.eval_loss(model, features), stop_every_step=a.stall_at >= 0)
    micro = tm.micro_batch(a.recipe, overrides)
    while not sync.done:
        step = sync.step_count
        if step == a.die_at and sync.rank == 1 and os.environ.get("TORCHELASTIC_RESTART_COUNT") == "0":
            print(f"rank 1 dies at step {step}", flush=True)
            os._exit(1)
        for m in range(tm.grad_accum(a.recipe, overrides)):
            x, y = tm.batch(step, m, sync.data_rank, sync.data_world, micro, features)
            x, y = x.to(a.device), y.to(a.device)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            if step == a.stall_at and m == 0:
                print(f"stalling at {step}", flush=True)
                time.sleep(3)
            sync.step(opt, loss=loss)
    sync.finish()
    if a.save:
        os.makedirs(a.save, exist_ok=True)
    if a.own_group:
        mean = torch.tensor([float(loss)])
        torch.distributed.all_reduce(mean)
        with open(os.path.join(a.save, f"own-group.rank-{sync.rank}.txt"), "w") as f:
            f.write(f"{mean.item() / torch.distributed.get_world_size()}\n")
        torch.distributed.destroy_process_group()
    if a.save:
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu().numpy()
        np.save(os.path.join(a.save, f"params.rank-{sync.rank}.npy"), flat)


if __name__ == "__main__":
    main()
