#!/usr/bin/env bash
# A short real run: 4 thread workers on Fashion-MNIST must learn (test accuracy >= 80% after
# 300 steps), write the run directory as documented, and --dry-run / --print-config write nothing.
# usage: train_smoke.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$1
src=$2
if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "Fashion-MNIST not installed (scripts/install-deps installs it): skipping"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
recipe="$src/recipes/mlp_fmnist.toml"

(cd "$tmp" && "$trainer" --recipe "$recipe" --dry-run | grep -q "dry run: nothing written")
(cd "$tmp" && "$trainer" --recipe "$recipe" --print-config | grep -q "world_size = 4")
[ ! -e "$tmp/runs" ] || { echo "dry run wrote files"; exit 1; }

"$trainer" --recipe "$recipe" --train.steps=300 --train.eval_every=150 --out "$tmp/run" | tee "$tmp/log"
for f in recipe.resolved.toml metrics.jsonl summary.json; do
  [ -s "$tmp/run/$f" ] || { echo "missing $f"; exit 1; }
done
/usr/bin/python3 - "$tmp/run" <<'PY'
import json, sys
run = sys.argv[1]
recs = [json.loads(l) for l in open(run + "/metrics.jsonl")]
need = {"step", "loss", "lr", "bytes_sent", "bytes_recv", "comm_s", "compute_s", "wall_s"}
assert all(need <= r.keys() for r in recs), recs[0]
assert recs[-1]["step"] == 300, recs[-1]
assert all(a["bytes_sent"] < b["bytes_sent"] for a, b in zip(recs, recs[1:])), "bytes not cumulative"
evals = [r for r in recs if "eval_accuracy" in r]
assert len(evals) == 2, evals
s = json.load(open(run + "/summary.json"))
print("summary:", s)
assert s["steps"] == 300
assert s["eval_accuracy"] >= 0.80, s["eval_accuracy"]
assert recs[-1]["loss"] < recs[0]["loss"], "loss did not fall"
PY
echo "smoke run passed"
