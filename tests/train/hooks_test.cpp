// The step loop's hook points (framework/train/hooks.h) in the order a hook sees them: after_step
// for every step that ran, end_step after every step, a skipped one too (an elastic replica's
// donations and sync log hang on it), after_loop once the loop is over, then finish.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "framework/train/trainer.h"
#include "tests/train/synthetic.h"

namespace laconic {
namespace {

using testing::blobs;
using testing::injecting;

// Rank 0's hook points, one line each.
struct Recorder final : StepHook {
  Loop& loop;
  std::vector<std::string>& seen;
  Recorder(Loop& l, std::vector<std::string>& s) : loop(l), seen(s) {}
  void note(const std::string& what) {
    if (loop.lead()) seen.push_back(what);
  }
  void after_step(StepState& s) override { note("after_step " + std::to_string(s.step)); }
  void end_step(std::int64_t step) override { note("end_step " + std::to_string(step)); }
  void after_loop(std::int64_t steps, bool stopped) override {
    note("after_loop " + std::to_string(steps) + (stopped ? " stopped" : " ran"));
  }
  void finish(TrainSummary&) override { note("finish"); }
};

Recipe small() {
  Recipe r;
  r.run.seed = 5;
  r.model.hidden = {16};
  r.train.micro_batch = 8;
  r.train.steps = 8;
  r.train.log_every = 4;
  r.optimizer.lr = 0.05;
  r.distributed.world_size = 2;
  return r;
}

TrainOptions recording(const Recipe& r, std::vector<std::string>& seen) {
  TrainOptions o = injecting(r);
  o.hooks.push_back([&seen](Loop& l) { return std::make_unique<Recorder>(l, seen); });
  return o;
}

TEST(StepHooks, EndStepFollowsEveryStepASkippedOneTooAndAfterLoopTheLast) {
  const TrainData data = image_data(blobs(400, 12, 5, 1), blobs(100, 12, 5, 2));
  Recipe r = small();
  r.fault = {FaultKind::nan, 1, 5};  // rank 1's gradient holds a NaN at step index 5
  r.guards.nonfinite = NonfiniteKind::skip;
  std::vector<std::string> seen;
  const TrainSummary s = train(r, data, recording(r, seen));
  ASSERT_EQ(s.skipped_steps, 1);
  std::vector<std::string> expected;
  for (int step = 0; step < 8; ++step) {
    if (step != 5) expected.push_back("after_step " + std::to_string(step));
    expected.push_back("end_step " + std::to_string(step));
  }
  expected.push_back("after_loop 8 ran");
  expected.push_back("finish");
  EXPECT_EQ(seen, expected);
}

TEST(StepHooks, AfterLoopSaysTheRunWasStopped) {
  const TrainData data = image_data(blobs(400, 12, 5, 1), blobs(100, 12, 5, 2));
  Recipe r = small();
  r.train.time_limit.seconds = 1e-9;  // already past after the first step
  std::vector<std::string> seen;
  const TrainSummary s = train(r, data, recording(r, seen));
  ASSERT_EQ(s.stopped, "time_limit");
  EXPECT_EQ(seen, (std::vector<std::string>{"after_step 0", "end_step 0", "after_loop 1 stopped", "finish"}));
}

}  // namespace
}  // namespace laconic
