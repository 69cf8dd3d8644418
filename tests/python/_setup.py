"""What every Python test starts with: the arguments CTest passes (the trainer, the source tree)
and the package, or a skip (exit 77) with one line when it was not built."""
import sys


def setup():
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} TRAINER SOURCE_DIR")
    try:
        import laconic  # noqa: F401
    except ImportError as e:
        print(f"skipped: the Python package laconic was not built ({e}; LACONIC_PYTHON, pybind11-dev)")
        sys.exit(77)
    return sys.argv[1], sys.argv[2]


def setup_torch():
    """setup(), and a skip when this interpreter has no torch (laconic.torch's tests)."""
    trainer, source = setup()
    try:
        import torch  # noqa: F401
    except ImportError:
        print("skipped: torch is not installed for this interpreter (python3-torch)")
        sys.exit(77)
    return trainer, source


def run_gloo_ranks(cmd, n, store, timeout=300):
    """Runs `cmd` as n gloo ranks (LACONIC_RANK, LACONIC_WORLD_SIZE, LACONIC_STORE=file:store),
    asserts every rank exits 0 within `timeout` s each, and kills any left on the way out."""
    import os
    import subprocess
    env = dict(os.environ, LACONIC_WORLD_SIZE=str(n), LACONIC_STORE="file:" + store)
    procs = [subprocess.Popen(cmd, env=dict(env, LACONIC_RANK=str(r))) for r in range(n)]
    try:
        for r, p in enumerate(procs):
            assert p.wait(timeout=timeout) == 0, f"gloo rank {r} of {cmd[1:3]} exited {p.returncode}"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
