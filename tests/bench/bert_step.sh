#!/usr/bin/env bash
# Training step time of BERT-small (the cross_dc recipes' width), the 784-512-256-10 MLP and the GPT of
# gpt_fortunes: Laconic (tests/bench/bert_step_bench.cpp) beside the same step in PyTorch 1.13
# (tests/bench/bert_step_torch.py), at equal threads: 1, then 2 (GEMM threads for ours; torch with
# OMP_WAIT_POLICY=PASSIVE, the stable setting on a shared machine, see docs/benchmarks.md), in
# alternation, ROUNDS times. Builds nothing.
#
#   tests/bench/bert_step.sh [BUILD_DIR]     (default: build; needs its bert_step_bench target)
# Environment: ROUNDS (default 3), REPS (timed steps per model and run, default 10), MODELS
# (bert, mlp, gpt or all; default all),
# PYTHON (default /usr/bin/python3, Debian's, which has python3-torch).
#
# Prints every run's rows, then per model the mean over rounds of each implementation's mean
# ms/step, ours / torch at each thread count (and per round), and our 1-thread GFLOP/s.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
rounds="${ROUNDS:-3}"
reps="${REPS:-10}"
python="${PYTHON:-/usr/bin/python3}"
models="${MODELS:-all}"

bin="$build/bert_step_bench"
[[ -x "$bin" ]] || { echo "error: $bin missing (cmake --build $build --target bert_step_bench)" >&2; exit 2; }
"$python" -c 'import torch' 2>/dev/null || { echo "error: $python cannot import torch (apt-get install python3-torch)" >&2; exit 2; }

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); ROUNDS=$rounds REPS=$reps"
echo "# torch $("$python" -c 'import torch; print(torch.__version__)'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
rows="$(mktemp)"
trap 'rm -f "$rows"' EXIT
for ((r = 1; r <= rounds; ++r)); do
  # OMP_NUM_THREADS keeps OpenBLAS from starting more threads than --threads before it is set.
  OMP_NUM_THREADS=1 "$bin" --reps "$reps" --model "$models" --threads 1 --label laconic-1t | sed "s/^/$r /" | tee -a "$rows"
  "$python" "$here/bert_step_torch.py" --threads 1 --reps "$reps" --model "$models" | sed "s/^/$r /" | tee -a "$rows"
  OMP_NUM_THREADS=2 "$bin" --reps "$reps" --model "$models" --threads 2 --label laconic-2t | sed "s/^/$r /" | tee -a "$rows"
  OMP_WAIT_POLICY=PASSIVE "$python" "$here/bert_step_torch.py" --threads 2 --reps "$reps" --model "$models" \
    --label torch-2t | sed "s/^/$r /" | tee -a "$rows"
done
echo "# round impl model batch ms/step min median [GFLOP/s done-GFLOP/s] (rows above)"

# Columns of $rows: round impl model batch mean min median [gflops done_gflops]
awk -v rounds="$rounds" '
  $2 == "impl" { next }
  {
    key = $3 SUBSEP $2; ms[key] += $5; n[key]++; per[$1, $3, $2] = $5; models[$3] = 1
    if ($2 == "laconic-1t") { gf[$3] += $8 }
  }
  function ratios(m, ours, theirs,   r, out) {
    out = ""
    for (r = 1; r <= rounds; ++r) out = out (r > 1 ? " / " : "") sprintf("%.2f", per[r, m, ours] / per[r, m, theirs])
    return out
  }
  END {
    printf "\n| model | laconic 1t ms/step | torch 1t ms/step | laconic / torch, 1 thread | laconic 2t ms/step | torch 2t ms/step | laconic / torch, 2 threads | GFLOP/s (1t, model) |\n"
    printf "|---|---:|---:|---:|---:|---:|---:|---:|\n"
    split("bert mlp gpt", order, " ")
    for (i = 1; i <= 3; ++i) {
      m = order[i]; if (!(m in models)) continue
      l1 = ms[m, "laconic-1t"] / n[m, "laconic-1t"]; t1 = ms[m, "torch-1t"] / n[m, "torch-1t"]
      l2 = ms[m, "laconic-2t"] / n[m, "laconic-2t"]; t2 = ms[m, "torch-2t"] / n[m, "torch-2t"]
      printf "| %s | %.1f | %.1f | %.2f (%s) | %.1f | %.1f | %.2f (%s) | %.1f |\n", m, l1, t1, l1 / t1,
             ratios(m, "laconic-1t", "torch-1t"), l2, t2, l2 / t2, ratios(m, "laconic-2t", "torch-2t"), gf[m] / n[m, "laconic-1t"]
    }
  }' "$rows"
