"""A laconic.torch run is a Laconic run: over 4 gloo processes as two simulated datacenters it
writes recipe.resolved.toml, metrics.jsonl, summary.json, trace/, timeline.json and simulated/;
`trainer simulate RUN --network F --as-params N` replays it unchanged, and `trainer compare --runs`
reports it beside a run of the C++ trainer with the same [sync] and [network]."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _setup import run_gloo_ranks, setup_torch  # noqa: E402

TRAINER, SOURCE = setup_torch()

import laconic  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "_torch_worker.py")
RECIPE = os.path.join(HERE, "torch_cross_dc.toml")
tmp = tempfile.mkdtemp(prefix="laconic-torch-replay-")
try:
    py_run = os.path.join(tmp, "torch_diloco")
    run_gloo_ranks([sys.executable, WORKER, RECIPE, "--out", py_run], 4, os.path.join(tmp, "store"))
    for f in ("recipe.resolved.toml", "metrics.jsonl", "summary.json", "trace/meta.json", "timeline.json",
              "simulated"):
        assert os.path.exists(os.path.join(py_run, f)), f"the torch run has no {f}"
    summary = json.load(open(os.path.join(py_run, "summary.json")))
    assert summary.get("sim_time_s") and summary["sim_time_s"] > 0, f"no replayed time: {summary}"
    assert summary.get("eval_loss") is not None, "eval_fn's loss is not in summary.json"
    meta = json.load(open(os.path.join(py_run, "trace/meta.json")))
    assert meta["world_size"] == 4 and meta["backend"] == "gloo", meta
    print(f"ok: the torch run is a Laconic run (simulated {summary['sim_time_s']:.3g} s, eval loss "
          f"{summary['eval_loss']:.4g})")

    # The same replay at 10^4 x the parameters (16M): the 30 ms latency no longer dominates, the
    # bytes on the 1 Gbit/s link do (bytes and modeled compute scale).
    network = os.path.join(tmp, "network.toml")
    with open(network, "w") as f:
        f.write('[network]\ngroups = 2\nintra_bandwidth = "100 Gbit/s"\nintra_latency = "5 us"\n'
                'inter_bandwidth = "1 Gbit/s"\ninter_latency = "30 ms"\ncompute = "modeled"\n'
                'device_tflops = 1.0\nmfu = 0.5\n')
    params = laconic.Run(py_run).summary.get("parameters") or meta["parameters"]
    out = subprocess.run([TRAINER, "simulate", py_run, "--network", network, "--as-params", str(10000 * params)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"trainer simulate failed: {out.stderr}"
    projected = json.load(open(os.path.join(py_run, "simulated", "summary.json")))
    assert projected["sim_time_s"] > 2 * summary["sim_time_s"], (projected["sim_time_s"], summary["sim_time_s"])
    print("ok: trainer simulate --as-params replays it:", out.stdout.strip().splitlines()[-1])

    # Beside a C++ run of Laconic's own MLP with the same [sync] and [network].
    cpp_run = os.path.join(tmp, "cpp_diloco")
    cpp = subprocess.run([TRAINER, "--recipe", os.path.join(SOURCE, "recipes", "mlp_fmnist.toml"), "--out", cpp_run,
                          "--train.steps=12", "--train.log_every=4", "--distributed.world_size=4",
                          "--distributed.backend=threads", "--network.groups=2",
                          "--network.inter_bandwidth=1 Gbit/s", "--network.inter_latency=30 ms",
                          "--network.compute=modeled", "--network.device_tflops=1.0", "--network.mfu=0.5",
                          "--sync.strategy=diloco", "--sync.diloco.period=4"],
                         capture_output=True, text=True, timeout=300)
    assert cpp.returncode == 0, f"the C++ run failed: {cpp.stderr}"
    cmp = subprocess.run([TRAINER, "compare", "--runs", py_run, cpp_run, "--out", os.path.join(tmp, "cmp")],
                         capture_output=True, text=True, timeout=300)
    assert cmp.returncode == 0, f"trainer compare failed: {cmp.stderr}"
    assert "torch_diloco" in cmp.stdout and "cpp_diloco" in cmp.stdout, cmp.stdout
    print("ok: trainer compare --runs reports it beside a C++ run")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
