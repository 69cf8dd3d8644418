"""torchrun --nnodes 2 as across two hosts: two network namespaces of this machine on a bridge
(the set-up of ../shared/NETNS-MPI.md), one torchrun per namespace (--node_rank 0 and 1, one
process each, the master at node 0's address), nothing of Laconic's in the environment. lt.Sync's
ranks meet through torch's store and listen on the address that reaches the master, so the two
"hosts" train together: the same parameters on both, those of one process at twice the batch (1e-6
relative). Traffic only between the namespaces made here; everything removed on exit. Skips (77)
where it cannot make them (not root, no ip)."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _setup import free_port, setup_torch, torchrun_env  # noqa: E402

TRAINER, SOURCE = setup_torch()
HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "_torch_worker.py")
RECIPE = os.path.join(HERE, "torch_allreduce.toml")
P = f"lt{os.getpid() % 100000}"
BRIDGE, SUBNET = P + "br", "10.217.0"


def ip(*args, ns=None):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + ["ip"] + list(args)
    subprocess.run(cmd, check=True, timeout=30, capture_output=True)


def up():
    ip("link", "add", BRIDGE, "type", "bridge")
    ip("addr", "add", f"{SUBNET}.1/24", "dev", BRIDGE)
    ip("link", "set", BRIDGE, "up")
    for i in (0, 1):
        ns = f"{P}n{i}"
        subprocess.run(["ip", "netns", "add", ns], check=True, timeout=30)
        ip("link", "add", f"{P}v{i}", "type", "veth", "peer", "name", f"{P}p{i}")
        ip("link", "set", f"{P}v{i}", "master", BRIDGE)
        ip("link", "set", f"{P}v{i}", "up")
        ip("link", "set", f"{P}p{i}", "netns", ns)
        ip("addr", "add", f"{SUBNET}.1{i}/24", "dev", f"{P}p{i}", ns=ns)
        ip("link", "set", f"{P}p{i}", "up", ns=ns)
        ip("link", "set", "lo", "up", ns=ns)


def down():
    for i in (0, 1):
        subprocess.run(["ip", "netns", "del", f"{P}n{i}"], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "del", f"{P}v{i}"], capture_output=True, timeout=30)
    subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True, timeout=30)


if os.geteuid() != 0 or not shutil.which("ip"):
    print("skipped: needs root and ip to make the two network namespaces")
    sys.exit(77)
tmp = tempfile.mkdtemp(prefix="laconic-nodes-")
try:
    try:
        up()
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        print(f"skipped: cannot make the namespaces and their bridge here ({e})")
        sys.exit(77)
    one = os.path.join(tmp, "one")
    subprocess.run([sys.executable, WORKER, RECIPE, "--save", one, "--set", "train.micro_batch=32"], check=True,
                   env=torchrun_env(), timeout=300)
    save, port = os.path.join(tmp, "nodes"), str(free_port())
    procs = [subprocess.Popen(["ip", "netns", "exec", f"{P}n{i}", sys.executable, "-m", "torch.distributed.run",
                               "--nnodes", "2", "--node_rank", str(i), "--nproc_per_node", "1", "--master_addr",
                               f"{SUBNET}.10", "--master_port", port, "--redirects", "2", "--tee", "2", WORKER, RECIPE,
                               "--save", save, "--set", "train.micro_batch=16", "--set", "distributed.world_size=2"],
                              env=torchrun_env(), start_new_session=True) for i in (0, 1)]
    try:
        for i, p in enumerate(procs):
            assert p.wait(timeout=300) == 0, f"node {i}'s torchrun exited {p.returncode}"
    finally:
        for p in procs:  # a node left waiting for its peer (a failed run): torchrun and its worker
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    ranks = [np.load(os.path.join(save, f"params.rank-{r}.npy")) for r in (0, 1)]
    base = np.load(os.path.join(one, "params.rank-0.npy"))
    assert np.array_equal(ranks[0], ranks[1]), "the two nodes' parameters differ"
    err = float(np.linalg.norm(ranks[0].astype(np.float64) - base) / np.linalg.norm(base.astype(np.float64)))
    assert err <= 1e-6, f"2 nodes at 16 differ from 1 process at 32 by {err:.3g} relative"
    print(f"ok: torchrun --nnodes 2 across two network namespaces == 1 process at twice the batch ({err:.2g})")
finally:
    down()
    shutil.rmtree(tmp, ignore_errors=True)
