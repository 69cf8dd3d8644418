// Straggler reports: every metrics record carries the ranks' median compute per step, the slowest
// and its rank (gathered with the loss, no extra collective); a rank slower than
// guards.straggler_factor x the median in guards.straggler_records records in a row is named once.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "framework/train/trainer.h"
#include "tests/train/synthetic.h"

namespace laconic {
namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Straggler, ASlowRankIsInEveryRecordAndNamedOnce) {
  // Steps of a few milliseconds, so that a rank thread descheduled for a time slice (4 ranks on
  // 2 cores) stays well below the straggler's 20x.
  const TrainData data = image_data(testing::blobs(2000, 256, 5, 1), testing::blobs(200, 256, 5, 2));
  Recipe r;
  r.model.hidden = {512};
  r.train.micro_batch = 64;
  r.train.steps = 24;
  r.train.log_every = 4;
  r.distributed.world_size = 4;
  r.network.groups = 2;               // simulated: rank 2's compute counts 20 times
  r.network.stragglers.ranks = {2};
  r.network.straggler_slowdown = 20;
  r.train.trace.value = false;
  std::ostringstream log;
  TrainOptions o;
  o.log = &log;
  const TrainSummary s = train(r, data, o);
  ASSERT_EQ(s.records.size(), 6u);
  for (const MetricsRecord& m : s.records) {
    EXPECT_EQ(m.slowest_rank, 2) << "step " << m.step;
    EXPECT_GT(m.step_time_max_s, 1.5 * m.step_time_median_s) << "step " << m.step;
    EXPECT_GT(m.step_time_median_s, 0) << "step " << m.step;
  }
  EXPECT_EQ(count(log.str(), "laconic: warning: rank 2 is a straggler: "), 1u) << log.str();
  EXPECT_EQ(count(log.str(), "is a straggler"), 1u) << log.str();
}

TEST(Straggler, OneRankHasNoSpread) {
  const TrainData data = image_data(testing::blobs(600, 12, 5, 1), testing::blobs(200, 12, 5, 2));
  Recipe r;
  r.model.hidden = {32};
  r.train.micro_batch = 8;
  r.train.steps = 4;
  r.train.log_every = 2;
  const TrainSummary s = train(r, data, {});
  for (const MetricsRecord& m : s.records) {
    EXPECT_EQ(m.slowest_rank, 0);
    EXPECT_EQ(m.step_time_max_s, m.step_time_median_s);
  }
}

}  // namespace
}  // namespace laconic
