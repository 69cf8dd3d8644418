// The trainer on the GPU: the same recipe trained with device = "cuda" and with device = "cpu",
// from the same seed and data, for every strategy, reaches the same losses and parameters to
// float rounding; on the GPU, 2N steps equal N steps + resume + N steps bit for bit. One GPU:
// world size 1 runs NCCL, world size 2 shares the GPU through the staging communicator.
// GTEST_SKIP without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/check.h"
#include "core/device.h"
#include "framework/train/trainer.h"
#include "tests/train/synthetic.h"

namespace laconic {
namespace {

using testing::blobs;

#define SKIP_WITHOUT_DEVICE() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device"

TrainData synthetic() { return image_data(blobs(600, 12, 5, 1), blobs(200, 12, 5, 2)); }

Recipe small(StrategyName kind, int world, DeviceKind device) {
  Recipe r;
  r.run.seed = 7;
  r.model.hidden = {16};
  r.model.dropout = 0.1f;
  r.train.micro_batch = 8;
  r.train.steps = 16;
  r.train.log_every = 4;
  r.optimizer.lr = 0.05;
  r.optimizer.momentum = 0.9;
  r.optimizer.grad_clip = 1.0;  // the device norm and scaling
  r.schedule.warmup_steps = 3;
  r.distributed.world_size = world;
  r.distributed.timeout_s = 60;
  r.distributed.device = device;
  r.sync.strategy = kind;
  r.sync.bucket_mb = 0.0004;  // several buckets
  r.sync.powersgd.start_iter = 3;
  r.sync.powersgd.rank = 2;
  r.sync.onebit.warmup_steps = 2;
  r.sync.topk.ratio = 0.1;
  r.sync.local_sgd.period = 3;
  r.sync.diloco.period = 3;
  return r;
}

// Largest |a - b| / max(1, |a|) over two parameter vectors.
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]) / std::max(1.0, std::abs(static_cast<double>(a[i]))));
  return worst;
}

TEST(TrainCuda, EveryStrategyMatchesTheCpu) {
  SKIP_WITHOUT_DEVICE();
  const TrainData data = synthetic();
  for (const int world : {1, 2}) {
    for (const StrategyName kind : {"allreduce", "topk", "powersgd", "onebit",
                                "local_sgd", "diloco"}) {
      SCOPED_TRACE(::testing::Message() << kind.c_str() << ", world size " << world);
      const TrainSummary cpu = train(small(kind, world, DeviceKind::cpu), data, {});
      const TrainSummary gpu = train(small(kind, world, DeviceKind::cuda), data, {});
      const double params = max_rel_diff(cpu.final_params, gpu.final_params);
      std::printf("train %-9s world %d: final loss cpu %.7f cuda %.7f, params max rel diff %.3g, bytes %llu / %llu\n",
                  kind.c_str(), world, cpu.final_loss, gpu.final_loss, params,
                  static_cast<unsigned long long>(cpu.bytes_sent), static_cast<unsigned long long>(gpu.bytes_sent));
      ASSERT_EQ(cpu.final_params.size(), gpu.final_params.size());
      // 16 steps of float rounding differences (and top-k / sign decisions that flip on them
      // only where values tie to rounding): losses and parameters agree closely.
      EXPECT_NEAR(cpu.final_loss, gpu.final_loss, 1e-3 * std::max(1.0, std::abs(cpu.final_loss)));
      EXPECT_LT(params, 1e-3);
      // The same payloads cross the wire (NCCL counts nominally, like MPI; staging is the host's).
      EXPECT_EQ(cpu.bytes_sent, gpu.bytes_sent);
    }
  }
}

// ZeRO-1 and ZeRO-2 (staging slots on the device, each micro-batch's shard added by a device
// axpy) with AdamW, in several buckets reduce-scattered as backward makes them: the CPU's run.
TEST(TrainCuda, ShardedMatchesTheCpu) {
  SKIP_WITHOUT_DEVICE();
  const TrainData data = synthetic();
  for (const ShardKind shard : {ShardKind::optimizer, ShardKind::gradients}) {
    SCOPED_TRACE(name_of(shard));
    Recipe r = small("allreduce", 2, DeviceKind::cpu);
    r.optimizer.name = "adamw";
    r.optimizer.lr = 0.01;
    r.train.grad_accum = 2;
    r.sync.shard = shard;
    const TrainSummary cpu = train(r, data, {});
    r.distributed.device = DeviceKind::cuda;
    const TrainSummary gpu = train(r, data, {});
    EXPECT_NEAR(cpu.final_loss, gpu.final_loss, 1e-3 * std::max(1.0, std::abs(cpu.final_loss)));
    EXPECT_LT(max_rel_diff(cpu.final_params, gpu.final_params), 1e-3);
    EXPECT_EQ(cpu.memory_gradients, gpu.memory_gradients);
  }
}

TEST(TrainCuda, ResumesBitForBitOnTheDevice) {
  SKIP_WITHOUT_DEVICE();
  const TrainData data = synthetic();
  const auto dir = std::filesystem::temp_directory_path() / "laconic_train_cuda_resume";
  std::filesystem::remove_all(dir);
  for (const StrategyName kind : {"topk", "diloco"}) {
    SCOPED_TRACE(kind.c_str());
    Recipe r = small(kind, 2, DeviceKind::cuda);
    r.checkpoint.every = 8;
    TrainOptions whole;
    whole.run_dir = (dir / (std::string(kind.c_str()) + "_whole")).string();
    const TrainSummary a = train(r, data, whole);

    TrainOptions first;
    first.run_dir = (dir / (std::string(kind.c_str()) + "_split")).string();
    Recipe half = r;
    half.train.steps = 8;
    (void)train(half, data, first);
    TrainOptions second = first;
    second.resume = "auto";
    const TrainSummary b = train(r, data, second);  // the step count is not in the hash
    EXPECT_EQ(b.first_step, 8);
    ASSERT_EQ(a.final_params.size(), b.final_params.size());
    EXPECT_EQ(0, std::memcmp(a.final_params.data(), b.final_params.data(), a.final_params.size() * sizeof(float)))
        << "params max rel diff " << max_rel_diff(a.final_params, b.final_params);
    EXPECT_EQ(a.final_loss, b.final_loss);
  }
  std::filesystem::remove_all(dir);
}

TEST(TrainCuda, NonFiniteGuardSkipsOnTheDevice) {
  SKIP_WITHOUT_DEVICE();
  const TrainData data = synthetic();
  Recipe r = small("allreduce", 2, DeviceKind::cuda);
  r.guards.nonfinite = NonfiniteKind::skip;
  r.guards.check_every = 1;  // replica checksums of device parameters, every step
  r.fault.kind = FaultKind::nan;
  r.fault.rank = 1;
  r.fault.step = 5;
  const TrainSummary s = train(r, data, testing::injecting(r));
  EXPECT_EQ(s.skipped_steps, 1);
  EXPECT_TRUE(std::isfinite(s.final_loss));

  r.guards.nonfinite = NonfiniteKind::abort;
  EXPECT_THROW(train(r, data, testing::injecting(r)), Error);
}

}  // namespace
}  // namespace laconic
