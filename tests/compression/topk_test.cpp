// Top-k sparsification (compression/topk.h): the exact selection against a sort on many shapes of
// data (ties, zeros, denormals, NaN), the sampled threshold selection, decode, the error-feedback
// invariant, and the reducer on 1..8 thread ranks against a straightforward reference (each
// rank's top-k by sorting, summed in rank order, divided), with its byte counts, warm-up and
// allocation-free steady state.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <numeric>
#include <string>
#include <vector>

#include "collectives/threads/threads_communicator.h"
#include "compression/topk.h"
#include "core/check.h"
#include "core/rng.h"
#include "tests/support/new_counter.h"

namespace laconic {
namespace {

using Selection = TopKOptions::Selection;

std::uint32_t key(float v) { return std::bit_cast<std::uint32_t>(v) & 0x7fffffffu; }

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

// The definition: indices of the k largest |x| (bit-pattern order, so NaN above inf), ties to the
// lowest index, ascending. By sorting.
std::vector<std::uint32_t> reference_topk(std::span<const float> x, std::size_t k) {
  std::vector<std::uint32_t> order(x.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return key(x[a]) > key(x[b]); });
  order.resize(std::min(k, x.size()));
  std::sort(order.begin(), order.end());
  return order;
}

// Test data of several shapes, n elements.
enum class Shape { normal, negative, ties, equal, zeros, denormal, narrow, special };
const Shape kShapes[] = {Shape::normal, Shape::negative, Shape::ties,   Shape::equal,
                         Shape::zeros,  Shape::denormal, Shape::narrow, Shape::special};

std::vector<float> make(Shape shape, std::size_t n, std::uint64_t seed) {
  const std::uint64_t k = rng::key({seed, rng::kTest});
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float g = rng::normal(k, i);
    const std::uint64_t b = rng::below(k, i, 8);
    switch (shape) {
      case Shape::normal: x[i] = g; break;
      case Shape::negative: x[i] = -std::fabs(g) * 1e-3f; break;
      case Shape::ties: x[i] = static_cast<float>(static_cast<int>(b) - 4) * 0.5f; break;  // 8 values, +-
      case Shape::equal: x[i] = -1.5f; break;
      case Shape::zeros: x[i] = b < 6 ? (b % 2 ? 0.0f : -0.0f) : g; break;  // mostly +-0
      case Shape::denormal:
        x[i] = std::numeric_limits<float>::denorm_min() * static_cast<float>(rng::below(k, i, 1000)) * (b % 2 ? 1 : -1);
        break;
      case Shape::narrow: x[i] = 1.0f + rng::uniform(k, i) * 0x1p-10f; break;  // one 12-bit bin
      case Shape::special: {
        const float s[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::max(), std::numeric_limits<float>::min(), 0.0f, g, g, g};
        x[i] = s[b];
        break;
      }
    }
  }
  return x;
}

std::vector<std::size_t> ks_for(std::size_t n) {
  std::vector<std::size_t> ks = {1, 2, n / 100, n / 7, n / 2, n - 1, n};
  std::erase_if(ks, [&](std::size_t k) { return k == 0 || k > n; });
  return ks;
}

TEST(TopKCount, RoundsToNearestWithinOneToN) {
  EXPECT_EQ(topk_count(0, 0.5), 0u);
  EXPECT_EQ(topk_count(1000, 0.01), 10u);
  EXPECT_EQ(topk_count(100, 0.07), 7u);    // 7.000000000000001: ceil would give 8
  EXPECT_EQ(topk_count(3, 0.5), 2u);       // 1.5: halves round up
  EXPECT_EQ(topk_count(1000, 1e-9), 1u);   // at least one
  EXPECT_EQ(topk_count(1000, 1.0), 1000u);
  EXPECT_EQ(topk_count(25'000'000, 0.01), 250'000u);
  EXPECT_THROW(topk_count(10, 0.0), Error);
  EXPECT_THROW(topk_count(10, 1.5), Error);
}

// Exact selection equals the sort on every shape of data and many (n, k), with and without the
// fused residual; with it, the residual is acc with exactly the selected positions zeroed.
TEST(TopKExact, MatchesSortReference) {
  TopKScratch scratch;
  std::uint64_t seed = 0;
  for (const std::size_t n : {1, 2, 3, 15, 16, 17, 31, 100, 1000, 4097, 10007, 65537}) {
    for (const Shape shape : kShapes) {
      const std::vector<float> x = make(shape, n, ++seed);
      const std::vector<float> r0 = make(Shape::normal, n, ++seed);
      for (const std::size_t k : ks_for(n)) {
        for (const bool ef : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "n " << n << " shape " << static_cast<int>(shape) << " k " << k
                                            << " ef " << ef);
          std::vector<float> acc = x, residual;
          if (ef) {
            residual = r0;
            for (std::size_t i = 0; i < n; ++i) acc[i] = x[i] + r0[i];
          }
          const std::vector<std::uint32_t> want = reference_topk(acc, k);
          std::vector<std::uint32_t> idx(k, 0xdeadbeef);
          std::vector<float> val(k);
          ASSERT_EQ(topk_exact(x, residual, k, idx, val, scratch), k);
          ASSERT_EQ(idx, want);
          for (std::size_t j = 0; j < k; ++j)
            ASSERT_EQ(std::bit_cast<std::uint32_t>(val[j]), std::bit_cast<std::uint32_t>(acc[idx[j]])) << j;
          if (ef) {
            for (const std::uint32_t i : idx) acc[i] = 0.0f;
            ASSERT_TRUE(same_bits(residual, acc));
          }
        }
      }
    }
  }
}

