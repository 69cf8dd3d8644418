#include "workloads/data/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "core/check.h"

namespace laconic {
namespace {

using Indices = std::vector<std::int64_t>;

SamplerOptions options(std::int64_t n, int world, int rank, int micro, std::uint64_t seed = 7) {
  return {.dataset_size = n, .seed = seed, .world_size = world, .rank = rank, .micro_batch = micro};
}

// The next `steps` micro-batches of `s`, concatenated.
Indices take(ShardedSampler& s, std::int64_t steps) {
  Indices out;
  for (std::int64_t i = 0; i < steps; ++i) {
    const auto b = s.next();
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

TEST(ShardedSampler, EachEpochIsAPermutationWithoutTheDroppedTail) {
  for (std::int64_t n : {100, 103, 1}) {
    const int micro = n == 1 ? 1 : 10;
    ShardedSampler s(options(n, 1, 0, micro));
    EXPECT_EQ(s.steps_per_epoch(), n / micro);
    for (int epoch = 0; epoch < 3; ++epoch) {
      const Indices seen = take(s, s.steps_per_epoch());
      const std::set<std::int64_t> distinct(seen.begin(), seen.end());
      EXPECT_EQ(distinct.size(), seen.size()) << "n=" << n << " epoch " << epoch << " repeats an index";
      EXPECT_EQ(static_cast<std::int64_t>(seen.size()), n / micro * micro);
      EXPECT_GE(*distinct.begin(), 0);
      EXPECT_LT(*distinct.rbegin(), n);
    }
  }
}

TEST(ShardedSampler, RanksAreDisjointAndCoverTheEpoch) {
  const std::int64_t n = 60;  // 5 global batches of 3 x 4, nothing dropped
  std::set<std::int64_t> all;
  std::int64_t total = 0;
  for (int r = 0; r < 3; ++r) {
    ShardedSampler s(options(n, 3, r, 4));
    ASSERT_EQ(s.steps_per_epoch(), 5);
    for (std::int64_t i : take(s, 5)) {
      all.insert(i);
      ++total;
    }
  }
  EXPECT_EQ(total, n);
  EXPECT_EQ(static_cast<std::int64_t>(all.size()), n);  // disjoint, and each index exactly once
}

// One worker with micro-batch K*b reads, step for step, the rank-order concatenation of K workers
// with micro-batch b: the property the K-workers-equals-one-worker tests rely on.
TEST(ShardedSampler, KRanksEqualOneRankWithKTimesTheBatch) {
  for (int k : {1, 2, 3, 5}) {
    const int b = 3;
    const std::int64_t n = 97;
    ShardedSampler one(options(n, 1, 0, k * b));
    std::vector<ShardedSampler> ranks;
    for (int r = 0; r < k; ++r) ranks.emplace_back(options(n, k, r, b));
    ASSERT_EQ(one.steps_per_epoch(), ranks[0].steps_per_epoch());
    for (std::int64_t step = 0; step < 3 * one.steps_per_epoch() + 1; ++step) {
      const auto whole = one.next();
      Indices joined;
      for (auto& s : ranks) {
        const auto part = s.next();
        joined.insert(joined.end(), part.begin(), part.end());
      }
      ASSERT_EQ(joined, Indices(whole.begin(), whole.end())) << "k=" << k << " step " << step;
    }
  }
}

TEST(ShardedSampler, DeterministicPerSeedAndEpochsDiffer) {
  ShardedSampler a(options(50, 2, 1, 5, 42)), b(options(50, 2, 1, 5, 42)), c(options(50, 2, 1, 5, 43));
  const Indices ea = take(a, 5), eb = take(b, 5), ec = take(c, 5);
  EXPECT_EQ(ea, eb);
  EXPECT_NE(ea, ec);
  const Indices next_epoch = take(a, 5);
  EXPECT_NE(ea, next_epoch);
  EXPECT_EQ(next_epoch, take(b, 5));
}

// Fisher-Yates must reach every permutation: over many epochs each index lands in the last
// position about equally often (a classic off-by-one, drawing from [0, i) instead of [0, i],
// would never leave the last element in place).
TEST(ShardedSampler, ShuffleIsUnbiased) {
  const std::int64_t n = 5, epochs = 5000;
  ShardedSampler s(options(n, 1, 0, static_cast<int>(n)));
  std::vector<int> last(n, 0), first(n, 0);
  for (std::int64_t e = 0; e < epochs; ++e) {
    const auto b = s.next();
    ++first[static_cast<std::size_t>(b.front())];
    ++last[static_cast<std::size_t>(b.back())];
  }
  for (std::int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(first[static_cast<std::size_t>(i)], epochs / n, 150) << i;  // ~5 standard deviations
    EXPECT_NEAR(last[static_cast<std::size_t>(i)], epochs / n, 150) << i;
  }
}

TEST(ShardedSampler, ResumeFromCursorEqualsUninterrupted) {
  const auto opts = options(53, 2, 1, 4);  // 6 steps per epoch, 5 examples dropped
  ShardedSampler reference(opts);
  const std::int64_t steps = 4 * reference.steps_per_epoch();
  std::vector<ShardedSampler::Cursor> cursors;
  std::vector<Indices> batches;
  for (std::int64_t i = 0; i < steps; ++i) {
    cursors.push_back(reference.cursor());
    const auto b = reference.next();
    batches.emplace_back(b.begin(), b.end());
  }
  EXPECT_EQ(cursors[6], (ShardedSampler::Cursor{1, 0}));  // the end of an epoch reads as the next one
  EXPECT_EQ(cursors[8], (ShardedSampler::Cursor{1, 16}));
  for (std::int64_t stop : {0, 1, 5, 6, 7, 13, 23}) {
    ShardedSampler resumed(opts);
    take(resumed, 2);  // a sampler elsewhere in the stream, so seek must really move it
    resumed.seek(cursors[static_cast<std::size_t>(stop)]);
    for (std::int64_t i = stop; i < steps; ++i) {
      const auto b = resumed.next();
      ASSERT_EQ(Indices(b.begin(), b.end()), batches[static_cast<std::size_t>(i)]) << "resumed at " << stop;
    }
  }
}

TEST(ShardedSampler, ReusesOnePermutationBuffer) {
  ShardedSampler s(options(40, 1, 0, 8));
  const std::int64_t* base = s.next().data();
  take(s, s.steps_per_epoch() - 1);
  EXPECT_EQ(s.next().data(), base);  // epoch 1 reshuffled in place
}

TEST(ShardedSampler, GlobalBatchLargerThanDatasetIsAnInputError) {
  try {
    ShardedSampler s(options(10, 4, 0, 3));
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("global batch (world_size 4 x micro_batch 3 = 12)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ShardedSampler(options(10, 2, 2, 1)), Error);  // rank outside the world
}

}  // namespace
}  // namespace laconic
