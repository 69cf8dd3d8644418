// Preemption (framework/train/stop.h): a signal caught mid-run stops every rank after the same
// step with a checkpoint of it and summary.json saying why; --resume auto then ends with the
// parameters of the run that was never stopped, bit for bit. train.time_limit the same, on its own.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>

#include "framework/train/metrics.h"
#include "framework/train/run_dir.h"
#include "framework/train/stop.h"
#include "framework/train/trainer.h"
#include "tests/train/synthetic.h"

namespace laconic {
namespace {

using testing::same_bits;

namespace fs = std::filesystem;

// Raises `sig` on one rank after step `at` (as a scheduler's SIGTERM would arrive: on one thread).
struct RaiseAt : StepHook {
  Loop& loop;
  int sig;
  std::int64_t at;
  RaiseAt(Loop& l, int s, std::int64_t a) : loop(l), sig(s), at(a) {}
  void after_step(StepState& s) override {
    if (s.step == at && loop.rank() == 1) std::raise(sig);
  }
};

class Stop : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("laconic_stop_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string run_dir(const std::string& name) const { return (dir_ / name).string(); }
  // A run into run_dir("stopped") that agrees every step it may and raises SIGUSR1 on rank 1
  // after step `at`.
  TrainOptions signalled_after(std::int64_t at) const {
    TrainOptions o;
    o.run_dir = run_dir("stopped");
    o.stop_on_signals = true;
    o.agree_every_step = true;  // the stop at the very next agreement (StopAgreement below otherwise)
    o.hooks.push_back([at](Loop& l) { return std::make_unique<RaiseAt>(l, SIGUSR1, at); });
    return o;
  }
  fs::path dir_;
};

Recipe small() {
  Recipe r;
  r.run.seed = 3;
  r.model.hidden = {16};
  r.model.dropout = 0.1f;
  r.train.micro_batch = 8;
  r.train.steps = 12;
  r.train.log_every = 4;
  r.optimizer.lr = 0.05;
  r.optimizer.momentum = 0.9;
  r.distributed.world_size = 3;
  r.sync.strategy = "diloco";  // replicas differ between syncs: every rank's state must be saved
  r.sync.diloco.period = 4;
  return r;
}


TEST_F(Stop, ASignalStopsEveryRankWithACheckpointAndTheResumedRunEndsBitForBit) {
  const TrainData data = image_data(testing::blobs(600, 12, 5, 1), testing::blobs(200, 12, 5, 2));
  const Recipe r = small();
  TrainOptions whole;
  whole.run_dir = run_dir("whole");
  const TrainSummary full = train(r, data, whole);

  const TrainSummary s = train(r, data, signalled_after(5));  // mid-period
  EXPECT_EQ(s.stopped, "signal");
  EXPECT_EQ(s.signal, "SIGUSR1");
  EXPECT_EQ(s.steps, 6);
  EXPECT_EQ(s.planned_steps, 12);
  EXPECT_EQ(s.checkpoint, run_dir("stopped") + "/checkpoints/step-000000006");
  EXPECT_TRUE(fs::exists(s.checkpoint + "/MANIFEST.json"));
  const RunSummary written = parse_summary(read_text(run_dir("stopped") + "/summary.json"), "summary.json");
  EXPECT_EQ(written.stopped, "signal");
  EXPECT_EQ(written.signal, "SIGUSR1");
  EXPECT_EQ(written.steps, 6);

  TrainOptions resumed;
  resumed.run_dir = run_dir("stopped");
  resumed.resume = "auto";
  resumed.stop_on_signals = true;
  const TrainSummary rest = train(r, data, resumed);
  EXPECT_EQ(rest.first_step, 6);
  EXPECT_EQ(rest.steps, 12);
  EXPECT_TRUE(rest.stopped.empty());
  EXPECT_TRUE(same_bits(rest.final_params, full.final_params));
  EXPECT_EQ(rest.bytes_sent, full.bytes_sent);
}

// Asynchronous replicas agree on stopping only where they meet anyway (SyncStrategy::ranks_meet):
// a world all-reduce every step would hold the fast replicas back to a 2x slower one's pace
// within each round. A signal after step 4 stops every rank after step 7, the fast replicas' next
// arrival (period 4), with a checkpoint from which the run ends as the uninterrupted one.
TEST_F(Stop, AsynchronousReplicasStopWhereTheyMeet) {
  const TrainData data = image_data(testing::blobs(600, 12, 5, 1), testing::blobs(200, 12, 5, 2));
  Recipe r = small();
  r.sync.strategy = "async_diloco";
  r.network.groups = 3;
  r.network.stragglers.ranks = {2};
  r.network.straggler_slowdown = 2;
  r = parse_recipe(to_toml(r), "async.toml", {"sync.async_diloco.period=4"});
  TrainOptions whole;
  whole.run_dir = run_dir("whole");
  const TrainSummary full = train(r, data, whole);

  const TrainSummary s = train(r, data, signalled_after(4));  // agreeing where the replicas meet
  EXPECT_EQ(s.stopped, "signal");
  EXPECT_EQ(s.steps, 8);

  TrainOptions resumed;
  resumed.run_dir = run_dir("stopped");
  resumed.resume = "auto";
  const TrainSummary rest = train(r, data, resumed);
  EXPECT_EQ(rest.first_step, 8);
  EXPECT_EQ(rest.steps, 12);
  EXPECT_TRUE(same_bits(rest.final_params, full.final_params));
}

// The agreement's interval: every step while it is cheap beside a step; else about 2% of the time
// between agreements, at most a second of steps, and never past the time limit's lookahead.
TEST(StopAgreement, AgreesAsOftenAsItsCostAndTheLimitsAllow) {
  constexpr double step = 0.0625;  // 62.5 ms steps (exact in binary: a second is 16 of them)
  EXPECT_EQ(StopAgreement::interval(0, step, step, 0, 0), 1);          // no agreement measured yet
  EXPECT_EQ(StopAgreement::interval(1e-5, step, step, 0, 0), 1);       // 10 us beside a step
  EXPECT_EQ(StopAgreement::interval(0.009, 1e-4, 1e-4, 0, 0), 1);      // 9 ms: cheap, whatever the step
  EXPECT_EQ(StopAgreement::interval(0.0101, step, step, 0, 0), 9);     // 10.1 ms: 2% of 9 steps
  EXPECT_EQ(StopAgreement::interval(0.05, step, step, 0, 0), 16);      // 50 ms: capped at a second of steps
  EXPECT_EQ(StopAgreement::interval(0.05, step, step, 9.0, 10.0), 15);  // 1 s left: 16 steps, one early
  EXPECT_EQ(StopAgreement::interval(0.05, step, step, 9.9, 10.0), 1);   // at the limit: every step
  EXPECT_EQ(StopAgreement::interval(0.05, step, step, 11.0, 10.0), 1);  // past it
  // A simulated network paces the agreements (its round trip beside its step); the time limit
  // is this machine's: 0.25 s of ~1 ms steps left allows 255 more, not 3 of the simulated ones.
  constexpr double wall = 1.0 / 1024;
  EXPECT_EQ(StopAgreement::interval(0.05, step, wall, 0, 0), 16);
  EXPECT_EQ(StopAgreement::interval(0.05, step, wall, 9.75, 10.0), 16);
  EXPECT_EQ(StopAgreement::interval(0.05, step, wall, 10.0 - 16 * wall, 10.0), 15);
  // Replicas that meet every 4 steps: the next agreement must see the limit 4 steps ahead.
  EXPECT_EQ(StopAgreement::interval(0.05, step, wall, 10.0 - 16 * wall, 10.0, 4), 12);
}

TEST_F(Stop, TimeLimitStopsOnItsOwnAndResumesBitForBit) {
  const TrainData data = image_data(testing::blobs(600, 12, 5, 1), testing::blobs(200, 12, 5, 2));
  Recipe r = small();
  r.checkpoint.every = 5;
  TrainOptions whole;
  whole.run_dir = run_dir("whole");
  const TrainSummary full = train(r, data, whole);

  Recipe limited = r;
  limited.train.time_limit.seconds = 1e-9;  // already past after the first step
  TrainOptions o;
  o.run_dir = run_dir("limited");
  const TrainSummary s = train(limited, data, o);
  EXPECT_EQ(s.stopped, "time_limit");
  EXPECT_TRUE(s.signal.empty());
  EXPECT_EQ(s.steps, 1);
  EXPECT_TRUE(fs::exists(run_dir("limited") + "/checkpoints/step-000000001/MANIFEST.json"));

  TrainOptions resumed;
  resumed.run_dir = run_dir("limited");
  resumed.resume = "auto";
  const TrainSummary rest = train(r, data, resumed);  // the limit lifted: it is not part of the recipe hash
  EXPECT_EQ(rest.first_step, 1);
  EXPECT_TRUE(same_bits(rest.final_params, full.final_params));
}

}  // namespace
}  // namespace laconic
