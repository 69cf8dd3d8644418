#!/usr/bin/env bash
# Collective benchmarks: the threads backend and our algorithms over MPI, against OpenMPI itself,
# in one run, with the performance targets checked at the end.
#
#   tests/bench/collectives.sh [COLLBENCH]     (COLLBENCH defaults to build/collbench; it must be
#                                              built with MPI: cmake -DLACONIC_MPI=ON)
#
# Rows (every configuration runs ROUNDS times, in alternation, so that load from other work on
# the machine falls on all of them alike; the summary takes the median of the rounds):
#   all-reduce f32 sum, 64 MiB, N = 2 and 4:
#     threads        collbench --backend threads --bind (our ring, the default all-reduce; rank r
#                    pinned to CPU r when N <= CPUs, as mpirun pins rank r to core r)
#     mpi_c          OpenMPI's MPI_Allreduce called directly (the reference of the targets)
#     mpi native     MPI_Iallreduce through our MpiCommunicator (polling wait with a deadline)
#   8-byte all-reduce latency, N = 2: threads --bind with --algo auto (recursive doubling below
#     2 KiB) and --algo ring, the same without --bind, mpi_c, mpi native
#   our ring over MPI point-to-point vs mpi native vs mpi_c, 1 MiB .. 64 MiB, N = 2 and 4
# MPI runs: mpirun --oversubscribe --allow-run-as-root --mca btl self,vader (shared memory).
# Targets (issue "perf"): threads busbw >= 1.5x mpi_c and >= 25% of single-core memcpy bandwidth
# (collbench measures it on its largest size); 8-byte latency within 2x of mpi_c.
# Environment: ROUNDS (default 3), ITERS (timed iterations for bandwidth rows, default 10),
# LAT_ITERS (latency rows, default 5000).
set -euo pipefail

bench="${1:-build/collbench}"
rounds="${ROUNDS:-3}"
iters="${ITERS:-10}"
lat_iters="${LAT_ITERS:-5000}"
mpirun=(mpirun --oversubscribe --allow-run-as-root --mca btl self,vader)

[[ -x "$bench" ]] || { echo "error: collbench '$bench' is not an executable (pass its path as \$1)" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "error: mpirun not found (apt-get install openmpi-bin)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "error: python3 not found (the summary needs it)" >&2; exit 2; }

tmp="$(mktemp -d "${TMPDIR:-/tmp}/collectives_bench.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
results="$tmp/results.txt"  # one line per row: label n size time_us busbw wrong
memcpy="$tmp/memcpy.txt"    # memcpy GB/s, one line per threads 64 MiB run

# run LABEL N ARGS...: runs collbench (under mpirun when LABEL starts with mpi) and keeps its rows.
run() {
  local label=$1 n=$2
  shift 2
  local out="$tmp/out.txt"
  if [[ $label == mpi* ]]; then
    "${mpirun[@]}" -np "$n" "$bench" "$@" >"$out" 2>"$tmp/err.txt" || { cat "$tmp/err.txt" >&2; return 1; }
  else
    "$bench" -n "$n" "$@" >"$out"
  fi
  awk -v l="$label" -v n="$n" '!/^#/ && NF >= 9 && $9 ~ /^[0-9]+$/ {print l, n, $1, $6, $8, $9}' "$out" >>"$results"
  awk '/^# memcpy/ {for (i = 1; i <= NF; ++i) if ($i == "GB/s") print $(i - 1)}' "$out" >>"$memcpy.$label.$n"
  if grep -q " not available: " "$out"; then grep " not available: " "$out" | sed "s/^/[$label n=$n] /" >&2; fi
}

echo "# collectives benchmark: $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), $(mpirun --version | head -n 1)"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg); $rounds rounds"
big=(-b 64M -e 64M --iters "$iters" --warmup 2)
lat=(-b 8 -e 8 --iters "$lat_iters" --warmup 200)
sweep=(-b 1M -e 64M -f 4 --iters "$iters" --warmup 2)
for ((round = 1; round <= rounds; ++round)); do
  echo "# round $round/$rounds ..." >&2
  for n in 2 4; do
    run threads "$n" --backend threads --bind "${big[@]}"
    run mpi_c "$n" --backend mpi_c "${big[@]}"
    run mpi_native "$n" --backend mpi --algo native "${big[@]}"
  done
  run threads_auto 2 --backend threads --bind --algo auto "${lat[@]}"
  run threads_ring 2 --backend threads --bind --algo ring "${lat[@]}"
  run threads_auto_unbound 2 --backend threads --algo auto "${lat[@]}"
  run threads_ring_unbound 2 --backend threads --algo ring "${lat[@]}"
  run mpi_c 2 --backend mpi_c "${lat[@]}"
  run mpi_native 2 --backend mpi --algo native "${lat[@]}"
  for n in 2 4; do
    run mpi_ring "$n" --backend mpi --algo ring "${sweep[@]}"
    run mpi_native_sweep "$n" --backend mpi --algo native "${sweep[@]}"
    run mpi_c_sweep "$n" --backend mpi_c "${sweep[@]}"
  done
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$results" "$memcpy.threads.2" "$memcpy.threads.4" <<'EOF'
import statistics, sys
rows = {}
wrong = 0
for line in open(sys.argv[1]):
    label, n, size, t, busbw, w = line.split()
    rows.setdefault((label, int(n), int(size)), []).append((float(t), float(busbw)))
    wrong += int(w)
