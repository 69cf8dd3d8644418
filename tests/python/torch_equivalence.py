"""laconic.torch's data parallelism is the trainer's: a torch MLP trained 20 steps with `allreduce`
over 4 processes at micro-batch b (gloo, and mpirun when MPI is built) ends with the parameters of
one process at 4b, to 1e-6 relative; one process accumulating 4 micro-batches of b too. And with
overlap on (gradient hooks start buckets during backward), the same bits as without. One process
alone is the plain torch loop bit for bit, and optimizer.grad_clip is torch's clip_grad_norm_."""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _setup import run_gloo_ranks, setup_torch  # noqa: E402

TRAINER, SOURCE = setup_torch()

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "_torch_worker.py")
RECIPE = os.path.join(HERE, "torch_allreduce.toml")
tmp = tempfile.mkdtemp(prefix="laconic-torch-eq-")


def env(extra=None):
    e = dict(os.environ)
    e.pop("LACONIC_RANK", None)
    e.pop("LACONIC_WORLD_SIZE", None)
    e.update(extra or {})
    return e


def run_single(name, sets):
    save = os.path.join(tmp, name)
    subprocess.run([sys.executable, WORKER, RECIPE, "--save", save] + sum([["--set", s] for s in sets], []),
                   check=True, env=env(), timeout=300)
    return np.load(os.path.join(save, "params.rank-0.npy"))


def run_gloo(name, n, sets):
    save = os.path.join(tmp, name)
    run_gloo_ranks([sys.executable, WORKER, RECIPE, "--save", save] + sum([["--set", s] for s in sets], []), n,
                   os.path.join(tmp, name + ".store"))
    return [np.load(os.path.join(save, f"params.rank-{r}.npy")) for r in range(n)]


def run_mpi(name, n, sets):
    save = os.path.join(tmp, name)
    cmd = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--mca", "btl", "self,vader", "--bind-to", "none",
           "-np", str(n), sys.executable, WORKER, RECIPE, "--save", save] + sum([["--set", s] for s in sets], [])
    subprocess.run(cmd, check=True, env=env(), timeout=300)
    return [np.load(os.path.join(save, f"params.rank-{r}.npy")) for r in range(n)]


def close(a, b, what, tol=1e-6):
    # Relative to the parameters' norm: float summation order differs (a mean of 32 against a mean
    # of 4 means of 8), nothing else may.
    err = float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b.astype(np.float64)))
    assert err <= tol, f"{what}: parameters differ by {err:.3g} relative (tolerance {tol})"
    print(f"ok: {what} (max relative difference {err:.2g})")


def plain_torch(clip=None):
    """The same 20 steps in a plain torch loop (zero_grad, backward, clip_grad_norm_, step)."""
    import torch
    import _torch_model as tm
    model = tm.make_model()
    opt = tm.make_optimizer(model, "sgd")
    for step in range(20):
        x, y = tm.batch(step, 0, 0, 1, 32)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy()


try:
    one = run_single("one", ["train.micro_batch=32"])
    assert np.array_equal(one, plain_torch()), "lt.Sync alone differs from the plain torch loop"
    print("ok: lt.Sync alone == the plain torch loop, bit for bit")
    clipped = run_single("clip", ["train.micro_batch=32", "optimizer.grad_clip=0.05"])
    close(clipped, plain_torch(0.05), "optimizer.grad_clip == torch's clip_grad_norm_")
    assert not np.allclose(clipped, one), "the clip did nothing"
    accum = run_single("accum", ["train.micro_batch=8", "train.grad_accum=4"])
    close(accum, one, "1 process accumulating 4 x 8 == 1 process at 32")
    # Small buckets (one tensor or two each), so that overlap has several to start during backward.
    gloo = run_gloo("gloo", 4, ["train.micro_batch=8", "distributed.world_size=4", "sync.bucket_mb=0.001",
                               "distributed.algorithm=ring"])
    for r in range(1, 4):
        assert np.array_equal(gloo[r], gloo[0]), f"gloo rank {r} differs from rank 0"
    close(gloo[0], one, "4 gloo processes at 8 == 1 process at 32")
    overlap = run_gloo("overlap", 4, ["train.micro_batch=8", "distributed.world_size=4", "sync.overlap=true",
                                      "sync.bucket_mb=0.001", "distributed.algorithm=ring"])
    assert np.array_equal(overlap[0], gloo[0]), "overlapped buckets changed the result"
    print("ok: overlapped buckets (gradient hooks) give the same bits")
    if os.environ.get("LACONIC_TORCH2"):
        print("torch 2.x: the mpirun part is Debian's torch's run (the same C++ path under any torch)")
    elif os.environ.get("LACONIC_HAVE_MPI", "ON") != "OFF" and shutil.which("mpirun"):
        mpi = run_mpi("mpi", 4, ["train.micro_batch=8", "distributed.world_size=4", "sync.bucket_mb=0.001",
                               "distributed.algorithm=ring"])
        close(mpi[0], one, "mpirun -np 4 at 8 == 1 process at 32")
        assert np.array_equal(mpi[0], gloo[0]), "the same ring all-reduce over MPI and over gloo differs"
    else:
        print("no MPI: the mpirun part is skipped")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
