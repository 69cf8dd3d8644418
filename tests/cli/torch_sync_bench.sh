#!/usr/bin/env bash
# tests/bench/torch_sync.sh at SIZE=tiny (seconds): laconic.torch's allreduce over mpirun -np 4
# ends with torch DistributedDataParallel's parameters (gloo; the same model, data and SGD) to
# 1e-5 relative, and lt.Sync alone with the plain torch loop's bit for bit, so the benchmark's
# rows compare the same computation (its time targets are for the full size: docs/benchmarks.md).
# usage: torch_sync_bench.sh TRAINER SOURCE_DIR
set -euo pipefail
build="$(cd "$(dirname "$1")" && pwd)"
command -v mpirun >/dev/null || { echo "no mpirun: skipping"; exit 77; }
[ "${LACONIC_HAVE_MPI:-ON}" != OFF ] || { echo "built without MPI (LACONIC_HAVE_MPI=OFF): skipping"; exit 77; }
python="${PYTHON:-/usr/bin/python3}"
"$python" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null ||
  { echo "$python has no torch with gloo (python3-torch): skipping"; exit 77; }
PYTHONPATH="$build/python" "$python" -c 'import laconic' 2>/dev/null ||
  { echo "the Python package was not built in $build (LACONIC_PYTHON, pybind11-dev): skipping"; exit 77; }
SIZE=tiny CHECK=1 PYTHON="$python" bash "$2/tests/bench/torch_sync.sh" "$build"
