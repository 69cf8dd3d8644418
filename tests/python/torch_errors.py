"""laconic.torch's bad input: each a one-line "laconic: error: ..." on stderr and exit code 2
from the script's process (laconic.Error uncaught), nothing written: a parameter that is not
float32, a world size that differs from the launcher's, recipe keys that cannot apply to a torch
model, a strategy that needs what the model lacks, an unknown override key."""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _setup import setup_torch  # noqa: E402

TRAINER, SOURCE = setup_torch()

HERE = os.path.dirname(os.path.abspath(__file__))
RECIPE = os.path.join(HERE, "torch_allreduce.toml")

SCRIPT = textwrap.dedent("""
    import sys, torch
    import laconic.torch as lt
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
    {prepare}
    lt.Sync(model, recipe={recipe!r}, overrides={overrides!r}, out={out!r}, log=False)
    print("no error")
""")

CASES = [
    ("a float64 parameter", "model.double()", {}, {}, "parameter 0.weight is torch.float64"),
    ("a world size the launcher did not start", "", {"distributed.world_size": 2}, {},
     "distributed.world_size = 2 but this process is alone"),
    ("gloo ranks of another world size", "", {"distributed.world_size": 2},
     {"LACONIC_WORLD_SIZE": "3", "LACONIC_RANK": "0", "LACONIC_STORE": "file:STORE"},
     "distributed.world_size = 2 but LACONIC_WORLD_SIZE = 3"),
    ("model.init_from", "", {"model.init_from": "weights.safetensors"}, {},
     "model.init_from: the torch model brings its own weights"),
    ("epochs, not steps", "", {"train.steps": 0, "train.epochs": 1}, {}, "train.steps: expected the number of optimizer steps"),
    ("device cuda", "", {"distributed.device": "cuda"}, {}, "distributed.device"),
    ("more fragments than tensors", "", {"sync.strategy": "streaming_diloco", "sync.streaming_diloco.fragments": 8},
     {}, "sync.streaming_diloco.fragments: expected at most 4"),
    ("an unknown key", "", {"sync.no_such_key": 1}, {}, "no_such_key"),
    ("a strategy whose slower replicas skip steps", "", {"sync.strategy": "async_diloco"}, {},
     "sync.strategy = \"async_diloco\": its slower replicas skip steps"),
    ("the optimizer's state sharded (the script's optimizer)", "", {"sync.shard": "optimizer"}, {},
     "sync.shard = \"optimizer\": the optimizer here is the script's own"),
    ("the gradients sharded (torch's autograd writes whole gradients)", "", {"sync.shard": "gradients"}, {},
     "sync.shard = \"gradients\": the optimizer here is the script's own"),
    ("a bad LACONIC_RANK", "", {"distributed.world_size": 2},
     {"LACONIC_WORLD_SIZE": "2", "LACONIC_RANK": "two", "LACONIC_STORE": "file:STORE"}, "LACONIC_RANK"),
]

failed = 0
with tempfile.TemporaryDirectory(prefix="laconic-torch-errors-") as tmp:
    for what, prepare, overrides, extra_env, expect in CASES:
        out = os.path.join(tmp, "run")
        env = {k: v for k, v in os.environ.items() if k not in ("LACONIC_RANK", "LACONIC_WORLD_SIZE", "RANK", "WORLD_SIZE")}
        env.update({k: v.replace("STORE", os.path.join(tmp, "store")) for k, v in extra_env.items()})
        code = SCRIPT.format(prepare=prepare, recipe=RECIPE, overrides=overrides, out=out)
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        lines = p.stderr.strip().splitlines()
        ok = (p.returncode == 2 and len(lines) == 1 and lines[0].startswith("laconic: error: ") and expect in lines[0]
              and not os.path.exists(out))
        print(f"{'ok' if ok else 'FAILED'}: {what}: exit {p.returncode}: {p.stderr.strip()}")
        if not ok:
            failed += 1
            print(f"  expected exit 2, one line containing {expect!r}, no {out}; stdout: {p.stdout.strip()}")

# Under mpirun, a rank whose script raises ends the whole job at once (MPI_Abort from laconic's
# excepthook), instead of leaving its peer in a collective until distributed.timeout_s.
if os.environ.get("LACONIC_HAVE_MPI", "ON") != "OFF" and shutil.which("mpirun"):
    code = textwrap.dedent(f"""
        import torch
        import laconic.torch as lt
        model = torch.nn.Linear(4, 2)
        sync = lt.Sync(model, recipe={RECIPE!r}, overrides={{"distributed.world_size": 2,
                       "distributed.timeout_s": 120}}, log=False)
        if sync.rank == 1:
            raise ValueError("the script failed on rank 1")
        model(torch.randn(3, 4)).sum().backward()
        sync.step(torch.optim.SGD(model.parameters(), lr=0.1))
    """)
    start = time.monotonic()
    p = subprocess.run(["mpirun", "--oversubscribe", "--allow-run-as-root", "--mca", "btl", "self,vader",
                        "--bind-to", "none", "-np", "2", sys.executable, "-c", code],
                       capture_output=True, text=True, timeout=110)
    took = time.monotonic() - start
    ok = p.returncode != 0 and took < 60 and "the script failed on rank 1" in p.stderr
    print(f"{'ok' if ok else 'FAILED'}: a rank's exception under mpirun ends the job (exit {p.returncode} "
          f"after {took:.1f} s)")
    if not ok:
        failed += 1
        print(p.stderr[-2000:])
sys.exit(1 if failed else 0)
