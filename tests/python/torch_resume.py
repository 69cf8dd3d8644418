"""A laconic.torch run stopped by SIGTERM checkpoints after the current step and exits 143, as the
trainer does; lt.Sync(..., resume="auto") then continues to parameters bit-identical to a run
that was never stopped: Laconic's shard (parameters, DiLoCo's outer state, counters) and the
torch optimizer's state (AdamW moments, torch's format beside the shard) both come back. Over 2
gloo processes with DiLoCo (H = 4), so a period is cut in the middle."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _setup import setup_torch  # noqa: E402

TRAINER, SOURCE = setup_torch()

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "_torch_worker.py")
RECIPE = os.path.join(HERE, "torch_diloco.toml")
SETS = ["--set", "distributed.world_size=2", "--optimizer", "adamw"]
tmp = tempfile.mkdtemp(prefix="laconic-torch-resume-")


def start(name, out, extra, store):
    env = dict(os.environ, LACONIC_WORLD_SIZE="2", LACONIC_STORE="file:" + os.path.join(tmp, store))
    return [subprocess.Popen([sys.executable, WORKER, RECIPE, "--out", out, "--save", os.path.join(tmp, name)] +
                             SETS + extra, env=dict(env, LACONIC_RANK=str(r)), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True) for r in range(2)]


def wait(procs):
    codes, logs = [], []
    for p in procs:
        out, _ = p.communicate(timeout=240)
        codes.append(p.returncode)
        logs.append(out)
    return codes, logs


try:
    whole = os.path.join(tmp, "whole")
    codes, logs = wait(start("whole", whole, [], "s1"))
    assert codes == [0, 0], f"the uninterrupted run failed: {codes}\n{logs}"
    cut = os.path.join(tmp, "cut")
    procs = start("cut", cut, ["--stall-at", "10"], "s2")
    # Both ranks stall in step 10 (before its sync.step): SIGTERM both, as a scheduler would.
    for line in procs[0].stdout:  # the worker's log: only this line before the stall
        if line.startswith("stalling at"):
            break
    for p in procs:
        p.send_signal(signal.SIGTERM)
    codes, logs = wait(procs)
    assert codes == [143, 143], f"SIGTERM: expected exit 143 on both ranks, got {codes}\n{logs}"
    ckpts = sorted(os.listdir(os.path.join(cut, "checkpoints")))
    assert ckpts == ["step-000000011"], f"expected one checkpoint of step 11, got {ckpts}"
    step_dir = os.path.join(cut, "checkpoints", ckpts[0])
    for r in range(2):
        assert os.path.exists(os.path.join(step_dir, f"torch.rank-{r}.pt")), f"no torch state of rank {r}"
    summary = open(os.path.join(cut, "summary.json")).read()
    assert '"stopped": "signal"' in summary, summary
    print("ok: SIGTERM checkpointed step 11 with torch's state and exited 143")
    codes, logs = wait(start("resumed", cut, ["--resume", "auto"], "s3"))
    assert codes == [0, 0], f"the resumed run failed: {codes}\n{logs}"
    for r in range(2):
        a = np.load(os.path.join(tmp, "whole", f"params.rank-{r}.npy"))
        b = np.load(os.path.join(tmp, "resumed", f"params.rank-{r}.npy"))
        assert np.array_equal(a, b), f"rank {r}: resumed parameters differ (max {np.max(np.abs(a - b)):.3g})"
    print("ok: resume=\"auto\" ends bit-identical to the uninterrupted run on both ranks")
    # Once more: the run had finished, so nothing is trained or written.
    before = sorted(os.listdir(os.path.join(cut, "checkpoints")))
    codes, logs = wait(start("again", cut, ["--resume", "auto"], "s4"))
    assert codes == [0, 0], f"resume of a finished run: expected exit 0, got {codes}\n{logs}"
    assert sorted(os.listdir(os.path.join(cut, "checkpoints"))) == before, "a finished run's resume wrote a checkpoint"
    print("ok: resume=\"auto\" of a finished run trains nothing and exits 0")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
