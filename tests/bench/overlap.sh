#!/usr/bin/env bash
# How much of the gradient communication hides behind backward: recipes/lamb_bert.toml (BERT-small,
# 4 workers) for STEPS steps in buckets of BUCKET_MB, once with each bucket reduced on the
# communication thread as soon as backward has produced it (sync.overlap = true) and once after
# backward (false), in one run. comm_s is the time the reductions took, wherever they ran;
# exposed_comm_s what the step loop waited for; hidden = 1 - exposed / comm.
#
#   tests/bench/overlap.sh [BUILD_DIR]       (default: build; needs its trainer)
# Environment: STEPS (default 60), BUCKET_MB (default 1), BACKEND (threads or mpi; default threads),
# WORLD (workers, default 4).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
steps="${STEPS:-60}"
bucket="${BUCKET_MB:-1}"
backend="${BACKEND:-threads}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -m), $(nproc) cores; lamb_bert, ${WORLD:-4} workers ($backend), $steps steps, buckets of $bucket MiB"
for overlap in true false; do
  run=("$build/trainer" --recipe "$repo/recipes/lamb_bert.toml" --out "$out/$overlap" --train.steps="$steps"
       --train.eval_every=0 --train.log_every=1000000 --train.noise_scale=false --sync.bucket_mb="$bucket"
       --sync.overlap="$overlap" --run.out_dir="$out/cache" --distributed.world_size="${WORLD:-4}"
       # BERT-small at batch 16 per worker, as measured in docs/benchmarks.md (lamb_bert's own size
       # has since become the large-batch one)
       --model.dim=128 --model.heads=4 --model.ffn=512 --data.seq_len=64 --data.mask_prob=0.15
       --train.micro_batch=16 --train.grad_accum=1)
  if [[ "$backend" == mpi ]]; then
    mpirun -np "${WORLD:-4}" --oversubscribe --allow-run-as-root --mca btl self,vader --bind-to none "${run[@]}" >"$out/$overlap.log" 2>&1
  else
    "${run[@]}" --distributed.backend=threads >"$out/$overlap.log" 2>&1
  fi
done
python3 - "$out" <<'PY'
import json, sys
print("| overlap | wall s | compute s | comm s | exposed comm s | hidden |")
print("|---|---|---|---|---|---|")
for o in ["true", "false"]:
    s = json.load(open(f"{sys.argv[1]}/{o}/summary.json"))
    hidden = 1 - s["exposed_comm_s"] / s["comm_s"] if s["comm_s"] > 0 else 0
    print(f"| {o} | {s['wall_s']:.2f} | {s['compute_s']:.2f} | {s['comm_s']:.2f} | {s['exposed_comm_s']:.2f} | {100 * hidden:.0f}% |")
PY
