// trainer plan's memory (framework/train/memory_plan.h) against what runs report holding
// (summary.json's memory_*): within 5% for every optimizer, the DiLoCo family and sharding, on a
// model of other shapes than the plan's proxies; exact closed forms where the state is per
// parameter.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "framework/train/memory_plan.h"
#include "framework/train/trainer.h"
#include "tests/train/synthetic.h"

namespace laconic {
namespace {

using testing::blobs;

constexpr double kParams = 12 * 15 + 15 + 15 * 5 + 5;  // the MLP 12 -> 15 -> 5

Recipe small(const OptimizerName& opt, const StrategyName& strategy, ShardKind shard) {
  Recipe r;
  r.run.seed = 5;
  r.model.hidden = {15};
  r.train.micro_batch = 8;
  r.train.steps = 2;
  r.train.log_every = 2;
  r.optimizer.name = opt;
  r.optimizer.lr = 0.01;
  r.distributed.world_size = 4;
  r.distributed.timeout_s = 30;
  r.sync.strategy = strategy;
  r.sync.shard = shard;
  r.sync.diloco.period = 1;
  r.sync.streaming_diloco.period = 2;
  r.sync.sparseloco.period = 1;
  return r;
}

TEST(MemoryPlan, ClosedFormsPerParameter) {
  const MemoryPlan adamw = plan_memory(small("adamw", "allreduce", ShardKind::none), 1e9, 8);
  EXPECT_EQ(adamw.weights, 4e9);
  EXPECT_EQ(adamw.gradients, 4e9);
  EXPECT_NEAR(adamw.optimizer, 8e9, 64);  // two moments, and a step count
  EXPECT_EQ(adamw.strategy, 0);
  const MemoryPlan sharded = plan_memory(small("adamw", "allreduce", ShardKind::optimizer), 1e9, 8);
  EXPECT_NEAR(sharded.optimizer, 1e9, 64);  // 8 bytes x 1e9 / 8 ranks
  EXPECT_EQ(sharded.buffers, 1e9);           // the shard's weights and gradients
  // ZeRO-2: two staging slots of a 25 MiB bucket in place of 4 GB of gradients, and a block of
  // each for a second micro-batch's reduce-scatter.
  Recipe zero2 = small("adamw", "allreduce", ShardKind::gradients);
  EXPECT_EQ(plan_memory(zero2, 1e9, 8).gradients, 2.0 * 25 * 1024 * 1024);
  EXPECT_EQ(plan_memory(zero2, 1e9, 8).optimizer, sharded.optimizer);
  zero2.train.grad_accum = 2;
  EXPECT_EQ(plan_memory(zero2, 1e9, 8).gradients, 2.0 * 4 * (25 * 1024 * 1024 / 4 + 25 * 1024 * 1024 / 4 / 8 + 7));
  EXPECT_EQ(plan_memory(zero2, 1e6, 8).gradients, 4.0 * (1e6 + 125000 + 7));  // smaller than a bucket
  const MemoryPlan diloco = plan_memory(small("sgd", "diloco", ShardKind::none), 1e9, 8);
  EXPECT_NEAR(diloco.strategy, 8e9, 64);  // theta_global and the outer momentum
  Recipe frozen = small("sgd", "streaming_diloco", ShardKind::none);
  frozen.sync.streaming_diloco.freeze = true;
  EXPECT_NEAR(plan_memory(frozen, 1e9, 8).buffers, 4e9, 64);  // freeze's copy of the parameters
}

// Given the model's layout (a run's own check), ZeRO-2's staging is its two largest buckets: the
// MLP's tensors 180, 15, 75, 5 in buckets of about 52 floats make [180, 15] and [75, 5], what
// shard_test.cpp's overlapped run holds (in line it holds the larger only).
TEST(MemoryPlan, StagesTheLayoutsLargestBucket) {
  ParamStore mlp;
  mlp.add("fc1.weight", {15, 12}, ParamGroup::decay);
  mlp.add("fc1.bias", {15}, ParamGroup::no_decay);
  mlp.add("head.weight", {5, 15}, ParamGroup::decay);
  mlp.add("head.bias", {5}, ParamGroup::no_decay);
  mlp.finalize();
  Recipe r = small("adamw", "allreduce", ShardKind::gradients);
  r.sync.bucket_mb = 52.0 * 4 / (1024 * 1024);
  EXPECT_EQ(plan_memory(r, kParams, 3, &mlp).gradients, 4 * 275.0);
  EXPECT_EQ(plan_memory(r, kParams, 3).gradients, 2 * 4 * 52.0);  // without it, buckets of the cap's size
  r.sync.bucket_mb = 1;
  EXPECT_EQ(plan_memory(r, kParams, 3).gradients, 4 * kParams);  // the whole model, one bucket
}

class MemoryPlanRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("laconic_memplan_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(MemoryPlanRun, WithinFivePercentOfWhatRunsHold) {
  const TrainData data = image_data(blobs(400, 12, 5, 1), blobs(100, 12, 5, 2));
  struct Case {
    OptimizerName opt;
    StrategyName strategy;
    ShardKind shard;
    bool intra = false;  // two groups of 2, sync.intra = "allreduce"
    bool freeze = false;  // sync.streaming_diloco.freeze
  };
  const Case cases[] = {{"sgd", "allreduce", ShardKind::none},       {"adamw", "allreduce", ShardKind::none},
                        {"lamb", "allreduce", ShardKind::none},      {"lars", "allreduce", ShardKind::none},
                        {"muon", "allreduce", ShardKind::none},      {"adamw", "allreduce", ShardKind::optimizer},
                        {"lamb", "allreduce", ShardKind::optimizer}, {"adamw", "allreduce", ShardKind::gradients},
                        {"sgd", "diloco", ShardKind::none},
                        {"adamw", "streaming_diloco", ShardKind::none}, {"sgd", "sparseloco", ShardKind::none},
                        {"sgd", "topk", ShardKind::none},
                        {"adamw", "diloco", ShardKind::optimizer, true},
                        {"adamw", "diloco", ShardKind::gradients, true},
                        {"adamw", "streaming_diloco", ShardKind::none, true},
                        {"adamw", "streaming_diloco", ShardKind::optimizer, true},
                        {"adamw", "diloco", ShardKind::outer, true},
                        {"sgd", "streaming_diloco", ShardKind::none, false, true}};
  int i = 0;
  for (const Case& c : cases) {
    Recipe r = small(c.opt, c.strategy, c.shard);
    r.sync.streaming_diloco.freeze = c.freeze;
    if (c.intra) {
      r.sync.intra = IntraKind::allreduce;
      r.network.groups = 2;
      r.train.trace = AutoBool{false};  // memory, not time: no replay (shard_test.cpp says why)
    }
    SCOPED_TRACE(c.opt.value + ", " + c.strategy.value + ", shard " + name_of(c.shard));
    TrainOptions o;
    o.run_dir = (dir_ / std::to_string(i++)).string();
    const TrainSummary s = train(r, data, o);
    const MemoryPlan m = plan_memory(r, kParams, 4);
    EXPECT_EQ(m.weights, static_cast<double>(*s.memory_weights));
    EXPECT_EQ(m.gradients, static_cast<double>(*s.memory_gradients));
    const auto within = [](double planned, std::uint64_t held) {
      return std::abs(planned - static_cast<double>(held)) <= 0.05 * static_cast<double>(held) + 16;
    };
    EXPECT_TRUE(within(m.optimizer, *s.memory_optimizer)) << m.optimizer << " planned, " << *s.memory_optimizer << " held";
    EXPECT_TRUE(within(m.strategy, *s.memory_strategy)) << m.strategy << " planned, " << *s.memory_strategy << " held";
    EXPECT_TRUE(within(m.buffers, *s.memory_buffers)) << m.buffers << " planned, " << *s.memory_buffers << " held";
    // The run's own plan (its memory check, with the model's layout), reported beside what it held.
    const std::uint64_t held = *s.memory_weights + *s.memory_gradients + *s.memory_optimizer + *s.memory_strategy +
                               *s.memory_buffers;
    ASSERT_TRUE(s.memory_planned);
    EXPECT_TRUE(within(static_cast<double>(*s.memory_planned), held)) << *s.memory_planned << " planned, " << held << " held";
  }
}

}  // namespace
}  // namespace laconic