TEST(TopKExact, TiesGoToTheLowestIndexAndSignIsIgnored) {
  TopKScratch scratch;
  const std::vector<float> x = {1, 3, 3, 2, -3, 3, 0.0f, -0.0f, 3};
  const auto top = [&](std::span<const float> v, std::size_t k) {
    std::vector<std::uint32_t> idx(k);
    std::vector<float> val(k);
    topk_exact(v, {}, k, idx, val, scratch);
    return idx;
  };
  EXPECT_EQ(top(x, 3), (std::vector<std::uint32_t>{1, 2, 4}));
  EXPECT_EQ(top(x, 5), (std::vector<std::uint32_t>{1, 2, 4, 5, 8}));
  EXPECT_EQ(top(x, 8), (std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5, 6, 8}));  // +0 before -0
  // All equal, large enough that the tie is resolved by whole-buffer refinement, not candidates.
  const std::vector<float> equal(100'000, 0.25f);
  std::vector<std::uint32_t> first(1000);
  std::iota(first.begin(), first.end(), 0u);
  EXPECT_EQ(top(equal, 1000), first);
}

TEST(TopKExact, NaNCountsAsLargest) {
  TopKScratch scratch;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {1, nan, -inf, 5, -nan, 7};
  std::vector<std::uint32_t> idx(3);
  std::vector<float> val(3);
  topk_exact(x, {}, 3, idx, val, scratch);
  EXPECT_EQ(idx, (std::vector<std::uint32_t>{1, 2, 4}));
  EXPECT_TRUE(std::isnan(val[0]) && std::isnan(val[2]));
  EXPECT_EQ(val[1], -inf);
}

TEST(TopKExact, ErrorFeedbackLosesNothingOverSteps) {
  // residual = input + residual - sent every step, so after T steps
  //   sum of what was sent + final residual = sum of inputs (up to the rounding of acc).
  TopKScratch scratch;
  const std::size_t n = 5003, k = 50;
  std::vector<float> residual(n, 0.0f);
  std::vector<double> sent(n, 0.0), input(n, 0.0);
  std::vector<std::uint32_t> idx(k);
  std::vector<float> val(k);
  for (int t = 0; t < 40; ++t) {
    const std::vector<float> x = make(Shape::normal, n, 1000 + t);
    for (std::size_t i = 0; i < n; ++i) input[i] += x[i];
    topk_exact(x, residual, k, idx, val, scratch);
    for (std::size_t j = 0; j < k; ++j) sent[idx[j]] += val[j];
  }
  for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(sent[i] + residual[i], input[i], 1e-4 * (1 + std::fabs(input[i]))) << i;
}

