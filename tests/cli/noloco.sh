#!/usr/bin/env bash
# NoLoCo from a recipe (framework/sync/noloco.h): 4 ranks of the Fashion-MNIST MLP,
#  - a recipe naming [sync.noloco] parses in a fresh process;
#  - every 15 steps each rank swaps two model-sized vectors with one peer: over 200 steps (13 syncs)
#    exactly 13 x 2 x 4n bytes more per rank than the same run with no sync in it (period 1000),
#    and the reducer statistics say 0.5 (two floats sent per parameter); the run trains (held-out
#    loss below 1.0);
#  - resumed from its step-100 checkpoint (mid-period: syncs after steps 89 and 104): the
#    uninterrupted run's held-out loss and final weights, bit for bit (the pairing is a function of
#    the seed and the sync index, the anchor and momentum are in the checkpoint);
#  - momentum 1 is refused in one line, exit 2.
# usage: noloco.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$1
src=$2
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "dataset-fashion-mnist not installed (scripts/install-deps installs it): skipping"; exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(--recipe "$src/recipes/mlp_fmnist.toml" --model.hidden=[64] --train.epochs=0 --train.log_every=50
      --train.eval_every=0 --distributed.world_size=4 --schedule.warmup_steps=0 --sync.strategy=noloco
      --train.steps=200)
"$trainer" "${args[@]}" --sync.noloco.period=15 --checkpoint.every=100 --checkpoint.keep_latest=3 \
  --out "$tmp/whole" > "$tmp/whole.out"
"$trainer" "${args[@]}" --sync.noloco.period=1000 --out "$tmp/none" > "$tmp/none.out"
cp -r "$tmp/whole" "$tmp/split"
rm -rf "$tmp/split/checkpoints/step-000000200" "$tmp/split/summary.json"
"$trainer" "${args[@]}" --sync.noloco.period=15 --checkpoint.every=100 --checkpoint.keep_latest=3 \
  --out "$tmp/split" --resume auto > "$tmp/split.out"
grep -q "step-000000100" "$tmp/split.out" || { cat "$tmp/split.out"; exit 1; }
/usr/bin/python3 - "$tmp/whole/summary.json" "$tmp/split/summary.json" "$tmp/none/summary.json" <<'PY'
import json, sys
a, b, none = (json.load(open(p)) for p in sys.argv[1:])
n = 784 * 64 + 64 + 64 * 10 + 10  # the MLP 784-64-10's parameters
syncs = len([s for s in range(200) if (s + 1) % 15 == 0])
extra = a["bytes_sent"] - none["bytes_sent"]
assert extra == syncs * 2 * 4 * n, (extra, syncs, n)
assert a["bytes_recv"] - none["bytes_recv"] == syncs * 2 * 4 * n
assert a["compression_ratio"] == 0.5, a["compression_ratio"]
assert a["eval_loss"] < 1.0, a["eval_loss"]
assert a["eval_loss"] == b["eval_loss"], (a["eval_loss"], b["eval_loss"])
print(f"noloco every 15 steps: {syncs} syncs, {extra} bytes per rank = {syncs} x 2 x 4n (n = {n}); "
      f"eval loss {a['eval_loss']:.4f}; resumed at step 100: the same")
PY
for r in 0 1 2 3; do
  cmp "$tmp/whole/checkpoints/step-000000200/rank-$r.bin" "$tmp/split/checkpoints/step-000000200/rank-$r.bin"
done
set +e
"$trainer" "${args[@]}" --sync.noloco.momentum=1 --out "$tmp/bad" > "$tmp/bad.out" 2> "$tmp/bad.err"
rc=$?
set -e
[ "$rc" -eq 2 ] && [ "$(wc -l < "$tmp/bad.err")" -eq 1 ] && grep -q "expected a number in \[0, 1)" "$tmp/bad.err" \
  || { echo "momentum 1: exit $rc"; cat "$tmp/bad.err"; exit 1; }
echo "noloco: all checks passed"
