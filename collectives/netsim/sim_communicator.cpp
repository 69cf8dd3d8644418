#include "collectives/netsim/sim_communicator.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/check.h"

namespace laconic {

SimCommunicator::SimCommunicator(Communicator& inner, const Topology& topo, SimOptions opts)
    : inner_(inner), topo_(topo), model_(topo, opts.cost),
      clocks_(static_cast<std::size_t>(inner.size())) {
  LC_CHECK(topo.size() == inner.size(), "simulated topology has ", topo.size(), " ranks, the communicator ",
           inner.size());
  set_groups(topo_.group_of);
}

void SimCommunicator::advance_compute(double seconds) {
  LC_CHECK(seconds >= 0, "advance_compute(", seconds, ")");
  clock_ += seconds * topo_.slowdown_of(rank());
}

double SimCommunicator::serialise(std::size_t n, int peer) const {
  return static_cast<double>(n) / topo_.link(topo_.tier(rank(), peer)).bandwidth_Bps;
}

double SimCommunicator::arrival(double sent_at, std::size_t n, int peer) const {
  const LinkSpec& l = topo_.link(topo_.tier(peer, rank()));
  return sent_at + l.latency_s + static_cast<double>(n) / l.bandwidth_Bps;
}

void SimCommunicator::set_clock(double t) {
  if (t <= clock_) return;
  comm_time_ += t - clock_;
  clock_ = t;
}

// ---- point-to-point: the timestamp, then the payload, both through inner ----

void SimCommunicator::do_send(const void* data, std::size_t bytes, int peer) {
  const double sent_at = clock_;
  inner_.send(&sent_at, sizeof sent_at, peer);
  inner_.send(data, bytes, peer);
  set_clock(sent_at + serialise(bytes, peer));
}

void SimCommunicator::do_recv(void* data, std::size_t bytes, int peer) {
  double sent_at = 0;
  inner_.recv(&sent_at, sizeof sent_at, peer);
  inner_.recv(data, bytes, peer);
  set_clock(arrival(sent_at, bytes, peer));
}

void SimCommunicator::do_sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                                  std::size_t recv_bytes, int from) {
  const double sent_at = clock_;
  double peer_sent_at = 0;
  inner_.sendrecv(&sent_at, sizeof sent_at, to, &peer_sent_at, sizeof peer_sent_at, from);
  inner_.sendrecv(send_data, send_bytes, to, recv_data, recv_bytes, from);
  // Full duplex: the outgoing serialisation and the incoming message overlap.
  set_clock(std::max(sent_at + serialise(send_bytes, to), arrival(peer_sent_at, recv_bytes, from)));
}

// ---- native collectives: forwarded to inner, charged by the cost model ----

namespace {
// nccl-tests bus bytes of one rank (docs/references.md, "Collectives") for a collective on `bytes`.
double bus_bytes(Collective c, double bytes, int p) {
  const double ring_share = static_cast<double>(p - 1) / p;
  switch (c) {
    case Collective::all_reduce: return 2 * ring_share * bytes;
    case Collective::reduce_scatter:
    case Collective::all_gather:
    case Collective::all_to_all: return ring_share * bytes;
    case Collective::reduce:
    case Collective::broadcast: return bytes;
    case Collective::barrier: return 0;
  }
  return 0;
}
}  // namespace

void SimCommunicator::charge_native(const CollectiveCall& call) {
  const int p = size();
  const Collective c = call.kind;
  // The size the cost model charges: the whole buffer (reduce-scatter and all-to-all: the input).
  const auto bytes = static_cast<double>(
      c == Collective::reduce_scatter || c == Collective::all_to_all ? call.send.bytes() : call.data.bytes());
  // A native collective ends no earlier than its last rank joins it.
  inner_.all_gather(CBuf{&clock_, sizeof clock_, DType::u8},
                    Buf{clocks_.data(), clocks_.size() * sizeof(double), DType::u8});
  set_clock(*std::max_element(clocks_.begin(), clocks_.end()) + model_.native(c, bytes).total());
  if (p == 1) return;
  // Messages: one per ring step (barrier: one per dissemination round; broadcast/reduce: one).
  std::uint64_t messages = 1;
  if (c == Collective::all_reduce) messages = 2 * static_cast<std::uint64_t>(p - 1);
  if (c == Collective::reduce_scatter || c == Collective::all_gather || c == Collective::all_to_all)
    messages = static_cast<std::uint64_t>(p - 1);
  if (c == Collective::barrier) messages = std::bit_width(static_cast<unsigned>(p - 1));  // ⌈lg p⌉
  const auto n = static_cast<std::uint64_t>(std::llround(bus_bytes(c, bytes, p)));
  count(n, n, messages);  // attributed like a ring: sent on tier(r, r+1), received on tier(r-1, r)
}

bool SimCommunicator::native(const CollectiveCall& call) {
  if (algorithm() != Algorithm::native) return false;
  inner_.collective(call);
  charge_native(call);
  return true;
}

}  // namespace laconic