// Sampled selection returns exactly the elements at or above its threshold, about k of them on
// smooth data; with a full sample the threshold is the exact k-th largest.
TEST(TopKSampled, SelectsEverythingAtOrAboveTheSampledThreshold) {
  TopKScratch scratch;
  const std::size_t n = 200'003, k = 2000;
  const std::vector<float> x = make(Shape::normal, n, 7);
  for (const double fraction : {0.01, 0.1, 1.0}) {
    SCOPED_TRACE(fraction);
    const float t = topk_sampled_threshold(x, k, fraction, 42, scratch);
    std::vector<std::uint32_t> want;
    for (std::size_t i = 0; i < n; ++i)
      if (key(x[i]) >= key(t)) want.push_back(static_cast<std::uint32_t>(i));
    std::vector<std::uint32_t> idx(topk_sampled_capacity(n, k));
    std::vector<float> val(idx.size());
    const std::size_t c = topk_sampled(x, {}, k, fraction, 42, idx, val, scratch);
    idx.resize(c);
    EXPECT_EQ(idx, want);
    for (std::size_t j = 0; j < c; ++j) EXPECT_EQ(val[j], x[idx[j]]);
    EXPECT_GT(c, k / 2);
    EXPECT_LT(c, 3 * k / 2);
    if (fraction == 1.0) {
      EXPECT_EQ(idx, reference_topk(x, k));  // distinct values: exactly k
    }
  }
  EXPECT_NE(topk_sampled_threshold(x, k, 0.01, 1, scratch), topk_sampled_threshold(x, k, 0.01, 2, scratch));
}

TEST(TopKSampled, FallsBackToExactWhenTooManyPass) {
  // All equal: every element passes the threshold, more than 2k, so the exact k (lowest indices).
  TopKScratch scratch;
  const std::size_t n = 10'000, k = 100;
  const std::vector<float> x(n, 2.0f);
  std::vector<float> residual(n, 1.0f);
  std::vector<std::uint32_t> idx(topk_sampled_capacity(n, k));
  std::vector<float> val(idx.size());
  ASSERT_EQ(topk_sampled(x, residual, k, 0.01, 3, idx, val, scratch), k);
  for (std::size_t j = 0; j < k; ++j) {
    EXPECT_EQ(idx[j], j);
    EXPECT_EQ(val[j], 3.0f);
  }
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(residual[i], i < k ? 0.0f : 3.0f) << i;
}

TEST(TopKSampled, ErrorFeedbackResidualIsAccMinusSent) {
  TopKScratch scratch;
  const std::size_t n = 30'011, k = 300;
  std::vector<float> residual = make(Shape::normal, n, 5);
  const std::vector<float> x = make(Shape::normal, n, 6);
  std::vector<float> acc(n);
  for (std::size_t i = 0; i < n; ++i) acc[i] = x[i] + residual[i];
  std::vector<std::uint32_t> idx(topk_sampled_capacity(n, k));
  std::vector<float> val(idx.size());
  const std::size_t c = topk_sampled(x, residual, k, 0.05, 9, idx, val, scratch);
  for (std::size_t j = 0; j < c; ++j) {
    ASSERT_EQ(val[j], acc[idx[j]]);
    acc[idx[j]] = 0.0f;
  }
  EXPECT_TRUE(same_bits(residual, acc));
}

TEST(TopKDecode, ScatterAddsInRankOrderThenDivides) {
  // Rank 0 sends (1.5 @ 0, -2 @ 3), rank 1 (4 @ 3), rank 2 nothing; n = 5, world 3.
  const auto w = [](float v) { return std::bit_cast<std::uint32_t>(v); };
  std::vector<std::uint32_t> gathered = {w(1.5f), w(-2.0f), 0, 3, w(4.0f), 3};
  const std::vector<std::size_t> counts = {2, 1, 0};
  std::vector<float> out(5, 9.0f);
  topk_decode(gathered, counts, out);
  EXPECT_EQ(out, (std::vector<float>{1.5f / 3, 0, 0, 2.0f / 3, 0}));
  std::vector<std::uint32_t> bad = {w(1.0f), 5};
  EXPECT_THROW(topk_decode(bad, std::vector<std::size_t>{1}, out), Error);
}

// ---- the reducer, on thread ranks --------------------------------------------------------------

class TopKReducerTest : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(TopKWorlds, TopKReducerTest, ::testing::Values(1, 2, 3, 4, 8));

// Rank r's buffer at step t: values whose sums depend on the order of addition.
std::vector<float> input(int r, int t, std::size_t n, int bucket) {
  const std::uint64_t k = rng::key({static_cast<std::uint64_t>(r), static_cast<std::uint64_t>(t),
                                    static_cast<std::uint64_t>(bucket), rng::kTest});
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = rng::normal(k, i) * std::exp2(static_cast<float>(i % 13) - 6);
  return x;
}

