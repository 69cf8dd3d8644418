#!/usr/bin/env bash
# The 2025 outer-loop family against all-reduce across two simulated datacenters (the CI-sized
# version of docs/cross_dc): recipes/mlp_fmnist.toml, three hidden layers of 384 (so two fragments of
# whole layers can be near halves), with WORLD workers in 2 groups, dense
# all-reduce inside each, the strategy between the group leaders, same seeds and data: DiLoCo
# (fp32 and int8 pseudo-gradients with error feedback, and eager: the all-reduce overlapping the next
# period), streaming DiLoCo (F = 2, tau = 1,
# alpha = 0.5), SparseLoCo and DeMo. The [network] describes a slow device (device_tflops) so a
# log interval's time is its compute and the peak inter-datacenter rate is what the strategy
# needs, not what the 1 Gbit/s link caps. Prints a markdown table: held-out loss and its
# difference to all-reduce, inter-datacenter bytes of training (the start's broadcast excluded),
# how many times fewer than fp32 DiLoCo, the peak inter-datacenter rate and how many times lower
# than DiLoCo's.
#
#   tests/bench/outer_convergence.sh [BUILD_DIR]     (default: build; needs its trainer)
# Environment: SIZE (full: the MLP above, the table docs/benchmarks.md and docs/outer_loop.md
# quote; ci: hidden layers of 176, 256 and 352, half the FLOPs, still split near halves by whole
# layers (the first against the rest), on a device of 0.0023 TFLOP/s so that a step's modeled
# time stays the same: the size cli.outer_convergence runs, where every bar below holds with the
# margins of the full size; fewer steps or a smaller batch miss them), WORLD (default 8), STEPS
# (default 300), OUT (run directories; default a temp dir),
# TRAINER (the trainer binary, instead of BUILD_DIR/trainer),
# CHECK=1: exit 1 unless every strategy's held-out loss is within MAX_LOSS_PCT (default 2) % of
# all-reduce's (eager DiLoCo: 8%, a guard on the +5.6% measured; DES-LOC 12% of AdamW all-reduce's,
# a guard on +8.2%: issue 30's 3% is missed by both; asynchronous DiLoCo 4%, flat, a guard on +2.0%
# with equal speeds and +3.0% with one replica 2x slower and DyLU, which must also take at least
# 1.5x less simulated time than flat DiLoCo waiting for that replica),
# eager DiLoCo sends exactly DiLoCo's inter-datacenter bytes, int8 DiLoCo sends >= 3.9x and
# SparseLoCo >= 20x fewer inter-datacenter bytes than fp32 DiLoCo, and streaming DiLoCo's peak rate is >= F / 1.2 = 1.67x lower (cli test).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
size="${SIZE:-full}"
case "$size" in
  full) hidden="[384,384,384]" tflops=0.005 label="" ;;
  ci) hidden="[176,256,352]" tflops=0.0023 label=" (SIZE=ci: hidden $hidden)" ;;  # 276.7k multiply-adds an example, not 599.8k
  *) echo "error: SIZE=$size: expected full or ci" >&2; exit 2 ;;
esac
world="${WORLD:-8}"
steps="${STEPS:-300}"
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"
trainer="${TRAINER:-${1:-$repo/build}/trainer}"
[[ -x "$trainer" ]] || { echo "error: $trainer missing (cmake --build build --target trainer)" >&2; exit 2; }

common=(--recipe "$repo/recipes/mlp_fmnist.toml" --distributed.world_size="$world" --distributed.backend=threads
        --model.hidden="$hidden"
        --train.steps="$steps" --train.log_every=5 --train.eval_every=0
        --network.groups=2 --network.compute=modeled --network.device_tflops="$tflops" --sync.intra=allreduce
        --sync.diloco.period=10 --sync.diloco.outer_momentum=0.5
        --sync.streaming_diloco.period=10 --sync.streaming_diloco.outer_momentum=0.5
        --sync.sparseloco.period=10 --sync.sparseloco.chunk=1024 --sync.sparseloco.ratio=0.03125
        --sync.sparseloco.outer_lr=2.0)
