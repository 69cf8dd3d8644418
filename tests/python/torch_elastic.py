"""Elastic replicas of a torch model: `trainer elastic --replicas 3 ... -- python3 script` starts
the script as three DiLoCo replicas (each learns which it is from its environment), restarts one
that is SIGKILLed mid-run, which rejoins with a live member's checkpoint (torch's optimizer state
included); every replica that finishes ends with the same theta_global, and the supervisor exits 0."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _setup import setup_torch  # noqa: E402

TRAINER, SOURCE = setup_torch()

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "_torch_worker.py")
RECIPE = os.path.join(HERE, "torch_elastic.toml")
tmp = tempfile.mkdtemp(prefix="laconic-torch-elastic-")


def elastic(name, extra):
    out = os.path.join(tmp, name)
    cmd = [TRAINER, "elastic", "--replicas", "3", "--max-restarts", "2", "--recipe", RECIPE, "--out", out, "--",
           sys.executable, WORKER, RECIPE, "--optimizer", "adamw"] + extra
    return out, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def checksums(out):
    sums = []
    for i in range(3):
        path = os.path.join(out, f"replica-{i}", "summary.json")
        if os.path.exists(path):
            sums.append(json.load(open(path)).get("theta_global_checksum"))
    return sums


try:
    out, p = elastic("calm", [])
    log, _ = p.communicate(timeout=300)
    assert p.returncode == 0, f"trainer elastic exited {p.returncode}\n{log}"
    sums = checksums(out)
    assert len(sums) == 3 and sums[0] and len(set(sums)) == 1, f"replicas disagree: {sums}\n{log}"
    print(f"ok: 3 torch replicas under trainer elastic agree on theta_global ({sums[0]})")

    # Replica 1 stalls in step 10 (after the sync of step 8): SIGKILL it there.
    out, p = elastic("kill", ["--stall-at", "10"])
    log1 = os.path.join(out, "replica-1", "log.txt")
    deadline = time.time() + 120
    while time.time() < deadline:
        if os.path.exists(log1) and "stalling at 10" in open(log1).read():
            break
        time.sleep(0.05)
    else:
        p.kill()
        raise AssertionError("replica 1 never reached step 10")
    os.kill(int(open(os.path.join(out, "replica-1", "pid")).read()), signal.SIGKILL)
    log, _ = p.communicate(timeout=300)
    assert p.returncode == 0, f"trainer elastic exited {p.returncode} after the kill\n{log}"
    report = json.load(open(os.path.join(out, "elastic.json")))
    starts = [r["starts"] for r in report["processes"]]
    assert starts[1] == 2, f"replica 1 was not restarted: {starts}\n{log}"
    sums = [s for s in checksums(out) if s]
    assert len(sums) >= 2 and len(set(sums)) == 1, f"finished replicas disagree: {sums}\n{log}"
    print(f"ok: SIGKILLed replica restarted and rejoined; {len(sums)} replicas agree on theta_global")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
