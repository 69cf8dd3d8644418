"""lt.Sync leaves the process's OpenBLAS threads as the caller set them. torch's CPU GEMMs run in
the same OpenBLAS pool as Laconic's, so a Sync that sized the pool as the trainer sizes its own
(cores / ranks on the node: 2 threads for one process on 2 cores) changed the user's model's
compute: a torch loop set to one thread ran its GEMMs on two under lt.Sync alone, which made
tests/bench/torch_sync.sh's 1-process row 1.8x the plain loop's on a loaded machine."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _setup import setup_torch  # noqa: E402

TRAINER, SOURCE = setup_torch()
import torch  # noqa: E402

try:
    blas = ctypes.CDLL("libopenblas.so.0")
    blas.openblas_get_num_threads.restype = ctypes.c_int
except (OSError, AttributeError):
    print("skipped: OpenBLAS (libopenblas.so.0) is not in this process; nothing shares its threads")
    sys.exit(77)

import _torch_model as tm  # noqa: E402
import laconic.torch as lt  # noqa: E402

if len(os.sched_getaffinity(0)) < 2:
    print("note: one core here, where the trainer's sizing also gives one thread (the check cannot tell them apart)")
for var in ("LACONIC_RANK", "LACONIC_WORLD_SIZE", "RANK", "WORLD_SIZE"):
    os.environ.pop(var, None)  # one process alone
blas.openblas_set_num_threads(1)
model = tm.make_model()
opt = tm.make_optimizer(model, "sgd")
sync = lt.Sync(model, recipe=os.path.join(SOURCE, "tests/python/torch_allreduce.toml"),
               overrides={"train.steps": 3}, log=False)
assert blas.openblas_get_num_threads() == 1, \
    f"lt.Sync set OpenBLAS to {blas.openblas_get_num_threads()} threads; the caller had set 1"
while not sync.done:
    x, y = tm.batch(sync.step_count, 0, sync.data_rank, sync.data_world, 32)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    sync.step(opt)
sync.finish()
assert blas.openblas_get_num_threads() == 1, \
    f"training under lt.Sync left OpenBLAS at {blas.openblas_get_num_threads()} threads; the caller had set 1"
print("ok: lt.Sync and its steps leave OpenBLAS at the caller's 1 thread")
