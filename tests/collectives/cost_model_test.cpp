// The alpha-beta-gamma formulas against hand computation, the seed table of docs/references.md
// ("Collectives"), the all-reduce chooser, the plan printer and the topology helpers.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "collectives/netsim/cost_model.h"
#include "collectives/netsim/plan.h"
#include "core/check.h"

namespace laconic {
namespace {

// α = 10 us, 1 GB/s (β = 1 ns/B), γ = 0.1 ns/B, n = 1 MB: α = 1e-5, nβ = 1e-3, nγ = 1e-4.
constexpr LinkSpec kLink{1e9, 1e-5};
constexpr double kN = 1e6, kGamma = 1e-10;

void expect_cost(const Cost& c, double latency, double bandwidth, double reduce) {
  EXPECT_NEAR(c.latency_s, latency, 1e-12 * (1 + latency * 1e9));
  EXPECT_NEAR(c.bandwidth_s, bandwidth, 1e-12 * (1 + bandwidth * 1e9));
  EXPECT_NEAR(c.reduce_s, reduce, 1e-12 * (1 + reduce * 1e9));
}

TEST(CostModel, RingAllReduce) {
  // p = 4: 2·3 = 6 latencies, 2·3/4 = 1.5 nβ, 3/4 nγ.
  expect_cost(ring_all_reduce_cost(kN, 4, kLink, kGamma), 6e-5, 1.5e-3, 0.75e-4);
  expect_cost(ring_all_reduce_cost(kN, 1, kLink, kGamma), 0, 0, 0);
}

TEST(CostModel, RecursiveDoubling) {
  // p = 8: lg 8 = 3 rounds of the whole buffer.
  expect_cost(recursive_doubling_all_reduce_cost(kN, 8, kLink, kGamma), 3e-5, 3e-3, 3e-4);
  // p = 6: p' = 4, two rounds plus the fold in and out (2 messages of n, one extra reduction).
  expect_cost(recursive_doubling_all_reduce_cost(kN, 6, kLink, kGamma), 4e-5, 4e-3, 3e-4);
}

TEST(CostModel, Rabenseifner) {
  // p = 8: 2·3 = 6 latencies, 2·7/8 = 1.75 nβ, 7/8 nγ.
  expect_cost(rabenseifner_all_reduce_cost(kN, 8, kLink, kGamma), 6e-5, 1.75e-3, 0.875e-4);
  // p = 12: p' = 8, plus the fold: 8 latencies, (1.75 + 2) nβ, (0.875 + 1) nγ.
  expect_cost(rabenseifner_all_reduce_cost(kN, 12, kLink, kGamma), 8e-5, 3.75e-3, 1.875e-4);
}

TEST(CostModel, OtherCollectives) {
  expect_cost(ring_reduce_scatter_cost(kN, 4, kLink, kGamma), 3e-5, 0.75e-3, 0.75e-4);
  expect_cost(ring_all_gather_cost(kN, 4, kLink), 3e-5, 0.75e-3, 0);
  expect_cost(tree_broadcast_cost(kN, 5, kLink), 3e-5, 3e-3, 0);  // ⌈lg 5⌉ = 3 rounds
  expect_cost(tree_broadcast_cost(kN, 8, kLink), 3e-5, 3e-3, 0);
  expect_cost(tree_reduce_cost(kN, 8, kLink, kGamma), 3e-5, 3e-3, 3e-4);
  expect_cost(pairwise_all_to_all_cost(kN, 4, kLink), 3e-5, 0.75e-3, 0);  // 3 blocks of n/4
  expect_cost(dissemination_barrier_cost(5, kLink), 3e-5, 0, 0);
  expect_cost(dissemination_barrier_cost(1, kLink), 0, 0, 0);
}

TEST(CostModel, HierarchicalAndBottleneck) {
  // 2 groups of 4; intra 100 GB/s, 1 us; inter 1 GB/s, 1 ms; n = 100 MB.
  //   reduce in group:  ⌈lg 4⌉ = 2 · (1 us + 1 ms)
  //   ring of 2 leaders: 2·1 ms + 2·(1/2)·0.1 s
  //   broadcast:        2 · (1 us + 1 ms)
  const Topology topo = uniform_topology(2, 4, {1e11, 1e-6}, {1e9, 1e-3});
  const double n = 1e8;
  expect_cost(hierarchical_all_reduce_cost(n, topo), 4e-6 + 2e-3, 4e-3 + 0.1, 0);
  // Flat algorithms pay the slow tier on every step.
  const Cost ring = all_reduce_cost(Algorithm::ring, n, topo);
  expect_cost(ring, 14e-3, 1.75 * 0.1, 0);
  // One group: the intra link.
  const Topology one = uniform_topology(1, 8, {1e11, 1e-6}, {1e9, 1e-3});
  expect_cost(all_reduce_cost(Algorithm::ring, n, one), 14e-6, 1.75e-3, 0);
}

TEST(CostModel, SeedTable) {
  // docs/references.md "Collectives": 7B bf16 parameters (14 GB): 0.05 s at N = 8 over 450 GB/s;
  // 0.55 s at N = 64 and 0.56 s at N = 1024 over 50 GB/s. Ring bandwidth term 2(N-1)/N·S/B,
  // quoted to 0.01 s.
  PlanOptions opts;
  opts.algorithms = {Algorithm::ring};
  ASSERT_EQ(plan_bytes(opts), 14e9);
  const auto check = [&](double want_8, double want_64, double want_1024) {
    const std::vector<PlanRow> rows = plan_rows(opts, plan_bytes(opts));
    ASSERT_EQ(rows.size(), 3u);
    const double want[3] = {want_8, want_64, want_1024};
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(std::round(rows[i].cost.total() * 100) / 100, want[i]) << "N = " << rows[i].world_size;
  };
  check(0.05, 0.55, 0.56);  // the default latencies, 1 us and 2 us
  // The bandwidth term alone, exactly: 1.75·14/450, 1.96875·14/50, (2046/1024)·14/50.
  const std::vector<PlanRow> rows = plan_rows(opts, 14e9);
  EXPECT_NEAR(rows[0].cost.bandwidth_s, 1.75 * 14e9 / 450e9, 1e-15);
  EXPECT_NEAR(rows[1].cost.bandwidth_s, 1.96875 * 14e9 / 50e9, 1e-15);
  EXPECT_NEAR(rows[2].cost.bandwidth_s, 2046.0 / 1024 * 14e9 / 50e9, 1e-15);
  EXPECT_EQ(rows[0].groups, 1);
  EXPECT_EQ(rows[2].groups, 128);
  opts.intra.latency_s = opts.inter.latency_s = 0;
  check(0.05, 0.55, 0.56);
  // 5 us per step is too much: the N = 1024 ring pays 2046·5 us = 10 ms more.
  opts.inter.latency_s = 5e-6;
  check(0.05, 0.55, 0.57);
}

TEST(CostModel, ChooserPicksByMessageSize) {
  // One group on 50 GB/s, 2 us.
  const LinkSpec link{50e9, 2e-6};
  const Topology t1024 = uniform_topology(1, 1024, link, link);
  const Topology t1000 = uniform_topology(1, 1000, link, link);
  // 8 bytes on 1024 ranks: 10 latencies (recursive doubling) vs 20 (Rabenseifner) vs 2046 (ring).
  EXPECT_EQ(choose_all_reduce(t1024, 8), Algorithm::recursive_doubling);
  // 1 GB on 1000 ranks: the ring's ~2·S/B beats Rabenseifner's fold (2 more messages of S) and
  // recursive doubling's 11·S/B.
  EXPECT_EQ(choose_all_reduce(t1000, std::size_t{1} << 30), Algorithm::ring);
  // On a power of two the model sees Rabenseifner as the ring's bandwidth with lg p latencies.
  EXPECT_EQ(choose_all_reduce(t1024, std::size_t{1} << 30), Algorithm::rabenseifner);
  ChooserOptions two;
  two.candidates = {Algorithm::ring, Algorithm::recursive_doubling};
  EXPECT_EQ(choose_all_reduce(t1024, std::size_t{1} << 30, two), Algorithm::ring);
  EXPECT_EQ(choose_all_reduce(t1024, 8, two), Algorithm::recursive_doubling);
  // Two datacenters of 8 on 1 Gbit/s, 30 ms: 100 MB crosses the slow link once (hierarchical,
  // ~0.91 s) instead of 1.875 times (ring ~2.4 s, Rabenseifner ~1.74 s).
  const Topology dc = uniform_topology(2, 8, {12.5e9, 5e-6}, {1.25e8, 30e-3});
  EXPECT_EQ(choose_all_reduce(dc, 100'000'000), Algorithm::hierarchical);
  // The chooser for Communicator::set_algorithm_chooser agrees.
  const auto chooser = make_all_reduce_chooser(dc);
  EXPECT_EQ(chooser(100'000'000), Algorithm::hierarchical);
  EXPECT_EQ(chooser(8), choose_all_reduce(dc, 8));
  ChooserOptions bad;
  bad.candidates = {Algorithm::native};
  EXPECT_THROW(make_all_reduce_chooser(dc, bad), Error);
}

TEST(CostModel, NativeIsTheCheapest) {
  const Topology t = uniform_topology(1, 4, kLink, kLink);
  const double n = 16000;  // ring 84 us, Rabenseifner 64 us, recursive doubling 52 us
  EXPECT_NEAR(native_cost(Collective::all_reduce, n, t).total(), 52e-6, 1e-15);
  EXPECT_NEAR(native_cost(Collective::broadcast, n, t).total(), 2 * (1e-5 + 16e-6), 1e-15);
}

TEST(Plan, PrintsEveryWorldSizeAndTheLatencyTable) {
  PlanOptions opts;
  std::ostringstream os;
  print_plan(opts, os);
  const std::string text = os.str();
  EXPECT_NE(text.find("14 GB"), std::string::npos) << text;
  EXPECT_NE(text.find("450 GB/s"), std::string::npos) << text;  // the header, not just numbers
  // N = 8: ring total 0.05444 s + 14 us = 0.05446 s.
  EXPECT_NE(text.find("0.05446"), std::string::npos) << text;
  EXPECT_NE(text.find("hierarchical"), std::string::npos) << text;
  EXPECT_NE(text.find("Small message (4.096 kB)"), std::string::npos) << text;
  // Small messages: the ring's latency term grows linearly, recursive doubling's as lg N.
  const std::vector<PlanRow> small = plan_rows(opts, 4096);
  for (const PlanRow& r : small) {
    const double alpha = r.groups > 1 ? 2e-6 : 1e-6;
    if (r.algorithm == Algorithm::ring) {
      EXPECT_NEAR(r.cost.latency_s, 2.0 * (r.world_size - 1) * alpha, 1e-15);
    }
    if (r.algorithm == Algorithm::recursive_doubling) {
      EXPECT_NEAR(r.cost.latency_s, std::log2(r.world_size) * alpha, 1e-15);
    }
    EXPECT_FALSE(r.algorithm == Algorithm::hierarchical && r.world_size == 8);
  }
}

TEST(Topology, Helpers) {
  const Topology t = grouped_topology(5, 2, {1e10, 1e-6}, {1e8, 1e-3});
  EXPECT_EQ(t.group_of, (std::vector<int>{0, 0, 0, 1, 1}));
  EXPECT_EQ(t.tier(0, 2), 0);
  EXPECT_EQ(t.tier(2, 3), 1);
  EXPECT_EQ(t.num_groups(), 2);
  EXPECT_EQ(t.max_group_size(), 3);
  EXPECT_EQ(t.bottleneck(), (LinkSpec{1e8, 1e-3}));
  EXPECT_DOUBLE_EQ(require_bandwidth("100 Gbit/s", "--inter"), 12.5e9);
  EXPECT_DOUBLE_EQ(require_duration("30ms", "--inter-latency"), 0.03);
  try {
    require_bandwidth("100 Gbps/s", "network.inter_bandwidth");
    ADD_FAILURE() << "no throw";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("network.inter_bandwidth: expected a bandwidth like \"100 Gbit/s\""),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(require_duration("-1 s", "x"), InputError);
}

}  // namespace
}  // namespace laconic
