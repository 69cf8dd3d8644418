"""DiLoCo and streaming DiLoCo through laconic.torch are the papers' algorithms: a torch MLP trained
20 steps over 2 gloo processes (inner AdamW, H = 5, outer SGD lr 0.7 with Nesterov momentum 0.9)
ends, on every rank, with the parameters of a pure-torch DiLoCo written here from the papers'
definitions, to 1e-6 relative (norm-wise).

DiLoCo (Douillard et al. 2023, Algorithm 1): each replica r takes H inner steps from the shared
anchor theta; then Delta = mean_r(theta - theta_r), theta is stepped by the outer optimizer
(torch.optim.SGD, Nesterov) with Delta as its gradient, and every replica restarts from theta.
The inner optimizers keep their state across syncs.

Streaming DiLoCo (Douillard et al. 2025, Algorithm 2): the parameters are cut into fragments p,
each with its own anchor and outer optimizer state; fragment p syncs after inner step t when
(t - t_p) mod H = 0, t_p = floor(p H / P) (t counts local steps from 1), and with no overlap
(tau = 0) is merged at once: theta_r,p = alpha theta_r,p + (1 - alpha) theta_p, alpha = 0.5.
The papers cut fragments as groups of transformer blocks (sequential or strided); Laconic's
documented choice (docs/outer_loop.md "Schedules") is contiguous runs of whole tensors whose
largest fragment is as small as possible, which the reference below finds by brute force.
"""
import itertools
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _setup import run_gloo_ranks, setup_torch  # noqa: E402

TRAINER, SOURCE = setup_torch()
import numpy as np  # noqa: E402
import torch  # noqa: E402

import _torch_model as tm  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "_torch_worker.py")
RECIPE = os.path.join(HERE, "torch_diloco_reference.toml")
WORLD, STEPS, MICRO, H = 2, 20, 16, 5  # as in torch_diloco_reference.toml
OUTER_LR, OUTER_MU = 0.7, 0.9
tmp = tempfile.mkdtemp(prefix="laconic-torch-diloco-")


def run_gloo(name, sets):
    save = os.path.join(tmp, name)
    cmd = [sys.executable, WORKER, RECIPE, "--optimizer", "adamw", "--save", save] + sum([["--set", s] for s in sets], [])
    run_gloo_ranks(cmd, WORLD, os.path.join(tmp, name + ".store"), timeout=120)
    return [np.load(os.path.join(save, f"params.rank-{r}.npy")) for r in range(WORLD)]


def fragments_of(sizes, count):
    """Contiguous runs of whole tensors, the largest as small as possible (the earliest cuts on a
    tie): lists of tensor indices."""
    best = None
    for cuts in itertools.combinations(range(1, len(sizes)), count - 1):
        bounds = (0,) + cuts + (len(sizes),)
        worst = max(sum(sizes[a:b]) for a, b in zip(bounds, bounds[1:]))
        if best is None or worst < best[0]:
            best = (worst, bounds)
    bounds = best[1]
    return [list(range(a, b)) for a, b in zip(bounds, bounds[1:])]


def reference(fragments=1, mixing=0.0, offsets=None, nesterov=True):
    """Pure-torch (streaming) DiLoCo of WORLD replicas in one process: each replica's parameters
    after STEPS steps, flattened as the worker saves them."""
    replicas = [tm.make_model() for _ in range(WORLD)]
    inner = [tm.make_optimizer(m, "adamw") for m in replicas]
    params = [list(m.parameters()) for m in replicas]
    groups = fragments_of([p.numel() for p in params[0]], fragments)
    if offsets is None:
        offsets = [f * H // fragments for f in range(fragments)]
    anchors, outer = [], []
    for g in groups:
        anchor = [params[0][i].detach().clone().requires_grad_(True) for i in g]
        anchors.append(anchor)
        outer.append(torch.optim.SGD(anchor, lr=OUTER_LR, momentum=OUTER_MU, nesterov=nesterov))
    for step in range(STEPS):
        for r, model in enumerate(replicas):
            x, y = tm.batch(step, 0, r, WORLD, MICRO)
            torch.nn.functional.cross_entropy(model(x), y).backward()
            inner[r].step()
            inner[r].zero_grad()
        t = step + 1  # inner steps done
        with torch.no_grad():
            for f, g in enumerate(groups):
                if t < offsets[f] or (t - offsets[f]) % H != 0:
                    continue
                for anchor, i in zip(anchors[f], g):
                    anchor.grad = sum(anchor - params[r][i] for r in range(WORLD)) / WORLD
                outer[f].step()
                for anchor, i in zip(anchors[f], g):
                    for r in range(WORLD):
                        params[r][i].mul_(mixing).add_(anchor, alpha=1.0 - mixing)
    return [torch.cat([p.detach().reshape(-1) for p in ps]).numpy() for ps in params]


def difference(a, b):
    return float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b.astype(np.float64)))


def check(laconic_ranks, ref, what, wrong, wrong_what):
    for r in range(WORLD):
        err = difference(laconic_ranks[r], ref[r])
        assert err <= 1e-6, f"{what}: rank {r} differs from the pure-torch reference by {err:.3g} relative"
    # The comparison can fail: a reference one detail off (named in `wrong`) is far away.
    gap = min(difference(laconic_ranks[r], wrong[r]) for r in range(WORLD))
    assert gap > 1e-4, f"{what}: the check cannot tell the reference from {gap:.3g} away"
    print(f"ok: {what} == pure-torch reference on both ranks (max relative difference "
          f"{max(difference(laconic_ranks[r], ref[r]) for r in range(WORLD)):.2g}; off by {gap:.2g} "
          f"against the reference with {wrong_what})")


try:
    sizes = [p.numel() for p in tm.make_model().parameters()]
    # The MLP's tensors (384, 32, 1024, 32, 128, 4): the first layer alone against the rest.
    assert fragments_of(sizes, 2) == [[0, 1], [2, 3, 4, 5]], fragments_of(sizes, 2)

    diloco = run_gloo("diloco", [])
    assert np.array_equal(diloco[0], diloco[1]), "DiLoCo: the replicas differ after the last step's sync"
    check(diloco, reference(), "DiLoCo (H = 5, outer Nesterov)", reference(nesterov=False), "plain momentum")

    streaming = run_gloo("streaming", ["sync.strategy=streaming_diloco"])
    what = "streaming DiLoCo (2 fragments, offsets 0 and 2, tau 0, alpha 0.5)"
    # Fragment 1 last synced after step 17, and alpha keeps replicas apart: they differ.
    assert not np.array_equal(streaming[0], streaming[1]), "streaming DiLoCo: the replicas agree at the end"
    check(streaming, reference(fragments=2, mixing=0.5), what, reference(fragments=2, mixing=0.5, offsets=[0, 0]),
          "both fragments at offset 0")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
