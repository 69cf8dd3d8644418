"""Laconic from Python: train a recipe with the C++ trainer in this process, read runs back.

    import laconic
    run = laconic.train("recipes/mlp_fmnist.toml", out="runs/x", overrides={"train.steps": 50})
    steps, loss = run.series("loss")
    run = laconic.Run("runs/mlp_fmnist")   # .summary, .recipe, .records, .series(key)

laconic.Error is a user's mistake (a recipe, key or file) in one line. Uncaught in a script, it is
printed as that one line ("laconic: error: ...") and the process exits with code 2, as the
trainer's command line does (the hook below). Importing laconic never imports torch.
"""
import ctypes
import glob
import importlib.util
import numbers
import os
import signal
import sys


def _prefer_torchs_cuda_libraries():
    """A torch from PyPI brings its own NCCL, cuBLAS and CUDA runtime (the nvidia-* wheels beside
    it), newer than the toolkit's this module was linked with, under the same sonames. The loader
    keeps whichever copy a process loads first: were it ours, a later `import torch` would fail
    (libtorch_cuda: undefined symbol ncclCommResume). So load torch's copies first, as torch's own
    import does, without importing torch; within a major version they keep our symbols."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return
    nvidia = os.path.join(os.path.dirname(list(spec.submodule_search_locations)[0]), "nvidia")
    for name in ("libcudart.so.*", "libcublasLt.so.*", "libcublas.so.*", "libnccl.so.*"):
        for path in sorted(glob.glob(os.path.join(nvidia, "*", "lib", name)))[:1]:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


_prefer_torchs_cuda_libraries()

from laconic import _laconic  # noqa: E402
from laconic._laconic import Error  # noqa: E402
from laconic._laconic import ReplicaDropped  # noqa: E402
from laconic._laconic import train as _train_in_process  # noqa: E402
from laconic.run import Run  # noqa: E402

__all__ = ["Error", "ReplicaDropped", "Run", "train"]
Error.__module__ = "laconic"  # how tracebacks and reprs name it
ReplicaDropped.__module__ = "laconic"


def _toml_value(key, value, inside_list=False):
    """`value` as the command line spells it: bools true/false, numbers as Python prints them
    (TOML reads them back the same: repr of a float round-trips), strings bare (quoted inside a
    list), lists as TOML arrays."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value))
    if isinstance(value, str):
        if not inside_list:
            return value
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(key, v, True) for v in value) + "]"
    raise Error(f"overrides: {key}: expected a bool, int, float, string or list, got {type(value).__name__}")


def _override_list(overrides):
    if not overrides:
        return []
    if not isinstance(overrides, dict):
        raise Error(f"overrides: expected a dict of \"section.key\": value, got {type(overrides).__name__}")
    lines = []
    for key, value in overrides.items():
        if not isinstance(key, str):
            raise Error(f"overrides: expected \"section.key\" strings as keys, got {key!r}")
        lines.append(f"{key}={_toml_value(key, value)}")
    return lines


def train(recipe, out=None, overrides=None, log=False, resume=None):
    """Trains `recipe` (a TOML file) with Laconic's trainer in this process, the GIL released while
    it trains, and returns the Run of its directory.

    out        the run directory (default: the recipe's [run] out_dir / name)
    overrides  {"section.key": value}, as --section.key=value on the command line
    log        False: silent; True: the trainer's log lines to sys.stdout; or any text stream
    resume     None: start fresh; "auto": the newest complete checkpoint of the run; or a checkpoint

    A run that had finished before (resume="auto" on a finished run) trains nothing: its Run comes
    back with .note saying so. SIGINT during the run checkpoints after the current step and raises
    KeyboardInterrupt; SIGTERM and SIGUSR1 checkpoint and exit with 128 + the signal, as the
    trainer does (resume="auto" continues). Distributed runs here use the threads backend.
    Raises laconic.Error on a bad recipe, key, value or data file.
    """
    stream = None
    if log is True:
        stream = sys.stdout
    elif log:
        stream = log
    done = _train_in_process(os.fspath(recipe), "" if out is None else os.fspath(out), _override_list(overrides),
                             stream, "" if resume is None else str(resume))
    run = Run(done.run_dir)
    run.note = done.note or None
    if done.stop_signal == signal.SIGINT:
        raise KeyboardInterrupt(done.note)
    if done.stop_signal:
        print(f"laconic: {done.note}", file=sys.stderr)
        sys.exit(128 + done.stop_signal)
    return run


_previous_excepthook = sys.excepthook


def _abort_mpi_job(code):
    """Under mpirun (laconic.torch), a rank whose script failed ends the job at once: its peers
    would wait in their next collective until distributed.timeout_s. Nothing without MPI."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):
        pass
    _laconic.abort_mpi_job(code)


def _excepthook(kind, value, traceback):
    """laconic.Error uncaught: its one line, exit code 2 (in a script; an interactive session
    only prints); laconic.ReplicaDropped (an elastic replica dropped from its run): its line, exit
    76, so that trainer elastic restarts it as a joiner. Everything else goes to the hook that was
    there before."""
    if not issubclass(kind, (Error, ReplicaDropped)):
        _previous_excepthook(kind, value, traceback)
        _abort_mpi_job(1)
        return
    dropped = issubclass(kind, ReplicaDropped)
    print(f"laconic: {'' if dropped else 'error: '}{value}", file=sys.stderr)
    if hasattr(sys, "ps1") or sys.flags.interactive:
        return
    _abort_mpi_job(76 if dropped else 2)
    # The interpreter would exit 1 after this hook; 2 is the code of a user's mistake (the
    # trainer's too). os._exit skips the interpreter's shutdown, so what it would do that matters
    # is done first: atexit handlers, then the standard streams flushed.
    import atexit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    os._exit(76 if dropped else 2)


sys.excepthook = _excepthook
