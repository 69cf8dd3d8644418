#!/usr/bin/env bash
# Several TCP streams per peer on a wide-area link (issue 31 item 3): two gloo ranks in two
# "datacenters" (scripts/netns-link --rtt, 100 Mbit/s) time an all-reduce with 1 and with 4 TCP
# connections per pair (collbench --backend gloo --streams), with the kernel's own socket buffers
# and with each namespace's TCP buffers capped (net.ipv4.tcp_rmem/tcp_wmem max = CAP_KIB), where
# one connection is window-limited. Beside each, the replay's model (sim/replay.h TransportModel):
#   time of one ring step = latency + bytes / min(rate, k · window / RTT)
# with nothing fitted: the rate is the tbf rate times TCP's payload share of a 1500-byte packet
# (1448 bytes with timestamps), the window half the socket buffer's limit (the kernel advertises
# about half its receive buffer: tcp_adv_win_scale = 1, or the ratio newer kernels measure, ~50%).
# The window one stream achieved (its throughput × RTT) is printed beside it. Needs root; skips
# (77) with the reason otherwise.
#   tests/bench/streams_link.sh BUILD_DIR SOURCE_DIR     (RTT_MS=40 BYTES=8388608 CAP_KIB=128 ITERS=3)
set -uo pipefail
build=$1 src=$2
rtt=${RTT_MS:-40} bytes=${BYTES:-8388608} cap=${CAP_KIB:-128} iters=${ITERS:-3}
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
[ -x "$build/collbench" ] && [ -x "$build/delay_line" ] || skip "no collbench or delay_line in $build"
[ -c /dev/net/tun ] || skip "no /dev/net/tun on this machine"
p=ls$(($$ % 100000))
tmp=$(mktemp -d)
cleanup() { "$src/scripts/netns-link" down "$p"; rm -rf "$tmp"; }
trap cleanup EXIT
timeout 30 "$src/scripts/netns-link" up "$p" 100mbit --delay-line "$build/delay_line" --rtt "$rtt" > "$tmp/setup.log" 2>&1 ||
  skip "cannot build the namespaces and the delayed uplink: $(tail -1 "$tmp/setup.log")"

run() {  # STREAMS -> seconds per all-reduce (collbench's time column)
  local store="$tmp/store-$RANDOM"
  mkdir -p "$store"
  local r=0
  for n in a0 b0; do
    local addr=10.214.1.10
    [ "$n" = b0 ] && addr=10.214.2.10
    ip netns exec "$p$n" env LACONIC_RANK=$r LACONIC_WORLD_SIZE=2 LACONIC_STORE="file:$store" LACONIC_ADDRESS=$addr \
      timeout 300 "$build/collbench" --backend gloo --streams "$1" --algo ring -b "$bytes" -e "$bytes" \
      --iters "$iters" --warmup 1 > "$tmp/rank$r.out" 2>&1 &
    r=$((r + 1))
  done
  wait
  awk '!/^#/ && NF >= 9 {printf "%.4f\n", $6 / 1e6}' "$tmp/rank0.out" | head -1 | grep . ||
    { echo "collbench failed:" >&2; cat "$tmp"/rank*.out >&2; exit 1; }
}
# The same over MPI (OpenMPI's TCP transport, btl_tcp_links connections per peer: what
# distributed.streams sets), when mpirun and an MPI collbench are here.
export PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include="${p}c"
run_mpi() {  # LINKS -> seconds per all-reduce, or nothing
  timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl tcp,self \
    --mca btl_tcp_if_include 10.214.0.0/16 --mca oob_tcp_if_include 10.213.0.0/24 --mca btl_tcp_links "$1" \
    -np 1 ip netns exec "${p}a0" "$build/collbench" --backend mpi --algo ring -b "$bytes" -e "$bytes" --iters "$iters" --warmup 1 : \
    -np 1 ip netns exec "${p}b0" "$build/collbench" --backend mpi --algo ring -b "$bytes" -e "$bytes" --iters "$iters" --warmup 1 \
    > "$tmp/mpi.out" 2>&1 || return 0
  awk '!/^#/ && NF >= 9 {printf "%.4f\n", $6 / 1e6}' "$tmp/mpi.out" | head -1
}
mpi_ok=0
command -v mpirun > /dev/null && "$build/collbench" --backend mpi -b 8 -e 8 --iters 1 > /dev/null 2>&1 && mpi_ok=1

echo "# ${rtt} ms RTT, 100 Mbit/s, two gloo ranks across the link, ring all-reduce of $bytes bytes"
echo "# (2 ring steps, each $((bytes / 2)) bytes both ways), $iters iterations after 1 warm-up"
echo "| transport, socket buffers | streams | measured s | throughput per direction MB/s | model s |"
echo "| --- | --- | --- | --- | --- |"
for buffers in kernel cap; do
  if [ "$buffers" = cap ]; then
    for n in a0 b0; do
      ip netns exec "$p$n" sysctl -qw net.ipv4.tcp_rmem="4096 65536 $((cap * 1024))" net.ipv4.tcp_wmem="4096 65536 $((cap * 1024))"
    done
    label="capped at $cap KiB"
  else
    label="kernel's ($(ip netns exec "${p}b0" sysctl -n net.ipv4.tcp_rmem | awk '{print $3}') B rmem max)"
  fi
  buf=$(( $(ip netns exec "${p}b0" sysctl -n net.ipv4.tcp_rmem | awk '{print $3}') ))
  wbuf=$(( $(ip netns exec "${p}a0" sysctl -n net.ipv4.tcp_wmem | awk '{print $3}') ))
  [ "$wbuf" -lt "$buf" ] && buf=$wbuf
  for transport in gloo mpi; do
  if [ "$transport" = gloo ]; then
    one=$(run 1)
    four=$(run 4)
  else
    [ "$mpi_ok" = 1 ] || { echo "# MPI: no mpirun or no MPI in collbench here: skipped"; continue; }
    one=$(run_mpi 1)
    four=$(run_mpi 4)
    [ -n "$one" ] && [ -n "$four" ] || { echo "# MPI: mpirun failed:"; tail -5 "$tmp/mpi.out"; continue; }
  fi
  /usr/bin/python3 - "$transport, $label" "$one" "$four" "$bytes" "$rtt" "$buf" <<'PY'
import sys
label, one, four, size, rtt = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]) / 1e3
rate, lat, step = 100e6 / 8 * 1448 / 1500, rtt / 2, size / 2
window = int(sys.argv[6]) / 2  # network.tcp_window_kib of the replay
achieved = step / (one / 2 - lat) * rtt
def model(k):
    return 2 * (lat + step / min(rate, k * window / rtt))
for k, t in ((1, one), (4, four)):
    print(f"| {label} | {k} | {t:.3f} | {step / (t / 2 - lat) / 1e6:.2f} | {model(k):.3f} ({(model(k) / t - 1) * 100:+.1f}%) |")
print(f"# {label}: modelled window {window / 1024:.0f} KiB (one stream achieved {achieved / 1024:.0f} KiB per RTT); "
      f"4 streams {one / four:.2f}x faster than 1")
PY
  done
done
