#!/usr/bin/env bash
# SPARTA from a recipe (framework/sync/sparta.h): 2 ranks of the Fashion-MNIST MLP,
#  - a recipe naming [sync.sparta] parses in a fresh process (the built-ins' own sections are
#    registered before the recipe is read);
#  - fraction 0.01 every step: about 1/100 of the parameter bytes on the wire (compression ratio in
#    [80, 125]), the run trains (held-out loss below 1.0);
#  - resumed from its step-100 checkpoint: the uninterrupted run's held-out loss and final weights,
#    bit for bit (the choice of elements is a function of the seed and the step);
#  - fraction 0 is refused in one line, exit 2.
# usage: sparta.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$1
src=$2
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "dataset-fashion-mnist not installed (scripts/install-deps installs it): skipping"; exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(--recipe "$src/recipes/mlp_fmnist.toml" --model.hidden=[64] --train.epochs=0 --train.log_every=50
      --train.eval_every=0 --distributed.world_size=2 --schedule.warmup_steps=0 --sync.strategy=sparta
      --sync.sparta.fraction=0.01)
args+=(--train.steps=200 --checkpoint.every=100 --checkpoint.keep_latest=3)
"$trainer" "${args[@]}" --out "$tmp/whole" > "$tmp/whole.out"
cp -r "$tmp/whole" "$tmp/split"
rm -rf "$tmp/split/checkpoints/step-000000200" "$tmp/split/summary.json"
"$trainer" "${args[@]}" --out "$tmp/split" --resume auto > "$tmp/split.out"
grep -q "step-000000100" "$tmp/split.out" || { cat "$tmp/split.out"; exit 1; }
/usr/bin/python3 - "$tmp/whole/summary.json" "$tmp/split/summary.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert 80 <= a["compression_ratio"] <= 125, a["compression_ratio"]
assert a["eval_loss"] < 1.0, a["eval_loss"]
assert a["eval_loss"] == b["eval_loss"], (a["eval_loss"], b["eval_loss"])
print(f"sparta 0.01: {a['compression_ratio']:.1f}x fewer bytes than the parameters, eval loss {a['eval_loss']:.4f}; "
      "resumed at step 100: the same")
PY
cmp "$tmp/whole/checkpoints/step-000000200/rank-0.bin" "$tmp/split/checkpoints/step-000000200/rank-0.bin"
set +e
"$trainer" "${args[@]}" --sync.sparta.fraction=0 --out "$tmp/bad" > "$tmp/bad.out" 2> "$tmp/bad.err"
rc=$?
set -e
[ "$rc" -eq 2 ] && [ "$(wc -l < "$tmp/bad.err")" -eq 1 ] && grep -q "expected a number in (0, 1]" "$tmp/bad.err" \
  || { echo "fraction 0: exit $rc"; cat "$tmp/bad.err"; exit 1; }
echo "sparta: all checks passed"
