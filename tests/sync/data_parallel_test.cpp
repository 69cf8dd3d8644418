// DataParallel: bucket layout (whole tensors, last first, capped), overlapped reduction giving the
// same bits as reduction after backward, failures reaching after_backward without a hang, and
// the dense reducer's 16-bit wire formats.
#include <gtest/gtest.h>

#include <cmath>
#include <chrono>
#include <cstring>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "collectives/threads/threads_communicator.h"
#include "compression/reducer.h"
#include "core/timer.h"
#include "framework/sync/sync_strategy.h"
#include "tests/sync/small_store.h"

namespace laconic {
namespace {


TEST(Buckets, WholeTensorsFromTheLastOneCappedBySize) {
  const ParamStore s = small_store();
  // Cap of 12 floats: c (7) + b.bias (4) = 11 < 12, + b.weight (24) closes at 35; then a.bias +
  // a.weight (35) closes at the first tensor.
  const auto b = make_buckets(s, mib(12));
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].id, 0);
  EXPECT_EQ(b[0].begin, 35u);
  EXPECT_EQ(b[0].size, 35u);
  ASSERT_EQ(b[0].tensors.size(), 3u);
  EXPECT_EQ(b[0].tensors[0].offset, 0u);  // b.weight viewed as 4 x 6
  EXPECT_EQ(b[0].tensors[0].rows, 4u);
  EXPECT_EQ(b[0].tensors[0].cols, 6u);
  EXPECT_EQ(b[0].tensors[1].offset, 24u);  // b.bias: 4 x 1
  EXPECT_EQ(b[0].tensors[1].rows, 4u);
  EXPECT_EQ(b[0].tensors[1].cols, 1u);
  EXPECT_EQ(b[0].tensors[2].offset, 28u);  // c: 7 x 1
  EXPECT_EQ(b[1].id, 1);
  EXPECT_EQ(b[1].begin, 0u);
  EXPECT_EQ(b[1].size, 35u);
  ASSERT_EQ(b[1].tensors.size(), 2u);
  EXPECT_EQ(b[1].tensors[0].rows, 6u);
  EXPECT_EQ(b[1].tensors[0].cols, 5u);

  // A cap of one float: one bucket per tensor, last first. A huge cap: one bucket.
  const auto each = make_buckets(s, mib(1));
  ASSERT_EQ(each.size(), 5u);
  for (std::size_t i = 0; i < each.size(); ++i) {
    EXPECT_EQ(each[i].begin, s.view(4 - i).offset);
    EXPECT_EQ(each[i].size, s.view(4 - i).numel);
  }
  const auto one = make_buckets(s, 25.0);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].size, 70u);
  EXPECT_EQ(one[0].tensors.size(), 5u);
}

// Values whose float sum depends on the order of addition.
float wobbly(int rank, std::size_t i) {
  return std::sin(static_cast<float>(i) * 0.37f + static_cast<float>(rank)) *
         std::exp2(static_cast<float>((i + static_cast<std::size_t>(rank)) % 13) - 6);
}

// Each rank runs `steps` steps of "backward" (gradients filled last tensor first, reported after
// each tensor as a model does) and returns its averaged gradients after each step.
std::vector<std::vector<float>> run(int world, bool overlap, double bucket_mb, int steps, double momentum = 0) {
  std::vector<std::vector<float>> out(static_cast<std::size_t>(world));
  run_threads(world, [&](Communicator& comm) {
    ParamStore s = small_store();
    DataParallel dp({bucket_mb, overlap, momentum}, std::make_unique<DenseReducer>());
    dp.start(s, comm);
    auto& mine = out[static_cast<std::size_t>(comm.rank())];
    for (int step = 0; step < steps; ++step) {
      for (std::size_t v = s.views().size(); v-- > 0;) {
        const ParamView& view = s.view(v);
        for (std::size_t i = 0; i < view.numel; ++i)
          s.grads()[view.offset + i] = wobbly(comm.rank() + 7 * step, view.offset + i);
        dp.grads_ready(step, view.offset);
      }
      dp.after_backward(step);
      mine.insert(mine.end(), s.grads().begin(), s.grads().end());
    }
  });
  return out;
}