# DES-LOC averages Adam's moments: it and its baseline run AdamW.
adamw="--optimizer.name=adamw --optimizer.lr=0.001 --optimizer.weight_decay=0.01"
# Asynchronous DiLoCo: every rank a replica (flat), DiLoCo's H and outer momentum; the slow
# scenario makes the last replica 2x slower (simulated), for it and for flat DiLoCo, which waits.
async="--sync.strategy=async_diloco --sync.intra=none --sync.async_diloco.period=10 --sync.async_diloco.momentum=0.5"
slow="--network.stragglers=[$((world - 1))] --network.straggler_slowdown=2"
declare -A extra=(
  [allreduce]="--sync.strategy=allreduce"
  [diloco]="--sync.strategy=diloco"
  [diloco_int8]="--sync.strategy=diloco --sync.diloco.dtype=int8 --sync.diloco.error_feedback=true"
  [diloco_eager]="--sync.strategy=diloco --sync.diloco.eager=true"
  [streaming_diloco]="--sync.strategy=streaming_diloco"
  [sparseloco]="--sync.strategy=sparseloco"
  [demo]="--sync.strategy=demo --optimizer.momentum=0 --optimizer.lr=0.002 --optimizer.weight_decay=0"
  [noloco]="--sync.strategy=noloco --sync.noloco.period=10"
  [diloco_sparta]="--sync.strategy=diloco --sync.diloco.period=40 --sync.diloco.sparta=true --sync.sparta.fraction=0.005"
  [allreduce_adamw]="--sync.strategy=allreduce $adamw"
  [desloc]="--sync.strategy=desloc --sync.intra=none $adamw --sync.desloc.param_period=5 --sync.desloc.m_period=15 --sync.desloc.v_period=30"
  [async_diloco]="$async"
  [async_diloco_slow]="$async --sync.async_diloco.dylu=true $slow"
  [diloco_flat_slow]="--sync.strategy=diloco --sync.intra=none $slow"
)
names=(allreduce diloco diloco_int8 diloco_eager streaming_diloco sparseloco demo noloco diloco_sparta allreduce_adamw desloc
       async_diloco async_diloco_slow diloco_flat_slow)

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -m), $(nproc) cores; $world workers in 2 groups, $steps steps of Fashion-MNIST$label"
for s in "${names[@]}"; do
  # shellcheck disable=SC2086
  "$trainer" "${common[@]}" ${extra[$s]} --out "$out/$s" >"$out/$s.log" 2>&1 || { cat "$out/$s.log" >&2; exit 1; }
done

/usr/bin/python3 - "$out" "${CHECK:-0}" "${MAX_LOSS_PCT:-2}" "${names[@]}" <<'PY'
import json, sys
out, check, max_pct, names = sys.argv[1], sys.argv[2] == "1", float(sys.argv[3]), sys.argv[4:]
runs = {s: json.load(open(f"{out}/{s}/summary.json")) for s in names}
def inter(s):  # the run's, the end's drain included (eager DiLoCo's last sync is in flight at the last record)
    return runs[s]["bytes_inter"] - runs[s]["bytes_inter_start"]
