#!/usr/bin/env bash
# The trainer is killed (SIGKILL) in the middle of writing a checkpoint ([fault] kind = "crash"):
# the previous checkpoint stays intact, `--resume auto` continues from it, and the resumed run
# writes the same metrics.jsonl, bit for bit in every non-timing field, as one never interrupted.
# usage: checkpoint_crash.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$1
src=$2
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "dataset-fashion-mnist not installed (scripts/install-deps installs it): skipping"; exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(--recipe "$src/recipes/topk_mlp_fmnist.toml" --train.steps=30 --train.log_every=10 --train.eval_every=0
      --model.hidden=[64] --distributed.world_size=3 --checkpoint.every=10)

"$trainer" "${args[@]}" --out "$tmp/whole" >"$tmp/whole.log"

set +e
"$trainer" "${args[@]}" --out "$tmp/run" --fault.kind=crash --fault.rank=1 --fault.step=20 >"$tmp/crash.log" 2>&1
rc=$?
set -e
[ "$rc" -eq 137 ] || { echo "expected death by SIGKILL (137), got $rc"; cat "$tmp/crash.log"; exit 1; }
ls "$tmp/run/checkpoints"
[ -d "$tmp/run/checkpoints/step-000000010" ] || { echo "the previous checkpoint is gone"; exit 1; }
[ -d "$tmp/run/checkpoints/step-000000020.tmp" ] || { echo "no half-written checkpoint: the kill came at the wrong time"; exit 1; }
[ ! -d "$tmp/run/checkpoints/step-000000020" ] || { echo "a checkpoint interrupted mid-write was published"; exit 1; }

"$trainer" "${args[@]}" --out "$tmp/run" --resume auto | tee "$tmp/resume.log"
grep -q "resumed from .*step-000000010" "$tmp/resume.log"
# The resumed run's metrics.jsonl equals the uninterrupted run's, record for record, in every field
# that does not measure time (the killed run's records after its checkpoint were dropped).
same_losses() {  # same_losses WHOLE_DIR RESUMED_DIR
/usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
math = ["step", "epoch", "loss", "lr", "bytes_sent", "bytes_recv", "bytes_per_step", "compression_ratio",
        "eval_loss", "eval_accuracy", "noise_scale", "grad_norm"]
whole = [json.loads(l) for l in open(f"{sys.argv[1]}/metrics.jsonl")]
run = [json.loads(l) for l in open(f"{sys.argv[2]}/metrics.jsonl")]
assert len(run) == len(whole), f"{len(run)} records after the resume, {len(whole)} uninterrupted"
for w, r in zip(whole, run):
    for k in math:
        assert w.get(k) == r.get(k), f"step {w['step']}: {k} {r.get(k)} != {w.get(k)} (uninterrupted)"
print("resumed run matches the uninterrupted one:", [(r["step"], r["loss"]) for r in whole])
PY
}
same_losses "$tmp/whole" "$tmp/run"

# The same under mpirun, one rank per process: rank 1 dies mid-write, the job ends, and a
# relaunch with --resume auto (rank 0 picks the checkpoint and broadcasts its choice) continues
# from step 10 with the uninterrupted run's losses.
if ! command -v mpirun >/dev/null || [ "${LACONIC_HAVE_MPI:-ON}" = OFF ]; then
  echo "no MPI: skipping the mpirun part"; exit 0
fi
mpi=(timeout 300 mpirun --oversubscribe --allow-run-as-root --mca btl self,vader --bind-to none -np 3)
set +e
"${mpi[@]}" "$trainer" "${args[@]}" --out "$tmp/mpi" --fault.kind=crash --fault.rank=1 --fault.step=20 >"$tmp/mpi_crash.log" 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { echo "mpirun: expected a failed job, got $rc"; cat "$tmp/mpi_crash.log"; exit 1; }
[ -d "$tmp/mpi/checkpoints/step-000000010" ] || { echo "mpirun: the previous checkpoint is gone"; exit 1; }
[ ! -d "$tmp/mpi/checkpoints/step-000000020" ] || { echo "mpirun: a checkpoint interrupted mid-write was published"; exit 1; }
"${mpi[@]}" "$trainer" "${args[@]}" --out "$tmp/mpi" --resume auto | tee "$tmp/mpi_resume.log"
grep -q "resumed from .*step-000000010" "$tmp/mpi_resume.log"
same_losses "$tmp/whole" "$tmp/mpi"
