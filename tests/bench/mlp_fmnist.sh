#!/usr/bin/env bash
# Side-by-side benchmark on the default recipe: Laconic's trainer vs PyTorch 1.13 (CPU).
#
#   tests/bench/mlp_fmnist.sh [TRAINER]        (TRAINER defaults to build/trainer)
#
# Rows, each run ROUNDS times in alternation (ours 4 ranks, ours 1 rank, torch, torch passive,
# ours 4 ranks, ...) so that load from other work on the machine falls on all of them alike; figures are means:
#   ours 4 ranks   recipes/mlp_fmnist.toml as is: 4 thread ranks x micro-batch 64, gradient
#                  all-reduce every step
#   ours 1 rank    --distributed.world_size=1 --train.micro_batch=256: the same global batch, no
#                  communication
#   torch          tests/bench/mlp_fmnist_torch.py: one process, global batch 256, 2 threads
#   torch, OMP passive   the same with OMP_WAIT_POLICY=PASSIVE: libgomp's default spin-waiting
#                  between ops is very costly when the 2 cores are shared with other work
# All rows: 1170 steps (5 epochs), evaluation on the 10k test set only at the end. Ours runs
# with --train.eval_every=0 (the recipe says 234); its summary.json wall_s still contains that
# final evaluation, so the script subtracts it (recovered from the last metrics.jsonl record,
# whose examples_per_s excludes evaluation time). Torch times its training loop alone.
# ms/step = training wall time / steps. Environment: ROUNDS (default 2), PYTHON (default
# /usr/bin/python3, Debian's, which has python3-torch), THREADS (torch threads, default 2), STEPS (a shorter run for a smoke test; default: 5 epochs).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
trainer="${1:-build/trainer}"
rounds="${ROUNDS:-2}"
python="${PYTHON:-/usr/bin/python3}"
threads="${THREADS:-2}"
steps="${STEPS:-}"
ours_steps=() torch_steps=()
if [[ -n "$steps" ]]; then ours_steps=(--train.steps="$steps"); torch_steps=(--steps "$steps"); fi
recipe="$repo/recipes/mlp_fmnist.toml"

[[ -x "$trainer" ]] || { echo "error: trainer '$trainer' is not an executable (pass its path as \$1)" >&2; exit 2; }
"$python" -c 'import torch' 2>/dev/null ||
  { echo "error: $python cannot import torch (apt-get install python3-torch libopenblas0-pthread)" >&2; exit 2; }

tmp="$(mktemp -d "${TMPDIR:-/tmp}/mlp_fmnist_bench.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
results="$tmp/results.jsonl"  # one JSON line per run: row, steps, wall_s, ms_per_step, ...

# ours ROW RUN EXTRA_ARGS...: one trainer run; appends its figures to $results.
ours() {
  local row="$1" run="$2"; shift 2
  local dir="$tmp/$run"
  "$trainer" --recipe "$recipe" --out "$dir" --train.eval_every=0 "${ours_steps[@]}" "$@" >"$tmp/$run.log" 2>&1 ||
    { echo "error: trainer failed; its log:" >&2; cat "$tmp/$run.log" >&2; exit 1; }
  "$python" - "$row" "$dir" >>"$results" <<'EOF'
import json, sys, tomllib
row, d = sys.argv[1], sys.argv[2]
s = json.load(open(f"{d}/summary.json"))
r = tomllib.load(open(f"{d}/recipe.resolved.toml", "rb"))
gb = r["train"]["micro_batch"] * r["train"].get("grad_accum", 1) * r["distributed"]["world_size"]
recs = [json.loads(l) for l in open(f"{d}/metrics.jsonl")]
last = recs[-1]
prev = recs[-2] if len(recs) > 1 else {"step": 0, "wall_s": 0.0}
# The final record's interval contains the end-of-run evaluation; its examples_per_s does not.
eval_s = (last["wall_s"] - prev["wall_s"]) - (last["step"] - prev["step"]) * gb / last["examples_per_s"]
train_s = s["wall_s"] - eval_s
print(json.dumps({"row": row, "global_batch": gb, "steps": s["steps"], "wall_s": s["wall_s"], "eval_s": eval_s,
                  "train_s": train_s, "ms_per_step": 1e3 * train_s / s["steps"], "compute_s": s["compute_s"],
                  "comm_s": s["comm_s"], "eval_accuracy": s["eval_accuracy"]}))
EOF
}

