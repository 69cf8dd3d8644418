#!/usr/bin/env bash
# 1-bit compression with error feedback over 25M floats (100 MB): encode + decode single-threaded
# against memcpy of the same bytes, the whole reducer at world size 1, and a RANKS-rank 1-bit
# reduce on thread ranks against the dense fp32 ring all-reduce, all in one run
# (tests/bench/onebit_bench.cpp; its header describes the rows).
#
#   tests/bench/onebit.sh [BUILD_DIR]       (default: build; needs its onebit_bench target)
# Environment: REPS (timed repetitions per row, default 5), FLOATS (default 25000000),
# RANKS (thread ranks of the multi-rank rows, default 4).
# Target: encode + decode >= 25% of memcpy bandwidth (the "of memcpy" column).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
reps="${REPS:-5}"
floats="${FLOATS:-25000000}"
ranks="${RANKS:-4}"

bin="$build/onebit_bench"
[[ -x "$bin" ]] || { echo "error: $bin missing (cmake --build $build --target onebit_bench)" >&2; exit 2; }

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -m), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); single-threaded rows, then $ranks thread ranks"
"$bin" "$reps" "$floats" "$ranks"
