#!/usr/bin/env bash
# World-size projection (issue 31 item 5): one run recorded at 8 ranks, replayed as N ranks by
# `trainer simulate RUN --world N --groups G` (sim/project.h).
# 1. The seeds' table: `trainer plan`'s ring all-reduce of 7e9 bf16 gradients at N = 8, 64, 1024
#    (nodes of 8 ranks, 450 GB/s and 1 us inside, 50 GB/s and 2 us between) against the replay
#    of one 8-rank mlp_fmnist run that all-reduces its gradients in bf16 (sync.allreduce.dtype),
#    projected to N ranks in N/8 groups and onto 7e9 parameters (--as-params), its compute
#    modeled on a device fast enough to vanish: time per step.
# 2. Cost: the replay's wall time and peak memory (the simulator's process included) at each of
#    WORLDS, rings beyond 256 ranks as flows; with EXACT=1 also message by message at 1024
#    (--exact-up-to 1024), the flows' error beside it.
#   tests/bench/projection.sh BUILD_DIR SOURCE_DIR    (WORLDS="64 1024 10000" EXACT=1 CHECK=0)
# CHECK=1: exit 1 when a seeds' row misses the plan by more than 5%, or a replay takes more than
# LIMIT_S (300) seconds or LIMIT_MB (4096) MB. Skips (77) without Fashion-MNIST.
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
worlds=${WORLDS:-"64 1024 10000"} exact=${EXACT:-1} check=${CHECK:-0}
limit_s=${LIMIT_S:-300} limit_mb=${LIMIT_MB:-4096}
trainer=$build/trainer
[ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
  { echo "Fashion-MNIST not installed (scripts/install-deps installs it): skipping"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}

cat >seeds.toml <<'EOF'
[network]
groups = 1
intra_bandwidth = "450 GB/s"
intra_latency = "1 us"
inter_bandwidth = "50 GB/s"
inter_latency = "2 us"
compute = "modeled"
device_tflops = 1e9
EOF
# One bucket per step (bucket_mb), metrics logged once (log_every): each step is one all-reduce.
"$trainer" --recipe "$src/recipes/mlp_fmnist.toml" --run.name=seeds --train.steps=4 --train.eval_every=100 \
  --train.log_every=4 --distributed.world_size=8 --distributed.algorithm=ring --sync.allreduce.dtype=bf16 \
  --sync.bucket_mb=1000 --network.groups=1 --network.compute=modeled --train.trace=true >record.log 2>&1 ||
  { cat record.log; exit 1; }
"$trainer" plan --params 7e9 --dtype bf16 --world-sizes 8,64,1024 >plan.txt

# step_s DIR: seconds per step between the summary's first and last step marks.
step_s() {
  /usr/bin/python3 -c 'import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))["steps"]
print((s[-1]["sim_time_s"] - s[0]["sim_time_s"]) / (s[-1]["step"] - s[0]["step"]))' "$1"
}
# timed NAME ARGS...: runs trainer simulate ARGS into NAME/; sets wall (s) and mb (peak memory).
timed() {
  local name=$1
  shift
  /usr/bin/time -f "%e %M" -o "$name.time" "$trainer" simulate "$@" --out "$tmp/$name" >"$name.log" 2>&1 ||
    { cat "$name.log"; exit 1; }
  read -r wall mb < <(awk '{ printf "%s %.0f\n", $1, $2 / 1024 }' "$name.time")
}

fail=0
echo "## The seeds' table from one 8-rank run (7e9 parameters, bf16 gradients)"
echo
echo "| N | groups | plan: ring all-reduce (s) | replay of the 8-rank run as N (s/step) | error | replay wall (s) |"
echo "|---|---|---|---|---|---|"
for n in 8 64 1024; do
  g=$(((n + 7) / 8))
  timed "seeds-$n" runs/seeds --network seeds.toml --world "$n" --groups "$g" --as-params 7e9
  plan=$(awk -v n="$n" '$1 == n && $4 == "ring" { print $5; exit }' plan.txt)
  got=$(step_s "seeds-$n")
  err=$(/usr/bin/python3 -c "print(f'{100 * ($got - $plan) / $plan:+.1f}%')")
  printf '| %s | %s | %.4g | %.4g | %s | %s |\n' "$n" "$g" "$plan" "$got" "$err" "$wall"
  /usr/bin/python3 -c "import sys; sys.exit(abs($got - $plan) > 0.05 * $plan)" || fail=1
done

cat >wan.toml <<'EOF'
[network]
groups = 2
inter_bandwidth = "1 Gbit/s"
inter_latency = "30 ms"
compute = "modeled"
device_tflops = 100
EOF
echo
echo "## What a projection costs (the 8-rank run as N ranks in 2 datacenters, 30 ms and 1 Gbit/s apart; 4 steps)"
echo
echo "| N | rings | simulated s/step | replay wall (s) | peak memory (MB) |"
echo "|---|---|---|---|---|"
for n in $worlds; do
  timed "wan-$n" runs/seeds --network wan.toml --world "$n"
  rings=$([ "$n" -le 256 ] && echo messages || echo flows)
  printf '| %s | %s | %.4g | %s | %s |\n' "$n" "$rings" "$(step_s "wan-$n")" "$wall" "$mb"
  /usr/bin/python3 -c "import sys; sys.exit($wall > $limit_s or $mb > $limit_mb)" ||
    { echo "$n ranks: beyond ${limit_s} s or ${limit_mb} MB"; fail=1; }
done
if [ "$exact" = 1 ]; then
  timed wan-exact runs/seeds --network wan.toml --world 1024 --exact-up-to 1024
  flows=$(step_s wan-1024 2>/dev/null || true)
  exact_s=$(step_s wan-exact)
  printf '| 1024 | messages (--exact-up-to 1024) | %.4g | %s | %s |\n' "$exact_s" "$wall" "$mb"
  [ -z "$flows" ] || echo && echo "Flows against messages at 1024 ranks: $(/usr/bin/python3 -c "print(f'{100 * ($flows - $exact_s) / $exact_s:+.2f}%')")"
fi
[ "$check" = 1 ] && [ "$fail" = 1 ] && exit 1
exit 0
