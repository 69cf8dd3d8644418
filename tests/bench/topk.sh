#!/usr/bin/env bash
# Top-k selection, k = 1% of 25M random normal floats (100 MB): Laconic's exact and sampled
# selections, with and without fused error feedback (tests/bench/topk_bench.cpp, single-threaded),
# beside a memcpy of the same buffer and torch.topk(x.abs(), k) from PyTorch 1.13
# (tests/bench/topk_torch.py, with THREADS threads, default 2, and with 1), in one run.
#
#   tests/bench/topk.sh [BUILD_DIR]       (default: build; needs its topk_bench target)
# Environment: REPS (timed calls per row, default 5), THREADS (torch, default 2),
# PYTHON (default /usr/bin/python3, Debian's, which has python3-torch).
# GB/s is input bytes (4n) over the mean time; %memcpy compares that with the memcpy row.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
reps="${REPS:-5}"
threads="${THREADS:-2}"
python="${PYTHON:-/usr/bin/python3}"

bin="$build/topk_bench"
[[ -x "$bin" ]] || { echo "error: $bin missing (cmake --build $build --target topk_bench)" >&2; exit 2; }
"$python" -c 'import torch' 2>/dev/null || { echo "error: $python cannot import torch (apt-get install python3-torch)" >&2; exit 2; }

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -m), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); REPS=$reps; ours single-threaded"
ours="$("$bin" "$reps")"
echo "$ours"
memcpy_gbs="$(awk '$2 == "memcpy" { print $7 }' <<<"$ours")"
exact_ms="$(awk '$2 == "exact" { print $5 }' <<<"$ours")"
torch_rows=""
for t in "$threads" 1; do
  row="$("$python" "$here/topk_torch.py" --threads "$t" --reps "$reps" --memcpy-gbs "$memcpy_gbs")"
  echo "$row"
  torch_rows+="$row"$'\n'
  [[ "$threads" == 1 ]] && break
done
awk -v ours="$exact_ms" '$1 ~ /^torch/ { printf "# exact vs %s: %.1fx faster\n", $1, $5 / ours }' <<<"$torch_rows"