mem = {}
for n, path in ((2, sys.argv[2]), (4, sys.argv[3])):
    vals = [float(x) for x in open(path).read().split()]
    mem[n] = statistics.median(vals) if vals else float("nan")

def med(label, n, size, i):  # i = 0: time (us), 1: busbw (GB/s)
    v = rows.get((label, n, size))
    return statistics.median(x[i] for x in v) if v else float("nan")

def verdict(ok):
    return "met" if ok else "MISSED"

big = 64 << 20
print()
print("# all-reduce f32 sum, 64 MiB: busbw (GB/s), medians")
print(f"# {'N':>2} {'threads':>8} {'mpi_c':>8} {'mpi nat':>8} {'memcpy':>8} {'thr/mpi_c':>10} {'thr/memcpy':>11}  targets (>=1.5x, >=25%)")
for n in (2, 4):
    t, c, m = med("threads", n, big, 1), med("mpi_c", n, big, 1), med("mpi_native", n, big, 1)
    r, f = t / c, t / mem[n]
    print(f"  {n:>2} {t:>8.3f} {c:>8.3f} {m:>8.3f} {mem[n]:>8.3f} {r:>9.2f}x {100 * f:>10.1f}%  "
          f"{verdict(r >= 1.5)}, {verdict(f >= 0.25)}")
print()
print("# 8-byte all-reduce, N = 2: time (us), medians")
a, g = med("threads_auto", 2, 8, 0), med("threads_ring", 2, 8, 0)
c, m = med("mpi_c", 2, 8, 0), med("mpi_native", 2, 8, 0)
au, gu = med("threads_auto_unbound", 2, 8, 0), med("threads_ring_unbound", 2, 8, 0)
print(f"  threads auto (recursive doubling) {a:8.2f}   threads ring {g:8.2f}   mpi_c {c:8.2f}   mpi native {m:8.2f}")
print(f"  without --bind: threads auto {au:8.2f}   threads ring {gu:8.2f}")
print(f"  threads auto / mpi_c = {a / c:.2f}x (target <= 2x: {verdict(a <= 2 * c)}); "
      f"threads ring / mpi_c = {g / c:.2f}x")
print()
print("# all-reduce over MPI: our ring over MPI point-to-point vs MPI's own: busbw (GB/s), medians")
print(f"# {'N':>2} {'size (B)':>10} {'ring':>8} {'native':>8} {'mpi_c':>8} {'ring/native':>12} {'ring/mpi_c':>11}")
for n in (2, 4):
    for size in sorted({k[2] for k in rows if k[0] == "mpi_ring" and k[1] == n}):
        r, nat, c = med("mpi_ring", n, size, 1), med("mpi_native_sweep", n, size, 1), med("mpi_c_sweep", n, size, 1)
        print(f"  {n:>2} {size:>10} {r:>8.3f} {nat:>8.3f} {c:>8.3f} {r / nat:>11.2f}x {r / c:>10.2f}x")
print()
print(f"# #wrong over all rows: {wrong}" + ("" if wrong == 0 else "  ERROR"))
sys.exit(1 if wrong else 0)
EOF
