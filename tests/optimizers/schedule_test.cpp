#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "framework/core/check.h"
#include "optimizers/schedule.h"

namespace laconic {
namespace {

TEST(Schedule, ConstantWithWarmup) {
  LrSchedule s({0.4, 4, 100, LrDecay::constant, 0.0});
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.at(1), 0.2);
  EXPECT_DOUBLE_EQ(s.at(3), 0.4);
  EXPECT_DOUBLE_EQ(s.at(4), 0.4);
  EXPECT_DOUBLE_EQ(s.at(99), 0.4);
}

TEST(Schedule, CosineEndpointsAndMidpoint) {
  // Warmup 10, then cosine over steps 10..109 (span 99) from 1.0 down to 0.1.
  LrSchedule s({1.0, 10, 110, LrDecay::cosine, 0.1});
  EXPECT_DOUBLE_EQ(s.at(9), 1.0);
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);
  EXPECT_NEAR(s.at(109), 0.1, 1e-12);
  const double mid = 0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * 49.0 / 99.0));
  EXPECT_NEAR(s.at(59), mid, 1e-12);
  for (int t = 11; t < 110; ++t) EXPECT_LT(s.at(t), s.at(t - 1)) << t;  // strictly decreasing
}

TEST(Schedule, CosineWithoutWarmupStartsAtPeak) {
  LrSchedule s({0.05, 0, 1170, LrDecay::cosine, 0.0});
  EXPECT_DOUBLE_EQ(s.at(0), 0.05);
  EXPECT_NEAR(s.at(1169), 0.0, 1e-15);
}

TEST(Schedule, RejectsBadOptions) {
  EXPECT_THROW(LrSchedule({0.0, 0, 10, LrDecay::constant, 0.0}), Error);
  EXPECT_THROW(LrSchedule({0.1, 0, 10, LrDecay::cosine, 1.5}), Error);
}

}  // namespace
}  // namespace laconic
