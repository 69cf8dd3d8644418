#!/usr/bin/env bash
# Training step time of BERT-small (lamb_bert size) and the 784-512-256-10 MLP: Laconic
# (tests/bench/bert_step_bench.cpp, single-threaded) beside the same step in PyTorch 1.13
# (tests/bench/bert_step_torch.py) with 1 thread and with 2 threads (OMP_WAIT_POLICY=PASSIVE,
# the stable setting on a shared machine, see docs/benchmarks.md), in alternation, ROUNDS times.
# Builds nothing.
#
#   tests/bench/bert_step.sh [BUILD_DIR]     (default: build; needs its bert_step_bench target)
# Environment: ROUNDS (default 3), REPS (timed steps per model and run, default 10),
# PYTHON (default /usr/bin/python3, Debian's, which has python3-torch).
#
# Prints every run's rows, then per model the mean over rounds of each implementation's mean
# ms/step, our GFLOP/s (flops_per_example x batch / time), and ours / torch per round.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
rounds="${ROUNDS:-3}"
reps="${REPS:-10}"
python="${PYTHON:-/usr/bin/python3}"

bin="$build/bert_step_bench"
[[ -x "$bin" ]] || { echo "error: $bin missing (cmake --build $build --target bert_step_bench)" >&2; exit 2; }
"$python" -c 'import torch' 2>/dev/null || { echo "error: $python cannot import torch (apt-get install python3-torch)" >&2; exit 2; }

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); ROUNDS=$rounds REPS=$reps"
echo "# torch $("$python" -c 'import torch; print(torch.__version__)'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
rows="$(mktemp)"
trap 'rm -f "$rows"' EXIT
for ((r = 1; r <= rounds; ++r)); do
  # Ours is single-threaded by construction; OMP_NUM_THREADS=1 only keeps a BLAS it may link
  # (OpenBLAS) from starting threads before the library sets it to one.
  OMP_NUM_THREADS=1 "$bin" --reps "$reps" | sed "s/^/$r /" | tee -a "$rows"
  "$python" "$here/bert_step_torch.py" --threads 1 --reps "$reps" | sed "s/^/$r /" | tee -a "$rows"
  OMP_WAIT_POLICY=PASSIVE "$python" "$here/bert_step_torch.py" --threads 2 --reps "$reps" \
    --label torch-2t-passive | sed "s/^/$r /" | tee -a "$rows"
done
echo "# round impl model batch ms/step min median [GFLOP/s done-GFLOP/s] (rows above)"

# Columns of $rows: round impl model batch mean min median [gflops done_gflops]
awk -v rounds="$rounds" '
  $2 == "impl" { next }
  {
    key = $3 SUBSEP $2; ms[key] += $5; n[key]++; per[$1, $3, $2] = $5; models[$3] = 1; impls[$2] = 1
    if ($2 == "laconic") { gf[$3] += $8; done[$3] += $9 }
  }
  END {
    printf "\n| model | laconic ms/step | GFLOP/s (model) | GFLOP/s (done) | torch 1 thread ms/step | torch 2 threads ms/step | laconic / torch 1t | laconic / torch 2t |\n"
    printf "|---|---:|---:|---:|---:|---:|---:|---:|\n"
    split("bert mlp", order, " ")
    for (i = 1; i <= 2; ++i) {
      m = order[i]; if (!(m in models)) continue
      ours = ms[m, "laconic"] / n[m, "laconic"]
      t1 = ms[m, "torch-1t"] / n[m, "torch-1t"]; t2 = ms[m, "torch-2t-passive"] / n[m, "torch-2t-passive"]
      r1 = ""; r2 = ""
      for (r = 1; r <= rounds; ++r) {
        r1 = r1 (r > 1 ? " / " : "") sprintf("%.2f", per[r, m, "laconic"] / per[r, m, "torch-1t"])
        r2 = r2 (r > 1 ? " / " : "") sprintf("%.2f", per[r, m, "laconic"] / per[r, m, "torch-2t-passive"])
      }
      printf "| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f (%s) | %.2f (%s) |\n", m, ours,
             gf[m] / n[m, "laconic"], done[m] / n[m, "laconic"], t1, t2, ours / t1, r1, ours / t2, r2
    }
  }' "$rows"
