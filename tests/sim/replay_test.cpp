// The SimGrid replay (sim/replay.h) on hand-made traces, against closed forms: one message, two
// flows sharing an uplink, a ring all-reduce, overlap of async work with compute, determinism.
#include "sim/replay.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "collectives/collectives.h"

namespace laconic {
namespace {

constexpr double kBw = 1e9, kLat = 1e-4;         // intra: 1 GB/s, 100 us
constexpr double kWanBw = 1e7, kWanLat = 1e-2;  // inter: 10 MB/s, 10 ms

TraceEvent ev(TraceKind k, double t0, double t1, std::int32_t a = 0, std::uint64_t bytes = 0) {
  TraceEvent e;
  e.kind = k;
  e.t0 = t0;
  e.t1 = t1;
  e.a = a;
  e.bytes = bytes;
  return e;
}
TraceEvent sendrecv(double t, int to, int from, std::uint64_t bytes) {
  TraceEvent e = ev(TraceKind::sendrecv, t, t, to, bytes);
  e.b = from;
  e.bytes2 = bytes;
  return e;
}
TraceEvent native(Collective c, double t, std::uint64_t bytes, int p) {
  TraceEvent e = ev(TraceKind::native, t, t, 0, bytes);
  e.sub = static_cast<std::uint8_t>(c);
  e.b = p;
  return e;
}
TraceEvent span(TraceKind k, SpanKind s, double t) {
  TraceEvent e = ev(k, t, t);
  e.sub = static_cast<std::uint8_t>(s);
  return e;
}

std::vector<RankTrace> empty_trace(int n) {
  std::vector<RankTrace> t(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    for (int l = 0; l < 2; ++l) t[static_cast<std::size_t>(r)].lanes[l] = TraceLane{.rank = r, .size = n, .lane = l, .version = 3, .events = {}};
  return t;
}
std::vector<TraceEvent>& lane(std::vector<RankTrace>& t, int r, int l) {
  return t[static_cast<std::size_t>(r)].lanes[l].events;
}

ReplayNetwork network(int n, int groups, InterLink link = InterLink::shared) {
  ReplayNetwork net;
  net.topo = grouped_topology(n, groups, LinkSpec{kBw, kLat}, LinkSpec{kWanBw, kWanLat});
  net.inter_link = link;
  return net;
}

TEST(Replay, OneMessageTakesLatencyPlusBytesOverBandwidth) {
  constexpr std::uint64_t S = 1'000'000;
  auto t = empty_trace(2);
  lane(t, 0, 0).push_back(ev(TraceKind::send, 0, 0, 1, S));
  lane(t, 1, 0).push_back(ev(TraceKind::recv, 0, 0, 0, S));
  const ReplayResult one = replay(t, network(2, 1), {});
  EXPECT_NEAR(one.time_s, kLat + S / kBw, 1e-9);
  const ReplayResult across = replay(t, network(2, 2), {});
  EXPECT_NEAR(across.time_s, kWanLat + S / kWanBw, 1e-9);
  EXPECT_EQ(across.ranks[0].tiers[1].sent, S);
  EXPECT_EQ(across.ranks[1].tiers[1].recv, S);
  EXPECT_EQ(across.ranks[0].tiers[0].sent, 0u);
}

// With a rendezvous protocol, a message above the eager limit first makes its round trips (a
// request, then the receiver's clear-to-send: two route latencies each, the first request carrying
// the first eager-limit bytes); one at or below the limit flows when sent. A ring all-reduce pays
// it on every one of its 2(p-1) steps.
TEST(Replay, ARendezvousDelaysMessagesAboveTheEagerLimitByItsRoundTrips) {
  constexpr std::uint64_t S = 1'000'000;
  auto t = empty_trace(2);
  lane(t, 0, 0).push_back(ev(TraceKind::send, 0, 0, 1, S));
  lane(t, 1, 0).push_back(ev(TraceKind::recv, 0, 0, 0, S));
  ReplayNetwork net = network(2, 2);
  net.protocol = {.eager_limit_bytes = S, .rendezvous_round_trips = 2};
  EXPECT_NEAR(replay(t, net, {}).time_s, kWanLat + S / kWanBw, 1e-9);  // at the limit: eager
  net.protocol.eager_limit_bytes = S - 1;
  EXPECT_NEAR(replay(t, net, {}).time_s, 2 * 2 * kWanLat + kWanLat + S / kWanBw, 1e-9);

  constexpr int p = 4;
  auto ring = empty_trace(p);
  for (int r = 0; r < p; ++r) lane(ring, r, 0).push_back(native(Collective::all_reduce, 0, 8 * S, p));
  ReplayNetwork one_group = network(p, 1);
  for (const int rounds : {1, 2}) {
    one_group.protocol = {.eager_limit_bytes = 65536, .rendezvous_round_trips = rounds};
    const double want = 2.0 * (p - 1) * (rounds * 2 * kLat + kLat + 8.0 * S / p / kBw);
    EXPECT_NEAR(replay(ring, one_group, {}).time_s, want, want * 1e-9) << rounds << " round trips";
  }
}

// Rank 0 sends S bytes across the uplink, then computes C; rank 1 computes D, then receives them.
// A buffered send is done once handed to the transport: eagerly at once, with a rendezvous once
// the clear-to-send has come back, which the receiver sends only when its receive is posted.
TEST(Replay, BufferedSendsAndTheRendezvousWaitForWhatTheProtocolSays) {
  constexpr std::uint64_t S = 1'000'000, E = 65'536;
  constexpr double C = 0.05, L = kWanLat, B = kWanBw;
  const auto trace = [&](double d) {
    auto t = empty_trace(2);
    auto& a = lane(t, 0, 0);
    a.push_back(ev(TraceKind::send, 0, 0, 1, S));
    a.push_back(span(TraceKind::span_begin, SpanKind::forward_backward, 0));
    a.push_back(span(TraceKind::span_end, SpanKind::forward_backward, C));
    auto& b = lane(t, 1, 0);
    b.push_back(span(TraceKind::span_begin, SpanKind::forward_backward, 0));
    b.push_back(span(TraceKind::span_end, SpanKind::forward_backward, d));
    b.push_back(ev(TraceKind::recv, d, d, 0, S));
    return t;
  };
  ReplayNetwork net = network(2, 2);
  const auto ends = [&](MessageProtocol m, double d) {
    net.protocol = m;
    const ReplayResult res = replay(trace(d), net, {});
    return std::pair{res.ranks[0].end_s, res.ranks[1].end_s};
  };
  // Eager: unbuffered, the sender waits for the arrival; buffered, it does not wait at all.
  auto [s0, r0] = ends({.eager_limit_bytes = S}, 0.5);
  EXPECT_NEAR(s0, L + S / B + C, 1e-9);
  EXPECT_NEAR(r0, 0.5, 1e-9);  // arrived at 0.11 s, before the receive was posted
  std::tie(s0, r0) = ends({.eager_limit_bytes = S, .buffered = true}, 0.5);
  EXPECT_NEAR(s0, C, 1e-9);
  EXPECT_NEAR(r0, 0.5, 1e-9);
  // Rendezvous, buffered, the receive posted at once: the request (E bytes) and its answer, then
  // the rest; the sender is done when the answer is back.
  const MessageProtocol openmpi{.eager_limit_bytes = E, .rendezvous_round_trips = 1, .buffered = true};
  std::tie(s0, r0) = ends(openmpi, 0);
  EXPECT_NEAR(s0, 2 * L + E / B + C, 1e-9);
  EXPECT_NEAR(r0, 3 * L + S / B, 1e-9);
  // The receive posted at 0.5 s, long after the request arrived: the answer leaves then.
  std::tie(s0, r0) = ends(openmpi, 0.5);
  EXPECT_NEAR(s0, 0.5 + L + C, 1e-9);
  EXPECT_NEAR(r0, 0.5 + 2 * L + (S - E) / B, 1e-9);
}

// TCP's slow start (TransportModel::initial_window_bytes): a connection sends a window per round
// trip, doubling it, until the window holds the bandwidth-delay product; the rest flows at the
// bandwidth, and the connection keeps its window for the next message. Each direction is a
// connection of its own.
TEST(Replay, SlowStartTakesItsRoundTripsOncePerConnection) {
  constexpr std::uint64_t S = 1'000'000;
  constexpr double rtt = 2 * kWanLat;  // 20 ms at 10 MB/s: a product of 200 kB
  double w = 1e4;
  // 10, 20, 40, 80, 160 kB in five round trips; then 690 kB at the bandwidth.
  EXPECT_NEAR(slow_start_time(S, w, kWanBw, rtt), 5 * rtt + 690e3 / kWanBw, 1e-12);
  EXPECT_DOUBLE_EQ(w, 320e3);
  EXPECT_NEAR(slow_start_time(S, w, kWanBw, rtt), S / kWanBw, 1e-12);  // open now
  w = 1e4;  // ending within a round: its start plus its bytes; that round was not full, no growth
  EXPECT_NEAR(slow_start_time(25'000, w, kWanBw, rtt), rtt + 15e3 / kWanBw, 1e-12);
  EXPECT_DOUBLE_EQ(w, 2e4);

  auto t = empty_trace(2);
  for (int i = 0; i < 2; ++i) {
    lane(t, 0, 0).push_back(ev(TraceKind::send, 0, 0, 1, S));
    lane(t, 1, 0).push_back(ev(TraceKind::recv, 0, 0, 0, S));
  }
  lane(t, 1, 0).push_back(ev(TraceKind::send, 0, 0, 0, S));  // the other direction: cold
  lane(t, 0, 0).push_back(ev(TraceKind::recv, 0, 0, 1, S));
  ReplayNetwork net = network(2, 2);
  const double warm = kWanLat + S / kWanBw, cold = kWanLat + 5 * rtt + 690e3 / kWanBw;
  EXPECT_NEAR(replay(t, net, {}).time_s, 3 * warm, 1e-9);
  net.transport.initial_window_bytes = 10'000;
  EXPECT_NEAR(replay(t, net, {}).time_s, cold + warm + cold, 1e-9);
}

// A protocol per link tier (ReplayNetwork::inter): a message inside a group pays `protocol`, one
// between groups the inter tier's (its rendezvous and its slow start); without `inter`, and with
// an `inter` equal to `protocol`, every message pays `protocol`, to the bit.
TEST(Replay, EachLinkTierPaysItsOwnProtocol) {
  constexpr std::uint64_t S = 1'000'000, E = 65'536;
  const auto one_message = [](int to) {
    auto t = empty_trace(4);  // groups {0, 1} and {2, 3}
    lane(t, 0, 0).push_back(ev(TraceKind::send, 0, 0, to, S));
    lane(t, to, 0).push_back(ev(TraceKind::recv, 0, 0, 0, S));
    return t;
  };
  const auto inside = one_message(1), across = one_message(2);
  ReplayNetwork net = network(4, 2);
  net.protocol = {.eager_limit_bytes = E, .rendezvous_round_trips = 2};
  net.inter = InterTier{.protocol = {.eager_limit_bytes = E, .rendezvous_round_trips = 1}};
  EXPECT_NEAR(replay(inside, net, {}).time_s, 2 * 2 * kLat + kLat + S / kBw, 1e-9);
  EXPECT_NEAR(replay(across, net, {}).time_s, 2 * kWanLat + kWanLat + S / kWanBw, 1e-9);
  // Eager across, from a window of 10 kB: 10, 20, 40, 80, 160 kB in five round trips, then the rest.
  net.inter = InterTier{.protocol = {}, .initial_window_bytes = 10'000};
  EXPECT_NEAR(replay(across, net, {}).time_s, kWanLat + 5 * 2 * kWanLat + 690e3 / kWanBw, 1e-9);
  EXPECT_NEAR(replay(inside, net, {}).time_s, 2 * 2 * kLat + kLat + S / kBw, 1e-9);  // no slow start inside

  net.inter.reset();  // every link pays `protocol`, with or without an equal `inter`
  const double was_inside = replay(inside, net, {}).time_s, was_across = replay(across, net, {}).time_s;
  EXPECT_NEAR(was_across, 2 * 2 * kWanLat + kWanLat + S / kWanBw, 1e-9);
  net.inter = InterTier{.protocol = net.protocol};
  EXPECT_EQ(replay(inside, net, {}).time_s, was_inside);
  EXPECT_EQ(replay(across, net, {}).time_s, was_across);
}

// One sendrecv whose send crosses to the other group while its receive comes from inside: each
// direction under its own tier's protocol (an eager receive taken for a rendezvous would deadlock).
TEST(Replay, ASendrecvAcrossTiersSendsAndReceivesUnderEachTiersProtocol) {
  constexpr std::uint64_t S = 1'000'000, E = 65'536;
  auto t = empty_trace(4);
  lane(t, 0, 0).push_back(ev(TraceKind::send, 0, 0, 1, S));
  lane(t, 1, 0).push_back(sendrecv(0, 2, 0, S));
  lane(t, 2, 0).push_back(ev(TraceKind::recv, 0, 0, 1, S));
  ReplayNetwork net = network(4, 2);
  net.inter = InterTier{.protocol = {.eager_limit_bytes = E, .rendezvous_round_trips = 1}};
  const ReplayResult res = replay(t, net, {});
  EXPECT_NEAR(res.ranks[0].end_s, kLat + S / kBw, 1e-9);                // eager inside
  EXPECT_NEAR(res.ranks[1].end_s, 3 * kWanLat + S / kWanBw, 1e-9);      // unbuffered: until it arrived
  EXPECT_NEAR(res.ranks[2].end_s, 3 * kWanLat + S / kWanBw, 1e-9);      // one round trip, then the rest
}

// A projected ring replayed as flows (NativeScope) pays each step's handshake as latency: the most
// round trips any tier its links cross asks, so a group's ring pays the intra tier's and a ring
// across the groups the larger of the two.
TEST(Replay, RingsAsFlowsPayTheRoundTripsOfTheTiersTheyCross) {
  constexpr std::uint64_t S = 8'000'000, E = 65'536;
  constexpr int p = 4;
  const auto ring = [](NativeScope scope) {
    auto t = empty_trace(p);
    for (int r = 0; r < p; ++r) {
      TraceEvent e = native(Collective::all_reduce, 0, S, p);
      e.tier = expand_as(Algorithm::ring);
      e.tier2 = static_cast<std::uint8_t>(scope);
      lane(t, r, 0).push_back(e);
    }
    return t;
  };
  ReplayOptions flows;
  flows.message_level_ranks = 1;
  ReplayNetwork net = network(p, 2);
  net.inter = InterTier{.protocol = {.eager_limit_bytes = E, .rendezvous_round_trips = 1}};
  // The world's ring: 2(p - 1) steps of S/p at the uplink's rate behind the slowest latency.
  const auto world = [&](int rounds) { return 2 * (p - 1) * kWanLat * (1 + 2 * rounds) + 2.0 * (p - 1) * S / p / kWanBw; };
  EXPECT_NEAR(replay(ring(NativeScope::world), net, flows).time_s, world(1), world(1) * 1e-9);
  net.protocol = {.eager_limit_bytes = E, .rendezvous_round_trips = 2};
  EXPECT_NEAR(replay(ring(NativeScope::world), net, flows).time_s, world(2), world(2) * 1e-9);
  // A group's ring (2 ranks: 2 steps of S/2) stays inside: the intra tier's 2 round trips.
  const double group = 2 * kLat * (1 + 2 * 2) + 2.0 * S / 2 / kBw;
  EXPECT_NEAR(replay(ring(NativeScope::group), net, flows).time_s, group, group * 1e-9);
}

// Several TCP streams through one window-limited link (TransportModel): one stream moves at most
// window / RTT, k streams k times that until they fill the link, so one message across takes
// latency + S / min(bandwidth, k · window / RTT); a message below split_bytes uses one stream.
TEST(Replay, StreamsThroughAWindowLimitedLinkFollowTheClosedForm) {
  constexpr std::uint64_t S = 1'000'000, W = 25'000;  // one window per 20 ms round trip: 1.25 MB/s
  constexpr double rtt = 2 * kWanLat;
  auto t = empty_trace(2);
  lane(t, 0, 0).push_back(ev(TraceKind::send, 0, 0, 1, S));
  lane(t, 1, 0).push_back(ev(TraceKind::recv, 0, 0, 0, S));
  auto sr = empty_trace(2);  // both ways at once
  for (int r = 0; r < 2; ++r) lane(sr, r, 0).push_back(sendrecv(0, 1 - r, 1 - r, S));
  ReplayNetwork net = network(2, 2);
  net.transport.window_bytes = W;
  for (int k : {1, 2, 4, 8, 16}) {
    SCOPED_TRACE(k);
    net.transport.streams = k;
    const double want = kWanLat + S / std::min(kWanBw, k * W / rtt);
    EXPECT_NEAR(replay(t, net, {}).time_s, want, want * 1e-9);
    EXPECT_NEAR(replay(sr, net, {}).time_s, want, want * 1e-9);  // each direction has its own bandwidth
    const ReplayResult res = replay(t, net, {});
    EXPECT_EQ(res.ranks[0].tiers[1].sent, S);  // k streams carry exactly the bytes of one
    EXPECT_EQ(res.ranks[0].tiers[1].messages_sent, 1u);
  }
  net.transport.streams = 4;
  net.transport.split_bytes = S + 1;  // below it: one stream
  EXPECT_NEAR(replay(t, net, {}).time_s, kWanLat + S * rtt / W, 1e-9);
  net.transport.window_bytes = 0;  // no window: streams change nothing
  net.transport.split_bytes = 1;
  EXPECT_NEAR(replay(t, net, {}).time_s, kWanLat + S / kWanBw, 1e-9);
}

// Ranks 0, 1 in one group each send S to ranks 2, 3 in the other: through one shared uplink they
// take twice as long as one flow; with a private link per pair (the old clock's model), as one.
TEST(Replay, TwoFlowsThroughOneUplinkShareItsBandwidth) {
  constexpr std::uint64_t S = 1'000'000;
  auto t = empty_trace(4);
  for (int r = 0; r < 2; ++r) {
    lane(t, r, 0).push_back(ev(TraceKind::send, 0, 0, r + 2, S));
    lane(t, r + 2, 0).push_back(ev(TraceKind::recv, 0, 0, r, S));
  }
  const double one_flow = kWanLat + S / kWanBw;
  const ReplayResult shared = replay(t, network(4, 2, InterLink::shared), {});
  EXPECT_NEAR(shared.time_s, kWanLat + 2 * S / kWanBw, 1e-9);
  const ReplayResult per_pair = replay(t, network(4, 2, InterLink::per_pair), {});
  EXPECT_NEAR(per_pair.time_s, one_flow, 1e-9);
}

// A native all-reduce is expanded into the ring's 2(p-1) steps of S/p bytes each way.
TEST(Replay, RingAllReduceMatchesTheClosedForm) {
  constexpr std::uint64_t S = 8'000'000;
  for (int p : {2, 4, 8}) {
    auto t = empty_trace(p);
    for (int r = 0; r < p; ++r) lane(t, r, 0).push_back(native(Collective::all_reduce, 0, S, p));
    const ReplayResult res = replay(t, network(p, 1), {});
    const double want = 2.0 * (p - 1) * (kLat + static_cast<double>(S) / p / kBw);
    EXPECT_NEAR(res.time_s, want, want * 1e-9) << p << " ranks";
    EXPECT_EQ(res.ranks[0].tiers[0].sent, 2u * static_cast<std::uint64_t>(p - 1) * (S / static_cast<std::uint64_t>(p)));
  }
}

// Small native collectives (the control plane's) are latency-bound: an all-reduce is replayed as a
// reduce to rank 0 and its broadcast (2 lg p rounds, what the 8-byte stop agreement measures on a
// real link), an all-gather on a power-of-two world as recursive doubling (lg p exchanges); not as
// the ring's 2(p - 1) or p - 1 steps.
TEST(Replay, SmallNativeCollectivesAreTreesOrRecursiveDoubling) {
  for (int p : {2, 4, 8}) {
    const int rounds = p == 2 ? 1 : p == 4 ? 2 : 3;
    for (Collective c : {Collective::all_reduce, Collective::all_gather}) {
      auto t = empty_trace(p);
      for (int r = 0; r < p; ++r) lane(t, r, 0).push_back(native(c, 0, 8u * static_cast<unsigned>(p), p));
      const ReplayResult res = replay(t, network(p, 1), {});
      const int latencies = c == Collective::all_reduce ? 2 * rounds : rounds;
      EXPECT_NEAR(res.time_s, latencies * kLat, kLat * 0.01) << p << " ranks, " << name_of(c);
    }
  }
}

// Native broadcast and reduce are replayed as the binomial trees Laconic runs: ceil(lg p) rounds.
TEST(Replay, TreeCollectivesTakeLogPRounds) {
  constexpr std::uint64_t S = 4'000'000;
  for (const Collective c : {Collective::broadcast, Collective::reduce})
    for (int p : {2, 4, 8}) {
      auto t = empty_trace(p);
      for (int r = 0; r < p; ++r) {
        TraceEvent e = native(c, 0, S, p);
        e.a = 1;  // root
        lane(t, r, 0).push_back(e);
      }
      const ReplayResult res = replay(t, network(p, 1), {});
      const double rounds = std::ceil(std::log2(p));
      EXPECT_NEAR(res.time_s, rounds * (kLat + S / kBw), 1e-9) << name_of(c) << " on " << p << " ranks";
    }
}

// Rank r: forward/backward from t = 0 to 1 s, issuing an async ring step at 0.5 s and waiting for
// it after backward; or (blocking) the same step after backward. The step takes about 0.1 s.
std::vector<RankTrace> overlap_trace(bool overlapped) {
  constexpr std::uint64_t S = 100'000'000;  // 0.1 s at 1 GB/s
  auto t = empty_trace(2);
  for (int r = 0; r < 2; ++r) {
    auto& l0 = lane(t, r, 0);
    l0.push_back(ev(TraceKind::step, 0, 0, 0));
    l0.push_back(span(TraceKind::span_begin, SpanKind::forward_backward, 0));
    if (overlapped) {
      l0.push_back(ev(TraceKind::issue, 0.5, 0.5, 0));
      l0.push_back(span(TraceKind::span_end, SpanKind::forward_backward, 1.0));
      l0.push_back(ev(TraceKind::wait, 1.0, 1.0, 0));
      auto& l1 = lane(t, r, 1);
      l1.push_back(ev(TraceKind::begin, 0.5, 0.5, 0));
      l1.push_back(sendrecv(0.5, 1 - r, 1 - r, S));
      l1.push_back(ev(TraceKind::end, 0.5, 0.5, 0));
    } else {
      l0.push_back(span(TraceKind::span_end, SpanKind::forward_backward, 1.0));
      l0.push_back(sendrecv(1.0, 1 - r, 1 - r, S));
    }
    l0.push_back(ev(TraceKind::step, 1.0, 1.0, 1));
  }
  return t;
}

TEST(Replay, AsyncWorkThatFitsInBackwardIsHidden) {
  const double comm = kLat + 1e8 / kBw;
  const ReplayResult hidden = replay(overlap_trace(true), network(2, 1), {});
  EXPECT_NEAR(hidden.time_s, 1.0, 1e-9);
  EXPECT_NEAR(hidden.ranks[0].exposed_s, 0.0, 1e-9);
  EXPECT_NEAR(hidden.ranks[0].compute_s, 1.0, 1e-9);
  const ReplayResult serial = replay(overlap_trace(false), network(2, 1), {});
  EXPECT_NEAR(serial.time_s, 1.0 + comm, 1e-9);
  EXPECT_NEAR(serial.ranks[0].exposed_s, comm, 1e-9);
  ASSERT_EQ(serial.ranks[0].step_begin.size(), 2u);
  EXPECT_NEAR(serial.ranks[0].step_begin[1], 1.0 + comm, 1e-9);
  // Modeled compute: the step's forward/backward becomes modeled_step_s, wherever the issue was.
  ReplayOptions modeled;
  modeled.modeled = true;
  modeled.modeled_step_s = 0.1;
  const ReplayResult m = replay(overlap_trace(true), network(2, 1), modeled);
  EXPECT_NEAR(m.time_s, 0.05 + comm, 1e-9);  // issued half way through (0.05 s), outlasting backward
}

TEST(Replay, IsDeterministicAndScalesWithAsParams) {
  const ReplayResult a = replay(overlap_trace(false), network(2, 1), {});
  const ReplayResult b = replay(overlap_trace(false), network(2, 1), {});
  EXPECT_EQ(a.time_s, b.time_s);
  EXPECT_EQ(a.ranks[1].exposed_s, b.ranks[1].exposed_s);
  ReplayOptions twice;
  twice.scale = 2;
  const ReplayResult c = replay(overlap_trace(false), network(2, 1), twice);
  EXPECT_NEAR(c.time_s, 2.0 + kLat + 2e8 / kBw, 1e-9);
}

// A user's SimGrid platform file instead of [network]: its first N hosts are the ranks, its
// routes the links (here one link of 10 MB/s and 1 ms).
TEST(Replay, RunsOnAUsersPlatformFile) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("laconic-platform-" + std::to_string(::getpid()) + ".xml")).string();
  std::ofstream(path) << R"(<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <zone id="lab" routing="Full">
    <host id="node-0" speed="1Gf"/>
    <host id="node-1" speed="1Gf"/>
    <link id="wire" bandwidth="10MBps" latency="1ms"/>
    <route src="node-0" dst="node-1"><link_ctn id="wire"/></route>
  </zone>
</platform>
)";
  constexpr std::uint64_t S = 1'000'000;
  auto t = empty_trace(2);
  lane(t, 0, 0).push_back(ev(TraceKind::send, 0, 0, 1, S));
  lane(t, 1, 0).push_back(ev(TraceKind::recv, 0, 0, 0, S));
  ReplayNetwork net;
  net.platform_file = path;
  const ReplayResult r = replay(t, net, {});
  std::filesystem::remove(path);
  EXPECT_NEAR(r.time_s, 1e-3 + S / 1e7, 1e-9);
  EXPECT_NE(r.engine.find(path), std::string::npos) << r.engine;
  // Too few hosts for the trace: a reason, not a crash.
  std::ofstream(path) << "<?xml version='1.0'?>\n<platform version=\"4.1\"><zone id=\"z\" routing=\"Full\">"
                         "<host id=\"only\" speed=\"1Gf\"/></zone></platform>\n";
  EXPECT_THROW(replay(t, net, {}), Error);
  std::filesystem::remove(path);
}

void expect_refused(const std::vector<RankTrace>& t, const std::string& why) {
  try {
    replay(t, network(2, 1), {});
    ADD_FAILURE() << "replayed a trace that would wait forever: " << why;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

TEST(Replay, AMismatchedTraceFailsWithAReason) {
  auto waits = empty_trace(2);
  lane(waits, 0, 0).push_back(ev(TraceKind::wait, 0, 0, 0));  // waits for an operation never issued
  expect_refused(waits, "waits for async operation 0, of which only 0 were issued");
  auto unpaired = empty_trace(2);
  lane(unpaired, 0, 0).push_back(ev(TraceKind::send, 0, 0, 1, 8));  // rank 1 never receives it
  expect_refused(unpaired, "rank 0 sent 1 messages to rank 1 on lane 0, which received 0");
  auto unrun = empty_trace(2);
  lane(unrun, 1, 0).push_back(ev(TraceKind::issue, 0, 0, 0));  // issued, never run on lane 1
  expect_refused(unrun, "rank 1 issued 1 async operations, its lane 1 ran 0");
}

}  // namespace
}  // namespace laconic