std::vector<BucketLayout> two_buckets() { return {flat_bucket(10'007, 0), flat_bucket(3001, 1)}; }

// Runs `steps` steps of a top-k reducer on `world` ranks; returns every rank's outputs (per step
// and bucket, concatenated) and checks them against the reference: every rank's top-k by sorting
// (with its own reference residual), summed in rank order from zero, divided by the world size.
void check_against_reference(int world, TopKOptions opts, int steps) {
  const std::vector<BucketLayout> buckets = two_buckets();
  std::vector<std::vector<float>> outputs(static_cast<std::size_t>(world));
  run_threads(world, [&](Communicator& comm) {
    const int rank = comm.rank();
    TopKReducer reducer(opts);
    reducer.prepare(buckets);
    // The reference residuals of every rank, per bucket.
    std::vector<std::vector<std::vector<float>>> ref_res(static_cast<std::size_t>(world));
    for (auto& r : ref_res)
      for (const auto& b : buckets) r.emplace_back(b.size, 0.0f);
    for (int t = 0; t < steps; ++t) {
      for (const BucketLayout& b : buckets) {
        const std::size_t n = b.size, k = topk_count(n, opts.ratio);
        std::vector<float> want(n, 0.0f);
        for (int q = 0; q < world; ++q) {
          std::vector<float> acc = input(q, t, n, b.id);
          auto& res = ref_res[static_cast<std::size_t>(q)][static_cast<std::size_t>(b.id)];
          if (opts.error_feedback)
            for (std::size_t i = 0; i < n; ++i) acc[i] = acc[i] + res[i];
          for (const std::uint32_t i : reference_topk(acc, k)) {
            want[i] += acc[i];
            acc[i] = 0.0f;
          }
          if (opts.error_feedback) res = acc;
        }
        for (float& v : want) v /= static_cast<float>(world);

        std::vector<float> data = input(rank, t, n, b.id);
        reducer.reduce(data, b, t, comm);
        EXPECT_TRUE(same_bits(data, want)) << "rank " << rank << " step " << t << " bucket " << b.id;
        auto& out = outputs[static_cast<std::size_t>(rank)];
        out.insert(out.end(), data.begin(), data.end());
      }
    }
    const std::vector<StateTensor> state = reducer.state();
    ASSERT_EQ(state.size(), opts.error_feedback ? buckets.size() : 0u);
    for (std::size_t i = 0; i < state.size(); ++i) {
      EXPECT_EQ(state[i].name, "topk.residual." + std::to_string(i));
      EXPECT_TRUE(same_bits(state[i].data, ref_res[static_cast<std::size_t>(rank)][i])) << "rank " << rank;
    }
  });
  for (int r = 1; r < world; ++r) EXPECT_TRUE(same_bits(outputs[0], outputs[static_cast<std::size_t>(r)])) << r;
}

TEST_P(TopKReducerTest, MatchesReferenceWithErrorFeedback) { check_against_reference(GetParam(), {}, 3); }

TEST_P(TopKReducerTest, MatchesReferenceWithoutErrorFeedback) {
  TopKOptions o;
  o.ratio = 0.05;
  o.error_feedback = false;
  check_against_reference(GetParam(), o, 2);
}

// With ratio 1 and no error feedback every element is sent: the exact average, summed in rank
// order (the ring all-reduce folds in another order, so it agrees to rounding, bitwise for N <= 2).
TEST_P(TopKReducerTest, RatioOneIsTheExactAverage) {
  const int world = GetParam();
  TopKOptions o;
  o.ratio = 1;
  o.error_feedback = false;
  check_against_reference(world, o, 1);
  const BucketLayout b = flat_bucket(4099);
  run_threads(world, [&](Communicator& comm) {
    TopKReducer reducer(o);
    reducer.prepare(std::span(&b, 1));
    std::vector<float> data = input(comm.rank(), 0, b.size, 0), dense = data;
    reducer.reduce(data, b, 0, comm);
    comm.all_reduce(dense, ReduceOp::avg);
    // Rounding of a sum of N terms: bounded by N ulps of the sum of magnitudes.
    std::vector<float> magnitude(b.size, 0.0f);
    for (int q = 0; q < world; ++q) {
      const std::vector<float> x = input(q, 0, b.size, 0);
      for (std::size_t i = 0; i < b.size; ++i) magnitude[i] += std::fabs(x[i]);
    }
    for (std::size_t i = 0; i < b.size; ++i)
      ASSERT_NEAR(data[i], dense[i], static_cast<float>(world) * 0x1p-23f * magnitude[i]) << i;
    if (world <= 2) {
      EXPECT_TRUE(same_bits(data, dense));
    }
  });
}

// Each rank's sent vector, recovered from the residual's change (sent = input + old residual -
// new residual), summed over steps, plus the final residual, is the sum of its inputs.
TEST_P(TopKReducerTest, ErrorFeedbackLosesNothingOverSteps) {
  const BucketLayout b = flat_bucket(7919);
  run_threads(GetParam(), [&](Communicator& comm) {
    TopKReducer reducer;
    reducer.prepare(std::span(&b, 1));
    const std::span<float> residual = reducer.state().at(0).data;
    std::vector<double> sent(b.size, 0.0), in(b.size, 0.0);
    for (int t = 0; t < 30; ++t) {
      std::vector<float> data = input(comm.rank(), t, b.size, 0);
      std::vector<float> acc(b.size);
      for (std::size_t i = 0; i < b.size; ++i) {
        in[i] += data[i];
        acc[i] = data[i] + residual[i];
      }
      reducer.reduce(data, b, t, comm);
      std::size_t count = 0;
      for (std::size_t i = 0; i < b.size; ++i) {
        sent[i] += acc[i] - residual[i];
        count += residual[i] != acc[i];
      }
      EXPECT_LE(count, topk_count(b.size, 0.01));
    }
    for (std::size_t i = 0; i < b.size; ++i)
      ASSERT_NEAR(sent[i] + residual[i], in[i], 1e-3 * (1 + std::fabs(in[i]))) << "rank " << comm.rank() << " " << i;
  });
}

// Sampled: all ranks agree bitwise, and each rank's output is the decode of what everyone sent.
TEST_P(TopKReducerTest, SampledRanksAgree) {
  const int world = GetParam();
  const std::vector<BucketLayout> buckets = two_buckets();
  TopKOptions o;
  o.selection = Selection::sampled;
  o.sample_fraction = 0.1;
  std::vector<std::vector<float>> outputs(static_cast<std::size_t>(world));
  run_threads(world, [&](Communicator& comm) {
    TopKReducer reducer(o);
    reducer.prepare(buckets);
    for (int t = 0; t < 3; ++t) {
      for (const BucketLayout& b : buckets) {
        std::vector<float> data = input(comm.rank(), t, b.size, b.id);
        reducer.reduce(data, b, t, comm);
        auto& out = outputs[static_cast<std::size_t>(comm.rank())];
        out.insert(out.end(), data.begin(), data.end());
      }
    }
    EXPECT_EQ(reducer.stats().calls, 6u);
    EXPECT_EQ(reducer.stats().meta_bytes, 6u * 4);
  });
  for (int r = 1; r < world; ++r) EXPECT_TRUE(same_bits(outputs[0], outputs[static_cast<std::size_t>(r)])) << r;
}

// Stats follow the formula; the ring all-gather sends (N-1) * 8k bytes per rank (exact), or
// 4 (N-1) for the counts plus 8 (total pairs - pairs of the next rank) (sampled).
TEST_P(TopKReducerTest, ByteCounts) {
  const int world = GetParam();
  const auto N = static_cast<std::uint64_t>(world);
  const BucketLayout b = flat_bucket(100'003);
  for (const Selection sel : {Selection::exact, Selection::sampled}) {
    std::vector<std::uint64_t> pairs(N);
    std::mutex mu;
    run_threads(world, [&](Communicator& comm) {
      TopKOptions o;
      o.ratio = 0.003;
      o.selection = sel;
      TopKReducer reducer(o);
      reducer.prepare(std::span(&b, 1));
      std::vector<float> data = input(comm.rank(), 0, b.size, 0);
      const ByteCounters before = comm.bytes();
      reducer.reduce(data, b, 0, comm);
      const std::uint64_t sent = comm.bytes().sent - before.sent;
      const ReducerStats& s = reducer.stats();
      const std::uint64_t c = s.value_bytes / 4;
      {
        std::lock_guard lock(mu);
        pairs[static_cast<std::size_t>(comm.rank())] = c;
      }
      comm.barrier();
      EXPECT_EQ(s.calls, 1u);
      EXPECT_EQ(s.input_bytes, 4u * b.size);
      EXPECT_EQ(s.index_bytes, 4 * c);
      if (sel == Selection::exact) {
        const std::uint64_t k = topk_count(b.size, o.ratio);
        EXPECT_EQ(c, k);
        EXPECT_EQ(s.meta_bytes, 0u);
        EXPECT_EQ(sent, (N - 1) * 8 * k);
      } else {
        EXPECT_EQ(s.meta_bytes, 4u);
        std::uint64_t total = 0;
        for (const std::uint64_t p : pairs) total += p;
        const std::uint64_t next = pairs[static_cast<std::size_t>((comm.rank() + 1) % world)];
        EXPECT_EQ(sent, 4 * (N - 1) + 8 * (total - next));
      }
    });
  }
}

// Steps before warmup_steps are the dense fp32 average, residual untouched; then sparse.
TEST_P(TopKReducerTest, WarmupIsDenseAveraging) {
  const BucketLayout b = flat_bucket(5000);
  run_threads(GetParam(), [&](Communicator& comm) {
    TopKOptions o;
    o.warmup_steps = 2;
    TopKReducer reducer(o);
    reducer.prepare(std::span(&b, 1));
    for (int t = 0; t < 2; ++t) {
      std::vector<float> data = input(comm.rank(), t, b.size, 0), dense = data;
      reducer.reduce(data, b, t, comm);
      comm.all_reduce(dense, ReduceOp::avg);
      EXPECT_TRUE(same_bits(data, dense)) << t;
      const std::span<const float> res = reducer.state().at(0).data;
      EXPECT_TRUE(std::all_of(res.begin(), res.end(), [](float v) { return v == 0.0f; }));
    }
    EXPECT_EQ(reducer.stats().value_bytes, 2u * 4 * b.size);
    EXPECT_EQ(reducer.stats().index_bytes, 0u);
    std::vector<float> data = input(comm.rank(), 2, b.size, 0);
    reducer.reduce(data, b, 2, comm);
    EXPECT_EQ(reducer.stats().index_bytes, 4u * topk_count(b.size, o.ratio));
    const auto nonzero = std::count_if(data.begin(), data.end(), [](float v) { return v != 0.0f; });
    EXPECT_LE(static_cast<std::size_t>(nonzero), static_cast<std::size_t>(GetParam()) * topk_count(b.size, o.ratio));
  });
}

TEST(TopKReducer, DescribeAndOptionChecks) {
  EXPECT_EQ(TopKReducer().describe(), "top-k 1% (exact, error feedback)");
  TopKOptions o;
  o.ratio = 0.001;
  o.error_feedback = false;
  o.selection = Selection::sampled;
  o.sample_fraction = 0.05;
  o.warmup_steps = 100;
  EXPECT_EQ(TopKReducer(o).describe(), "top-k 0.1% (sampled 5%, no error feedback, 100 dense warm-up steps)");
  o.ratio = 0;
  EXPECT_THROW(TopKReducer{o}, Error);
}

// After the first reduce() (which sizes the world-dependent buffers), reducing allocates nothing.
TEST(TopKReducer, NoAllocationAfterTheFirstReduce) {
  if (!new_counter::in_use()) GTEST_SKIP() << "another operator new replacement is linked in";
  const std::vector<BucketLayout> buckets = two_buckets();
  for (const Selection sel : {Selection::exact, Selection::sampled}) {
    for (const int world : {1, 2}) {
      std::vector<long> news(static_cast<std::size_t>(world), -1);
      run_threads(world, [&](Communicator& comm) {
        TopKOptions o;
        o.selection = sel;
        TopKReducer reducer(o);
        reducer.prepare(buckets);
        std::vector<std::vector<float>> data;
        for (const auto& b : buckets) data.push_back(input(comm.rank(), 0, b.size, b.id));
        const auto step = [&](int t) {
          for (const auto& b : buckets) reducer.reduce(data[static_cast<std::size_t>(b.id)], b, t, comm);
        };
        step(0);
        step(1);
        // The threads backend grows a mailbox's buffers at each new largest message; sampled
        // counts vary, so pre-grow them with the largest block the reducer can send.
        const std::size_t words = 2 * topk_sampled_capacity(buckets[0].size, topk_count(buckets[0].size, o.ratio));
        std::vector<float> big(words * static_cast<std::size_t>(world));
        comm.all_gather(cbuf(std::span<const float>(big).first(words)), buf(std::span<float>(big)));
        comm.barrier();
        news[static_cast<std::size_t>(comm.rank())] = new_counter::during([&] {
          for (int t = 2; t < 5; ++t) step(t);
        });
        comm.barrier();
      });
      for (int r = 0; r < world; ++r)
        EXPECT_EQ(news[static_cast<std::size_t>(r)], 0) << "rank " << r << ", world " << world << ", sampled "
                                                        << (sel == Selection::sampled);
    }
  }
}

}  // namespace
}  // namespace laconic
