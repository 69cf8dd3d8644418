#!/usr/bin/env bash
# Elastic DiLoCo from the command line (`trainer elastic`, recipes/elastic_diloco.toml: the
# cross-datacenter BERT-small, 3 replicas of 2 ranks), at the CI size: the model cut to d64, 2 heads,
# ffn 256, a vocabulary of 1000, sequences of 32, 1% held out, 200 steps with an outer sync every 25
# (8 syncs; the stopped run 300); SIZE=full runs the recipe as it is (d128, 300 steps: 12 syncs;
# docs/benchmarks.md).
#  - uninterrupted: every sync has all 3 replicas; they end with bit-identical parameters; the
#    same run through a redis store (its own redis-server on 127.0.0.1) ends with the same bits;
#  - SIGKILL of replica 2 mid-period: the two others complete the next sync without it within
#    elastic.sync_timeout_s and go on, the supervisor restarts it, it rejoins at a later sync
#    with a live member's state; afterwards every replica holds the same parameters and the held-out
#    loss is within 2% of the uninterrupted run's; metrics.jsonl shows quorum sizes 2 and 3;
#  - SIGSTOP of replica 1 mid-period: it is dropped, not waited on; once continued it learns it
#    was left out (exit 76), is restarted and rejoins; the run completes;
#  - SIGTERM to the supervisor: every replica checkpoints its step (exit 143), and `trainer elastic
#    --resume` ends with the uninterrupted run's parameters, bit for bit;
#  - a recipe that cannot be elastic is refused once (exit 2), not restarted;
#  - `trainer simulate --failures`: the cross-datacenter DiLoCo run's replayed step time (20 steps of
#    the same cut model, projected to 7e9 parameters) with its 8 hosts failing at random: elastic
#    training's goodput above data parallel's checkpoint-restart.
# usage: [SIZE=full] [KEEP=1: keep the run directories] elastic.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$1
src=$2
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; pkill -9 -f "$tmp" 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
recipe=$src/recipes/elastic_diloco.toml
cd "$tmp"
# The size, and where the signals land: the kill and the stop 10 steps into a period, the continue
# 10 steps into the period after the first sync without the stopped replica, the SIGTERM 5 steps
# after a sync (a replica at the next sync when it arrives would stop without its checkpoint). A
# restarted replica rejoins only after its start-up (reading and tokenizing the data): at the cut
# size the others go on for 65-115 steps meanwhile, so the stop comes in the first period and the
# stopped run is longer (300 steps), for it to rejoin with syncs to spare.
if [ "${SIZE:-ci}" = full ]; then
  size=() cut=() steps=300 stop_steps=300 period=25 kill_at=110 stop_at=110 cont_at=160 term_at=105
else
  cut=(--model.dim=64 --model.heads=2 --model.ffn=256 --data.seq_len=32 --data.vocab_size=1000 --data.eval_fraction=0.01)
  size=("${cut[@]}" --train.eval_every=0 --schedule.warmup_steps=50)
  steps=200 stop_steps=300 period=25 kill_at=35 stop_at=10 cont_at=35 term_at=30
fi

source "$src/tests/support/elastic_run.sh"  # start, finished, at_step
check() {  # check RUN RC [STEPS]: the supervisor's report, every replica's parameters the same
  [ "$2" -eq 0 ] || { echo "$1: trainer elastic exited $2"; cat "$tmp/$1.out"; tail -5 "$tmp/$1"/replica-*/log.txt; exit 1; }
  /usr/bin/python3 - "$tmp/$1/elastic.json" "${3:-$steps}" <<'PY'
import json, sys
d, steps = json.load(open(sys.argv[1])), int(sys.argv[2])
sums = {p["theta_global_checksum"] for p in d["processes"]}
assert len(sums) == 1 and "" not in sums, d["processes"]
assert all(p["steps"] == steps for p in d["processes"]), d["processes"]
print(f"{sys.argv[1]}: {d['restarts']} restart(s), parameters {sums.pop()}, useful {d['useful_steps']} of {3 * steps}, "
      f"goodput {d['goodput_steps_per_replica_s']:.2f} steps per replica-second in {d['wall_s']:.1f} s")
for t in d["timeline"]:
    if t["left"] or t["joined"] or len(t["quorum"]) != 3 or t["attempts"] > 1:
        print(f"  sync at step {t['step']}: quorum {t['quorum']}, left {t['left']}, joined {t['joined']}")
PY
}

