"""TensorBoard events of a run, read back with tensorboard's own reader (EventAccumulator):
lt.Sync(tensorboard=True) and the recipe's train.tensorboard = true write them live into the run
directory, lt.Sync(tensorboard=writer) through the script's own SummaryWriter; the trainer's
train.tensorboard = true live into RUN/tensorboard, `trainer compare --runs ... --tensorboard D`
into D/<run name>, and `python -m laconic.tensorboard RUN --logdir D` from a trainer's run
directory: in each, every scalar at every step equals the metrics.jsonl record's. A trainer whose
interpreter lacks tensorboard refuses train.tensorboard in one line, exit 2, nothing written.
Skips where the tensorboard package is missing (Debian's torch: scripts/install-deps --pypi)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _setup import setup_torch  # noqa: E402

TRAINER, SOURCE = setup_torch()
try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError as e:
    print(f"skipped: tensorboard is not installed for this interpreter ({e}; scripts/install-deps --pypi)")
    sys.exit(77)
import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
tmp = tempfile.mkdtemp(prefix="laconic-tensorboard-")


def records(run):
    with open(os.path.join(run, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def check(logdir, run, what):
    """Every number of every record of `run` is the scalar of its name at its step in `logdir`."""
    events = EventAccumulator(logdir, size_guidance={"scalars": 0})
    events.Reload()
    recs = records(run)
    tags = set(events.Tags()["scalars"])
    for key in ("loss", "lr", "bytes_sent", "examples_per_s"):
        assert key in tags, f"{what}: no scalar '{key}' among {sorted(tags)}"
        got = {e.step: e.value for e in events.Scalars(key)}
        want = {r["step"]: r[key] for r in recs if key in r}
        assert sorted(got) == sorted(want), f"{what}: '{key}' at steps {sorted(got)}, the records at {sorted(want)}"
        for step, value in want.items():
            assert got[step] == np.float32(value), f"{what}: '{key}' at step {step}: {got[step]} against {value}"
    print(f"ok: {what}: {len(tags)} scalars at the records' {len(recs)} steps, equal to metrics.jsonl")


def train(out, tensorboard, overrides=None):
    import torch
    import _torch_model as tm
    import laconic.torch as lt
    model = tm.make_model()
    opt = tm.make_optimizer(model, "sgd")
    sync = lt.Sync(model, recipe=os.path.join(HERE, "torch_allreduce.toml"), out=out, log=False,
                   tensorboard=tensorboard, overrides=overrides)
    while not sync.done:
        x, y = tm.batch(sync.step_count, 0, 0, 1, 32)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        sync.step(opt, loss=loss)
    sync.finish()


try:
    own = os.path.join(tmp, "own")
    train(own, True)
    check(os.path.join(own, "tensorboard"), own, "lt.Sync(tensorboard=True)")
    from torch.utils.tensorboard import SummaryWriter
    writer = SummaryWriter(os.path.join(tmp, "writer"))
    script = os.path.join(tmp, "script")
    train(script, writer)
    writer.close()
    check(os.path.join(tmp, "writer"), script, "lt.Sync(tensorboard=SummaryWriter(...))")
    run = os.path.join(tmp, "trainer_run")
    subprocess.run([TRAINER, "--recipe", os.path.join(SOURCE, "recipes", "mlp_fmnist.toml"), "--out", run,
                    "--train.steps=12", "--train.log_every=3", "--train.eval_every=6"], check=True,
                   stdout=subprocess.DEVNULL)
    logdir = os.path.join(tmp, "tb")
    subprocess.run([sys.executable, "-m", "laconic.tensorboard", run, "--logdir", logdir], check=True)
    check(os.path.join(logdir, "trainer_run"), run, "python -m laconic.tensorboard on a trainer run")
    keyed = os.path.join(tmp, "keyed")
    train(keyed, None, {"train.tensorboard": True})
    check(os.path.join(keyed, "tensorboard"), keyed, "lt.Sync with the recipe's train.tensorboard = true")
    env = dict(os.environ, LACONIC_TENSORBOARD_PYTHON=sys.executable)
    live = os.path.join(tmp, "live")
    subprocess.run([TRAINER, "--recipe", os.path.join(SOURCE, "recipes", "mlp_fmnist.toml"), "--out", live,
                    "--train.steps=12", "--train.log_every=3", "--train.tensorboard=true"], check=True,
                   stdout=subprocess.DEVNULL, env=env)
    check(os.path.join(live, "tensorboard"), live, "the trainer's train.tensorboard = true")
    compared = os.path.join(tmp, "compared")
    subprocess.run([TRAINER, "compare", "--runs", run, live, "--out", os.path.join(tmp, "cmp"), "--no-plots",
                    "--tensorboard", compared], check=True, stdout=subprocess.DEVNULL, env=env)
    check(os.path.join(compared, "live"), live, "trainer compare --tensorboard")
    refused = os.path.join(tmp, "refused")
    p = subprocess.run([TRAINER, "--recipe", os.path.join(SOURCE, "recipes", "mlp_fmnist.toml"), "--out", refused,
                        "--train.steps=3", "--train.tensorboard=true"], capture_output=True, text=True,
                       env=dict(os.environ, LACONIC_TENSORBOARD_PYTHON="/bin/false"))
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and "train.tensorboard" in lines[0] and not os.path.exists(refused), \
        (p.returncode, p.stderr)
    print("ok: train.tensorboard without an interpreter that has tensorboard: one line, exit 2, nothing written")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
