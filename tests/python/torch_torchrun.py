"""torchrun as it is: `torchrun --nproc-per-node 2 worker.py` with nothing of Laconic's in the
environment trains through lt.Sync, the ranks meeting through torch's own rendezvous store (gloo):
2 processes at micro-batch 16 end with the parameters of one process at 32 (1e-6 relative), every
rank with the same bits. A script with its own torch.distributed process group (made before
lt.Sync, used after it) keeps it working beside lt.Sync, and trains the same bits."""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _setup import setup_torch, torchrun, torchrun_env  # noqa: E402

TRAINER, SOURCE = setup_torch()

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "_torch_worker.py")
RECIPE = os.path.join(HERE, "torch_allreduce.toml")
tmp = tempfile.mkdtemp(prefix="laconic-torchrun-")


def sets(pairs):
    return sum([["--set", p] for p in pairs], [])


def run_single(name, pairs):
    save = os.path.join(tmp, name)
    subprocess.run([sys.executable, WORKER, RECIPE, "--save", save] + sets(pairs), check=True, env=torchrun_env(),
                   timeout=300)
    return np.load(os.path.join(save, "params.rank-0.npy"))


def run_torchrun(name, n, pairs, extra=()):
    save = os.path.join(tmp, name)
    cmd = torchrun(n) + [WORKER, RECIPE, "--save", save] + sets(pairs) + list(extra)
    subprocess.run(cmd, check=True, env=torchrun_env(), timeout=300)
    return [np.load(os.path.join(save, f"params.rank-{r}.npy")) for r in range(n)], save


def close(a, b, what, tol=1e-6):
    err = float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b.astype(np.float64)))
    assert err <= tol, f"{what}: parameters differ by {err:.3g} relative (tolerance {tol})"
    print(f"ok: {what} (max relative difference {err:.2g})")


try:
    one = run_single("one", ["train.micro_batch=32"])
    two, _ = run_torchrun("two", 2, ["train.micro_batch=16", "distributed.world_size=2"])
    assert np.array_equal(two[0], two[1]), "torchrun's rank 1 differs from rank 0"
    close(two[0], one, "torchrun --nproc-per-node 2 at 16 == 1 process at 32")
    own, save = run_torchrun("own", 2, ["train.micro_batch=16", "distributed.world_size=2"], ["--own-group"])
    assert np.array_equal(own[0], two[0]), "a process group of the script's changed what lt.Sync trained"
    means = [open(os.path.join(save, f"own-group.rank-{r}.txt")).read() for r in range(2)]
    assert means[0] == means[1], f"the script's own all-reduce disagrees between ranks: {means}"
    print("ok: the script's own process group works beside lt.Sync, and lt.Sync trains the same bits")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
