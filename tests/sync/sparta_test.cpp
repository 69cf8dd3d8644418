// SPARTA (framework/sync/sparta.h): the chosen elements are replaced by their average over the
// ranks and no other changes (the replicas' mean kept), the choice is the same on every rank and
// chooses about fraction x n elements, only the chosen values cross the wire and only every
// `period` steps; fraction 1 every step is data parallelism (plain SGD) up to rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "collectives/threads/threads_communicator.h"
#include "compression/reducer.h"
#include "framework/sync/sparta.h"
#include "optimizers/sgd.h"
#include "tests/sync/small_store.h"

namespace laconic {
namespace {

float value(int rank, std::size_t i, std::int64_t step) {
  return std::sin(0.37f * static_cast<float>(i) + 1.3f * static_cast<float>(rank) + 0.2f * static_cast<float>(step));
}

TEST(Sparta, TheChosenElementsBecomeTheirAverageAndNothingElseMoves) {
  constexpr int kRanks = 3;
  constexpr std::size_t kN = 20000;
  constexpr double kFraction = 0.3;
  std::vector<std::vector<float>> before(kRanks), after(kRanks);
  std::vector<std::uint64_t> sent(kRanks), sent_off(kRanks);
  std::size_t chosen = 0;
  std::vector<bool> mask(kN);
  run_threads(kRanks, [&](Communicator& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    ParamStore s;
    s.add("w", {200, 100}, ParamGroup::decay);
    s.finalize();
    for (std::size_t i = 0; i < kN; ++i) s.params()[i] = value(comm.rank(), i, 0);
    Sparta sync({kFraction, 2, 7});
    sync.bind(s, comm);  // replicas that differ (start() would broadcast rank 0's)
    before[r].assign(s.params().begin(), s.params().end());
    std::uint64_t b0 = comm.bytes().sent;
    EXPECT_FALSE(sync.after_update(0));  // period 2: step 0 does not sync
    sent_off[r] = comm.bytes().sent - b0;
    b0 = comm.bytes().sent;
    EXPECT_TRUE(sync.after_update(1));
    sent[r] = comm.bytes().sent - b0;
    after[r].assign(s.params().begin(), s.params().end());
    if (r == 0) {
      for (std::size_t i = 0; i < kN; ++i) mask[i] = sync.chosen(1, i);
      for (std::size_t i = 0; i < kN; ++i) chosen += mask[i];
    }
  });
  // About fraction x n chosen (within 5 standard deviations of the binomial).
  const double mean = kFraction * kN, sd = std::sqrt(kN * kFraction * (1 - kFraction));
  EXPECT_NEAR(static_cast<double>(chosen), mean, 5 * sd);
  for (std::size_t i = 0; i < kN; ++i) {
    double avg = 0, kept = 0, moved = 0;
    for (int r = 0; r < kRanks; ++r) avg += before[r][i] / kRanks;
    for (int r = 0; r < kRanks; ++r) {
      kept += before[r][i];
      moved += after[r][i];
      if (mask[i]) ASSERT_NEAR(after[r][i], avg, 1e-6) << i;
      else ASSERT_EQ(after[r][i], before[r][i]) << i;
    }
    ASSERT_NEAR(moved, kept, 1e-5) << i;  // the replicas' mean is kept
  }
  // Only the chosen values travel: a ring all-reduce of `chosen` floats, every rank the same.
  std::vector<std::uint64_t> ring(kRanks);
  run_threads(kRanks, [&](Communicator& comm) {
    std::vector<float> x(chosen, 1.0f);
    const std::uint64_t b0 = comm.bytes().sent;
    comm.all_reduce(std::span<float>(x), ReduceOp::avg);
    ring[static_cast<std::size_t>(comm.rank())] = comm.bytes().sent - b0;
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(sent_off[r], 0u);
    EXPECT_EQ(sent[r], ring[r]);
  }
  EXPECT_LT(sent[0], 0.5 * 2.0 * kN * sizeof(float));  // far below a dense all-reduce
}

TEST(Sparta, FractionOneEveryStepIsDataParallelWithPlainSgd) {
  constexpr int kRanks = 3, kSteps = 6;
  std::vector<std::vector<float>> got(2);
  for (int variant = 0; variant < 2; ++variant)
    run_threads(kRanks, [&](Communicator& comm) {
      ParamStore s = small_store();
      for (std::size_t i = 0; i < s.size(); ++i) s.params()[i] = value(0, i, 0);
      std::unique_ptr<SyncStrategy> sync;
      if (variant == 0) sync = std::make_unique<Sparta>(SpartaOptions{1.0, 1, 3});
      else sync = std::make_unique<DataParallel>(DataParallelOptions{25.0, false}, std::make_unique<DenseReducer>());
      Sgd opt(SgdOptions{});
      sync->start(s, comm);
      for (std::int64_t step = 0; step < kSteps; ++step) {
        for (std::size_t i = 0; i < s.size(); ++i)  // each rank's own gradient, from its parameters
          s.grads()[i] = s.params()[i] * (1.0f + 0.1f * static_cast<float>(comm.rank())) - value(comm.rank(), i, step);
        sync->after_backward(step);
        opt.step(s, 0.1);
        sync->after_update(step);
        EXPECT_TRUE(sync->replicas_agree_after(step));
      }
      if (comm.rank() == 1) got[static_cast<std::size_t>(variant)].assign(s.params().begin(), s.params().end());
    });
  ASSERT_EQ(got[0].size(), kSmallStoreSize);
  for (std::size_t i = 0; i < kSmallStoreSize; ++i) EXPECT_NEAR(got[0][i], got[1][i], 1e-5) << i;
}

}  // namespace
}  // namespace laconic
