#!/usr/bin/env bash
# tests/bench/gemm_libraries.sh's program at a tiny size (the MLP's GEMM shapes, one repetition, 1
# thread): every GEMM library this build found (OpenBLAS, oneDNN, BLIS, libxsmm) computes every
# shape within 1e-5 of the double-precision product on this CPU (exit 1 names the wrong one), and
# the peak probe reports a positive fp32 rate. The timings are for the full run: docs/benchmarks.md.
# usage: gemm_libraries.sh TRAINER SOURCE_DIR
set -euo pipefail
build="$(cd "$(dirname "$1")" && pwd)"
bin="$build/gemm_libraries_bench"
[[ -x "$bin" ]] || { echo "no gemm_libraries_bench (built where OpenBLAS is): skipping"; exit 77; }
status=0
out="$(OMP_NUM_THREADS=1 "$bin" --threads 1 --reps 1 --model mlp)" || status=$?
echo "$out"
[[ $status -eq 0 ]] || { echo "FAIL: gemm_libraries_bench exited $status (a WRONG line above names the library)"; exit 1; }
grep -Eq '^# peak \((avx512|avx2)[^)]*\): fp32 [1-9][0-9.]* GFLOP/s' <<<"$out" || { echo "FAIL: no fp32 peak measured"; exit 1; }
[[ "$(grep -c $'\tmlp\t' <<<"$out")" -ge 1 ]] || { echo "FAIL: no library row"; exit 1; }
echo "PASS: every library's GEMMs within 1e-5 of the double product"
