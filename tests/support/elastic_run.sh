# Helpers for the CLI tests that drive `trainer elastic` (sourced by tests/cli/elastic.sh and
# tests/cli/registered_components.sh). The caller sets: trainer (the program), recipe, tmp (the
# test's directory) and pids=() (killed by its EXIT trap).

# start NAME ARGS...: `$trainer elastic` of 3 replicas in the background ($pid), its output in $tmp/NAME.out
start() {
  local name=$1; shift
  "$trainer" elastic --replicas 3 --max-restarts 2 --recipe "$recipe" --out "$tmp/$name" "$@" > "$tmp/$name.out" 2>&1 &
  pid=$!
  pids+=("$pid")
}
finished() { set +e; wait "$1"; rc=$?; set -e; }
# at_step RUN REPLICA STEP: until the replica's metrics reach STEP (at most 240 s)
at_step() {
  for _ in $(seq 1 12000); do
    grep -q "\"step\":$3[,}]" "$tmp/$1/replica-$2/metrics.jsonl" 2>/dev/null && return 0
    sleep 0.02
  done
  echo "replica $2 of $1 never reached step $3"; cat "$tmp/$1.out"; exit 1
}