# ---- uninterrupted ----
start plain "${size[@]}" --train.steps="$steps"
finished "$pid"
check plain "$rc"
grep -q "0 restart(s)" "$tmp/plain.out"
/usr/bin/python3 - "$tmp/plain/elastic.json" "$steps" "$period" <<'PY'
import json, sys
d, steps, period = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
assert len(d["timeline"]) == steps // period and all(t["quorum"] == [0, 1, 2] for t in d["timeline"]), d["timeline"]
assert d["useful_steps"] == 3 * steps and d["restarts"] == 0, d
PY

# ---- through redis, when redis-server is installed: the same bits ----
if [ -x /usr/bin/redis-server ]; then
  port=$((20000 + $$ % 20000))
  /usr/bin/redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$tmp" > /dev/null 2>&1 &
  pids+=("$!")
  disown "$!"
  for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
  start redis --store "redis:127.0.0.1:$port" "${size[@]}" --train.steps="$steps"
  finished "$pid"
  check redis "$rc"
  /usr/bin/python3 - "$tmp/plain/elastic.json" "$tmp/redis/elastic.json" <<'PY'
import json, sys
a, b = (json.load(open(p))["processes"][0]["theta_global_checksum"] for p in sys.argv[1:])
assert a == b, (a, b)
print("redis store: the same parameters as the file store's run")
PY
else
  echo "no redis-server: the redis store is not exercised here (scripts/install-deps installs it)"
fi

# ---- SIGKILL of replica 2 mid-period ----
start killed "${size[@]}" --train.steps="$steps"
at_step killed 2 "$kill_at"
kill -KILL "$(cat "$tmp/killed/replica-2/pid")"
finished "$pid"
check killed "$rc"
/usr/bin/python3 - "$tmp/plain" "$tmp/killed" <<'PY'
import json, sys
plain, killed = (json.load(open(p + "/elastic.json")) for p in sys.argv[1:])
assert killed["restarts"] == 1, killed
tl = killed["timeline"]
after = [t for t in tl if t["quorum"] == [0, 1]]
assert after, tl
first = after[0]
assert 2 in first["left"], first
rejoin = [t for t in tl if 2 in t["joined"]]
assert rejoin and rejoin[0]["step"] >= first["step"], tl
assert any(t["quorum"] == [0, 1, 2] and t["step"] > rejoin[0]["step"] for t in tl), tl
# The sync after the kill: within sync_timeout_s (20 s) on the replicas that went on.
rows = [json.loads(l) for l in open(sys.argv[2] + "/replica-0/elastic.jsonl")]
sync = [r for r in rows if r["step"] == first["step"]][0]
assert sync["seconds"] < 20, sync
sizes = {json.loads(l).get("quorum_size") for l in open(sys.argv[2] + "/replica-0/metrics.jsonl")}
assert {2, 3} <= sizes, sizes
a = plain["processes"][0]["eval_loss"]
b = killed["processes"][0]["eval_loss"]
assert abs(b - a) <= 0.02 * a, (a, b)
print(f"killed: replica 2 left before step {first['step']} (that sync took {sync['seconds']:.1f} s), rejoined after "
      f"step {rejoin[0]['step']}; eval loss {b:.4f} against {a:.4f} uninterrupted ({100 * (b - a) / a:+.2f}%)")
PY

# ---- SIGSTOP of replica 1 mid-period: dropped, then told so when it wakes ----
start stopped "${size[@]}" --train.steps="$stop_steps"
at_step stopped 1 "$stop_at"
kill -STOP "$(cat "$tmp/stopped/replica-1/pid")"
at_step stopped 0 "$cont_at"   # the others went on without it
kill -CONT "$(cat "$tmp/stopped/replica-1/pid")"
finished "$pid"
check stopped "$rc" "$stop_steps"
grep -q "replica 1 was dropped from the run (exit 76)" "$tmp/stopped.out" || { cat "$tmp/stopped.out"; exit 1; }
grep -q "replica 1 was left out of round" "$tmp/stopped/replica-1/log.txt"

