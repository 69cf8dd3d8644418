#!/usr/bin/env bash
# Elastic training through correlated failures (framework/elastic/elastic.h: recovery, min_quorum,
# the store's head and heartbeats; supervisor.h: restart backoff): 3 replicas of an MLP on
# Fashion-MNIST (DiLoCo, outer sync every 20 steps, a checkpoint every 20 steps):
#  - uninterrupted: the reference held-out loss and theta_global;
#  - SIGKILL of all three replicas at once mid-run: the supervisor restarts them (after its
#    backoff), no member is alive (their heartbeats stopped), so they recover from their own newest
#    checkpoints (the theta_global most of them hold) and complete: the same theta_global on every
#    replica, the held-out loss within 2% of the uninterrupted run's;
#  - the store wiped mid-run (as redis FLUSHALL would) and replica 1 killed: the two live replicas
#    go on, the restarted one holds a checkpoint but finds no committed round; it waits (the others'
#    heartbeats are live) and joins once they commit again: never training alone from step 0;
#  - two of three replicas killed with no restarts left: the survivor never syncs as a quorum of one
#    (elastic.min_quorum, a majority by default): it waits join_wait_s and fails, saying so;
#  - a replica that keeps dying young is restarted after 0.5, 1 and 2 s (the backoff doubles).
# usage: elastic_recover.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$1
src=$2
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "dataset-fashion-mnist not installed (scripts/install-deps installs it): skipping"; exit 77
fi
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; pkill -9 -f "$tmp" 2>/dev/null || true; rm -rf "$tmp"' EXIT
recipe=$tmp/recover.toml
cat > "$recipe" <<'EOF'
[run]
name = "elastic_recover"
seed = 1
[model]
name = "mlp"
hidden = [256]
[data]
name = "fashion_mnist"
path = "/usr/share/datasets/fashion-mnist"
[train]
steps = 400
micro_batch = 64
eval_every = 0
log_every = 10
[optimizer]
name = "sgd"
lr = 0.05
momentum = 0.9
[schedule]
decay = "cosine"
[distributed]
backend = "threads"
world_size = 1
[sync]
strategy = "diloco"
[sync.diloco]
period = 20
outer_lr = 0.7
outer_momentum = 0.5
nesterov = true
[checkpoint]
every = 20
[elastic]
join_timeout_s = 3
sync_timeout_s = 10
join_wait_s = 120
EOF
cd "$tmp"
source "$src/tests/support/elastic_run.sh"  # start, finished, at_step

# report RUN: exit 0, every replica at the end with one theta_global; prints the checksum and loss.
report() {
  [ "$rc" -eq 0 ] || { echo "$1: trainer elastic exited $rc"; cat "$tmp/$1.out"; tail -n 5 "$tmp/$1"/replica-*/log.txt; exit 1; }
  /usr/bin/python3 - "$tmp/$1/elastic.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
sums = {p["theta_global_checksum"] for p in d["processes"]}
assert len(sums) == 1 and "" not in sums, d["processes"]
assert all(p["steps"] == 400 for p in d["processes"]), d["processes"]
print(f"{sys.argv[1]}: {d['restarts']} restart(s), theta_global {sums.pop()}, eval loss "
      f"{d['processes'][0]['eval_loss']:.4f}, useful {d['useful_steps']:.0f} of 1200 inner steps, {d['wall_s']:.1f} s")
PY
}
# near RUN: the held-out loss within 2% of the uninterrupted run's.
near() {
  /usr/bin/python3 - "$tmp/plain/elastic.json" "$tmp/$1/elastic.json" <<'PY'
import json, sys
a, b = (json.load(open(p))["processes"][0]["eval_loss"] for p in sys.argv[1:])
assert abs(b - a) <= 0.02 * a, (a, b)
print(f"  eval loss {b:.4f} against {a:.4f} uninterrupted ({100 * (b - a) / a:+.2f}%)")
PY
}

# ---- uninterrupted ----
start plain
finished "$pid"
report plain

# ---- all three SIGKILLed at once mid-run ----
"$trainer" elastic --replicas 3 --max-restarts 3 --recipe "$recipe" --out "$tmp/allkilled" > "$tmp/allkilled.out" 2>&1 &
pid=$!
pids+=("$pid")
at_step allkilled 0 150
kill -KILL "$(cat "$tmp/allkilled/replica-0/pid")" "$(cat "$tmp/allkilled/replica-1/pid")" \
  "$(cat "$tmp/allkilled/replica-2/pid")"
finished "$pid"
report allkilled
near allkilled
grep -q "restarting it in 0.5 s" "$tmp/allkilled.out" || { cat "$tmp/allkilled.out"; exit 1; }
grep -h "the run recovers at round" "$tmp"/allkilled/replica-*/log.txt | head -3
[ "$(grep -l "the run recovers at round" "$tmp"/allkilled/replica-*/log.txt | wc -l)" -ge 2 ] \
  || { echo "allkilled: the replicas did not recover together"; tail -n 5 "$tmp"/allkilled/replica-*/log.txt; exit 1; }

# ---- the store wiped mid-run, replica 1 killed: no split brain ----
start wiped
at_step wiped 1 150
find "$tmp/wiped/store" -mindepth 1 -delete
kill -KILL "$(cat "$tmp/wiped/replica-1/pid")"
finished "$pid"
report wiped
near wiped
grep -q "joining at round" "$tmp/wiped/replica-1/log.txt" || { tail -20 "$tmp/wiped/replica-1/log.txt"; exit 1; }
! grep -q "the run recovers" "$tmp"/wiped/replica-*/log.txt || { echo "wiped: recovered beside live members"; exit 1; }

# ---- two of three killed, no restarts: the survivor does not go on alone ----
"$trainer" elastic --replicas 3 --max-restarts 0 --recipe "$recipe" --out "$tmp/minority" \
  --elastic.join_wait_s=6 > "$tmp/minority.out" 2>&1 &
pid=$!
pids+=("$pid")
at_step minority 0 150
kill -KILL "$(cat "$tmp/minority/replica-1/pid")" "$(cat "$tmp/minority/replica-2/pid")"
finished "$pid"
[ "$rc" -ne 0 ] || { echo "minority: a run that lost two of three replicas exited 0"; cat "$tmp/minority.out"; exit 1; }
grep -q "fewer than elastic.min_quorum = 2" "$tmp/minority/replica-0/log.txt" \
  || { tail -5 "$tmp/minority/replica-0/log.txt"; exit 1; }
/usr/bin/python3 - "$tmp/minority/replica-0/elastic.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert rows and all(r["quorum_size"] >= 2 for r in rows), rows
print(f"minority: replica 0 synced {len(rows)} times, never as a quorum of one; it failed at min_quorum")
PY

# ---- restart backoff: a replica that dies at once, three times ----
"$trainer" elastic --replicas 1 --max-restarts 3 --recipe "$recipe" --out "$tmp/backoff" -- /bin/false \
  > "$tmp/backoff.out" 2>&1 || true
for d in 0.5 1.0 2.0; do
  grep -q "restarting it in $d s" "$tmp/backoff.out" || { cat "$tmp/backoff.out"; exit 1; }
done
echo "backoff: restarts after 0.5, 1.0 and 2.0 s"
