// Checkpoints in the step loop: for every strategy, 2N steps equal N steps + resume + N steps bit
// for bit (parameters and losses); resume refuses another recipe or world size; guards skip or
// abort on non-finite gradients and catch replica drift; an injected failure stops every rank
// with a message naming the rank and step.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/check.h"
#include "framework/train/trainer.h"
#include "tests/train/synthetic.h"

namespace laconic {
namespace {

using testing::same_bits;

using testing::blobs;
using testing::injecting;

TrainData synthetic() { return image_data(blobs(600, 12, 5, 1), blobs(200, 12, 5, 2)); }

class Resume : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("laconic_resume_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string run_dir(const std::string& name) const { return (dir_ / name).string(); }
  // `r` trained whole, and resumed from its checkpoint of step 8 (run directories tag_whole and
  // tag_resumed): the same final parameters, losses (the mean over steps 9..16) and held-out
  // loss, bit for bit.
  void expect_resume_from_step_8(const Recipe& r, const TrainData& data, const std::string& tag) const {
    TrainOptions whole;
    whole.run_dir = run_dir(tag + "_whole");
    const TrainSummary a = train(r, data, whole);
    TrainOptions resumed;
    resumed.run_dir = run_dir(tag + "_resumed");
    resumed.resume = whole.run_dir + "/checkpoints/step-000000008";
    const TrainSummary b = train(r, data, resumed);
    EXPECT_EQ(b.first_step, 8);
    EXPECT_TRUE(same_bits(a.final_params, b.final_params));
    EXPECT_EQ(a.final_loss, b.final_loss);
    EXPECT_EQ(a.eval_loss, b.eval_loss);
  }

  std::filesystem::path dir_;
};

Recipe small(StrategyName kind) {
  Recipe r;
  r.run.seed = 7;
  r.model.hidden = {16};
  r.model.dropout = 0.1f;  // randomness keyed by the step must resume too
  r.train.micro_batch = 8;
  r.train.steps = 16;
  r.train.log_every = 8;
  r.optimizer.lr = 0.05;
  r.optimizer.momentum = 0.9;
  r.schedule.warmup_steps = 3;
  r.schedule.decay = LrDecay::cosine;
  r.distributed.world_size = 3;
  r.distributed.timeout_s = 30;
  r.sync.strategy = kind;
  r.sync.bucket_mb = 0.0004;  // several buckets
  r.sync.powersgd.start_iter = 3;
  r.sync.powersgd.rank = 2;
  r.sync.onebit.warmup_steps = 2;
  r.sync.topk.ratio = 0.1;
  r.sync.local_sgd.period = 3;  // N = 8 is mid-period: replicas differ at the checkpoint
  r.sync.diloco.period = 3;
  // Streaming: fragment 0 launches after step 7 and merges after 9, so the checkpoint of step 8
  // holds it in flight.
  r.sync.streaming_diloco.period = 4;
  r.sync.streaming_diloco.overlap_steps = 2;
  r.sync.streaming_diloco.dtype = Codec::int4;
  r.sync.streaming_diloco.error_feedback = true;
  r.sync.streaming_diloco.block = 16;
  r.sync.sparseloco.period = 3;
  r.sync.sparseloco.chunk = 64;
  r.sync.sparseloco.ratio = 0.1;
  r.sync.demo.chunk = 8;
  r.sync.demo.topk = 2;
  if (kind == "demo") r.optimizer.momentum = 0;
  r.checkpoint.every = 8;
  return r;
}

TEST_F(Resume, EveryStrategyResumesBitForBit) {
  const TrainData data = synthetic();
  for (const StrategyName kind : {"allreduce", "topk", "powersgd", "onebit",
                              "local_sgd", "diloco", "streaming_diloco", "sparseloco",
                              "demo"}) {
    for (const bool momentum_correction : {false, true}) {
      const bool gradient = kind == "allreduce" || kind == "topk" || kind == "powersgd" || kind == "onebit";
      if (momentum_correction && !gradient) continue;  // periodic strategies and DeMo: no
      SCOPED_TRACE(::testing::Message() << kind.c_str() << (momentum_correction ? " with momentum correction" : ""));
      Recipe r = small(kind);
      if (momentum_correction) {
        r.sync.momentum = 0.9;
        r.optimizer.momentum = 0;
      }
      expect_resume_from_step_8(r, data, std::string(kind.c_str()) + (momentum_correction ? "_mc" : ""));
    }
  }
}

// MuLoCo (recipes/cross_dc_muloco.toml, small): Muon inside DiLoCo with 2-bit pseudo-gradients
// and error feedback. The checkpoint of step 8 falls mid-period, with Muon's momentum, Adam's
// moments of the other tensors and the codec's residuals all non-zero.
TEST_F(Resume, MuLoCoResumesBitForBit) {
  const TrainData data = synthetic();
  Recipe r = small("diloco");
  r.model.hidden = {16, 16};  // fc1 and fc2 hidden matrices (Muon), fc3 the head (AdamW)
  r.optimizer.name = "muon";
  r.optimizer.lr = 0.01;
  r.optimizer.weight_decay = 0.01;
  r.sync.diloco.dtype = Codec::int2;
  r.sync.diloco.error_feedback = true;
  r.sync.diloco.block = 16;
  expect_resume_from_step_8(r, data, "muloco");
}

// Eager DiLoCo and eager streaming DiLoCo (the all-reduce overlapping the next period): the
// checkpoint of step 8 falls while the reduction of step 5's sync is in flight and the replicas'
// anchors differ; it holds the reduced mean and each rank's own pseudo-gradient.
TEST_F(Resume, EagerDilocoResumesBitForBit) {
  const TrainData data = synthetic();
  for (const StrategyName kind : {"diloco", "streaming_diloco"}) {
    SCOPED_TRACE(kind.c_str());
    Recipe r = small(kind);
    r.sync.diloco.eager = true;
    r.sync.streaming_diloco.eager = true;
    r.sync.streaming_diloco.overlap_steps = 0;
    expect_resume_from_step_8(r, data, kind.c_str());
  }
}

// DES-LOC: the checkpoint of step 8 falls between syncs of all three states (periods 3, 5, 6), and
// the strategy keeps nothing: AdamW's moments in the checkpoint carry what it averaged.
TEST_F(Resume, DeslocResumesBitForBit) {
  const TrainData data = synthetic();
  Recipe r = small("desloc");
  r.optimizer.name = "adamw";
  r.optimizer.lr = 0.01;
  r.optimizer.weight_decay = 0.01;
  r = parse_recipe(to_toml(r), "desloc.toml",
                   {"sync.desloc.param_period=3", "sync.desloc.m_period=5", "sync.desloc.v_period=6"});
  expect_resume_from_step_8(r, data, "desloc");
}

// A 2x slower replica (simulated, DyLU) with rounds in progress and a window part-filled at the
// checkpoint; and speeds measured over the first round (a run's own timing: the checkpoint
// carries them).
TEST_F(Resume, AsyncDilocoResumesBitForBit) {
  const TrainData data = synthetic();
  for (const char* speeds : {"network", "measured"}) {
    SCOPED_TRACE(speeds);
    Recipe r = small("async_diloco");
    r.network.groups = 3;
    r.network.stragglers.ranks = {2};
    r.network.straggler_slowdown = 2;
    r = parse_recipe(to_toml(r), "async.toml",
                     {"sync.async_diloco.period=3", "sync.async_diloco.window=2", "sync.async_diloco.activation=0.2",
                      "sync.async_diloco.dylu=true", std::string("sync.async_diloco.speeds=") + speeds});
    expect_resume_from_step_8(r, data, std::string("async_") + speeds);
  }
}

// TrainOptions::run_dir = "": nothing is written, the last step's checkpoint included (it once
// went to checkpoints/ in the working directory, where parallel tests raced over it).
TEST_F(Resume, ARunWithoutARunDirectoryWritesNothing) {
  std::filesystem::create_directories(dir_);
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir_);
  Recipe r = small("allreduce");
  r.checkpoint.every = 0;
  const TrainSummary s = train(r, synthetic(), {});
  std::filesystem::current_path(cwd);
  EXPECT_EQ(s.steps, 16);
  EXPECT_EQ(s.checkpoint, "");
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
  // checkpoint.every asks for checkpoints: refused without a run directory or an absolute dir.
  r.checkpoint.every = 8;
  EXPECT_THROW(train(r, synthetic(), {}), InputError);
}

TEST_F(Resume, AutoPicksTheNewestCompleteCheckpointOrStartsFresh) {
  const TrainData data = synthetic();
  Recipe r = small("allreduce");
  TrainOptions o;
  o.run_dir = run_dir("run");
  o.resume = "auto";  // nothing there yet: a fresh start
  const TrainSummary first = train(r, data, o);
  EXPECT_EQ(first.first_step, 0);
  // A half-written newer one (staging directory) is ignored.
  std::filesystem::create_directories(o.run_dir + "/checkpoints/step-000000099.tmp");
  // The newest complete checkpoint is the end of the run (the last step is always written): the
  // run is over, and resuming it again writes nothing.
  const auto summary_file = [&] { return std::filesystem::last_write_time(o.run_dir + "/summary.json"); };
  const auto written = summary_file();
  EXPECT_THROW(train(r, data, o), RunFinished);
  EXPECT_EQ(summary_file(), written);
  // More steps continue it from there; with a schedule that does not depend on the length, to
  // the parameters of a run that planned them from the start.
  r.schedule.decay = LrDecay::constant;
  o.run_dir = run_dir("constant");
  o.resume.clear();
  train(r, data, o);
  Recipe longer = r;
  longer.train.steps = 24;
  o.resume = "auto";
  const TrainSummary more = train(longer, data, o);
  EXPECT_EQ(more.first_step, 16);
  EXPECT_EQ(more.steps, 24);
  TrainOptions whole;
  whole.run_dir = run_dir("whole");
  EXPECT_TRUE(same_bits(train(longer, data, whole).final_params, more.final_params));
}

TEST_F(Resume, RefusesAnotherRecipeOrWorldSize) {
  const TrainData data = synthetic();
  Recipe r = small("allreduce");
  TrainOptions o;
  o.run_dir = run_dir("run");
  train(r, data, o);
  TrainOptions again = o;
  again.resume = o.run_dir + "/checkpoints/step-000000008";
  Recipe other = r;
  other.optimizer.lr = 0.1;
  try {
    train(other, data, again);
    FAIL() << "resumed a checkpoint of another recipe";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint of a different recipe: optimizer.lr = 0.05 in the checkpoint, 0.1 here"),
              std::string::npos)
        << e.what();
  }
  again.resume_any_recipe = true;
  EXPECT_EQ(train(other, data, again).first_step, 8);
  Recipe wider = r;
  wider.distributed.world_size = 2;
  try {
    train(wider, data, again);
    FAIL() << "resumed a checkpoint of another world size";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint of 3 ranks"), std::string::npos) << e.what();
  }
}

