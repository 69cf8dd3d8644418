#!/usr/bin/env bash
# Elastic training against a faulty peer (framework/elastic/aggregate.h): 3 replicas of an MLP on
# Fashion-MNIST (DiLoCo, outer sync every 20 steps, 300 steps), replica 2 started by hand with
# lr = 50 (its pseudo-gradients are noise some 300 times the honest ones' norm):
#  - uninterrupted (all honest, `trainer elastic`): the reference held-out loss;
#  - elastic.aggregate = "mean" alone: the faulty replica drags every replica's theta_global off
#    (held-out loss many times the reference): what the checks below guard against;
#  - elastic.max_norm_ratio = 2: its pseudo-gradient is left out of every sync (one log line each),
#    it stays in the quorum, adopting theta_global; every replica ends with the same parameters and
#    the held-out loss within 2% of the uninterrupted run's;
#  - elastic.aggregate = "median" (gathering every pseudo-gradient): theta_global stays bounded
#    (within 5% of the reference; 2.6% measured), the same bits on every replica;
#  - the max_norm_ratio run again over a store signed with elastic.secret_file's secret
#    (collectives/gloo/signed_store.h): the same bits; the secret is in no file of the run; without
#    a secret each replica says once that its store is unauthenticated (forged keys: the
#    SignedStore.* and Elastic.AForged* unit tests);
#  - bad [elastic] keys (an unreadable or empty secret_file too): one line, exit 2, before
#    anything starts.
# usage: elastic_faults.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$1
src=$2
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "dataset-fashion-mnist not installed (scripts/install-deps installs it): skipping"; exit 77
fi
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT
recipe=$tmp/faults.toml
cat > "$recipe" <<'EOF'
[run]
name = "elastic_faults"
seed = 1
[model]
name = "mlp"
hidden = [64]
[data]
name = "fashion_mnist"
path = "/usr/share/datasets/fashion-mnist"
[train]
steps = 300
micro_batch = 32
eval_every = 0
log_every = 50
[optimizer]
name = "sgd"
lr = 0.05
momentum = 0.9
grad_clip = 1.0          # keeps lr = 50 finite: noise, not NaN (a NaN is dropped by the guard)
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
[elastic]
join_timeout_s = 10
sync_timeout_s = 20
EOF
cd "$tmp"
source "$src/tests/support/elastic_run.sh"  # start, finished

# by_hand NAME ARGS...: the 3 replicas started as `trainer elastic` would, replica 2 with lr = 50;
# every one must exit 0.
by_hand() {
  local name=$1; shift
  local ps=()
  for i in 0 1 2; do
    local faulty=()
    [ "$i" -eq 2 ] && faulty=(--optimizer.lr=50)
    "$trainer" --recipe "$recipe" --out "$tmp/$name/replica-$i" --replica "$i" --replicas 3 \
      --elastic-store "file:$tmp/$name/store" "${faulty[@]}" "$@" > "$tmp/$name-$i.log" 2>&1 &
    ps+=("$!")
    pids+=("$!")
  done
  for i in 0 1 2; do
    wait "${ps[$i]}" || { echo "$name: replica $i failed"; tail -5 "$tmp/$name-$i.log"; exit 1; }
  done
}

# ---- uninterrupted ----
start plain
finished "$pid"
[ "$rc" -eq 0 ] || { echo "the uninterrupted run failed ($rc)"; cat "$tmp/plain.out"; exit 1; }

by_hand poisoned
by_hand guarded --elastic.max_norm_ratio=2
by_hand median --elastic.aggregate=median

secret="elastic-faults-test-secret-$RANDOM$RANDOM"
printf '%s\n' "$secret" > "$tmp/secret"
by_hand signed --elastic.max_norm_ratio=2 --elastic.secret_file="$tmp/secret"
! grep -rqF "$secret" "$tmp"/signed/replica-* "$tmp"/signed-*.log || { echo "the secret was written out"; exit 1; }
for name in guarded signed; do  # said once per replica without a secret, never with one
  want=1
  [ "$name" = signed ] || [ -n "${LACONIC_ELASTIC_SECRET:-}" ] && want=0
  [ "$(grep -c "the store is unauthenticated" "$tmp/$name-0.log")" -eq "$want" ] || { echo "$name:"; head "$tmp/$name-0.log"; exit 1; }
done

