#!/usr/bin/env bash
# Convergence and bytes of the compressed data-parallel strategies against all-reduce, same
# seeds and data order: each of recipes/{mlp_fmnist,powersgd_mlp_fmnist,topk_mlp_fmnist,
# onebit_mlp_fmnist}.toml with WORLD workers for EPOCHS epochs, all-reduce over the ring (whose
# bytes per rank are 2(N-1)/N of the gradient). Prints a markdown table: test accuracy and its
# difference to all-reduce, bytes sent per rank (whole run, warm-up included), how many times
# fewer than all-reduce, and the reducers' payload compression ratio.
#
#   tests/bench/compression_convergence.sh [BUILD_DIR]     (default: build; needs its trainer)
# Environment: WORLD (default 8), EPOCHS (default 5), OUT (run directories; default a temp dir),
# TRAINER (the trainer binary, instead of BUILD_DIR/trainer),
# CHECK=1: exit 1 unless every strategy is within MAX_DROP_PP (default 1.0) points of all-reduce
# and sends at least 30x (PowerSGD), 25x (1-bit) and 10x (top-k) fewer bytes. The cli test
# (tests/cli/compression_convergence.sh) runs CHECK=1 EPOCHS=3, the shortest at which the bars hold.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
world="${WORLD:-8}"
epochs="${EPOCHS:-5}"
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"
trainer="${TRAINER:-${1:-$repo/build}/trainer}"
[[ -x "$trainer" ]] || { echo "error: $trainer missing (cmake --build build --target trainer)" >&2; exit 2; }

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -m), $(nproc) cores; $world workers, $epochs epochs of Fashion-MNIST"
for s in allreduce powersgd topk onebit; do
  recipe="$repo/recipes/${s}_mlp_fmnist.toml"
  [[ "$s" == allreduce ]] && recipe="$repo/recipes/mlp_fmnist.toml"
  start=$(date +%s%N)
  "$trainer" --recipe "$recipe" --out "$out/$s" --distributed.world_size="$world" \
    --distributed.backend=threads --distributed.algorithm=ring --train.epochs="$epochs" \
    --train.steps=0 --train.log_every=1000000 --train.eval_every=0 >"$out/$s.log" 2>&1 ||
    { cat "$out/$s.log" >&2; exit 1; }
  echo "$s $(( ($(date +%s%N) - start) / 1000000 ))" >>"$out/times"  # ms
done

python3 - "$out" "${CHECK:-0}" "${MAX_DROP_PP:-1.0}" <<'EOF'
import json, sys
out, check, max_drop = sys.argv[1], sys.argv[2] == "1", float(sys.argv[3])
times = dict(line.split() for line in open(f"{out}/times"))
runs = {s: json.load(open(f"{out}/{s}/summary.json")) for s in ["allreduce", "powersgd", "topk", "onebit"]}
need = {"powersgd": 30.0, "onebit": 25.0, "topk": 10.0}
base = runs["allreduce"]
print("| strategy | test accuracy | vs all-reduce | bytes sent per rank | fewer bytes than all-reduce | payload compression | wall |")
print("|---|---|---|---|---|---|---|")
failures = []
for s, r in runs.items():
    drop = 100 * (base["eval_accuracy"] - r["eval_accuracy"])
    fewer = base["bytes_sent"] / r["bytes_sent"]
    versus = "baseline" if s == "allreduce" else f"{-drop:+.2f} pp"
    print(f"| {s} | {100 * r['eval_accuracy']:.2f}% | {versus} | {r['bytes_sent'] / 1e6:.1f} MB | "
          f"{fewer:.1f}x | {r['compression_ratio']:.1f}x | {float(times[s]) / 1000:.0f} s |")
    if s in need:
        if drop > max_drop:
            failures.append(f"{s}: {drop:.2f} points below all-reduce (at most {max_drop})")
        if fewer < need[s]:
            failures.append(f"{s}: {fewer:.1f}x fewer bytes than all-reduce (at least {need[s]}x)")
for f in failures:
    print("FAIL", f, file=sys.stderr)
sys.exit(1 if check and failures else 0)
EOF
