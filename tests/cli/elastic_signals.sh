#!/usr/bin/env bash
# `trainer elastic` as an operator runs it:
#  - Ctrl-C at the terminal (SIGINT to the whole foreground process group): the replicas live in
#    process groups of their own, so each gets the signal once, from the supervisor, finishes its
#    step and checkpoints it; the supervisor exits 130 and says how many checkpointed (all three);
#    `--resume` completes the run;
#  - refused before anything starts, one line, exit 2: a recipe without a periodic strategy, a
#    redis store that cannot be reached, a second supervisor on a live --out.
# usage: elastic_signals.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$1
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
  { echo "Fashion-MNIST is not installed (scripts/install-deps): skipped"; exit 77; }
command -v setsid >/dev/null || { echo "no setsid (util-linux): skipped"; exit 77; }
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 -- "-$p" 2>/dev/null || true; done; pkill -9 -f "$tmp" 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
cat > "$tmp/small.toml" <<'TOML'
[model]
name = "mlp"
hidden = [32]
[data]
name = "fashion_mnist"
[train]
steps = 200000
micro_batch = 16
log_every = 5
noise_scale = false
[optimizer]
name = "sgd"
lr = 0.05
[distributed]
backend = "threads"
world_size = 1
[sync]
strategy = "diloco"
[sync.diloco]
period = 100000
[elastic]
sync_timeout_s = 20
TOML
recipe=$tmp/small.toml
# shellcheck source=../support/elastic_run.sh
source "$(dirname "$0")/../support/elastic_run.sh"

# A terminal's Ctrl-C: the supervisor leads a process group (setsid), and the whole group gets SIGINT.
setsid "$trainer" elastic --replicas 3 --max-restarts 2 --recipe "$recipe" --out "$tmp/run" > "$tmp/run.out" 2>&1 &
pid=$!
pids+=("$pid")
# Every replica at step 25 or later, none near the first sync (step 100000) when the signal comes:
# replicas run at different speeds between syncs, and one already at a sync would wait there for
# the others, which stop first (it then stops too, without that step's checkpoint).
for r in 0 1 2; do at_step run "$r" 25; done
# The second supervisor on the same --out, while the first runs: refused.
set +e
"$trainer" elastic --replicas 3 --recipe "$recipe" --out "$tmp/run" > "$tmp/second.out" 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] && [ "$(wc -l < "$tmp/second.out")" -eq 1 ] && grep -q "another trainer elastic is running there" "$tmp/second.out" ||
  { echo "a second supervisor on a live --out: expected one line and exit 2, got $rc:"; cat "$tmp/second.out"; exit 1; }
echo "ok: a second supervisor on a live --out is refused: $(cat "$tmp/second.out")"
# Each replica leads a process group of its own: the terminal's signal reaches the supervisor alone
# (with fast steps a replica may finish before the forwarded copy arrives, so the race itself
# would not show reliably; the groups are what prevents it).
for r in 0 1 2; do
  rp=$(cat "$tmp/run/replica-$r/pid")
  [ "$(ps -o pgid= -p "$rp" | tr -d ' ')" = "$rp" ] ||
    { echo "replica $r (pid $rp) is in process group $(ps -o pgid= -p "$rp"), not its own"; exit 1; }
done
kill -INT -- "-$pid"
finished "$pid"
[ "$rc" -eq 130 ] || { echo "Ctrl-C: expected exit 130, got $rc"; cat "$tmp/run.out"; exit 1; }
grep -q "elastic run stopped by a signal; every replica checkpointed its step" "$tmp/run.out" ||
  { echo "Ctrl-C: not every replica checkpointed"; cat "$tmp/run.out"; exit 1; }
for r in 0 1 2; do
  # A replica signalled twice ends at once (the signal's default action): no summary, no checkpoint.
  grep -q '"stopped": "signal"' "$tmp/run/replica-$r/summary.json" ||
    { echo "replica $r did not stop cleanly"; cat "$tmp/run/replica-$r/log.txt"; exit 1; }
done
echo "ok: Ctrl-C to the terminal's process group: every replica checkpointed once, exit 130"
# Ten steps past the furthest checkpoint (only train.steps may change on a resume).
last=$(cat "$tmp"/run/replica-*/summary.json | sed -n 's/.*"steps": \([0-9]*\).*/\1/p' | sort -n | tail -1)
"$trainer" elastic --replicas 3 --max-restarts 2 --recipe "$recipe" --out "$tmp/run" --resume --train.steps=$((last + 10)) \
  > "$tmp/resume.out" 2>&1 ||
  { echo "--resume failed"; cat "$tmp/resume.out"; exit 1; }
echo "ok: --resume completes the run"

expect_refused() {  # NAME MESSAGE ARGS...: one line, exit 2, nothing started
  local name=$1 msg=$2; shift 2
  set +e
  "$trainer" elastic --replicas 2 --out "$tmp/$name" "$@" > "$tmp/$name.out" 2>&1
  local code=$?
  set -e
  [ "$code" -eq 2 ] && [ "$(wc -l < "$tmp/$name.out")" -eq 1 ] && grep -qF -- "$msg" "$tmp/$name.out" &&
    [ ! -e "$tmp/$name/replica-0" ] ||
    { echo "$name: expected one line with '$msg', exit 2 and no replica started; got $code:"; cat "$tmp/$name.out"; exit 1; }
  echo "ok: $name refused: $(cat "$tmp/$name.out")"
}
expect_refused allreduce "elastic training needs one periodic strategy" --recipe "$recipe" --sync.strategy=allreduce
expect_refused no_redis "--store redis:127.0.0.1:1" --recipe "$recipe" --store redis:127.0.0.1:1
