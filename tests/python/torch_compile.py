"""torch.compile through lt.Sync: the torch MLP compiled trains the same 20 steps as uncompiled,
the store's parameters and gradients staying views the compiled graph reads and writes. With
backend="aot_eager" (torch's graph capture and autograd, eager kernels): the same bits. With the
default inductor (its own fused CPU kernels): within 1e-5 of the parameters' scale (measured:
1.3e-7, float rounding of other kernels). Overlapped buckets on, so the post-accumulate-grad hooks
fire from the compiled backward. Skips where torch has no torch.compile (Debian's 1.13)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _setup import setup_torch  # noqa: E402

TRAINER, SOURCE = setup_torch()
import torch  # noqa: E402

if not hasattr(torch, "compile"):
    print(f"skipped: torch {torch.__version__} has no torch.compile")
    sys.exit(77)
import _torch_model as tm  # noqa: E402
import laconic.torch as lt  # noqa: E402

RECIPE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_allreduce.toml")


def train(backend):
    model = tm.make_model()
    opt = tm.make_optimizer(model, "sgd")
    sync = lt.Sync(model, recipe=RECIPE, log=False, overrides={"sync.overlap": True, "sync.bucket_mb": 0.001})
    forward = torch.compile(model, backend=backend) if backend else model
    while not sync.done:
        x, y = tm.batch(sync.step_count, 0, 0, 1, 32)
        loss = torch.nn.functional.cross_entropy(forward(x), y)
        loss.backward()
        sync.step(opt, loss=loss)
    sync.finish()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy()


plain = train(None)
assert np.array_equal(train("aot_eager"), plain), "torch.compile(backend='aot_eager') changed the bits"
print("ok: torch.compile(backend='aot_eager') through lt.Sync: the same bits as uncompiled")
inductor = train("inductor")
err = float(np.abs(inductor - plain).max() / np.abs(plain).max())
assert err <= 1e-5, f"torch.compile (inductor): parameters differ by {err:.3g} of their scale (bound 1e-5)"
print(f"ok: torch.compile (inductor) through lt.Sync: within {err:.2g} of uncompiled (bound 1e-5)")