# torch ROW RUN [VAR=VALUE...]: one run of the PyTorch script under that environment; appends its
# figures to $results.
torch_run() {
  local row="$1" run="$2"; shift 2
  env "$@" "$python" "$here/mlp_fmnist_torch.py" --threads "$threads" "${torch_steps[@]}" >"$tmp/$run.log" 2>&1 ||
    { echo "error: torch script failed; its log:" >&2; cat "$tmp/$run.log" >&2; exit 1; }
  tail -n 1 "$tmp/$run.log" | "$python" -c '
import json, sys
t = json.loads(sys.stdin.read())
print(json.dumps({"row": sys.argv[1], "global_batch": t["global_batch"], "steps": t["steps"],
                  "wall_s": t["train_s"] + t["eval_s"], "eval_s": t["eval_s"], "train_s": t["train_s"],
                  "ms_per_step": t["ms_per_step"], "compute_s": None, "comm_s": None,
                  "eval_accuracy": t["eval_accuracy"]}))' "$row" >>"$results"
}

echo "mlp_fmnist: $(nproc) CPUs ($(grep -m1 '^model name' /proc/cpuinfo | sed 's/.*: //')), $rounds rounds"
echo "trainer: $trainer; torch: $("$python" -c 'import torch; print(torch.__version__)') via $python, $threads threads"
for ((i = 1; i <= rounds; ++i)); do
  echo "round $i/$rounds: ours 4 ranks" >&2
  ours "ours 4 ranks" "ours4_$i"
  echo "round $i/$rounds: ours 1 rank" >&2
  ours "ours 1 rank" "ours1_$i" --distributed.world_size=1 --train.micro_batch=256
  echo "round $i/$rounds: torch" >&2
  torch_run "torch 1 process" "torch_$i"
  echo "round $i/$rounds: torch, OMP_WAIT_POLICY=PASSIVE" >&2
  torch_run "torch 1 process, OMP passive" "torchp_$i" OMP_WAIT_POLICY=PASSIVE
done

"$python" - "$results" <<'EOF'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
rows = {}
for r in runs:
    rows.setdefault(r["row"], []).append(r)
mean = lambda rs, k: sum(r[k] for r in rs) / len(rs)
def fmt(x, spec):
    return "-" if x is None else format(x, spec)
print()
print("Means over %d runs per row; train s = wall s - final eval s; ms/step = train s / steps." % len(next(iter(rows.values()))))
print()
hdr = ("implementation", "global batch", "steps", "wall s", "eval s", "train s", "ms/step", "ms/step runs",
       "compute s", "comm s", "test acc %")
print("| " + " | ".join(hdr) + " |")
print("|" + "|".join(["---"] + ["---:"] * (len(hdr) - 1)) + "|")
ms = {}
for name, rs in rows.items():
    ms[name] = mean(rs, "ms_per_step")
    has_comm = rs[0]["compute_s"] is not None
    print("| " + " | ".join([
        name, str(rs[0]["global_batch"]), str(rs[0]["steps"]), fmt(mean(rs, "wall_s"), ".2f"),
        fmt(mean(rs, "eval_s"), ".2f"), fmt(mean(rs, "train_s"), ".2f"), fmt(ms[name], ".2f"),
        " / ".join(format(r["ms_per_step"], ".1f") for r in rs),
        fmt(mean(rs, "compute_s") if has_comm else None, ".2f"), fmt(mean(rs, "comm_s") if has_comm else None, ".2f"),
        " / ".join(format(100 * r["eval_accuracy"], ".2f") for r in rs)]) + " |")
print()
for name in (n for n in ms if n.startswith("ours")):
    for tname in (n for n in ms if n.startswith("torch")):
        per_round = [o["ms_per_step"] / t["ms_per_step"] for o, t in zip(rows[name], rows[tname])]
        print("ratio %s / %s (ms/step): %.2f  (per round: %s)" %
              (name, tname, ms[name] / ms[tname], " / ".join("%.2f" % x for x in per_round)))
print()
print(json.dumps({"rows": {k: {"ms_per_step": v, "runs": rows[k]} for k, v in ms.items()}}))
EOF
