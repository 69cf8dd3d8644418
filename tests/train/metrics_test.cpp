// metrics.jsonl means the same across world sizes and restarts: `loss` is the mean over the whole
// global batch (1 worker x K*b and K workers x b log the same loss), a run killed after a
// checkpoint and resumed writes the uninterrupted run's records in every field that does not
// measure time, and the bytes a run reports do not depend on how often it logs, checks replicas
// or checkpoints (those talk over the control plane).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/check.h"
#include "framework/train/trainer.h"
#include "tests/train/synthetic.h"

namespace laconic {
namespace {

namespace fs = std::filesystem;
using testing::blobs;
using testing::injecting;

TrainData synthetic() { return image_data(blobs(960, 12, 5, 1), blobs(200, 12, 5, 2)); }

class Metrics : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("laconic_metrics_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string run_dir(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

std::vector<nlohmann::json> records(const std::string& run_dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

Recipe base() {
  Recipe r;
  r.run.seed = 5;
  r.model.hidden = {16};
  r.train.steps = 16;
  r.train.log_every = 4;
  r.optimizer.lr = 0.05;
  r.optimizer.momentum = 0.9;
  r.schedule.warmup_steps = 3;
  r.schedule.decay = LrDecay::cosine;
  r.distributed.timeout_s = 30;
  return r;
}

TEST_F(Metrics, LossIsTheGlobalBatchMeanAtEveryWorldSize) {
  const TrainData data = synthetic();
  for (const int k : {3, 5}) {
    SCOPED_TRACE(::testing::Message() << "K = " << k);
    Recipe one = base();
    one.train.micro_batch = 8 * k;
    one.distributed.world_size = 1;
    Recipe many = base();
    many.train.micro_batch = 8;
    many.distributed.world_size = k;
    TrainOptions a, b;
    a.run_dir = run_dir("one_" + std::to_string(k));
    b.run_dir = run_dir("many_" + std::to_string(k));
    const TrainSummary sa = train(one, data, a);
    const TrainSummary sb = train(many, data, b);
    const auto ra = records(a.run_dir), rb = records(b.run_dir);
    ASSERT_EQ(ra.size(), 4u);
    ASSERT_EQ(ra.size(), rb.size());
    for (std::size_t i = 0; i < ra.size(); ++i) {
      const double x = ra[i]["loss"], y = rb[i]["loss"];
      EXPECT_EQ(ra[i]["step"], rb[i]["step"]);
      EXPECT_NEAR(x, y, 1e-5 * std::fabs(x)) << "record " << i;
    }
    EXPECT_NEAR(sa.final_loss, sb.final_loss, 1e-5 * std::fabs(sa.final_loss));
  }
}

// Every field of a record that does not measure time.
const char* const kMath[] = {"step", "epoch", "loss", "lr", "bytes_sent", "bytes_recv", "bytes_per_step",
                             "compression_ratio", "eval_loss", "eval_accuracy", "noise_scale", "grad_norm"};

void expect_same_records(const std::vector<nlohmann::json>& want, const std::vector<nlohmann::json>& got) {
  ASSERT_EQ(want.size(), got.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    for (const char* k : kMath) {
      EXPECT_EQ(want[i].contains(k), got[i].contains(k)) << "record " << i << " " << k;
      if (want[i].contains(k)) {
        EXPECT_EQ(want[i][k], got[i][k]) << "record " << i << " (step " << want[i]["step"] << ") " << k;
      }
    }
}

struct Case {
  const char* name;
  StrategyName strategy;
  std::vector<SyncPhase> phases;
};

TEST_F(Metrics, AResumedRunWritesTheUninterruptedRunsRecords) {
  const TrainData data = synthetic();
  const std::vector<Case> cases = {
      {"allreduce", "allreduce", {}},
      {"powersgd", "powersgd", {}},
      {"onebit", "onebit", {}},
      {"diloco", "diloco", {}},
      {"phased", "allreduce", {{"allreduce", 5}, {"powersgd", 0}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Recipe r = base();
    r.model.dropout = 0.1f;
    r.train.micro_batch = 8;
    r.train.eval_every = 5;     // records between multiples of log_every too
    r.train.noise_scale = c.strategy == "allreduce" && c.phases.empty();
    r.optimizer.grad_clip = 5;  // grad_norm in every record
    r.distributed.world_size = 3;
    r.sync.strategy = c.strategy;
    r.sync.phases.phases = c.phases;
    r.sync.bucket_mb = 0.0004;
    r.sync.powersgd.start_iter = 3;  // the checkpoint at 6 falls after the dense start
    r.sync.powersgd.rank = 2;
    r.sync.onebit.warmup_steps = 2;
    r.sync.diloco.period = 4;
    r.checkpoint.every = 6;  // mid log interval: the checkpoint holds half an interval
    TrainOptions whole;
    whole.run_dir = run_dir(std::string(c.name) + "_whole");
    train(r, data, whole);

    // Killed at step 10 (after the checkpoint of step 6 and the record of step 8), then resumed.
    Recipe killed = r;
    killed.fault = {FaultKind::throw_, 1, 9};
    TrainOptions first;
    first.run_dir = run_dir(std::string(c.name) + "_resumed");
    EXPECT_THROW(train(killed, data, injecting(killed, first)), Error);
    TrainOptions again = first;
    again.resume = "auto";
    const TrainSummary s = train(r, data, again);
    ASSERT_EQ(s.first_step, 6);
    expect_same_records(records(whole.run_dir), records(first.run_dir));
  }
}

TEST_F(Metrics, BytesDoNotDependOnLoggingChecksOrCheckpoints) {
  const TrainData data = synthetic();
  Recipe r = base();
  r.train.micro_batch = 8;
  r.distributed.world_size = 3;
  TrainOptions plain;
  plain.run_dir = run_dir("plain");
  const TrainSummary a = train(r, data, plain);
  r.train.log_every = 1;
  r.guards.check_every = 2;
  r.checkpoint.every = 4;
  TrainOptions busy;
  busy.run_dir = run_dir("busy");
  const TrainSummary b = train(r, data, busy);
  EXPECT_EQ(a.bytes_sent, b.bytes_sent);
  EXPECT_EQ(a.bytes_recv, b.bytes_recv);
  EXPECT_EQ(records(plain.run_dir).back()["bytes_sent"], records(busy.run_dir).back()["bytes_sent"]);
}

}  // namespace
}  // namespace laconic

namespace laconic {
namespace {

// The live estimate of the peak inter-tier rate: windows between consecutive records, the first
// record only the base (its interval holds the start's broadcast).
TEST(PeakInterRate, IsTheBusiestWindowAfterTheFirstRecord) {
  std::vector<MetricsRecord> r(4);
  const std::uint64_t bytes[] = {1000000, 1000600, 1000600, 1001000};
  const double t[] = {0.5, 1.5, 2.5, 3.0};
  for (std::size_t i = 0; i < 4; ++i) {
    r[i].step = static_cast<std::int64_t>(10 * (i + 1));
    r[i].bytes_inter = bytes[i];
    r[i].sim_time_s = t[i];
  }
  EXPECT_DOUBLE_EQ(peak_inter_rate(r), 800.0);  // 400 bytes in 0.5 s; the first window (1e6 in 0.5 s) is not one
  r.resize(1);
  EXPECT_TRUE(std::isnan(peak_inter_rate(r)));
}

}  // namespace
}  // namespace laconic

namespace laconic {
namespace {

// What a rank holds, in closed form: an MLP of 12-16-5 (293 parameters) under AdamW (two moments
// and its step count) and DiLoCo (the anchor and the outer momentum), in summary.json too.
TEST_F(Metrics, TheMemoryReportCountsEachStateBuffer) {
  const TrainData data = synthetic();
  Recipe r = base();
  r.optimizer.name = "adamw";
  r.sync.strategy = "diloco";
  r.sync.diloco.period = 4;
  r.distributed.world_size = 2;
  TrainOptions o;
  o.run_dir = run_dir("memory");
  const TrainSummary s = train(r, data, o);
  const std::uint64_t n = 12 * 16 + 16 + 16 * 5 + 5;
  EXPECT_EQ(s.memory_weights, 4 * n);
  EXPECT_EQ(s.memory_gradients, 4 * n);
  EXPECT_EQ(s.memory_optimizer, 4 * (2 * n + 1));
  EXPECT_EQ(s.memory_strategy, 4 * (2 * n));
  ASSERT_TRUE(s.peak_rss.has_value());
  EXPECT_GT(*s.peak_rss, 1u << 20);
  std::ifstream in(o.run_dir + "/summary.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["memory_optimizer"], 4 * (2 * n + 1));
  EXPECT_EQ(j["memory_strategy"], 4 * (2 * n));
  EXPECT_NE(done_line(s).find("laconic: held per rank: weights 1.17 KB"), std::string::npos) << done_line(s);
}

}  // namespace
}  // namespace laconic
