"""torchrun's elastic agent as the supervisor: `torchrun --max-restarts 1` over a DiLoCo run whose
rank 1 dies at step 13 on the first attempt. The agent stops the other worker and starts both
again; lt.Sync(resume="auto") takes the newest intact checkpoint (step 12), the ranks meet afresh
in torch's store (the attempt's own keys), and the run ends with the uninterrupted run's
parameters bit for bit on every rank."""
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
RECIPE = os.path.join(HERE, "torch_diloco.toml")
tmp = tempfile.mkdtemp(prefix="laconic-torchrun-restart-")


def run(name, agent=(), worker=()):
    out, save = os.path.join(tmp, name), os.path.join(tmp, name + ".params")
    cmd = torchrun(2) + list(agent) + [WORKER, RECIPE, "--out", out, "--save", save, "--resume", "auto",
                                       "--optimizer", "adamw", "--set", "checkpoint.every=4"] + list(worker)
    p = subprocess.run(cmd, env=torchrun_env(), timeout=300, capture_output=True, text=True)
    assert p.returncode == 0, f"torchrun exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return [np.load(os.path.join(save, f"params.rank-{r}.npy")) for r in range(2)], p.stdout + p.stderr


try:
    whole, _ = run("whole")
    restarted, log = run("restarted", ["--max_restarts", "1"], ["--die-at", "13"])
    assert "rank 1 dies at step 13" in log, f"the worker did not die:\n{log[-3000:]}"
    for r in range(2):
        assert np.array_equal(restarted[r].view(np.uint32), whole[r].view(np.uint32)), \
            f"rank {r}: the restarted run ends apart from the uninterrupted one " \
            f"(max difference {np.abs(restarted[r] - whole[r]).max():.3g})"
    print("ok: torchrun --max-restarts 1 restarted the run after rank 1 died at step 13; it resumed from step 12 "
          "and ended with the uninterrupted run's bits on both ranks")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
