// Hierarchical composition on a simulated two-tier network (bytes per tier against the formula,
// replicas identical) and strategy schedules (each phase's strategy runs its steps, boundaries
// leave identical replicas).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "collectives/netsim/sim_communicator.h"
#include "collectives/netsim/topology.h"
#include "collectives/threads/threads_communicator.h"
#include "framework/sync/composite.h"
#include "framework/sync/periodic.h"
#include "optimizers/sgd.h"
#include "tests/sync/small_store.h"

namespace laconic {
namespace {

constexpr std::size_t kN = kSmallStoreSize;


float grad(int rank, int step, std::size_t i) {
  return std::sin(0.3f * static_cast<float>(i) + static_cast<float>(rank) + 1.7f * static_cast<float>(step));
}

// One rank's run of `steps` SGD steps through `sync` on a simulated network of `groups` groups;
// returns the parameters after each step and rank's per-tier bytes sent.
struct RankRun {
  std::vector<float> params;  // steps x kN
  std::uint64_t intra = 0, inter = 0;
};

template <class MakeSync>
std::vector<RankRun> run(int world, int groups, int steps, MakeSync make_sync) {
  std::vector<RankRun> out(static_cast<std::size_t>(world));
  run_threads(world, [&](Communicator& base) {
    SimCommunicator comm(base, grouped_topology(world, groups, LinkSpec{12.5e9, 5e-6}, LinkSpec{1.25e8, 30e-3}));
    ParamStore s = small_store();
    for (std::size_t i = 0; i < kN; ++i) s.params()[i] = 0.01f * static_cast<float>(i) + static_cast<float>(comm.rank());
    std::unique_ptr<SyncStrategy> sync = make_sync();
    Sgd sgd(SgdOptions{});
    sync->start(s, comm);
    const auto after_start = comm.tiers();
    RankRun& mine = out[static_cast<std::size_t>(comm.rank())];
    for (int step = 0; step < steps; ++step) {
      for (std::size_t i = 0; i < kN; ++i) s.grads()[i] = grad(comm.rank(), step, i);
      sync->after_backward(step);
      sgd.step(s, 0.1);
      sync->after_update(step);
      mine.params.insert(mine.params.end(), s.params().begin(), s.params().end());
    }
    mine.intra = comm.tier_bytes(0).sent - after_start[0].sent;
    mine.inter = comm.tier_bytes(1).sent - after_start[1].sent;
  });
  return out;
}

bool same_step(const std::vector<RankRun>& runs, int step) {
  for (const auto& r : runs)
    if (std::memcmp(r.params.data() + step * kN, runs[0].params.data() + step * kN, kN * sizeof(float)) != 0)
      return false;
  return true;
}

TEST(Hierarchical, DenseBetweenGroupsSendsTheFormulasBytesPerTier) {
  // 2 groups of 2 ranks, dense fp32 data parallel between the leaders. Per step and per rank:
  // inside, a ring all-reduce of 2 ranks (2 (L-1)/L * 4n = 4n bytes); between leaders, the same
  // over 2 leaders (4n); then each leader broadcasts the result to its other member (4n).
  constexpr int kSteps = 3;
  const auto runs = run(4, 2, kSteps, [] {
    return std::make_unique<Hierarchical>(std::make_unique<DataParallel>(DataParallelOptions{25.0, false},
                                                                         std::make_unique<DenseReducer>()));
  });
  const std::uint64_t b = 4 * kN;
  for (int r = 0; r < 4; ++r) {
    const bool leader = r % 2 == 0;
    EXPECT_EQ(runs[r].inter, leader ? kSteps * b : 0u) << "rank " << r;
    EXPECT_EQ(runs[r].intra, kSteps * (leader ? 2 * b : b)) << "rank " << r;
  }
  for (int step = 0; step < kSteps; ++step) EXPECT_TRUE(same_step(runs, step)) << step;
  // And it is the average of all four ranks' gradients (SGD lr 0.1 from rank 0's start).
  for (std::size_t i = 0; i < kN; ++i) {
    float mean = 0;
    for (int r = 0; r < 4; ++r) mean += grad(r, 0, i);
    EXPECT_NEAR(runs[0].params[i], 0.01f * static_cast<float>(i) - 0.1f * mean / 4, 1e-6f) << i;
  }
}

TEST(Hierarchical, DilocoBetweenGroupsCrossesTheSlowLinkEveryHSteps) {
  // 2 groups of 3 ranks; DiLoCo (H = 4) between the leaders: inter bytes only at outer steps, a
  // 2-leader ring all-reduce of the pseudo-gradient (4n), so 1/H of per-step dense traffic.
  constexpr int kSteps = 8, kH = 4;
  const auto runs = run(6, 2, kSteps, [] {
    return std::make_unique<Hierarchical>(
        std::make_unique<PeriodicAveraging>(diloco_options(kH), std::make_unique<DenseReducer>()));
  });
  EXPECT_EQ(runs[0].inter, static_cast<std::uint64_t>(kSteps / kH) * 4 * kN);
  EXPECT_EQ(runs[3].inter, static_cast<std::uint64_t>(kSteps / kH) * 4 * kN);
  EXPECT_EQ(runs[1].inter, 0u);
  for (int step = 0; step < kSteps; ++step) {
    // Inside a group replicas never differ; between groups they agree right after outer steps.
    EXPECT_EQ(std::memcmp(runs[0].params.data() + step * kN, runs[2].params.data() + step * kN, kN * 4), 0);
    EXPECT_EQ(std::memcmp(runs[3].params.data() + step * kN, runs[5].params.data() + step * kN, kN * 4), 0);
    EXPECT_EQ(same_step(runs, step), (step + 1) % kH == 0) << step;
  }
}

TEST(Phased, EachPhaseRunsItsStrategyAndBoundariesLeaveIdenticalReplicas) {
  // Local SGD (H = 3) for 4 steps (a boundary mid-period: finish() averages), then all-reduce.
  constexpr int kSteps = 7;
  const auto runs = run(2, 2, kSteps, [] {
    std::vector<Phased::Phase> phases;
    phases.push_back({0, std::make_unique<PeriodicAveraging>(local_sgd_options(3), std::make_unique<DenseReducer>())});
    phases.push_back({4, std::make_unique<DataParallel>(DataParallelOptions{25.0, false}, std::make_unique<DenseReducer>())});
    return std::make_unique<Phased>(std::move(phases));
  });
  EXPECT_FALSE(same_step(runs, 0));
  EXPECT_FALSE(same_step(runs, 1));
  EXPECT_TRUE(same_step(runs, 2));   // local SGD's sync
  EXPECT_TRUE(same_step(runs, 3));   // the boundary: finish() averaged
  for (int step = 4; step < kSteps; ++step) EXPECT_TRUE(same_step(runs, step)) << step;  // all-reduce
  // Bytes after start: 2 parameter averages (the sync, the boundary) and 3 gradient all-reduces;
  // each of the 5 averages a 2-rank ring all-reduce of 4n bytes (all inter-group: 1 rank each).
  EXPECT_EQ(runs[0].inter + runs[0].intra, 5u * 4 * kN);
}

// A phase is bound when it takes over: at start only the one running at the first step (one
// broadcast for the whole schedule, not one per phase), the next at its boundary; a run resumed
// inside a later phase binds that phase at start.
TEST(Phased, APhaseIsBoundWhenItTakesOver) {
  const auto schedule = [] {
    std::vector<Phased::Phase> phases;
    phases.push_back({0, std::make_unique<DataParallel>(DataParallelOptions{25.0, false}, std::make_unique<DenseReducer>())});
    phases.push_back({2, std::make_unique<PeriodicAveraging>(local_sgd_options(2), std::make_unique<DenseReducer>())});
    phases.push_back({6, std::make_unique<DataParallel>(DataParallelOptions{25.0, false}, std::make_unique<DenseReducer>())});
    return std::make_unique<Phased>(std::move(phases));
  };
  const auto names = [](SyncStrategy& sync) {
    std::vector<std::string> out;
    for (const StateTensor& t : sync.state()) out.push_back(t.name);
    return out;
  };
  run_threads(2, [&](Communicator& comm) {
    ParamStore s = small_store();
    DataParallel plain({25.0, false}, std::make_unique<DenseReducer>());
    plain.start(s, comm);
    const std::uint64_t one_start = comm.bytes().sent;
    auto sync = schedule();
    sync->start(s, comm);
    EXPECT_EQ(comm.bytes().sent - one_start, one_start) << "start broadcasts once, not once per phase";
    EXPECT_TRUE(names(*sync).empty());  // phase 0 has no state; phase 1 is not bound yet
    Sgd sgd(SgdOptions{});
    for (int step = 0; step < 2; ++step) {
      for (std::size_t i = 0; i < kN; ++i) s.grads()[i] = grad(comm.rank(), step, i);
      sync->after_backward(step);
      sgd.step(s, 0.1);
      sync->after_update(step);
    }
    EXPECT_EQ(names(*sync), std::vector<std::string>{"phase1.periodic.global"});

    auto resumed = schedule();
    resumed->start(s, comm, /*first_step=*/3);
    EXPECT_EQ(names(*resumed), std::vector<std::string>{"phase1.periodic.global"});
  });
}

}  // namespace
}  // namespace laconic
