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


def free_port():
    """A TCP port on 127.0.0.1 nothing listens on now (for a launcher's master)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_env():
    """The environment with no LACONIC_* variable but LACONIC_HAVE_MPI: what torchrun sets is all
    the ranks have."""
    import os
    return {k: v for k, v in os.environ.items() if not k.startswith("LACONIC_") or k == "LACONIC_HAVE_MPI"}


def torchrun(n):
    """torchrun of this interpreter for n processes on this machine. --redirects/--tee 2: Debian's
    torch 1.13 torchrun fails on Python 3.11 with their default 0 before starting a worker (to_map:
    'NoneType' object has no attribute 'get'; torch's own bug)."""
    import sys
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(n), "--master_addr", "127.0.0.1",
            "--master_port", str(free_port()), "--redirects", "2", "--tee", "2"]

