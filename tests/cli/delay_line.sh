#!/usr/bin/env bash
# The wide-area link of scripts/netns-link --rtt (tools/delay_line.cpp between two TUN devices,
# tbf for the rate): ping's RTT within 5% of the setting; one TCP flow across 100 Mbit/s at 40 ms
# RTT against the bandwidth-delay product and the kernel's largest window; jitter stays within its
# bounds without reordering; loss drops about its fraction; everything it made is gone after
# `down`. Skips (77) with the reason where the machine cannot do it.
#   tests/cli/delay_line.sh TRAINER SOURCE_DIR     (ctest: cli.delay_line; as root)
set -uo pipefail
trainer=$1 src=$2
dl=$(dirname "$trainer")/delay_line
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
[ -x "$dl" ] || skip "no delay line program at $dl (Linux only)"
for c in ip tc ping /usr/bin/python3 timeout; do command -v "$c" >/dev/null || skip "no $c on this machine"; done
[ -c /dev/net/tun ] || skip "no /dev/net/tun on this machine"
p=ld$(($$ % 100000))
ip netns add "${p}probe" 2>/dev/null || skip "cannot create network namespaces here"
ip netns del "${p}probe"
tmp=$(mktemp -d)
cleanup() { "$src/scripts/netns-link" down "$p"; rm -rf "$tmp"; }
trap cleanup EXIT
up() {  # RTT_MS [more options]
  "$src/scripts/netns-link" down "$p"
  timeout 30 "$src/scripts/netns-link" up "$p" 100mbit --delay-line "$dl" --rtt "$@" > "$tmp/setup.log" 2>&1 ||
    skip "cannot build the namespaces and the delayed uplink: $(tail -1 "$tmp/setup.log")"
}
ping_stats() {  # COUNT -> "loss_percent min avg max" of a0 -> b0
  ip netns exec "${p}a0" timeout 60 ping -q -n -c "$1" -i 0.02 10.214.2.10 > "$tmp/ping" 2>&1
  /usr/bin/python3 - "$tmp/ping" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
loss = re.search(r"([\d.]+)% packet loss", t).group(1)
m = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/", t)
print(loss, *(m.groups() if m else ("nan", "nan", "nan")))
PY
}

# 1. RTT: 40 ms, ping's average within 5%; inside a group no delay is added.
up 40
read -r loss min avg max <<< "$(ping_stats 50)"
echo "rtt 40 ms: ping min/avg/max $min/$avg/$max ms, loss $loss%"
/usr/bin/python3 -c "import sys; a=float('$avg'); sys.exit(0 if abs(a/40-1) <= 0.05 else 1)" ||
  fail "ping's average RTT $avg ms is not within 5% of 40 ms"
[ "$loss" = 0 ] || fail "ping lost $loss% of its packets on a lossless link"
intra=$(ip netns exec "${p}a0" timeout 10 ping -q -n -c 5 -i 0.02 10.214.1.11 | sed -n 's|.*= [0-9.]*/\([0-9.]*\)/.*|\1|p')
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$intra') < 2 else 1)" ||
  fail "inside a group the RTT is $intra ms: the delay line holds traffic it should not see"

# 2. One TCP flow: 50 MB across 100 Mbit/s at 40 ms RTT. The bandwidth-delay product is 500 kB;
# the largest window the kernel allows is min(tcp_wmem max, tcp_rmem max): a flow is window-limited
# when that is below the product. Asserted: within [70%, 102%] of min(rate, window / RTT).
ip netns exec "${p}b0" timeout 60 /usr/bin/python3 "$src/scripts/netns-bw" server 10.214.2.10 5310 1 &
sleep 0.5
flow=$(ip netns exec "${p}a0" timeout 60 /usr/bin/python3 "$src/scripts/netns-bw" client 10.214.2.10 5310 50000000)
wait
wmem=$(ip netns exec "${p}a0" sysctl -n net.ipv4.tcp_wmem | awk '{print $3}')
rmem=$(ip netns exec "${p}b0" sysctl -n net.ipv4.tcp_rmem | awk '{print $3}')
cc=$(ip netns exec "${p}a0" sysctl -n net.ipv4.tcp_congestion_control)
/usr/bin/python3 - "$flow" "$wmem" "$rmem" "$cc" <<'PY' || fail "one TCP flow's throughput is off the link's limits"
import sys
mbs = float(sys.argv[1].split()[0])
wmem, rmem, cc = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rate, rtt = 12.5, 0.040                            # MB/s, s
bdp = rate * 1e6 * rtt
window = min(wmem, rmem)
limit = min(rate, window / rtt / 1e6)
kind = "window-limited" if window < bdp else "not window-limited"
print(f"one TCP flow ({cc}): {mbs:.2f} MB/s = {100*mbs/rate:.1f}% of 100 Mbit/s; bandwidth-delay product "
      f"{bdp/1e3:.0f} kB, largest window {window/1e3:.0f} kB ({kind}): expected at most {limit:.2f} MB/s")
sys.exit(0 if 0.70 * limit <= mbs <= 1.02 * rate else 1)
PY

# 3. Jitter 5 ms each way: every RTT within 40 +- 10 ms, and the spread is visible.
up 40 --jitter 5
read -r loss min avg max <<< "$(ping_stats 100)"
echo "rtt 40 ms, jitter 5 ms: ping min/avg/max $min/$avg/$max ms"
/usr/bin/python3 -c "import sys; lo,hi=float('$min'),float('$max'); sys.exit(0 if lo >= 29.5 and hi <= 52 and hi - lo > 2 else 1)" ||
  fail "with 5 ms of jitter each way the RTTs spread over $min..$max ms (expected within 30..50, wider than 2 ms)"

# 4. Loss 0.2 each way: a ping survives both ways with 0.64; 300 pings lose 36% +- 10%.
up 10 --loss 0.2
read -r loss min avg max <<< "$(ping_stats 300)"
echo "loss 0.2 each way: ping lost $loss% (expected 36%)"
/usr/bin/python3 -c "import sys; sys.exit(0 if 26 <= float('$loss') <= 46 else 1)" ||
  fail "with 20% loss each way ping lost $loss% of its round trips (expected 36 +- 10%)"

# 5. down removes the namespaces, the bridge and the delay line.
pid=$(cat "/run/netns-link-$p.pid")
"$src/scripts/netns-link" down "$p"
ip netns list | grep -q "^$p" && fail "namespaces $p* remain after down"
kill -0 "$pid" 2>/dev/null && fail "the delay line (pid $pid) still runs after down"
[ -e "/run/netns-link-$p.pid" ] && fail "the pid file remains after down"
echo "delay line: RTT, one flow, jitter, loss and clean-up as set"
