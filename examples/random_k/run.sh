#!/usr/bin/env bash
# run.sh BUILD_DIR OUT_DIR: top-k against the example's random-k through `trainer compare`.
set -euo pipefail
build=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
"$build/randk_trainer" compare --recipe "$here/compare.toml" --vary sync.strategy=topk,random_k --out "$out/report" \
  --run.out_dir="$out" --no-plots > "$out/compare.log"
grep -E "^\| (run|topk|random_k) " "$out/report/report.md" | head -3
/usr/bin/python3 - "$out/report/compare.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
runs = {r["name"]: r for r in c["runs"]}
names = list(runs)
assert any("random_k" in n for n in names) and any("topk" in n for n in names), names
for n, r in runs.items():
    print(f"{n}: eval loss {r['eval_loss']:.4f}, accuracy {r['eval_accuracy']:.3f}, compression {r['compression_ratio']:.1f}x")
    assert r["eval_loss"] < 1.2, (n, r["eval_loss"])  # both learn (ln 10 = 2.30 at chance)
PY
