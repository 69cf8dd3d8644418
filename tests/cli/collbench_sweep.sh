#!/usr/bin/env bash
# collbench verifies every row against the closed-form result: every op x algorithm x dtype on
# the threads backend (and native + ring under mpirun when available) must report #wrong = 0.
# usage: collbench_sweep.sh TRAINER SOURCE_DIR   (collbench sits beside the trainer)
set -euo pipefail
bench="$(dirname "$1")/collbench"
fails=0
run() {  # run ARGS...: every data row must have #wrong == 0 and none may be "not available"
  local out
  if ! out=$("$@" -b 4 -e 16K -f 16 --iters 2 --warmup 1 2>&1); then
    echo "FAIL (exit): $*"; echo "$out"; fails=$((fails + 1)); return
  fi
  # Data rows end in #wrong; a row for an unavailable algorithm says so instead of a number.
  if ! awk '!/^#/ && NF { if ($NF != "0") bad = 1; n++ } END { exit (bad || n == 0) }' <<<"$out"; then
    echo "FAIL: $*"; echo "$out"; fails=$((fails + 1)); return
  fi
  echo "ok   $*"
}
for n in 1 3 4; do
  for algo in ring recursive_doubling rabenseifner hierarchical native auto; do
    for dtype in f32 bf16 i32; do
      run "$bench" --op allreduce --algo "$algo" --dtype "$dtype" -n "$n"
    done
  done
  for op in reduce reduce_scatter allgather alltoall broadcast; do
    for dtype in f32 f16 u8; do run "$bench" --op "$op" --dtype "$dtype" -n "$n"; done
  done
done
# LACONIC_HAVE_MPI=OFF (CTest sets it): this build has no MPI backend, mpirun or not.
if [ "${LACONIC_HAVE_MPI:-ON}" != OFF ] && command -v mpirun >/dev/null; then
  mpi=(mpirun -np 3 --oversubscribe --allow-run-as-root --mca btl self,vader --bind-to none)
  for op in allreduce reduce reduce_scatter allgather alltoall broadcast; do
    for algo in native ring; do run "${mpi[@]}" "$bench" --backend mpi --op "$op" --algo "$algo" -n 3; done
  done
fi
if [ $fails -ne 0 ]; then echo "$fails collbench runs reported wrong results"; exit 1; fi
echo "all collbench rows correct"
