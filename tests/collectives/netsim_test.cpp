// SimCommunicator: virtual clocks against schedules worked out by hand from each algorithm's
// message order (never from the cost model), per-tier byte counts against the algorithms' byte
// formulas, stragglers, native collectives, and results identical to the inner communicator's.
#include <gtest/gtest.h>

#include <array>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "collectives/netsim/sim_communicator.h"
#include "collectives/threads/threads_communicator.h"
#include "core/check.h"

namespace laconic {
namespace {

// Two groups of two ranks: {0, 1} and {2, 3}.
//   intra: 100 Gbit/s = 12.5e9 B/s, 5 us;   inter: 1 Gbit/s = 1.25e8 B/s, 30 ms.
constexpr LinkSpec kIntra{12.5e9, 5e-6};
constexpr LinkSpec kInter{1.25e8, 30e-3};

Topology two_by_two(LinkSpec inter = kInter) { return uniform_topology(2, 2, kIntra, inter); }

// Relative comparison: clocks are sums of a dozen terms, exact to a few ulps.
void expect_time(double got, double want, int rank) {
  EXPECT_NEAR(got, want, 1e-12 * want) << "rank " << rank;
}

struct PerRank {
  std::vector<double> clock = std::vector<double>(4);
  std::vector<double> comm = std::vector<double>(4);
  std::vector<std::array<ByteCounters, 2>> tiers = std::vector<std::array<ByteCounters, 2>>(4);
  std::vector<ByteCounters> sim = std::vector<ByteCounters>(4), inner = std::vector<ByteCounters>(4);
};

// Ring all-reduce of S = 4·c bytes on 2x2 (each of the 6 steps moves one chunk of c bytes).
// Rank r sends to r+1 and receives from r-1: ranks 0 and 2 receive over the inter link and send
// over the intra one, ranks 1 and 3 the reverse. By symmetry clock(0) = clock(2) = u and
// clock(1) = clock(3) = v, and each sendrecv step gives (sI = c/B_intra, sX = c/B_inter,
// a = α_intra + sI, b = α_inter + sX):
//   u' = max(u + sI, v + b)      (own send to an intra peer, or the message from an inter peer)
//   v' = max(v + sX, u + a)
PerRank run_ring(const Topology& topo, std::size_t floats) {
  PerRank out;
  run_threads(4, [&](Communicator& inner) {
    SimCommunicator sim(inner, topo);
    std::vector<float> x(floats, 1.0f);
    const ByteCounters before = inner.bytes();
    sim.all_reduce(x, ReduceOp::sum);
    const int r = sim.rank();
    out.clock[r] = sim.clock();
    out.comm[r] = sim.comm_time();
    out.tiers[r] = sim.tiers();
    out.sim[r] = sim.bytes();
    const ByteCounters after = inner.bytes();
    out.inner[r] = {after.sent - before.sent, after.recv - before.recv, after.messages_sent - before.messages_sent};
    EXPECT_EQ(x[0], 4.0f);
  });
  return out;
}

TEST(SimCommunicator, RingAllReduceLatencyBoundClocks) {
  // c = 1 MiB: sX = 8.39 ms > a = 89 us, and sX < α_inter + a, so every inter message waits on
  // its predecessor (latency-bound). Step by step from u = v = 0:
  //   1: u = b,            v = sX
  //   2: u = sX + b,       v = b + a
  //   3: u = 2b + a,       v = b + a + sX
  //   4: u = 2b + a + sX,  v = 2b + 2a
  //   5: u = 3b + 2a,      v = 2b + 2a + sX
  //   6: u = 3b + 2a + sX, v = 3b + 3a
  const double c = 1 << 20;
  const double sI = c / kIntra.bandwidth_Bps, sX = c / kInter.bandwidth_Bps;
  const double a = kIntra.latency_s + sI, b = kInter.latency_s + sX;
  const PerRank got = run_ring(two_by_two(), 4 * (1 << 20) / sizeof(float));
  for (int r : {0, 2}) expect_time(got.clock[r], 3 * b + 2 * a + sX, r);
  for (int r : {1, 3}) expect_time(got.clock[r], 3 * b + 3 * a, r);
  for (int r = 0; r < 4; ++r) expect_time(got.comm[r], got.clock[r], r);  // all of it is communication

  // Bytes: the ring moves 2(N-1)/N·S = 6 chunks each way per rank, all on one tier per direction.
  const std::uint64_t moved = 6 * (1u << 20);
  for (int r = 0; r < 4; ++r) {
    const int send_tier = r % 2 == 0 ? 0 : 1, recv_tier = 1 - send_tier;
    EXPECT_EQ(got.tiers[r][send_tier].sent, moved) << r;
    EXPECT_EQ(got.tiers[r][send_tier].messages_sent, 6u) << r;
    EXPECT_EQ(got.tiers[r][recv_tier].sent, 0u) << r;
    EXPECT_EQ(got.tiers[r][recv_tier].recv, moved) << r;
    EXPECT_EQ(got.tiers[r][send_tier].recv, 0u) << r;
    // The wrapper counts payload only; inner also carries one 8-byte timestamp per message.
    EXPECT_EQ(got.sim[r].sent, moved);
    EXPECT_EQ(got.sim[r].recv, moved);
    EXPECT_EQ(got.sim[r].messages_sent, 6u);
    EXPECT_EQ(got.inner[r].sent, moved + 6 * 8);
    EXPECT_EQ(got.inner[r].recv, moved + 6 * 8);
    EXPECT_EQ(got.inner[r].messages_sent, 12u);
  }
}

TEST(SimCommunicator, RingAllReduceBandwidthBoundClocks) {
  // Inter latency 100 us and c = 64 KiB: sX = 524 us > α_inter + a = 110 us, so ranks 1 and 3
  // are never idle: v = k·sX after step k, and u = max(u + sI, v + b) = (k-1)·sX + b.
  // After 6 steps: v = 6·sX, u = 5·sX + b = 6·sX + α_inter (the last chunk's flight time).
  const LinkSpec inter{1.25e8, 100e-6};
  const double sX = 65536 / inter.bandwidth_Bps;
  const PerRank got = run_ring(two_by_two(inter), 4 * 65536 / sizeof(float));
  for (int r : {0, 2}) expect_time(got.clock[r], 6 * sX + inter.latency_s, r);
  for (int r : {1, 3}) expect_time(got.clock[r], 6 * sX, r);
}

TEST(SimCommunicator, BroadcastClocksAndTierBytes) {
  // Binomial tree from root 0 (broadcast_tree.h): 0 sends to 2 (inter) then to 1 (intra); 2
  // forwards to 3 (intra). TX = S/B_inter, TI = S/B_intra. The root's second send leaves at TX.
  //   clock(0) = TX + TI
  //   clock(1) = TX + α_intra + TI                 (arrival of the root's second message)
  //   clock(2) = α_inter + TX + TI                 (arrival, then its own send)
  //   clock(3) = α_inter + TX + α_intra + TI       (2's message left at α_inter + TX)
  const std::size_t S = 1000000;
  const double TX = S / kInter.bandwidth_Bps, TI = S / kIntra.bandwidth_Bps;
  const double want[4] = {TX + TI, TX + kIntra.latency_s + TI, kInter.latency_s + TX + TI,
                          kInter.latency_s + TX + kIntra.latency_s + TI};
  PerRank got;
  run_threads(4, [&](Communicator& inner) {
    SimCommunicator sim(inner, two_by_two());
    std::vector<std::uint8_t> data(S, sim.rank() == 0 ? 7 : 0);
    sim.broadcast(data.data(), S, 0);
    EXPECT_EQ(data[S - 1], 7);
    got.clock[sim.rank()] = sim.clock();
    got.tiers[sim.rank()] = sim.tiers();
  });
  for (int r = 0; r < 4; ++r) expect_time(got.clock[r], want[r], r);
  // sent/recv per tier: {intra sent, intra recv, inter sent, inter recv}.
  const std::uint64_t expect[4][4] = {{S, 0, S, 0}, {0, S, 0, 0}, {S, 0, 0, S}, {0, S, 0, 0}};
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(got.tiers[r][0].sent, expect[r][0]) << r;
    EXPECT_EQ(got.tiers[r][0].recv, expect[r][1]) << r;
    EXPECT_EQ(got.tiers[r][1].sent, expect[r][2]) << r;
    EXPECT_EQ(got.tiers[r][1].recv, expect[r][3]) << r;
  }
}

TEST(SimCommunicator, StragglerDelaysTheRing) {
  // One group of 4 on α = 10 us, 1 GB/s; rank 2 computes at half speed. Every rank computes
  // 50 ms (rank 2: 100 ms), then a ring all-reduce of 4 chunks of c = 4000 bytes (s = c/B = 4 us
  // to send, a = α + s = 14 us per hop). Each step a rank either waits on its own send (+s) or on
  // its predecessor's message (+a), so its final clock is the longest such path. Rank 2 starts
  // 50 ms late, far more than the 6·(a - s) any other path can gain, so every clock is
  //   100 ms + m·a + (6 - m)·s,   m = the most hops from rank 2 to r in 6 steps (m ≡ r - 2 mod 4):
  //   r = 2: m = 4; r = 3: m = 5; r = 0: m = 6; r = 1: m = 3 (7 hops would need 7 steps).
  // Without the straggler every clock would be 50 ms + 6a.
  Topology topo = uniform_topology(1, 4, {1e9, 1e-5}, {1e9, 1e-5});
  set_stragglers(topo, {2}, 2.0);
  const double s = 4000 / 1e9, a = 1e-5 + s;
  const int hops[4] = {6, 3, 4, 5};
  std::vector<double> clocks(4), comm(4);
  run_threads(4, [&](Communicator& inner) {
    SimCommunicator sim(inner, topo);
    sim.advance_compute(0.05);
    std::vector<float> x(4000, 1.0f);  // 16000 bytes: 4 chunks of 4000
    sim.all_reduce(x, ReduceOp::sum);
    clocks[sim.rank()] = sim.clock();
    comm[sim.rank()] = sim.comm_time();
  });
  for (int r = 0; r < 4; ++r) {
    expect_time(clocks[r], 0.1 + hops[r] * a + (6 - hops[r]) * s, r);
    expect_time(comm[r], clocks[r] - (r == 2 ? 0.1 : 0.05), r);  // waiting for the straggler is communication
  }
}

TEST(SimCommunicator, NativeCollectiveSynchronisesThenChargesTheModel) {
  // Native all-reduce of S = 16000 bytes on one group of 4 (α = 10 us, 1 GB/s): a tuned library
  // is charged its cheapest algorithm. Ring 6α + 1.5·S/B = 84 us, Rabenseifner 4α + 1.5·S/B =
  // 64 us, recursive doubling 2α + 2·S/B = 52 us: 52 us, after the slowest rank (rank 2 at
  // 100 ms) joins. Every rank ends at 100 ms + 52 us.
  Topology topo = uniform_topology(1, 4, {1e9, 1e-5}, {1e9, 1e-5});
  set_stragglers(topo, {2}, 2.0);
  std::vector<double> clocks(4);
  std::vector<ByteCounters> bytes(4);
  run_threads(4, [&](Communicator& inner) {
    SimCommunicator sim(inner, topo);
    sim.set_algorithm(Algorithm::native);
    sim.advance_compute(0.05);
    std::vector<float> x(4000, static_cast<float>(sim.rank()));
    sim.all_reduce(x, ReduceOp::sum);
    EXPECT_EQ(x[3999], 6.0f);
    clocks[sim.rank()] = sim.clock();
    bytes[sim.rank()] = sim.bytes();
  });
  for (int r = 0; r < 4; ++r) {
    expect_time(clocks[r], 0.1 + 2 * (1e-5 + 16000 / 1e9), r);
    // nccl-tests bus bytes of an all-reduce: 2(N-1)/N·S = 24000.
    EXPECT_EQ(bytes[r].sent, 24000u);
    EXPECT_EQ(bytes[r].recv, 24000u);
  }
}

// Values that make a sum depend on its order, so any change of algorithm or fold would show.
float value(int r, std::size_t i) { return std::sin(0.37f * static_cast<float>(i) + 1.3f * static_cast<float>(r)) * 1e3f; }

TEST(SimCommunicator, ResultsAreTheInnerCommunicatorsBits) {
  const std::size_t n = 1001;
  for (Algorithm alg : {Algorithm::ring, Algorithm::recursive_doubling, Algorithm::rabenseifner,
                        Algorithm::hierarchical, Algorithm::native}) {
    run_threads(4, [&](Communicator& inner) {
      const int r = inner.rank();
      std::vector<float> direct(n), wrapped(n);
      for (std::size_t i = 0; i < n; ++i) direct[i] = wrapped[i] = value(r, i);
      inner.set_groups(two_by_two().group_of);
      inner.set_algorithm(alg == Algorithm::native ? Algorithm::ring : alg);
      inner.all_reduce(direct, ReduceOp::avg);
      SimCommunicator sim(inner, two_by_two());
      sim.set_algorithm(alg);
      sim.all_reduce(wrapped, ReduceOp::avg);
      EXPECT_EQ(std::memcmp(direct.data(), wrapped.data(), n * sizeof(float)), 0) << name_of(alg);
      EXPECT_GT(sim.clock(), 0.0);

      // reduce-scatter and all-gather through the wrapper match inner's too.
      std::vector<float> rs_direct(n), rs_wrapped(n), ag_direct(4 * n), ag_wrapped(4 * n), all(4 * n);
      for (std::size_t i = 0; i < all.size(); ++i) all[i] = value(r, i);
      const CBuf all_buf{all.data(), all.size(), DType::f32};
      inner.reduce_scatter(all_buf, buf(std::span<float>(rs_direct)), ReduceOp::sum);
      sim.reduce_scatter(all_buf, buf(std::span<float>(rs_wrapped)), ReduceOp::sum);
      EXPECT_EQ(rs_direct, rs_wrapped);
      inner.all_gather(CBuf{direct.data(), n, DType::f32}, buf(std::span<float>(ag_direct)));
      sim.all_gather(CBuf{direct.data(), n, DType::f32}, buf(std::span<float>(ag_wrapped)));
      EXPECT_EQ(ag_direct, ag_wrapped);
    });
  }
}

TEST(SimCommunicator, HierarchicalKeepsInterTrafficOnLeaders) {
  // hierarchical.h on 2x2: leaders 0 and 2 alone cross groups (a ring of two leaders moves S each
  // way); non-leaders 1 and 3 only talk inside their group (send S up, receive S back).
  const std::size_t floats = 1000, S = floats * sizeof(float);
  std::vector<std::array<ByteCounters, 2>> tiers(4);
  run_threads(4, [&](Communicator& inner) {
    SimCommunicator sim(inner, two_by_two());
    sim.set_algorithm(Algorithm::hierarchical);
    std::vector<float> x(floats, 1.0f);
    sim.all_reduce(x, ReduceOp::sum);
    EXPECT_EQ(x[0], 4.0f);
    tiers[sim.rank()] = sim.tiers();
  });
  for (int r = 0; r < 4; ++r) {
    const bool leader = r % 2 == 0;
    EXPECT_EQ(tiers[r][0].sent, S) << r;
    EXPECT_EQ(tiers[r][0].recv, S) << r;
    EXPECT_EQ(tiers[r][1].sent, leader ? S : 0u) << r;
    EXPECT_EQ(tiers[r][1].recv, leader ? S : 0u) << r;
  }
}

TEST(SimCommunicator, RejectsAMismatchedTopology) {
  run_threads(2, [&](Communicator& inner) {
    EXPECT_THROW((SimCommunicator{inner, two_by_two()}), Error);
  });
}

}  // namespace
}  // namespace laconic
