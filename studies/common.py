"""What the studies under studies/ share: running the trainer, reading its runs, statistics,
fits and the report. Each study is one script (studies/NAME) that runs its grid of trainer runs
and writes docs/studies/NAME/report.md with its plots; --tiny runs the same grid at a size CI
can afford (a smoke test: the numbers mean nothing), into a temporary folder unless --out says.

Runs use the threads backend in this process's trainer, one after another; every run's
directory stays under OUT/runs/ (not committed: .gitignore) so a report can be checked.
"""
import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
# The cross-datacenter recipes' protocol between groups (recipes/cross_dc_*.toml's [network.inter]):
# OpenMPI over TCP, as checked on a real link; inside a group [network]'s defaults (eager, lock step).
INTER_TCP = ["network.inter.eager_limit_kib=64", "network.inter.rendezvous_round_trips=1",
             "network.inter.buffered_sends=true", "network.inter.tcp_initial_window_segments=10"]


def in_pypi_environment(name, modules):
    """Re-runs this script under the PyPI environment's Python (scripts/install-deps --pypi) unless
    `modules` import here already; exits with one line when there is none."""
    try:
        for m in modules:
            __import__(m)
        return
    except ImportError:
        pass
    for d in (os.environ.get("LACONIC_VENV", ""), "/opt/laconic-venv", os.path.expanduser("~/.local/share/laconic/venv")):
        python = os.path.join(d, "bin", "python") if d else ""
        # A virtual environment's python links to the system's: tell them apart by their prefix.
        if python and os.access(python, os.X_OK) and os.path.realpath(sys.prefix) != os.path.realpath(d):
            os.execv(python, [python] + sys.argv)
    sys.exit("studies/%s: %s not installed (scripts/install-deps --pypi makes the PyPI environment that has them)"
             % (name, ", ".join(modules)))


def parse_args(name, doc):
    ap = argparse.ArgumentParser(prog="studies/" + name, description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trainer", default=os.path.join(REPO, "build", "trainer"), help="the trainer binary")
    ap.add_argument("--out", help="report folder (default docs/studies/%s; with --tiny a temporary one)" % name)
    ap.add_argument("--tiny", action="store_true", help="the CI smoke size: every run a few steps")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per configuration (default: the study's)")
    ap.add_argument("--reuse", action="store_true",
                    help="take a run from OUT/runs when it finished with the very same command (redraws a report)")
    args = ap.parse_args()
    if not os.access(args.trainer, os.X_OK):
        sys.exit("studies/%s: %s is not an executable trainer (build it: make build, or pass --trainer)" % (name, args.trainer))
    if args.out is None:
        args.out = tempfile.mkdtemp(prefix="laconic_study_") if args.tiny else os.path.join(REPO, "docs", "studies", name)
    os.makedirs(os.path.join(args.out, "runs"), exist_ok=True)
    args.started = time.time()
    args.name = name
    return args


def train(args, recipe, run_name, overrides, diverge_ok=False):
    """Runs `trainer --recipe RECIPE --out OUT/runs/RUN_NAME OVERRIDES`; returns the run. With
    diverge_ok, a run stopped by a non-finite gradient (guards.nonfinite = "abort") is a result:
    {"diverged": True, "summary": {}, "records": [...]} instead of the study's end."""
    out = os.path.join(args.out, "runs", run_name)
    cmd = [args.trainer, "--recipe", os.path.join(REPO, recipe), "--out", out,
           "--run.out_dir=" + os.path.join(args.out, "runs")] + ["--" + o for o in overrides]
    t0 = time.time()
    log = os.path.join(args.out, "runs", run_name + ".log")
    stamp = os.path.join(args.out, "runs", run_name + ".cmd")
    if args.reuse and os.path.exists(stamp) and open(stamp).read() == " ".join(cmd) and \
            os.path.exists(os.path.join(out, "summary.json")):
        run = read_run(out)
        args.reused = getattr(args, "reused", 0) + 1
        args.train_s = getattr(args, "train_s", 0.0) + run["summary"].get("wall_s", 0.0)
        print("studies/%s: %-40s eval loss %s  (reused)" % (args.name, run_name, fmt(run["summary"].get("eval_loss"))), flush=True)
        return run
    with open(log, "w") as f:
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=REPO)
    if rc != 0 and diverge_ok and "non-finite" in open(log).read():
        print("studies/%s: %-40s DIVERGED (non-finite gradient)  (%.0f s)" % (args.name, run_name, time.time() - t0), flush=True)
        return {"dir": out, "summary": {}, "records": [], "diverged": True}
    if rc != 0:
        tail = open(log).read().splitlines()[-3:]
        sys.exit("studies/%s: run %s failed (exit %d): %s\n  %s" % (args.name, run_name, rc, " ".join(map(shlex.quote, cmd)),
                                                                   "\n  ".join(tail)))
    with open(stamp, "w") as f:
        f.write(" ".join(cmd))
    run = read_run(out)
    args.train_s = getattr(args, "train_s", 0.0) + run["summary"].get("wall_s", 0.0)
    print("studies/%s: %-40s eval loss %s  (%.0f s)" % (args.name, run_name, fmt(run["summary"].get("eval_loss")),
                                                        time.time() - t0), flush=True)
    return run


def compare(args, out, recipe, flags):
    """`trainer compare --recipe RECIPE FLAGS` into OUT/runs/out, --no-plots (finished runs of the
    same recipe are reused under --tune); returns its directory. The log is OUT/runs/out.log."""
    d = os.path.join(args.out, "runs", out)
    cmd = [args.trainer, "compare", "--recipe", os.path.join(REPO, recipe), "--out", d, "--no-plots"] + flags
    log = d + ".log"
    os.makedirs(os.path.dirname(log), exist_ok=True)
    t0 = time.time()
    with open(log, "w") as f:
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=REPO)
    if rc != 0:
        sys.exit("studies/%s: %s failed (exit %d); see %s" % (args.name, " ".join(map(shlex.quote, cmd)), rc, log))
    args.train_s = getattr(args, "train_s", 0.0) + time.time() - t0  # reused runs cost nothing here
    print("studies/%s: compare %s done (%.0f s)" % (args.name, out, time.time() - t0), flush=True)
    return d


