"""laconic.Error: a bad override key, value or recipe file raises it with the trainer's one-line
message; uncaught in a script it prints that one line and exits 2, while any other exception keeps
Python's traceback and exit code 1."""
import os
import subprocess
import sys
import tempfile

from _setup import setup

trainer, source = setup()
import laconic  # noqa: E402

recipe = os.path.join(source, "recipes", "mlp_fmnist.toml")


def refused(expected, **kwargs):
    """laconic.train(recipe, **kwargs) raises laconic.Error whose message starts with `expected`."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            laconic.train(kwargs.pop("recipe", recipe), out=os.path.join(tmp, "run"), **kwargs)
        except laconic.Error as e:
            message = str(e)
            assert "\n" not in message and message.startswith(expected), (message, expected)
            assert not os.path.exists(os.path.join(tmp, "run")), "a refused run wrote its directory"
            return message
    raise AssertionError(f"laconic.train({kwargs}) was accepted")


# The trainer's own messages: the same words as `trainer --train.nope=1`.
message = refused("--train.nope=1: unknown key 'train.nope'", overrides={"train.nope": 1})
cli = subprocess.run([trainer, "--recipe", recipe, "--train.nope=1"], capture_output=True, text=True)
assert cli.returncode == 2 and cli.stderr == f"trainer: error: {message}\n", (cli.returncode, cli.stderr)
refused("--train.steps=many: ", overrides={"train.steps": "many"})
refused("--train.steps=2.5: ", overrides={"train.steps": 2.5})
# MPI is the trainer's (mpirun trainer): laconic.train's workers are threads.
refused(f"{recipe}: distributed.backend: ", overrides={"distributed.backend": "mpi"})
missing = os.path.join(source, "recipes", "no_such_recipe.toml")
refused(missing, recipe=missing)
# What cannot be an override value, caught before the trainer.
refused("overrides: train.steps: expected a bool, int, float, string or list, got dict",
        overrides={"train.steps": {"a": 1}})
refused("overrides: expected a dict", overrides=["train.steps=5"])


def script(body):
    """Runs `body` as a script in a fresh interpreter (the package on its PYTHONPATH)."""
    return subprocess.run([sys.executable, "-c", "import laconic\n" + body], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))


# Uncaught: one line, exit code 2, and atexit handlers still ran.
with tempfile.TemporaryDirectory() as tmp:
    p = script(f"import atexit\natexit.register(print, 'atexit ran')\n"
               f"laconic.train({recipe!r}, out={tmp!r}, overrides={{'train.nope': 1}})")
assert p.returncode == 2, (p.returncode, p.stderr)
assert p.stderr == f"laconic: error: {message}\n", p.stderr
assert p.stdout == "atexit ran\n", p.stdout
# Any other exception: Python's own hook, traceback and exit code 1.
p = script("raise ValueError('not laconic')")
assert p.returncode == 1 and p.stderr.startswith("Traceback") and p.stderr.endswith("ValueError: not laconic\n"), p
print("errors: bad keys, values and files raise laconic.Error in one line; uncaught, one line and exit 2")