base, dil = runs["allreduce"], runs["diloco"]
EAGER_MAX_PCT = 8.0
DESLOC_MAX_PCT = 12.0
ASYNC_MAX_PCT = 4.0
FLAT = ("desloc", "async_diloco", "async_diloco_slow", "diloco_flat_slow")
print("| strategy | held-out loss | vs all-reduce | inter-DC bytes (training) | fewer than DiLoCo | peak inter-DC rate | lower than DiLoCo |")
print("|---|---|---|---|---|---|---|")
failures = []
for s in names:
    r = runs[s]
    ref = runs["allreduce_adamw"] if s == "desloc" else base  # the same inner optimizer
    pct = 100 * (r["eval_loss"] - ref["eval_loss"]) / ref["eval_loss"]
    if s in FLAT:
        # Flat (no sync.intra): rank 0's ring neighbours are in its own datacenter, so its
        # inter-datacenter counter says nothing; every rank's total is the figure (desloc.h), and
        # the simulated time (a replica 2x slower in the *_slow rows).
        print(f"| {s}{' (vs allreduce_adamw)' if s == 'desloc' else ''} | {r['eval_loss']:.4f} | {pct:+.2f}% | flat: "
              f"{r['bytes_sent'] / 1e6:.2f} MB sent per rank in all, {r['sim_time_s']:.1f} s simulated | | | |")
        if s.startswith("async"):
            if pct > ASYNC_MAX_PCT:
                failures.append(f"{s}: held-out loss {pct:+.2f}% from all-reduce's (measured +2.0% and +3.0%; at most {ASYNC_MAX_PCT}%)")
            elif pct > 3:
                print(f"note: {s}: held-out loss {pct:+.2f}% from all-reduce's: issue 30's 3% missed", file=sys.stderr)
        if s == "async_diloco" and r["bytes_sent"] != runs["diloco_flat_slow"]["bytes_sent"]:
            failures.append(f"{s}: {r['bytes_sent']} bytes sent, flat DiLoCo's {runs['diloco_flat_slow']['bytes_sent']} (equal speeds: the same syncs)")
        if s == "async_diloco_slow" and not r["sim_time_s"] * 1.5 < runs["diloco_flat_slow"]["sim_time_s"]:
            failures.append(f"{s}: {r['sim_time_s']:.1f} s simulated, flat DiLoCo waiting for the slow replica "
                            f"{runs['diloco_flat_slow']['sim_time_s']:.1f} s (at least 1.5x faster expected)")
        if s != "desloc":
            continue
        if pct > DESLOC_MAX_PCT:
            failures.append(f"{s}: held-out loss {pct:+.2f}% from AdamW all-reduce's (measured +8.2%; at most {DESLOC_MAX_PCT}%)")
        elif pct > 3:
            print(f"note: {s}: held-out loss {pct:+.2f}% from AdamW all-reduce's: issue 30's 3% missed "
                  "(Local Adam at K = 10 ends +9.2% here too; docs/outer_loop.md)", file=sys.stderr)
        continue
    fewer = inter("diloco") / max(1, inter(s))
    lower = dil["peak_inter_bytes_per_s"] / r["peak_inter_bytes_per_s"] if r.get("peak_inter_bytes_per_s") else float("nan")
    print(f"| {s} | {r['eval_loss']:.4f} | {pct:+.2f}% | {inter(s) / 1e6:.2f} MB | {fewer:.1f}x | "
          f"{8 * r.get('peak_inter_bytes_per_s', float('nan')) / 1e6:.2f} Mbit/s | {lower:.2f}x |")
    if s == "diloco_eager":
        # Eager DiLoCo misses issue 30's 3% here (docs/outer_loop.md "Eager DiLoCo"): (M-1)/M of
        # each outer step is one sync stale, which momentum amplifies (the paper's rule; a reference
        # reproduces it). Reported, and guarded against getting worse than measured.
        if pct > EAGER_MAX_PCT:
            failures.append(f"{s}: held-out loss {pct:+.2f}% from all-reduce's (measured +5.6%; at most {EAGER_MAX_PCT}%)")
        elif pct > 3:
            print(f"note: {s}: held-out loss {pct:+.2f}% from all-reduce's: issue 30's 3% missed "
                  "(the one-period-stale outer step; docs/outer_loop.md)", file=sys.stderr)
    elif s not in ("allreduce", "diloco", "allreduce_adamw") and pct > max_pct:
        failures.append(f"{s}: held-out loss {pct:+.2f}% from all-reduce's (at most {max_pct}%)")
    need = {"diloco_int8": 3.9, "sparseloco": 20.0}.get(s)
    if need and fewer < need:
        failures.append(f"{s}: {fewer:.2f}x fewer inter-datacenter bytes than fp32 DiLoCo (at least {need}x)")
    if s == "diloco_eager" and inter(s) != inter("diloco"):
        failures.append(f"{s}: {inter(s)} inter-datacenter bytes, DiLoCo's are {inter('diloco')} (the same syncs)")
    if s == "streaming_diloco" and not lower >= 2 / 1.2:
        failures.append(f"{s}: peak inter-datacenter rate {lower:.2f}x lower than DiLoCo's (at least 1.67x)")
for f in failures:
    print("FAIL", f, file=sys.stderr)
sys.exit(1 if check and failures else 0)
PY
