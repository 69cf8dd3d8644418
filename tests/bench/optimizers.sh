#!/usr/bin/env bash
# LAMB and LARS step throughput over ~25M parameters: Laconic (tests/bench/optimizers_bench.cpp,
# single-threaded) beside a PyTorch 1.13 translation of the same formulas
# (tests/bench/optimizers_torch.py, with THREADS threads, default 2, and with 1), in one run.
#
#   tests/bench/optimizers.sh [BUILD_DIR]       (default: build; needs its optimizers_bench target)
# Environment: REPS (timed steps per optimizer, default 5), THREADS (torch, default 2),
# PYTHON (default /usr/bin/python3, Debian's, which has python3-torch).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
reps="${REPS:-5}"
threads="${THREADS:-2}"
python="${PYTHON:-/usr/bin/python3}"

bin="$build/optimizers_bench"
[[ -x "$bin" ]] || { echo "error: $bin missing (cmake --build $build --target optimizers_bench)" >&2; exit 2; }
"$python" -c 'import torch' 2>/dev/null || { echo "error: $python cannot import torch (apt-get install python3-torch)" >&2; exit 2; }

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -m), $(nproc) cores; REPS=$reps; ours single-threaded"
"$bin" "$reps"
"$python" "$here/optimizers_torch.py" --threads "$threads" --reps "$reps"
if [[ "$threads" != 1 ]]; then "$python" "$here/optimizers_torch.py" --threads 1 --reps "$reps"; fi
