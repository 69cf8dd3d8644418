#!/usr/bin/env bash
# What the uplink of scripts/netns-link does to messages, as docs/benchmarks.md ("Simulation on a
# wide-area link") cites it: one bulk flow's rate and a lone 535 KB message's time (after 0.1 s
# and 5 ms idle) with the tbf bucket of 256 KB and of 32 KB; 1.07 MB exchanged both ways at once
# over one fresh connection, six times 0.3 s apart; ping idle, under a bulk flow the other way, and
# (through the delay line) beside four spinning processes. At RTT ~0 and at 40 ms. Needs root;
# skips (77) with the reason otherwise. Traffic only between the namespaces made here.
#   tests/bench/link_probe.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$1 src=$2
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
[ -x "$build/delay_line" ] || skip "no delay_line in $build"
p=lp$(($$ % 100000))
trap '"$src/scripts/netns-link" down "$p"' EXIT
ns() { ip netns exec "$@"; }
bucket() {  # BURST: the uplink's tbf bucket, both ways
  ns "${p}ga" tc qdisc replace dev "${p}ua" root tbf rate 100mbit burst "$1" latency 10ms
  ns "${p}gb" tc qdisc replace dev "${p}ub" root tbf rate 100mbit burst "$1" latency 10ms
}
msg() {  # MODE BYTES GAP REPS PORT -> the client's (a0's) milliseconds per round
  ns "${p}b0" timeout 60 /usr/bin/python3 "$src/scripts/netns-msg" "$1" server 10.214.2.10 "$5" "$2" "$3" "$4" > /dev/null &
  sleep 0.5
  ns "${p}a0" timeout 60 /usr/bin/python3 "$src/scripts/netns-msg" "$1" client 10.214.2.10 "$5" "$2" "$3" "$4"
  wait
}
bulk() {  # BYTES PORT -> one flow's MB/s, a0 to b0
  ns "${p}b0" timeout 60 /usr/bin/python3 "$src/scripts/netns-bw" server 10.214.2.10 "$2" 1 &
  sleep 0.5
  ns "${p}a0" timeout 60 /usr/bin/python3 "$src/scripts/netns-bw" client 10.214.2.10 "$2" "$1" | cut -d' ' -f1
  wait
}
ping_avg() { ns "${p}a0" timeout 30 ping -q -n -c "$1" -i 0.05 10.214.2.10 | sed -n 's|.*= \([0-9.]*\)/\([0-9.]*\)/\([0-9.]*\)/.*|\2 ms (max \3)|p'; }
loaded_ping() {  # BYTES: ping a0 -> b0 while b1 sends BYTES to a1 (the replies queue behind them)
  ns "${p}a1" timeout 60 /usr/bin/python3 "$src/scripts/netns-bw" server 10.214.1.11 5399 1 &
  sleep 0.3
  ns "${p}b1" timeout 60 /usr/bin/python3 "$src/scripts/netns-bw" client 10.214.1.11 5399 "$1" > /dev/null &
  sleep 1
  ping_avg 20
  wait
}
for rtt in 0 40; do
  opts=()
  [ "$rtt" = 0 ] || opts=(--rtt "$rtt" --delay-line "$build/delay_line")
  timeout 30 "$src/scripts/netns-link" up "$p" 100mbit "${opts[@]}" > /dev/null 2>&1 ||
    skip "cannot build the namespaces and the uplink (RTT $rtt ms)"
  echo "## RTT $rtt ms (tbf 100 Mbit/s)"
  for b in 256kb 32kb; do
    bucket "$b"
    echo "bucket $b: one bulk flow $(bulk $([ "$rtt" = 0 ] && echo 8000000 || echo 40000000) 5301) MB/s"
    [ "$rtt" = 0 ] || continue
    echo "bucket $b: lone 535816 B message, ms per round, 0.1 s idle before each: $(msg oneway 535816 0.1 8 5302)"
    echo "bucket $b: lone 535816 B message, ms per round, 5 ms idle before each:  $(msg oneway 535816 0.005 8 5303)"
  done
  echo "bucket 32kb: 1071636 B both ways at once, fresh connection, ms per exchange: $(msg twoway 1071636 0.3 6 5304)"
  echo "ping idle: $(ping_avg 20); under a bulk flow the other way: $(loaded_ping $([ "$rtt" = 0 ] && echo 60000000 || echo 80000000))"
  if [ "$rtt" != 0 ]; then
    for _ in 1 2 3 4; do timeout 6 sh -c 'while :; do :; done' & done
    sleep 0.5
    echo "ping beside four spinning processes: $(ping_avg 40)"
    wait
  fi
  "$src/scripts/netns-link" down "$p"
done
