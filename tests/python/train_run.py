"""laconic.train and laconic.Run round trip on recipes/mlp_fmnist.toml (6 steps): the run is the
trainer's (the same overrides on the command line give the same resolved recipe, the same records'
losses and the same final_loss, exactly); Run reads back what the files hold; the log goes to the
stream given; a finished run comes back with a note; a bad run directory is one line naming it."""
import contextlib
import io
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

from _setup import setup

trainer, source = setup()
import laconic  # noqa: E402
import numpy as np  # noqa: E402

recipe = os.path.join(source, "recipes", "mlp_fmnist.toml")
tmp = tempfile.mkdtemp(prefix="laconic-python-")
try:
    # Every kind of value the overrides format: int, list, float, bool, string.
    overrides = {"train.steps": 6, "train.log_every": 2, "model.hidden": [64, 32], "optimizer.lr": 0.04,
                 "optimizer.nesterov": True, "model.activation": "gelu"}
    log = io.StringIO()
    run = laconic.train(recipe, out=os.path.join(tmp, "py"), overrides=overrides, log=log)
    cli_dir = os.path.join(tmp, "cli")
    subprocess.run([trainer, "--recipe", recipe, "--out", cli_dir, "--train.steps=6", "--train.log_every=2",
                    "--model.hidden=[64,32]", "--optimizer.lr=0.04", "--optimizer.nesterov=true",
                    "--model.activation=gelu"], check=True, stdout=subprocess.DEVNULL)
    cli = laconic.Run(cli_dir)

    # The same run as the trainer's.
    assert run.recipe == cli.recipe, "the overrides resolved differently from the command line's"
    assert run.recipe["model"]["hidden"] == [64, 32] and run.recipe["optimizer"]["nesterov"] is True
    assert run.recipe["model"]["activation"] == "gelu" and run.recipe["optimizer"]["lr"] == 0.04
    assert run.summary["final_loss"] == cli.summary["final_loss"], (run.summary, cli.summary)
    assert [r["loss"] for r in run.records] == [r["loss"] for r in cli.records]
    assert run.note is None

    # Run holds what the files hold.
    with open(os.path.join(run.path, "metrics.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    assert run.records == lines and [r["step"] for r in lines] == [2, 4, 6]
    assert run.summary["steps"] == run.records[-1]["step"] == 6
    steps, loss = run.series("loss")
    assert steps.dtype == np.int64 and loss.dtype == np.float64
    assert steps.tolist() == [2, 4, 6] and loss.tolist() == [r["loss"] for r in lines]
    assert loss[-1] == run.summary["final_loss"]
    steps, acc = run.series("eval_accuracy")  # evaluated at the last step only: the others skipped
    assert steps.tolist() == [6] and acc.tolist() == [lines[-1]["eval_accuracy"]]

    # The log: the trainer's lines, then its closing line.
    text = log.getvalue().splitlines()
    assert len(text) > 1 and any("784-64-32-10" in line for line in text), text  # the trainer's lines came through
    assert text[-1].startswith("done: 6 steps") and text[-1].endswith(f"results in {run.path}/"), text[-1:]

    # The GIL is released while it trains: a Python thread keeps running meanwhile. log=True
    # writes to sys.stdout as it is at the call.
    ticks, stop = [0], threading.Event()

    def tick():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    ticker = threading.Thread(target=tick)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ticker.start()
        time.sleep(0.05)
        before = ticks[0]
        laconic.train(recipe, out=os.path.join(tmp, "gil"), overrides={"train.steps": 4}, log=True)
        during = ticks[0] - before
        stop.set()
        ticker.join()
    assert during >= 5, f"a Python thread ticked {during} times while laconic.train ran: the GIL was held"
    assert out.getvalue().splitlines()[-1].startswith("done: 4 steps"), out.getvalue()

    # Trained to the end already: nothing written, the Run back with the trainer's note.
    before = os.path.getmtime(os.path.join(run.path, "summary.json"))
    again = laconic.train(recipe, out=run.path, overrides=overrides, resume="auto")
    assert again.summary == run.summary and again.note and "finished its 6 steps already" in again.note, again.note
    assert os.path.getmtime(os.path.join(run.path, "summary.json")) == before

    # Bad run directories: laconic.Error, one line naming the directory or the file.
    def refused(path, expected):
        try:
            laconic.Run(path)
        except laconic.Error as e:
            message = str(e)
            assert "\n" not in message and message.startswith(expected), (message, expected)
            return
        raise AssertionError(f"Run({path!r}) was accepted")

    missing = os.path.join(tmp, "missing")
    refused(missing, f"{missing}: not a run directory")
    broken = os.path.join(tmp, "broken")
    shutil.copytree(cli_dir, broken)
    os.remove(os.path.join(broken, "metrics.jsonl"))
    refused(broken, f"{broken}: not a run directory: metrics.jsonl is missing")
    with open(os.path.join(broken, "metrics.jsonl"), "w") as f:
        f.write(json.dumps(lines[0]) + "\n{\"step\": 4, \"loss\":\n")
    refused(broken, f"{broken}/metrics.jsonl:2: malformed JSON")
    with open(os.path.join(broken, "metrics.jsonl"), "w") as f:
        f.write('{"loss": 1.0}\n')
    refused(broken, f"{broken}/metrics.jsonl:1: expected an integer \"step\"")
    # A NaN loss, which the trainer writes as null, reads as NaN; a record without the key is skipped.
    with open(os.path.join(broken, "metrics.jsonl"), "w") as f:
        f.write('{"step": 2, "loss": 2.5}\n{"step": 4}\n{"step": 6, "loss": null}\n')
    steps, loss = laconic.Run(broken).series("loss")
    assert steps.tolist() == [2, 6] and loss[0] == 2.5 and np.isnan(loss[1]), (steps, loss)
    with open(os.path.join(broken, "recipe.resolved.toml"), "a") as f:
        f.write("[train\n")
    refused(broken, f"{broken}/recipe.resolved.toml: malformed TOML")
    with open(os.path.join(broken, "summary.json"), "w") as f:
        f.write("[1, 2]\n")
    refused(broken, f"{broken}/summary.json: expected a JSON object, got list")
    try:
        run.series("los")
        raise AssertionError("series of a key no record has was accepted")
    except laconic.Error as e:
        assert str(e).startswith(f"{run.path}/metrics.jsonl: no record has 'los' (keys: "), e
    print(f"train_run: laconic.train equals the trainer (final_loss {run.summary['final_loss']!r}); "
          "Run reads it back; bad directories refused in one line")
finally:
    shutil.rmtree(tmp)
