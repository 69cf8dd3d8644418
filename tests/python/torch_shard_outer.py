"""laconic.torch with sync.shard = "outer" (docs/sharding.md): DiLoCo between two simulated
datacenters of 2 gloo ranks each (sync.intra = "allreduce"), the script's own optimizer whole, the
outer state sharded across each datacenter's ranks. Each element's sums have two terms either way,
so every rank ends with the unsharded run's parameters bit for bit; rank 0 holds half of
theta_global and the outer momentum, and sends half the inter-datacenter bytes of a leader."""
import json
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _setup import run_gloo_ranks, setup_torch  # noqa: E402

TRAINER, SOURCE = setup_torch()

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "_torch_worker.py")
RECIPE = os.path.join(HERE, "torch_cross_dc.toml")


def train(tmp, shard):
    out, save = os.path.join(tmp, shard), os.path.join(tmp, shard + ".params")
    run_gloo_ranks([sys.executable, WORKER, RECIPE, "--out", out, "--save", save, "--set", "sync.intra=allreduce",
                    "--set", "sync.shard=" + shard], 4, os.path.join(tmp, "store." + shard))
    params = [np.load(os.path.join(save, "params.rank-%d.npy" % r)) for r in range(4)]
    return params, json.load(open(os.path.join(out, "summary.json")))


tmp = tempfile.mkdtemp(prefix="laconic-torch-shard-outer-")
try:
    whole, a = train(tmp, "none")
    sharded, b = train(tmp, "outer")
    for r in range(4):
        assert np.array_equal(whole[r].view(np.uint32), sharded[r].view(np.uint32)), \
            f"rank {r}: sharded outer state moved other bits (max diff {np.abs(whole[r] - sharded[r]).max()})"
        assert np.array_equal(sharded[r], sharded[0]), f"rank {r} ends apart from rank 0"
    n = whole[0].size
    assert a["memory_strategy"] == 8 * n, a
    assert b["memory_strategy"] == 8 * (n // 2), b
    assert b["memory_buffers"] == 8 * (n // 2), b
    syncs = 3  # 12 steps, every 4
    got = (a["bytes_inter"] - a["bytes_inter_start"]) - (b["bytes_inter"] - b["bytes_inter_start"])
    assert got == syncs * 4 * (n - n // 2), (got, a["bytes_inter"], b["bytes_inter"])
    print(f"ok: sync.shard = \"outer\" trains bit for bit as unsharded on every rank; rank 0 holds "
          f"{b['memory_strategy']} of {a['memory_strategy']} bytes of outer state and sends half a leader's bytes")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
