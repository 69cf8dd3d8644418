// The 2025 outer-loop family through the trainer, across two simulated datacenters (dense inside,
// the strategy between the group leaders): streaming DiLoCo with one fragment and no overlap is
// DiLoCo bit for bit; with F = 2 fragments it lowers the peak inter-datacenter bandwidth about
// F-fold; a block codec divides DiLoCo's inter-datacenter bytes by its compression.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "framework/train/metrics.h"
#include "framework/train/trainer.h"
#include "tests/train/synthetic.h"

namespace laconic {
namespace {

using testing::same_bits;

using testing::blobs;

TrainData synthetic() { return image_data(blobs(600, 12, 5, 1), blobs(200, 12, 5, 2)); }

// Tensors of 96, 8, 64, 8, 64, 8, 64, 8, 40, 5 floats: two fragments of 176 and 189.
Recipe two_datacenters(StrategyName kind) {
  Recipe r;
  r.run.seed = 3;
  r.model.hidden = {8, 8, 8, 8};
  r.train.micro_batch = 8;
  r.train.steps = 32;
  r.train.log_every = 4;  // H / F: a log interval holds one fragment's sync
  r.optimizer.name = "adamw";
  r.optimizer.lr = 0.01;
  r.distributed.world_size = 4;
  r.distributed.timeout_s = 60;
  r.network.groups = 2;
  r.network.compute = ComputeKind::modeled;
  r.network.device_tflops = 1e-7;  // a slow device: compute, not the link (nor the control plane's
                                   // metrics gather at each log), sets a window's time
  r.sync.strategy = kind;
  r.sync.intra = IntraKind::allreduce;
  r.sync.diloco.period = 8;
  r.sync.diloco.outer_momentum = 0.5;
  static_cast<DilocoConfig&>(r.sync.streaming_diloco) = r.sync.diloco;
  return r;
}

class Outer : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("laconic_outer_" + std::to_string(::getpid()) + "_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  TrainSummary run(const Recipe& r, const std::string& name) {
    TrainOptions o;
    o.run_dir = (dir_ / name).string();
    return train(r, synthetic(), o);
  }
  std::filesystem::path dir_;
};

Recipe streaming_recipe(int fragments, std::int64_t overlap_steps, double mixing) {
  Recipe r = two_datacenters("streaming_diloco");
  r.sync.streaming_diloco.fragments = fragments;
  r.sync.streaming_diloco.overlap_steps = overlap_steps;
  r.sync.streaming_diloco.mixing = mixing;
  return r;
}

TEST_F(Outer, StreamingWithOneFragmentAndNoOverlapIsDiloco) {
  const TrainSummary diloco = run(two_datacenters("diloco"), "diloco");
  const TrainSummary streaming = run(streaming_recipe(1, 0, 0.0), "streaming");
  EXPECT_TRUE(same_bits(diloco.final_params, streaming.final_params));
  EXPECT_EQ(diloco.final_loss, streaming.final_loss);
  EXPECT_EQ(diloco.bytes_sent, streaming.bytes_sent);
}

TEST_F(Outer, FragmentsLowerThePeakInterDatacenterBandwidth) {
  const TrainSummary diloco = run(two_datacenters("diloco"), "diloco");
  const TrainSummary streaming = run(streaming_recipe(2, 1, 0.5), "streaming");
  ASSERT_FALSE(std::isnan(diloco.peak_inter_bytes_per_s));
  ASSERT_FALSE(std::isnan(streaming.peak_inter_bytes_per_s));
  const double ratio = diloco.peak_inter_bytes_per_s / streaming.peak_inter_bytes_per_s;
  std::cout << "peak inter-datacenter rate: DiLoCo " << diloco.peak_inter_bytes_per_s << " B/s, streaming (F = 2) "
            << streaming.peak_inter_bytes_per_s << " B/s: " << ratio << "x lower\n";
  EXPECT_GE(ratio, 2.0 / 1.2);
  EXPECT_TRUE(std::isfinite(streaming.final_loss));
}

TEST_F(Outer, Int8PseudoGradientsCrossTheLinkWithAQuarterOfTheBytes) {
  // The syncs' bytes: from the first record (step 4, before the first sync) to the last; the start's
  // broadcast of the parameters is the same for both.
  const auto inter = [&](const std::string& name) {
    const std::vector<MetricsRecord> m = read_metrics((dir_ / name / "metrics.jsonl").string());
    return static_cast<double>(m.back().bytes_inter.value_or(0) - m.front().bytes_inter.value_or(0));
  };
  Recipe r = two_datacenters("diloco");
  r.model.hidden = {64, 64};  // blocks of 256 elements, so the scales cost 1/64 of the codes
  run(r, "fp32");
  r.sync.diloco.dtype = Codec::int8;
  r.sync.diloco.error_feedback = true;
  const TrainSummary q = run(r, "int8");
  const double ratio = inter("fp32") / inter("int8");
  std::cout << "inter-datacenter bytes, fp32 / int8 pseudo-gradients: " << ratio << "\n";
  EXPECT_GE(ratio, 3.9);
  EXPECT_TRUE(std::isfinite(q.final_loss));
}

}  // namespace
}  // namespace laconic
