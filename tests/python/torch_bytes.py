"""Compressed pseudo-gradients cost a torch model what they cost Laconic's own: DiLoCo (H = 5, 15
steps, 2 ranks) with top-k, PowerSGD and int8 pseudo-gradients sends, from a torch MLP through
laconic.torch over gloo, exactly the bytes the C++ trainer sends (threads backend) for its MLP of
the same tensor shapes (its model "mlp" on Fashion-MNIST, hidden [32, 16]: fc1.weight 32 x 784,
fc1.bias 32, fc2.weight 16 x 32, fc2.bias 16, fc3.weight 10 x 16, fc3.bias 10, in that order):
summary.json's bytes_sent, bytes_recv and compression_ratio, and every metrics.jsonl record's bytes.

The two runs share no values: different data (synthetic against Fashion-MNIST), activations (tanh
against ReLU) and initialisation. That is the point: these codecs' sizes depend on the shapes only.
Exact top-k sends k = round(ratio n) (value, index) pairs per bucket whatever the values
(compression/topk.h: ties and zeros are resolved by position, never by sending more or fewer);
PowerSGD's P (n x r') and Q (m x r') sizes, and which tensors it compresses, follow from each
tensor's shape, the rank and min_compression_rate (compression/powersgd.h); the int8 block codec
sends 4 ceil(n / block) + n bytes per chunk (docs/outer_loop.md). Matching byte counts from two
runs whose values differ everywhere is the test of that claim.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _setup import run_gloo_ranks, setup_torch  # noqa: E402

TRAINER, SOURCE = setup_torch()

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "_torch_worker.py")
RECIPE = os.path.join(HERE, "torch_bytes.toml")
FASHION = "/usr/share/datasets/fashion-mnist"
WORLD = 2  # as in torch_bytes.toml
# The trainer's model, data and optimizer, added to the recipe for the C++ run; the torch model
# has the same widths (input first).
TRAINER_SECTIONS = f"""
[model]
name = "mlp"
hidden = [32, 16]

[data]
name = "fashion_mnist"
path = "{FASHION}"

[optimizer]
name = "sgd"
lr = 0.05
"""
WIDTHS = "784,32,16,10"
CODECS = {"top-k": ["sync.diloco.reducer=topk"], "PowerSGD": ["sync.diloco.reducer=powersgd"],
          "int8": ["sync.diloco.dtype=int8"]}

if not os.path.isfile(os.path.join(FASHION, "train-images-idx3-ubyte.gz")):
    print(f"skipped: the trainer's MLP needs Fashion-MNIST in {FASHION} (Debian's dataset-fashion-mnist)")
    sys.exit(77)

tmp = tempfile.mkdtemp(prefix="laconic-torch-bytes-")


def env():
    return {k: v for k, v in os.environ.items() if k not in ("LACONIC_RANK", "LACONIC_WORLD_SIZE", "LACONIC_STORE")}


def read_run(out):
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    with open(os.path.join(out, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return ({k: s[k] for k in ("bytes_sent", "bytes_recv", "compression_ratio")},
            [(r["step"], r["bytes_sent"], r["bytes_recv"]) for r in records])


def run_torch(name, sets):
    out = os.path.join(tmp, name)
    cmd = [sys.executable, WORKER, RECIPE, "--widths", WIDTHS, "--out", out] + sum([["--set", s] for s in sets], [])
    run_gloo_ranks(cmd, WORLD, os.path.join(tmp, name + ".store"), timeout=120)
    return read_run(out)


def run_trainer(name, sets):
    out = os.path.join(tmp, name)
    recipe = os.path.join(tmp, "trainer.toml")
    if not os.path.exists(recipe):
        with open(RECIPE) as f, open(recipe, "w") as g:
            g.write(f.read() + TRAINER_SECTIONS)
    subprocess.run([TRAINER, "--recipe", recipe, "--out", out] + ["--" + s for s in sets], check=True, env=env(),
                   stdout=subprocess.DEVNULL, timeout=120)
    return read_run(out)


try:
    params = 32 * 784 + 32 + 16 * 32 + 16 + 10 * 16 + 10
    seen = {}
    for codec, sets in CODECS.items():
        cpp, cpp_records = run_trainer("cpp-" + codec, sets)
        py, py_records = run_torch("torch-" + codec, sets)
        assert py == cpp, f"{codec}: laconic.torch's summary {py} differs from the trainer's {cpp}"
        assert py_records == cpp_records, f"{codec}: metrics records (step, sent, received) differ: " \
                                          f"laconic.torch {py_records}, trainer {cpp_records}"
        # Rank 0 broadcasts the initial parameters, then the 3 syncs send what they receive.
        synced = py["bytes_sent"] - 4 * params
        assert synced == py["bytes_recv"] > 0, f"{codec}: {py}"
        seen[codec] = synced
        print(f"ok: {codec} pseudo-gradients: {synced} bytes over 3 syncs from both (compression "
              f"{py['compression_ratio']:.3g}x); per interval {[r[2] for r in py_records]}")
    assert len(set(seen.values())) == len(seen), f"the codecs were not all applied: {seen}"
finally:
    shutil.rmtree(tmp, ignore_errors=True)