TEST_F(Resume, NonFiniteGradientsAreSkippedOnEveryRankOrAbort) {
  const TrainData data = synthetic();
  for (const StrategyName kind : {"allreduce", "topk"}) {
    SCOPED_TRACE(kind.c_str());
    Recipe r = small(kind);
    r.checkpoint.every = 0;
    r.fault = {FaultKind::nan, 1, 5};  // rank 1's gradient holds a NaN at step 6
    r.guards.nonfinite = NonfiniteKind::skip;
    r.guards.check_every = 1;  // and the replicas never drift apart
    const TrainSummary s = train(r, data, injecting(r));
    EXPECT_EQ(s.skipped_steps, 1);
    for (const float p : s.final_params) ASSERT_TRUE(std::isfinite(p));
    r.guards.nonfinite = NonfiniteKind::abort;
    try {
      train(r, data, injecting(r));
      FAIL() << "a NaN gradient did not stop the run";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("at step 6: non-finite gradient"), std::string::npos) << e.what();
    }
  }
}

TEST_F(Resume, AFailingRankStopsEveryRankWithItsRankAndStep) {
  const TrainData data = synthetic();
  Recipe r = small("allreduce");
  r.checkpoint.every = 0;
  r.fault = {FaultKind::throw_, 2, 4};
  try {
    train(r, data, injecting(r));
    FAIL() << "the injected failure did not stop the run";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 2 at step 5: fault injected: rank 2 throw at step 5"), std::string::npos)
        << e.what();
  }
  // A rank that stops answering: the others give up after distributed.timeout_s, no hang.
  r.fault = {FaultKind::stall, 1, 3};
  r.distributed.timeout_s = 0.5;
  EXPECT_THROW(train(r, data, injecting(r)), Error);
}

}  // namespace
}  // namespace laconic
