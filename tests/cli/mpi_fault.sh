#!/usr/bin/env bash
# Under mpirun, a rank that exits, throws or stops answering mid-run ([fault]) never hangs the
# job: the whole job ends non-zero within distributed.timeout_s (plus start-up), and what is
# printed names the failing rank and step.   usage: mpi_fault.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$1
src=$2
command -v mpirun >/dev/null || { echo "no mpirun: skipping"; exit 77; }
[ "${LACONIC_HAVE_MPI:-ON}" != OFF ] || { echo "built without MPI (LACONIC_HAVE_MPI=OFF): skipping"; exit 77; }
if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "Fashion-MNIST not installed: skipping"; exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpi=(mpirun --oversubscribe --allow-run-as-root --mca btl self,vader --bind-to none -np 3)
common=(--recipe "$src/recipes/mlp_fmnist.toml" --train.steps=200 --train.log_every=50 --model.hidden=[64]
        --distributed.world_size=3 --distributed.timeout_s=5 --fault.rank=1 --fault.step=20)
for kind in exit throw stall; do
  start=$(date +%s)
  set +e
  timeout 120 "${mpi[@]}" "$trainer" "${common[@]}" --fault.kind="$kind" --out "$tmp/$kind" >"$tmp/$kind.log" 2>&1
  rc=$?
  set -e
  took=$(( $(date +%s) - start ))
  echo "fault $kind: exit code $rc after ${took}s"
  [ "$rc" -ne 0 ] || { echo "the job succeeded despite the fault"; cat "$tmp/$kind.log"; exit 1; }
  [ "$rc" -ne 124 ] || { echo "the job hung (killed by timeout)"; cat "$tmp/$kind.log"; exit 1; }
  [ "$took" -lt 60 ] || { echo "took ${took}s to stop"; exit 1; }
  if [ "$kind" != stall ]; then
    grep -q "rank 1 $kind at step 21" "$tmp/$kind.log" || { echo "the failing rank and step are not named"; cat "$tmp/$kind.log"; exit 1; }
  fi
done