# ---- SIGTERM to the supervisor mid-period: every replica checkpoints, exit 143; --resume ends with
# the uninterrupted run's bits (each replica resumes from its own step, all before the next sync) ----
start term "${size[@]}" --train.steps="$steps"
# Every replica past a sync before the signal, so that none can be at the next one when it
# arrives: replicas run at different speeds between syncs (2x on a loaded machine).
for r in 0 1 2; do at_step term "$r" "$term_at"; done
kill -TERM "$pid"
finished "$pid"
[ "$rc" -eq 143 ] || { echo "expected exit 143 after SIGTERM, got $rc"; cat "$tmp/term.out"; exit 1; }
[ "$(grep -c 'trainer: stopped by SIGTERM after step' "$tmp"/term/replica-*/log.txt | awk -F: '{s+=$2} END {print s}')" -eq 3 ]
"$trainer" elastic --replicas 3 --max-restarts 2 --recipe "$recipe" --out "$tmp/term" --resume "${size[@]}" --train.steps="$steps" > "$tmp/term2.out" 2>&1 \
  || { echo "the resumed elastic run failed"; cat "$tmp/term2.out"; exit 1; }
check term 0
/usr/bin/python3 - "$tmp/plain/elastic.json" "$tmp/term/elastic.json" <<'PY'
import json, sys
a, b = (json.load(open(p))["processes"][0]["theta_global_checksum"] for p in sys.argv[1:])
assert a == b, (a, b)
print("stopped by SIGTERM and resumed: the uninterrupted run's parameters")
PY

# ---- bad input: refused by the supervisor in one line, exit 2, no replica started ----
set +e
"$trainer" elastic --replicas 2 --recipe "$recipe" --out "$tmp/bad" "${cut[@]}" --sync.strategy=allreduce > "$tmp/bad.out" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "expected exit 2 for a non-periodic strategy, got $rc"; cat "$tmp/bad.out"; exit 1; }
grep -q "elastic training needs one periodic strategy" "$tmp/bad.out"
[ "$(wc -l < "$tmp/bad.out")" -eq 1 ] && [ ! -e "$tmp/bad/replica-0" ] || { echo "expected one line, nothing started"; cat "$tmp/bad.out"; exit 1; }
set +e
"$trainer" elastic --replicas 2 --recipe "$recipe" --out "$tmp/bad2" "${cut[@]}" --sync.diloco.warmup_steps=10 > "$tmp/bad2.out" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "expected exit 2 for a synchronous warm-up, got $rc"; cat "$tmp/bad2.out"; exit 1; }
grep -q "sync.diloco.warmup_steps = 10: an elastic run's synchronous warm-up" "$tmp/bad2.out"
[ ! -e "$tmp/bad2/replica-0" ] || { echo "a replica was started for a refused recipe"; exit 1; }
set +e
"$trainer" elastic --replicas 2 --recipe "$recipe" --out "$tmp/bad3" "${cut[@]}" --sync.diloco.eager=true > "$tmp/bad3.out" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "expected exit 2 for eager DiLoCo, got $rc"; cat "$tmp/bad3.out"; exit 1; }
grep -q "sync.diloco.eager = true: elastic replicas share one anchor" "$tmp/bad3.out"
[ ! -e "$tmp/bad3/replica-0" ] || { echo "a replica was started for a refused recipe"; exit 1; }
# ---- goodput under simulated failures: the cross-datacenter DiLoCo run replayed with hosts failing ----
"$trainer" --recipe "$src/recipes/cross_dc_diloco.toml" --train.steps=20 --train.eval_every=0 --sync.diloco.period=10 \
  "${cut[@]}" --out "$tmp/cross_dc" > "$tmp/cross_dc.out" 2>&1 || { cat "$tmp/cross_dc.out"; exit 1; }
"$trainer" simulate "$tmp/cross_dc" --as-params 7e9 --failures mtbf=2h,restart=10m,steps=20000,trials=10 \
  > "$tmp/failures.out" 2>&1 || { cat "$tmp/failures.out"; exit 1; }
grep "simulate:   " "$tmp/failures.out"
/usr/bin/python3 - "$tmp/cross_dc/simulated/goodput.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
dp, el = g["data_parallel"]["goodput"], g["elastic"]["goodput"]
assert g["hosts"] == 8 and g["replicas"] == 2 and g["period"] == 10 and g["steps"] == 20000, g
assert 0 < dp < el < 1, (dp, el)
assert g["failures_per_trial"] > 10, g
PY
echo "elastic: all checks passed"
