#!/usr/bin/env bash
# Which CPU GEMM library to build Laconic on, by measurement: tests/bench/gemm_libraries_bench.cpp
# (every GEMM shape of one training step of the GPT, BERT and MLP models, on OpenBLAS, oneDNN, BLIS
# and libxsmm, each checked against a double-precision product) at 1 and 2 threads, beside the
# core's measured fp32 FMA and bf16 dot-product peaks, ROUNDS times. Then OpenBLAS alone with its
# AVX-512 kernels (OPENBLAS_CORETYPE=SkylakeX) at 1 thread, the kernels this environment avoids.
# Builds nothing.
#
#   tests/bench/gemm_libraries.sh [BUILD_DIR]     (default: build; needs its gemm_libraries_bench)
# Environment: ROUNDS (default 2), REPS (best-of repetitions per shape, default 5), MODELS
# (gpt, bert, mlp or all; default all). OPENBLAS_CORETYPE is left as the environment sets it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
rounds="${ROUNDS:-2}"
reps="${REPS:-5}"
models="${MODELS:-all}"
bin="$build/gemm_libraries_bench"
[[ -x "$bin" ]] || { echo "error: $bin missing (needs OpenBLAS; cmake --build $build --target gemm_libraries_bench)" >&2; exit 2; }

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; ROUNDS=$rounds REPS=$reps; load average $(cut -d' ' -f1-3 /proc/loadavg)"
status=0
for ((r = 1; r <= rounds; ++r)); do
  for t in 1 2; do
    echo "# round $r, $t thread(s)"
    OMP_NUM_THREADS=$t "$bin" --threads "$t" --reps "$reps" --model "$models" || status=1
  done
done
echo "# OpenBLAS's AVX-512 kernels, 1 thread"
OPENBLAS_CORETYPE=SkylakeX OMP_NUM_THREADS=1 "$bin" --threads 1 --reps "$reps" --model "$models" --library openblas || true
exit $status