TEST(DataParallel, OverlappedReductionGivesTheSameBitsAsAfterBackward) {
  for (const int world : {1, 2, 3, 4}) {
    for (const double cap : {mib(1), mib(12), 25.0}) {
      SCOPED_TRACE(testing::Message() << "world " << world << ", cap " << cap);
      const auto later = run(world, false, cap, 3);
      const auto overlapped = run(world, true, cap, 3);
      for (int r = 0; r < world; ++r) {
        ASSERT_EQ(later[r].size(), overlapped[r].size());
        EXPECT_EQ(std::memcmp(later[r].data(), overlapped[r].data(), later[r].size() * sizeof(float)), 0);
        EXPECT_EQ(std::memcmp(later[0].data(), later[r].data(), later[r].size() * sizeof(float)), 0);
      }
      // And it is the average.
      for (std::size_t i = 0; i < 70; ++i) {
        double sum = 0;
        for (int r = 0; r < world; ++r) sum += wobbly(r, i);
        EXPECT_NEAR(later[0][i], sum / world, 1e-6 * (1 + std::abs(sum))) << i;
      }
    }
  }
}

// Momentum correction with exact averaging: what is reduced each step is the average velocity
// u_t = mu * u_{t-1} + mean_r g_t, i.e. what momentum SGD would step with.
TEST(DataParallel, MomentumCorrectionAveragesTheVelocity) {
  constexpr int kWorld = 3, kSteps = 4;
  constexpr double kMu = 0.75;
  const auto got = run(kWorld, true, mib(12), kSteps, kMu);
  std::vector<double> u(70, 0.0);
  for (int step = 0; step < kSteps; ++step) {
    for (std::size_t i = 0; i < u.size(); ++i) {
      double mean = 0;
      for (int r = 0; r < kWorld; ++r) mean += wobbly(r + 7 * step, i);
      u[i] = kMu * u[i] + mean / kWorld;
      for (int r = 0; r < kWorld; ++r)
        EXPECT_NEAR(got[r][static_cast<std::size_t>(step) * 70 + i], u[i], 1e-5 * (1 + std::abs(u[i])))
            << "rank " << r << ", step " << step << ", element " << i;
    }
  }
}

// Reduces like DenseReducer but throws on one bucket at one step, on one rank.
class FailingReducer final : public Reducer {
 public:
  FailingReducer(int rank, int bucket) : rank_(rank), bucket_(bucket) {}
  void reduce(std::span<float> data, const BucketLayout& b, std::int64_t step, Communicator& comm) override {
    if (comm.rank() == rank_ && b.id == bucket_ && step == 1) throw std::runtime_error("encode failed");
    comm.all_reduce(data, ReduceOp::avg);
  }
  std::string describe() const override { return "failing"; }

 private:
  int rank_, bucket_;
};

TEST(DataParallel, AFailingBucketReachesEveryRankWithoutHanging) {
  ThreadsOptions opts;
  opts.timeout_s = 2;  // the other ranks' next receive times out instead of waiting forever
  EXPECT_THROW(run_threads(
                   3,
                   [&](Communicator& comm) {
                     ParamStore s = small_store();
                     DataParallel dp({mib(1), true}, std::make_unique<FailingReducer>(1, 2));
                     dp.start(s, comm);
                     for (int step = 0; step < 3; ++step) {
                       for (std::size_t v = s.views().size(); v-- > 0;) dp.grads_ready(step, s.view(v).offset);
                       dp.after_backward(step);
                     }
                   },
                   opts),
               std::exception);
}

// A slow link: each bucket's reduction waits (without using a core) before averaging.
class SlowReducer final : public Reducer {
 public:
  void reduce(std::span<float> data, const BucketLayout&, std::int64_t, Communicator& comm) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    comm.all_reduce(data, ReduceOp::avg);
  }
  std::string describe() const override { return "slow"; }
};

