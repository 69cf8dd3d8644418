#!/usr/bin/env bash
# Components registered from outside run where the built-ins run (tests/programs/registered_trainer,
# which registers examples/random_k's reducer and a periodic strategy "every_k" of its own):
#  - DiLoCo through the random_k reducer as 3 elastic replicas: replica 2 is killed mid-period,
#    the others finish the next sync without it, the supervisor restarts it, it rejoins and syncs
#    again; the replicas that finish end with the same parameters;
#  - every_k as elastic replicas, one killed and rejoined (its traits say it is periodic), and
#    refused with a synchronous warm-up like a built-in;
#  - `simulate --failures` on an every_k run takes its period from the strategy's traits;
#  - random_k with distributed.device = "cuda" is refused when the recipe parses (its traits
#    declare no device implementation).
# usage: registered_components.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$(dirname "$1")/registered_trainer
src=$2
[ -x "$trainer" ] || { echo "no $trainer: build the target registered_trainer"; exit 1; }
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
  { echo "Fashion-MNIST is not installed (scripts/install-deps): skipped"; exit 77; }
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; pkill -9 -f "$tmp" 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
cd "$tmp"
cat > "$tmp/small.toml" <<'TOML'
[run]
name = "registered"
seed = 3
[model]
name = "mlp"
hidden = [64]
[data]
name = "fashion_mnist"
[train]
steps = 120
micro_batch = 32
eval_every = 60
log_every = 5
noise_scale = false
[optimizer]
name = "sgd"
lr = 0.05
momentum = 0.9
[distributed]
backend = "threads"
world_size = 2
[sync]
strategy = "diloco"
[sync.diloco]
period = 20
reducer = "random_k"
outer_lr = 0.7
outer_momentum = 0.5
[sync.random_k]
ratio = 0.25
[sync.every_k]
period = 20
[elastic]
join_timeout_s = 10
sync_timeout_s = 20
TOML

recipe=$tmp/small.toml
source "$src/tests/support/elastic_run.sh"  # start, finished, at_step
same_parameters() {  # same_parameters RUN RC: the run completed, and every replica that did holds the same bits
  [ "$2" -eq 0 ] || { echo "$1: elastic run exited $2"; cat "$tmp/$1.out"; tail -5 "$tmp/$1"/replica-*/log.txt; exit 1; }
  /usr/bin/python3 - "$tmp/$1/elastic.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
# On a loaded machine a live replica may be dropped as well (a gloo timeout while the quorum
# re-forms) and not get back before the end: it then has no final parameters. Those that finish
# must agree, and at least two must.
done = [p for p in d["processes"] if p.get("steps") == 120]
sums = {p["theta_global_checksum"] for p in done}
assert len(done) >= 2 and len(sums) == 1 and "" not in sums, d["processes"]
if len(done) < 3:
    print(f"note: {3 - len(done)} replica(s) dropped and not back before the end: {d['processes']}")
PY
}

# ---- DiLoCo through the registered random_k reducer; replica 2 killed mid-period (steps 21-40) ----
start randk
at_step randk 2 25
kill -KILL "$(cat "$tmp/randk/replica-2/pid")"
finished "$pid"
same_parameters randk "$rc"
# random_k was the pseudo-gradient reducer: its section is in the resolved recipe (printed only when
# used: the diloco strategy's traits name its reducer) and it kept a quarter of the values.
grep -q '^\[sync.random_k\]' "$tmp/randk/replica-0/recipe.resolved.toml" ||
  { echo "[sync.random_k] is not in the resolved recipe"; exit 1; }
/usr/bin/python3 - "$tmp/randk/elastic.json" "$tmp/randk/replica-0/summary.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ratio = json.load(open(sys.argv[2]))["compression_ratio"]
assert abs(ratio - 4.0) < 0.05, ratio
tl = d["timeline"]
assert d["restarts"] >= 1, d
left = [t for t in tl if 2 in t["left"]]
joined = [t for t in tl if 2 in t["joined"]]
assert left and joined and joined[0]["step"] >= left[0]["step"], tl
assert any(2 in t["quorum"] and t["step"] > joined[0]["step"] for t in tl), tl  # it synced again
print(f"random_k under DiLoCo: replica 2 left before step {left[0]['step']}, rejoined after step {joined[0]['step']}")
PY

# ---- the registered periodic strategy as elastic replicas; replica 1 killed mid-period ----
start everyk --sync.strategy=every_k
at_step everyk 1 25
kill -KILL "$(cat "$tmp/everyk/replica-1/pid")"
finished "$pid"
same_parameters everyk "$rc"
/usr/bin/python3 - "$tmp/everyk/elastic.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
tl = d["timeline"]
assert d["restarts"] >= 1, d
assert [t["step"] for t in tl] == list(range(20, 121, 20)), tl
assert any(1 in t["left"] for t in tl) and any(1 in t["joined"] for t in tl), tl
print(f"every_k: {len(tl)} outer syncs every 20 steps; replica 1 killed, left and rejoined")
PY
set +e
"$trainer" elastic --replicas 2 --recipe "$tmp/small.toml" --out "$tmp/bad" --sync.strategy=every_k \
  --sync.every_k.warmup_steps=5 > "$tmp/bad.out" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "expected exit 2 for every_k with a synchronous warm-up, got $rc"; cat "$tmp/bad.out"; exit 1; }
grep -q "sync.every_k.warmup_steps = 5: an elastic run's synchronous warm-up" "$tmp/bad.out"  # before any replica starts
[ ! -e "$tmp/bad/replica-0" ] || { echo "a replica was started for a refused recipe"; exit 1; }

# ---- simulate --failures takes every_k's period from its traits ----
"$trainer" --recipe "$tmp/small.toml" --sync.strategy=every_k --train.steps=20 --train.eval_every=0 \
  --distributed.world_size=4 --network.groups=2 --network.inter_bandwidth="1 Gbit/s" --out "$tmp/sim" > "$tmp/sim.out" 2>&1 \
  || { cat "$tmp/sim.out"; exit 1; }
"$trainer" simulate "$tmp/sim" --as-params 7e9 --failures mtbf=2h,restart=10m,steps=20000,trials=5 > "$tmp/failures.out" 2>&1 \
  || { cat "$tmp/failures.out"; exit 1; }
/usr/bin/python3 - "$tmp/sim/simulated/goodput.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))
assert g["period"] == 20 and g["replicas"] == 2 and g["failures_per_trial"] > 1, g
print(f"every_k under simulate --failures: period {g['period']}, goodput {g['elastic']['goodput']:.3f} elastic, "
      f"{g['data_parallel']['goodput']:.3f} data parallel")
PY

# ---- random_k has no device implementation: refused with device = "cuda" when the recipe parses ----
set +e
"$trainer" --recipe "$tmp/small.toml" --distributed.device=cuda --dry-run > "$tmp/cuda.out" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "expected exit 2 for random_k on cuda, got $rc"; cat "$tmp/cuda.out"; exit 1; }
grep -q 'distributed.device: expected "cpu" with reducer "random_k" (it runs on host buffers), got "cuda"' "$tmp/cuda.out" \
  || { cat "$tmp/cuda.out"; exit 1; }
echo "registered components: all checks passed"
