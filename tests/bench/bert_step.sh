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
# PYTHON (default /usr/bin/python3, Debian's, which has python3-torch), BASELINE (another build
# directory, e.g. one configured with -DLACONIC_GEMM=openblas: its bert_step_bench runs in the same
# rounds as "before-1t"/"before-2t", and a second table gives before / after per thread count).
#
# Prints every run's rows, then per model the mean over rounds of each implementation's mean
# ms/step, ours / torch at each thread count (and per round), our 1-thread GFLOP/s, and the
# fraction of the fp32 FMA peak each achieves at 1 and 2 threads (the peak of that many threads,
# measured by bert_step_bench in each of its runs; torch's from the same model FLOPs and its time).
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
  if [[ -n "${BASELINE:-}" ]]; then
    for t in 1 2; do
      OMP_NUM_THREADS=$t "$BASELINE/bert_step_bench" --reps "$reps" --model "$models" --threads $t --label before-${t}t |
        sed "s/^/$r /" | tee -a "$rows"
    done
  fi
done
echo "# round impl model batch ms/step min median [GFLOP/s done-GFLOP/s %peak peak-GFLOP/s] (rows above)"

# Columns of $rows: round impl model batch mean min median [gflops done_gflops]
awk -v rounds="$rounds" '
  $2 == "impl" || $2 == "#" { next }
  {
    key = $3 SUBSEP $2; ms[key] += $5; n[key]++; per[$1, $3, $2] = $5; models[$3] = 1
    if ($2 == "laconic-1t") { gf[$3] += $8 }
    if ($2 ~ /^(laconic|before)/) { pk[key] += $10 }
  }
  function ratios(m, ours, theirs,   r, out) {
    out = ""
    for (r = 1; r <= rounds; ++r) out = out (r > 1 ? " / " : "") sprintf("%.2f", per[r, m, ours] / per[r, m, theirs])
    return out
  }
  END {
    printf "\n| model | laconic 1t ms/step | torch 1t ms/step | laconic / torch, 1 thread | laconic 2t ms/step | torch 2t ms/step | laconic / torch, 2 threads | GFLOP/s (1t, model) | %% of fp32 peak, 1t: laconic / torch | 2t: laconic / torch |\n"
    printf "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    split("bert mlp gpt", order, " ")
    for (i = 1; i <= 3; ++i) {
      m = order[i]; if (!(m in models)) continue
      l1 = ms[m, "laconic-1t"] / n[m, "laconic-1t"]; t1 = ms[m, "torch-1t"] / n[m, "torch-1t"]
      l2 = ms[m, "laconic-2t"] / n[m, "laconic-2t"]; t2 = ms[m, "torch-2t"] / n[m, "torch-2t"]
      p1 = pk[m, "laconic-1t"] / n[m, "laconic-1t"]; p2 = pk[m, "laconic-2t"] / n[m, "laconic-2t"]
      printf "| %s | %.1f | %.1f | %.2f (%s) | %.1f | %.1f | %.2f (%s) | %.1f | %.0f%% / %.0f%% | %.0f%% / %.0f%% |\n", m, l1, t1, l1 / t1,
             ratios(m, "laconic-1t", "torch-1t"), l2, t2, l2 / t2, ratios(m, "laconic-2t", "torch-2t"), gf[m] / n[m, "laconic-1t"],
             p1, p1 * l1 / t1, p2, p2 * l2 / t2
    }
    if (!(("gpt" SUBSEP "before-1t") in n) && !(("bert" SUBSEP "before-1t") in n) && !(("mlp" SUBSEP "before-1t") in n)) exit
    printf "\n| model | before 1t ms/step | after 1t ms/step | after / before | %% of peak before / after | before 2t ms/step | after 2t ms/step | after / before | %% of peak before / after |\n"
    printf "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    for (i = 1; i <= 3; ++i) {
      m = order[i]; if (!((m SUBSEP "before-1t") in n)) continue
      b1 = ms[m, "before-1t"] / n[m, "before-1t"]; a1 = ms[m, "laconic-1t"] / n[m, "laconic-1t"]
      b2 = ms[m, "before-2t"] / n[m, "before-2t"]; a2 = ms[m, "laconic-2t"] / n[m, "laconic-2t"]
      printf "| %s | %.1f | %.1f | %.2f | %.0f%% / %.0f%% | %.1f | %.1f | %.2f | %.0f%% / %.0f%% |\n", m, b1, a1, a1 / b1,
             pk[m, "before-1t"] / n[m, "before-1t"], pk[m, "laconic-1t"] / n[m, "laconic-1t"], b2, a2, a2 / b2,
             pk[m, "before-2t"] / n[m, "before-2t"], pk[m, "laconic-2t"] / n[m, "laconic-2t"]
    }
  }' "$rows"
