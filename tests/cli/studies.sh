#!/usr/bin/env bash
# Every study under studies/ at its --tiny size (a smoke test: the grid runs, the report and its
# plots are written; the numbers mean nothing at this size). The full studies write docs/studies/.
# --tiny is a few steps per run; the GPT studies evaluate once, on 1% of the text, and frontier and
# elastic cut the model further (frontier: dim 32 on one folder of its corpus, a vocabulary of 300).
# usage: studies.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$(realpath "$1")
src=$2
if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "Fashion-MNIST not installed (scripts/install-deps installs it): skipping"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for study in large_batch critical_batch compression diloco elastic frontier reproductions/replicas reproductions/diloco_paper reproductions/streaming \
    reproductions/async reproductions/sparseloco sharding; do
  log="$tmp/${study//\//_}.log"
  "$src/studies/$study" --tiny --trainer "$trainer" --out "$tmp/$study" >"$log" 2>&1 ||
    { echo "studies/$study --tiny failed:"; tail -20 "$log"; exit 1; }
  [ -s "$tmp/$study/report.md" ] || { echo "studies/$study wrote no report"; exit 1; }
  grep -q "TINY smoke size" "$tmp/$study/report.md" || { echo "studies/$study: the report does not say it is tiny"; exit 1; }
  if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
    ls "$tmp/$study"/*.png >/dev/null 2>&1 || { echo "studies/$study wrote no plot"; exit 1; }
  fi
  echo "studies/$study: ok"
done
# The eager DiLoCo reference written from the paper: its two forms of the rule (the paper's sum over
# the other replicas, docs/outer_loop.md's) give the same parameters.
/usr/bin/python3 "$src/studies/reproductions/eager_reference.py" --steps 20 --seeds 1 --hidden 32 >"$tmp/eager.log" 2>&1 ||
  { echo "eager_reference.py failed:"; tail -5 "$tmp/eager.log"; exit 1; }
diff=$(sed -n 's/.*eager_doc (Laconic.s form): max |diff| \([0-9.e+-]*\).*/\1/p' "$tmp/eager.log")
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$diff') < 1e-5 else 1)" 2>/dev/null ||
  { echo "eager_reference.py: the two forms of the eager rule differ by '$diff'"; cat "$tmp/eager.log"; exit 1; }
echo "studies/reproductions/eager_reference.py: ok"
