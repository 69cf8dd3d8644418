#!/usr/bin/env bash
# PowerSGD's local work on one 4096 x 4096 fp32 gradient at rank 4 (world size 1: computation
# only): Laconic (tests/bench/powersgd_bench.cpp, single-threaded, with the three-pass memory
# floor and per-pass times) beside PyTorch 1.13's hook ops and hook (tests/bench/powersgd_torch.py,
# with THREADS threads, default 2, and with 1), in one run.
#
#   tests/bench/powersgd.sh [BUILD_DIR]       (default: build; needs its powersgd_bench target)
# Environment: REPS (timed steps, default 10), THREADS (torch, default 2),
# PYTHON (default /usr/bin/python3, Debian's, which has python3-torch).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
reps="${REPS:-10}"
threads="${THREADS:-2}"
python="${PYTHON:-/usr/bin/python3}"

bin="$build/powersgd_bench"
[[ -x "$bin" ]] || { echo "error: $bin missing (cmake --build $build --target powersgd_bench)" >&2; exit 2; }
"$python" -c 'import torch' 2>/dev/null || { echo "error: $python cannot import torch (apt-get install python3-torch)" >&2; exit 2; }

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -m), $(nproc) cores; REPS=$reps; ours single-threaded"
"$bin" "$reps"
"$python" "$here/powersgd_torch.py" --threads "$threads" --reps "$reps"
if [[ "$threads" != 1 ]]; then "$python" "$here/powersgd_torch.py" --threads 1 --reps "$reps"; fi
