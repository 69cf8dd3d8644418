"""laconic.torch on CUDA tensors: the store moves to the model's GPU, the parameters and gradients
view device memory (DLPack), and the run takes the trainer's device path (NCCL, or staging over the
host communicator when a network is simulated). 1 process on the GPU and 2 gloo processes (each on
its node-local GPU) with allreduce end within 1e-4 relative of the same run on the CPU (GPU
kernels sum in another order); DiLoCo on 2 processes likewise. Skips without a CUDA build of
Laconic, a CUDA build of torch, or a GPU."""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _setup import setup_torch  # noqa: E402

TRAINER, SOURCE = setup_torch()
import torch  # noqa: E402

if not torch.cuda.is_available():
    print("skipped: torch sees no CUDA device (a CPU build of torch, or no GPU)")
    sys.exit(77)
if subprocess.run([TRAINER, "--recipe", os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_allreduce.toml"),
                   "--print-config", "--distributed.device=cuda"], capture_output=True).returncode != 0:
    print("skipped: this build of Laconic has no CUDA")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "_torch_worker.py")
tmp = tempfile.mkdtemp(prefix="laconic-torch-cuda-")


def run(name, recipe, n, device, sets):
    save = os.path.join(tmp, name)
    env = dict(os.environ, LACONIC_STORE="file:" + os.path.join(tmp, name + ".store"), LACONIC_WORLD_SIZE=str(n))
    args = [sys.executable, WORKER, os.path.join(HERE, recipe), "--save", save, "--device", device]
    for s in sets + [f"distributed.world_size={n}"]:
        args += ["--set", s]
    procs = [subprocess.Popen(args, env=dict(env, LACONIC_RANK=str(r)) if n > 1 else
                              {k: v for k, v in os.environ.items() if not k.startswith("LACONIC_")}) for r in range(n)]
    assert [p.wait(timeout=300) for p in procs] == [0] * n, f"{name}: a rank failed"
    return np.load(os.path.join(save, "params.rank-0.npy"))


def close(a, b, what):
    err = float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b.astype(np.float64)))
    assert err <= 1e-4, f"{what}: {err:.3g} relative"
    print(f"ok: {what} ({err:.2g} relative)")


try:
    cpu = run("cpu1", "torch_allreduce.toml", 1, "cpu", [])
    close(run("gpu1", "torch_allreduce.toml", 1, "cuda", []), cpu, "1 process on the GPU == on the CPU")
    close(run("gpu2", "torch_allreduce.toml", 2, "cuda", ["train.micro_batch=16"]), cpu,
          "2 gloo processes on GPUs at 16 == 1 CPU process at 32")
    close(run("diloco_gpu", "torch_diloco.toml", 2, "cuda", []), run("diloco_cpu", "torch_diloco.toml", 2, "cpu", []),
          "DiLoCo on 2 processes: GPU == CPU")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
