#!/usr/bin/env bash
# run.sh BUILD_DIR OUT_DIR: trains the recipe with the example's trainer, checks that the model
# learned, that its section rejects bad values like a built-in one, and exports its weights.
set -euo pipefail
build=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
"$build/moe_trainer" --recipe "$here/moe.toml" --run.out_dir="$out" | tail -3
/usr/bin/python3 - "$out/moe/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"moe: eval accuracy {s['eval_accuracy']:.3f}")
assert s["eval_accuracy"] > 0.70, s
PY
set +e
"$build/moe_trainer" --recipe "$here/moe.toml" --run.out_dir="$out" --model.moe.experts=0 2> "$out/err.txt"
rc=$?
set -e
[ $rc -eq 2 ] && [ "$(wc -l < "$out/err.txt")" -eq 1 ] || { echo "expected exit 2 and one line, got $rc:"; cat "$out/err.txt"; exit 1; }
grep -q "model.moe.experts=0: expected an integer in \[1, 64\], got 0" "$out/err.txt"
"$build/moe_trainer" export "$out/moe" --out "$out/moe.safetensors"
