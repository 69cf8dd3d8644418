#!/usr/bin/env bash
# The same recipe under mpirun (one rank per process) trains exactly like the threads backend:
# with our ring over MPI point-to-point the losses are bitwise equal; with native MPI_Allreduce
# they agree to rounding; sharded (ZeRO-2, buckets reduce-scattered as backward makes them) too. A
# world size that differs from the recipe is refused with exit code 2, and so is streaming
# DiLoCo's overlap (MPI is initialised MPI_THREAD_SERIALIZED).
# usage: mpi_train.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$1
src=$2
command -v mpirun >/dev/null || { echo "no mpirun: skipping"; exit 77; }
[ "${LACONIC_HAVE_MPI:-ON}" != OFF ] || { echo "built without MPI (LACONIC_HAVE_MPI=OFF): skipping"; exit 77; }
"$trainer" --help >/dev/null
if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "Fashion-MNIST not installed: skipping"; exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
recipe="$src/recipes/mlp_fmnist.toml"
mpi=(mpirun --oversubscribe --allow-run-as-root --mca btl self,vader --bind-to none)
common=(--recipe "$recipe" --train.steps=40 --train.log_every=10 --distributed.world_size=2)

"$trainer" "${common[@]}" --distributed.algorithm=ring --out "$tmp/threads" >/dev/null
"${mpi[@]}" -np 2 "$trainer" "${common[@]}" --distributed.algorithm=ring --out "$tmp/mpi_ring" >/dev/null
"${mpi[@]}" -np 2 "$trainer" "${common[@]}" --out "$tmp/mpi_native" >/dev/null
zero2=(--distributed.algorithm=ring --sync.shard=gradients --sync.bucket_mb=0.1 --sync.overlap=true)
"$trainer" "${common[@]}" "${zero2[@]}" --out "$tmp/threads_zero2" >/dev/null
"${mpi[@]}" -np 2 "$trainer" "${common[@]}" "${zero2[@]}" --out "$tmp/mpi_zero2" >/dev/null
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
t = sys.argv[1]
def losses(d):
    return [json.loads(l)["loss"] for l in open(f"{t}/{d}/metrics.jsonl")]
a, b, c = losses("threads"), losses("mpi_ring"), losses("mpi_native")
print("threads   ", a); print("mpi ring  ", b); print("mpi native", c)
assert len(a) == 4 and a == b, "ring over MPI must equal the threads backend bit for bit"
assert all(abs(x - y) <= 1e-4 * abs(x) for x, y in zip(a, c)), "native MPI all-reduce drifted"
z, w = losses("threads_zero2"), losses("mpi_zero2")
print("ZeRO-2 threads", z); print("ZeRO-2 mpi    ", w)
assert len(z) == 4 and z == w, "ZeRO-2 over MPI must equal the threads backend bit for bit"
PY

set +e
"${mpi[@]}" -np 3 "$trainer" "${common[@]}" --out "$tmp/bad" >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
grep -q "world_size = 2 but the MPI launcher started 3 ranks" "$tmp/err" || { cat "$tmp/err"; exit 1; }
[ $rc -ne 0 ] || { echo "world-size mismatch was accepted"; exit 1; }
[ ! -e "$tmp/bad" ] || { echo "refused run left files"; exit 1; }

set +e
"${mpi[@]}" -np 2 "$trainer" "${common[@]}" --sync.strategy=streaming_diloco --out "$tmp/overlap" >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
grep -q "sync.streaming_diloco.overlap_steps: expected 0 with the mpi backend" "$tmp/err" || { cat "$tmp/err"; exit 1; }
[ $rc -ne 0 ] || { echo "streaming overlap under MPI was accepted"; exit 1; }
echo "mpi training matches threads; refusals ok"
