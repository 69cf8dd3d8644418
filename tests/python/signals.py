"""A signal during laconic.train stops the run after the current step with a checkpoint, as the
trainer does: SIGTERM exits 143 with a line saying where to continue, SIGINT raises
KeyboardInterrupt (uncaught, Python ends by SIGINT: 130 in a shell); resume="auto" then trains the
rest to the same final loss as an uninterrupted run."""
import os
import signal
import subprocess
import sys
import tempfile

from _setup import setup

trainer, source = setup()
import laconic  # noqa: E402

recipe = os.path.join(source, "recipes", "mlp_fmnist.toml")
overrides = {"train.steps": 400, "train.log_every": 1, "model.hidden": [32]}
with tempfile.TemporaryDirectory() as tmp:
    whole = laconic.train(recipe, out=os.path.join(tmp, "whole"), overrides=overrides)
    for sig, code, says in ((signal.SIGTERM, 143, "laconic: stopped by SIGTERM after step "),
                            (signal.SIGINT, -signal.SIGINT, "KeyboardInterrupt: stopped by SIGINT after step ")):
        out = os.path.join(tmp, sig.name)
        p = subprocess.Popen([sys.executable, "-c", f"import laconic\nlaconic.train({recipe!r}, out={out!r}, "
                              f"overrides={overrides!r}, log=True)"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
        for line in p.stdout:  # the first step logged: the loop runs, the handlers are in place
            if line.startswith("step "):
                break
        p.send_signal(sig)
        p.stdout.read()
        err = p.stderr.read()
        assert p.wait() == code, (sig.name, p.returncode, err)
        last = err.splitlines()[-1]
        assert last.startswith(says) and "(continue with resume=\"auto\")" in last, (sig.name, err)
        if sig == signal.SIGTERM:
            assert "Traceback" not in err, err  # the trainer's lines, no traceback
        done = laconic.train(recipe, out=out, overrides=overrides, resume="auto")
        assert done.summary["steps"] == 400 and done.note is None
        assert done.summary["final_loss"] == whole.summary["final_loss"], (sig.name, done.summary, whole.summary)
print("signals: SIGTERM exits 143, SIGINT raises KeyboardInterrupt, each after a checkpoint that resumes exactly")