/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
ref = json.load(open(f"{tmp}/plain/elastic.json"))["processes"][0]["eval_loss"]
def run(name):
    s = [json.load(open(f"{tmp}/{name}/replica-{i}/summary.json")) for i in range(3)]
    sums = {x["theta_global_checksum"] for x in s}
    assert len(sums) == 1 and "" not in sums, (name, sums)  # every replica holds the same theta_global
    return s[0]["eval_loss"]
poisoned, guarded, median = run("poisoned"), run("guarded"), run("median")
# Signing changes no number: the same bits as the unsigned run.
sums = [json.load(open(f"{tmp}/{n}/replica-0/summary.json"))["theta_global_checksum"] for n in ("guarded", "signed")]
assert run("signed") == guarded and sums[0] == sums[1], sums
assert poisoned > 2 * ref, (poisoned, ref)
assert abs(guarded - ref) <= 0.02 * ref, (guarded, ref)
assert abs(median - ref) <= 0.05 * ref, (median, ref)
# The faulty replica stayed a member of every sync, and none of its steps reached theta_global.
rows = [json.loads(l) for l in open(f"{tmp}/guarded/replica-2/elastic.jsonl")]
assert len(rows) == 15 and all(r["members"] == [0, 1, 2] and r["contributed_steps"] == 0 for r in rows), rows
honest = [json.loads(l) for l in open(f"{tmp}/guarded/replica-0/elastic.jsonl")]
assert all(r["contributed_steps"] == 20 for r in honest), honest
pct = lambda x: f"{100 * (x - ref) / ref:+.2f}%"
print(f"held-out loss, replica 2 at lr = 50: uninterrupted {ref:.4f}; mean {poisoned:.4g} ({pct(poisoned)}); "
      f"max_norm_ratio = 2 {guarded:.4f} ({pct(guarded)}); median {median:.4f} ({pct(median)})")
PY
# One line per sync on every honest replica: 15 syncs, the faulty one left out of each.
[ "$(grep -c "round [0-9]*: replica 2's pseudo-gradient left out: norm .* > elastic.max_norm_ratio 2 x the median member's" \
      "$tmp/guarded-0.log")" -eq 15 ] || { grep "left out" "$tmp/guarded-0.log"; exit 1; }

# ---- bad [elastic] keys: one line naming the key, exit 2, nothing started ----
bad() {  # bad WHAT ARGS...: the replica refuses with WHAT in one line
  local what=$1; shift
  set +e
  "$trainer" --recipe "$recipe" --out "$tmp/bad" --replica 0 --replicas 3 --elastic-store "file:$tmp/bad/store" "$@" \
    > "$tmp/bad.out" 2>&1
  local code=$?
  set -e
  [ "$code" -eq 2 ] || { echo "expected exit 2 for $*, got $code"; cat "$tmp/bad.out"; exit 1; }
  [ "$(wc -l < "$tmp/bad.out")" -eq 1 ] && grep -q "$what" "$tmp/bad.out" || { echo "for $*:"; cat "$tmp/bad.out"; exit 1; }
  [ ! -e "$tmp/bad/store" ] || { echo "the store was created for $*"; exit 1; }
}
bad "elastic.aggregate" --elastic.aggregate=mode
bad "elastic.trim_fraction" --elastic.trim_fraction=0.5
bad "elastic.max_norm_ratio = 0.5: expected 0 (off) or at least 1" --elastic.max_norm_ratio=0.5
bad "elastic.aggregate = \"median\": it gathers every replica's dense pseudo-gradient" --elastic.aggregate=median \
  --sync.diloco.dtype=int8
: > "$tmp/empty"
bad "elastic.secret_file = \"$tmp/none\": cannot read it" --elastic.secret_file="$tmp/none"
bad "elastic.secret_file = \"$tmp/empty\": it is empty" --elastic.secret_file="$tmp/empty"
# The supervisor refuses it before starting any replica.
set +e
"$trainer" elastic --replicas 3 --recipe "$recipe" --out "$tmp/bad-supervised" --elastic.secret_file="$tmp/none" \
  > "$tmp/bad.out" 2>&1
code=$?
set -e
[ "$code" -eq 2 ] && [ "$(wc -l < "$tmp/bad.out")" -eq 1 ] && grep -q "elastic.secret_file" "$tmp/bad.out" &&
  [ ! -e "$tmp/bad-supervised/replica-0" ] || { echo "trainer elastic with no secret file: exit $code"; cat "$tmp/bad.out"; exit 1; }
echo "elastic_faults: all checks passed"
