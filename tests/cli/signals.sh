#!/usr/bin/env bash
# Preemption from the command line: SIGTERM mid-run finishes the step, checkpoints it on every
# rank, writes summary.json with "stopped": "signal" and exits 143 with one line naming the
# signal and the checkpoint; --resume auto then ends with the weights of a run never stopped,
# byte for byte (their safetensors exports compared). A second signal ends the process at once
# (no summary). The same under mpirun -np 3, which forwards SIGTERM to every rank.
# usage: signals.sh TRAINER SOURCE_DIR
set -euo pipefail
trainer=$1
src=$2
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT
common=(--recipe "$src/recipes/mlp_fmnist.toml" --train.steps=6000 --model.hidden=[64] --train.eval_every=0)

# start NAME CMD...: runs CMD in the background (its pid in $pid), output in $tmp/NAME.{out,err}
start() {
  local name=$1; shift
  "$@" > "$tmp/$name.out" 2> "$tmp/$name.err" &
  pid=$!
  pids+=("$pid")
}
# wait_for_steps DIR: until the run has written a metrics record (it is mid-run), at most 120 s
wait_for_steps() {
  for _ in $(seq 1 2400); do
    [ -s "$1/metrics.jsonl" ] && return 0
    sleep 0.05
  done
  echo "no metrics record in $1 after 120 s"; exit 1
}
# finished PID: waits for it; its exit code in $rc (not in a $(...) subshell: wait needs this shell)
finished() { set +e; wait "$1"; rc=$?; set -e; }
same_weights() {  # same_weights RUN_A RUN_B LAUNCH...: their last checkpoints export to the same bytes
  local a=$1 b=$2
  "$trainer" export "$a" --out "$tmp/a.safetensors" > /dev/null
  "$trainer" export "$b" --out "$tmp/b.safetensors" > /dev/null
  cmp "$tmp/a.safetensors" "$tmp/b.safetensors" || { echo "the resumed run's weights differ from the uninterrupted run's"; exit 1; }
}
check_stopped() {  # check_stopped RUN_DIR ERR_FILE RC
  [ "$3" -eq 143 ] || { echo "expected exit 143, got $3"; cat "$2"; exit 1; }
  grep -q "^trainer: stopped by SIGTERM after step [0-9]* of 6000; checkpoint .*step-0* *[0-9]* (continue with --resume auto)$" "$2" \
    || { echo "no stop line:"; cat "$2"; exit 1; }
  /usr/bin/python3 - "$1/summary.json" <<'PY'
import json, os, sys
s = json.load(open(sys.argv[1]))
assert s["stopped"] == "signal" and s["signal"] == "SIGTERM" and 0 < s["steps"] < 6000, s
assert os.path.exists(os.path.join(os.path.dirname(sys.argv[1]), "checkpoints", "step-%09d" % s["steps"], "MANIFEST.json")), s
print(f"stopped at step {s['steps']} of 6000: {s['checkpoint']}")
PY
}

# ---- threads backend, 2 ranks ----
"$trainer" "${common[@]}" --distributed.world_size=2 --checkpoint.every=6000 --out "$tmp/whole" > /dev/null
start stopped "$trainer" "${common[@]}" --distributed.world_size=2 --checkpoint.every=6000 --out "$tmp/stopped"
wait_for_steps "$tmp/stopped"
kill -TERM "$pid"
finished "$pid"
check_stopped "$tmp/stopped" "$tmp/stopped.err" "$rc"
"$trainer" "${common[@]}" --distributed.world_size=2 --checkpoint.every=6000 --out "$tmp/stopped" --resume auto > "$tmp/resumed.out"
grep -q "^done: 6000 steps (resumed at " "$tmp/resumed.out" || { cat "$tmp/resumed.out"; exit 1; }
same_weights "$tmp/whole" "$tmp/stopped"

# ---- a second signal: at once, no summary ----
# Rank 1 stalls at step 100 (the [fault]), so the first signal's step never ends: a hung job, the
# case a second signal is for.
start twice "$trainer" "${common[@]}" --distributed.world_size=2 --fault.kind=stall --fault.rank=1 --fault.step=100 \
  --distributed.timeout_s=60 --out "$tmp/twice"
wait_for_steps "$tmp/twice"
sleep 0.5
kill -TERM "$pid"
for _ in $(seq 1 200); do grep -q "SIGTERM: finishing this step" "$tmp/twice.err" && break; sleep 0.05; done
kill -TERM "$pid"  # signals do not queue: the second only after the first was handled
finished "$pid"
[ "$rc" -eq 143 ] || { echo "expected death by SIGTERM (143), got $rc"; exit 1; }
[ ! -e "$tmp/twice/summary.json" ] || { echo "a second signal must not wait for the checkpoint"; exit 1; }

# ---- mpirun -np 3: every rank agrees on the step ----
if command -v mpirun > /dev/null && [ "${LACONIC_HAVE_MPI:-OFF}" = ON ]; then
  mpi=(mpirun --oversubscribe --allow-run-as-root --mca btl self,vader --bind-to none -np 3)
  m=("${common[@]}" --distributed.world_size=3 --distributed.backend=mpi --checkpoint.every=6000)
  "${mpi[@]}" "$trainer" "${m[@]}" --out "$tmp/mpi_whole" > /dev/null
  start mpi "${mpi[@]}" "$trainer" "${m[@]}" --out "$tmp/mpi_stopped"
  wait_for_steps "$tmp/mpi_stopped"
  kill -TERM "$pid"  # mpirun forwards it to the ranks (mpirun itself then exits non-zero)
  finished "$pid"
  check_stopped "$tmp/mpi_stopped" "$tmp/mpi.err" 143
  shards=$(ls "$tmp"/mpi_stopped/checkpoints/step-*/rank-*.bin | wc -l)
  [ "$shards" -eq 3 ] || { echo "expected 3 shards, got $shards"; exit 1; }
  "${mpi[@]}" "$trainer" "${m[@]}" --out "$tmp/mpi_stopped" --resume auto > /dev/null
  same_weights "$tmp/mpi_whole" "$tmp/mpi_stopped"
  echo "mpirun: ok (mpirun exited $rc)"
else
  echo "no MPI build or mpirun: the mpirun case is skipped"
fi
echo "signals: ok"