def compare_tuned(args, name, recipe, flags, seeds, key=None, values=()):
    """One method's `trainer compare --seeds` (FLAGS hold --seeds), tuning KEY over VALUES when
    given; its variant is named NAME (run.name) so that `compare --runs` of several methods'
    seeds groups each apart. Returns (its seeds' run directories, the value chosen for KEY or None)."""
    tune = ["--tune", key + "=" + ",".join(values)] if key else []
    d = compare(args, name, recipe, flags + ["--vary", "run.name=" + name] + tune)
    return seed_dirs(d, name, seeds), (tuned_choice(d, name)[key] if key else None)


def tuned_choice(compare_dir, variant):
    """The assignments --tune chose for `variant` of the comparison in compare_dir ({} untuned)."""
    t = json.load(open(os.path.join(compare_dir, "tuning.json")))
    v = [v for v in t["variants"] if v["name"] == variant][0]
    return v["configs"][v["chosen"]]["assignments"]


def seed_dirs(compare_dir, variant, seeds):
    """The run directories of `variant`'s seeds in a `trainer compare --seeds` directory."""
    return [os.path.join(compare_dir, variant, "seed%d" % k) for k in range(seeds)]


def paired(args, name, runs):
    """`trainer compare --runs RUNS` into OUT/runs/name (the first variant the baseline); returns
    {variant: (its seeds' eval losses, compare.json's loss_difference against the baseline)}."""
    d = os.path.join(args.out, "runs", name)
    subprocess.check_call([args.trainer, "compare", "--runs"] + runs + ["--out", d, "--no-plots"],
                          stdout=subprocess.DEVNULL, cwd=REPO)
    return groups_of(d)


def groups_of(compare_dir):
    """A comparison's variants: {variant: (its seeds' eval losses, compare.json's loss_difference
    against the first variant)}."""
    c = json.load(open(os.path.join(compare_dir, "compare.json")))
    return {g["name"]: ([c["runs"][i]["eval_loss"] for i in g["runs"]], g.get("loss_difference")) for g in c["groups"]}


def difference_cell(d, digits=4):
    """A paired difference as two table cells: "mean [lo, hi] (relative%) | verdict" (digits
    decimals, the relative two fewer), or "— | —" for the baseline (no difference)."""
    if not d:
        return "— | —"
    rel = 100 / d["baseline_mean"]
    return "%+.*f [%+.*f, %+.*f] (%+.*f%%) | %s" % (digits, d["mean"], digits, d["lo95"], digits, d["hi95"], digits - 2,
                                                     d["mean"] * rel, d["verdict"])


def read_run(d):
    summary = json.load(open(os.path.join(d, "summary.json")))
    records = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl")) if l.strip()]
    return {"dir": d, "summary": summary, "records": records}


def mean_std(xs):
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    if not xs:
        return None, None
    m = sum(xs) / len(xs)
    s = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
    return m, s


def fmt(x, digits=4):
    return "—" if x is None else ("%.*f" % (digits, x))


def fmt_bytes(b):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= scale:
            return "%.3g %s" % (b / scale, unit)
    return "%.0f B" % b


def fmt_ms(m, s, digits=4):
    if m is None:
        return "—"
    return "%.*f ± %.*f" % (digits, m, digits, s) if s else "%.*f" % (digits, m)


def crossing(records, key, target, x_of):
    """The first point where records[key] falls to target, interpolated on x_of(record)."""
    prev = None
    for r in records:
        y = r.get(key)
        if y is None:
            continue
        x = x_of(r)
        if y <= target:
            if prev is None:
                return x
            (px, py) = prev
            return px + (x - px) * (py - target) / (py - y) if py != y else x
        prev = (x, y)
    return None


def linear_fit(xs, ys):
    """Least squares y = a + b x; returns (a, b)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


def pyplot():
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save(fig, args, name):
    path = os.path.join(args.out, name)
    fig.tight_layout()
    fig.savefig(path + ".tmp.png", dpi=110)
    os.replace(path + ".tmp.png", path)
    return name


def write_report(args, title, command, body, plots):
    minutes = (time.time() - args.started) / 60
    text = ["# %s" % title, "", "```", command + (" --tiny" if args.tiny else ""), "```", "",
            "%s; %.1f minutes on this machine (%d cores), of which the runs' training %.1f minutes%s%s." % (
                time.strftime("%Y-%m-%d", time.gmtime()), minutes, os.cpu_count(), getattr(args, "train_s", 0.0) / 60,
                ", TINY smoke size: the numbers mean nothing" if args.tiny else "",
                "; %d runs reused from an earlier invocation (--reuse; their training time is counted, not the total)" % args.reused
                if getattr(args, "reused", 0) else ""),
            ""] + body + [""]
    for p in plots:
        text += ["![%s](%s)" % (p, p), ""]
    path = os.path.join(args.out, "report.md")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(text))
    os.replace(path + ".tmp", path)
    print("studies/%s: wrote %s (%.1f min)" % (args.name, path, minutes))