// With overlap, bucket b's reduction runs while "backward" computes the tensors before it, so a
// step takes about one layer + all reductions (5 x 30 ms) instead of all layers + all
// reductions (2 x 5 x 30 ms). Sleeps stand for both, so a loaded machine does not matter much.
TEST(DataParallel, OverlapHidesReductionsBehindBackward) {
  const auto step_seconds = [](bool overlap) {
    double seconds = 0;
    run_threads(2, [&](Communicator& comm) {
      ParamStore s = small_store();
      DataParallel dp({mib(1), overlap}, std::make_unique<SlowReducer>());  // 5 buckets
      dp.start(s, comm);
      Stopwatch t;
      for (std::size_t v = s.views().size(); v-- > 0;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));  // this layer's backward
        dp.grads_ready(0, s.view(v).offset);
      }
      dp.after_backward(0);
      if (comm.rank() == 0) seconds = t.seconds();
    });
    return seconds;
  };
  const double later = step_seconds(false), overlapped = step_seconds(true);
  std::cout << "step with reductions after backward " << later << " s, overlapped " << overlapped << " s\n";
  EXPECT_GT(later, 0.29);
  EXPECT_LT(overlapped, 0.8 * later);
}

TEST(DenseReducer, SixteenBitWiresAverageExactlyRepresentableValuesExactly) {
  for (const DType wire : {DType::f32, DType::bf16, DType::f16}) {
    for (const int world : {1, 2, 4}) {
      SCOPED_TRACE(testing::Message() << name_of(wire) << ", world " << world);
      run_threads(world, [&](Communicator& comm) {
        // Small integers times 1/8: exact in bf16 and f16, their sums too, and / world (a power
        // of two) as well.
        std::vector<float> x(37);
        for (std::size_t i = 0; i < x.size(); ++i)
          x[i] = static_cast<float>(static_cast<int>(i % 9) - 4 + comm.rank()) * 0.125f;
        DenseReducer red(wire);
        const BucketLayout b = flat_bucket(x.size());
        red.prepare(std::span(&b, 1));
        const auto sent_before = comm.bytes().sent;
        red.reduce(x, b, 0, comm);
        for (std::size_t i = 0; i < x.size(); ++i) {
          float sum = 0;
          for (int r = 0; r < world; ++r) sum += static_cast<float>(static_cast<int>(i % 9) - 4 + r) * 0.125f;
          EXPECT_EQ(x[i], sum / static_cast<float>(world)) << i;
        }
        EXPECT_EQ(red.stats().input_bytes, 37u * 4);
        EXPECT_EQ(red.stats().payload_bytes(), 37u * dtype_size(wire));
        // The ring moves 2(N-1)/N of the wire bytes: half as many for the 16-bit formats.
        if (world > 1) {
          const auto sent = comm.bytes().sent - sent_before;
          EXPECT_NEAR(static_cast<double>(sent), 2.0 * (world - 1) / world * 37 * dtype_size(wire), 2.0 * dtype_size(wire));
        }
      });
    }
  }
}

TEST(DenseReducer, Bf16WireRoundsToTheNearestBf16) {
  run_threads(2, [&](Communicator& comm) {
    std::vector<float> x{1.0f + 1.0f / 1024.0f, 3.14159265f, -1e-3f};
    const std::vector<float> in = x;
    DenseReducer red(DType::bf16);
    red.reduce(x, flat_bucket(x.size()), 0, comm);  // no prepare(): sizes itself
    for (std::size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(x[i], from_bf16(to_bf16(from_bf16(to_bf16(in[i])) * 2.0f)) / 2.0f) << i;
      EXPECT_NEAR(x[i], in[i], std::abs(in[i]) / 128.0f) << i;
    }
  });
}

}  // namespace
}  // namespace laconic
