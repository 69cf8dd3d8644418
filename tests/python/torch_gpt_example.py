"""examples/torch_gpt at a tiny size: its GPT is causal (a logit never depends on a later token),
its ranks read disjoint shards and the same batch again when a step is read again, and run.sh
(tokenize, allreduce / diloco with int8 pseudo-gradients / streaming_diloco over 4 processes,
trainer compare) writes Laconic runs that learned, with DiLoCo (one replica per datacenter, dense
inside) sending far fewer bytes across the slow link than all-reduce. Over mpirun when MPI is
built, else 4 gloo processes."""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _setup import setup_torch  # noqa: E402

TRAINER, SOURCE = setup_torch()
import torch  # noqa: E402

FORTUNES = "/usr/share/games/fortunes"
if not os.path.isdir(FORTUNES):
    print(f"skipped: {FORTUNES} is missing (Debian's fortunes package)")
    sys.exit(77)

EXAMPLE = os.path.join(SOURCE, "examples", "torch_gpt")
sys.path.insert(0, EXAMPLE)
import train as ex  # noqa: E402

# Causal: changing the tokens after position t leaves the logits at positions <= t as they were.
torch.manual_seed(0)
model = ex.GPT(vocab=50, seq_len=16, dim=32, layers=2, heads=4)
x = torch.randint(0, 50, (3, 16))
changed = x.clone()
changed[:, 9:] = (changed[:, 9:] + 7) % 50
with torch.no_grad():
    a, b = model(x), model(changed)
assert torch.equal(a[:, :9], b[:, :9]), "a logit depends on a later token"
assert not torch.allclose(a[:, 9:], b[:, 9:]), "the changed tokens changed nothing"
assert model.head.weight is model.tok.weight, "the head is not tied to the embedding"
print("ok: the GPT is causal and its head tied")

# Shards: rank r of 4 reads the r-th quarter of the tokens; a batch's targets are its inputs
# shifted by one; reading step s again gives the same batch (a resumed run reads what it would have).
tokens = torch.arange(1000)
shards = [ex.Shard(tokens, r, 4, seq_len=8, seed=1) for r in range(4)]
for r, s in enumerate(shards):
    xs, ys = s.batch(step=3, micro=0, b=5)
    assert xs.shape == (5, 8) and torch.equal(xs[:, 1:], ys[:, :-1]) and torch.equal(ys - xs, torch.ones_like(xs))
    assert int(xs.min()) >= 250 * r and int(ys.max()) < 250 * (r + 1), f"rank {r} read outside its shard"
    assert torch.equal(s.batch(3, 0, 5)[0], xs), "reading a step again gave another batch"
    assert not torch.equal(s.batch(4, 0, 5)[0], xs), "two steps read the same batch"
print("ok: disjoint shards, targets shifted by one, batches a function of the step")

tmp = tempfile.mkdtemp(prefix="laconic-torch-gpt-")
try:
    mpi = os.environ.get("LACONIC_HAVE_MPI", "ON") != "OFF" and shutil.which("mpirun")
    env = dict(os.environ, TRAINER=TRAINER, PYTHON=sys.executable, TINY="1", LAUNCH="mpi" if mpi else "gloo")
    for k in ("LACONIC_RANK", "LACONIC_WORLD_SIZE", "LACONIC_STORE", "STEPS"):
        env.pop(k, None)
    if not mpi:
        print("no MPI: the mpirun part is skipped, 4 gloo processes instead")
    out = os.path.join(tmp, "runs")
    done = subprocess.run(["bash", os.path.join(EXAMPLE, "run.sh"), out], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"run.sh exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    report = json.load(open(os.path.join(out, "report", "compare.json")))
    runs = {r["name"]: r for r in report["runs"]}
    assert list(runs) == ["allreduce", "diloco", "streaming_diloco"], list(runs)
    for name, r in runs.items():
        d = os.path.join(out, name)
        for f in ("recipe.resolved.toml", "metrics.jsonl", "summary.json", "timeline.json", "trace", "simulated"):
            assert os.path.exists(os.path.join(d, f)), f"{name}: no {f}"
        summary = json.load(open(os.path.join(d, "summary.json")))
        assert summary["steps"] == 12, summary
        # An untrained GPT predicts about uniformly: ln(vocab). Twelve steps must get below it.
        assert r["eval_loss"] < math.log(2048) - 0.2, f"{name}: eval loss {r['eval_loss']} (ln 2048 = 7.62)"
        assert r["time_s"] > 0, f"{name}: no simulated time"
    ar, dl, sd = (runs[n]["bytes_inter_training"] for n in ("allreduce", "diloco", "streaming_diloco"))
    # DiLoCo syncs every 4 steps, int8 (about 1/3.9 of fp32): ~16x fewer bytes across than every
    # step; streaming DiLoCo half the model every 2 steps, int8 too: about as many as DiLoCo.
    assert dl * 8 < ar, f"diloco sent {dl} bytes across, allreduce {ar}"
    assert sd * 8 < ar, f"streaming_diloco sent {sd} bytes across, allreduce {ar}"
    assert "| streaming_diloco |" in done.stdout, "run.sh printed no results table"
    print(f"ok: run.sh ({env['LAUNCH']}): 3 runs and the report; bytes across in training: allreduce {ar:.0f}, "
          f"diloco {dl:.0f}, streaming_diloco {sd:.0f}")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
