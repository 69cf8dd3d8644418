#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "core/check.h"
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

namespace laconic {
namespace {

TEST(Schedule, PolyLinearAndSquaredClosedForms) {
  // Warmup 4, then poly decay over steps 4..104 (span 100) from 2.0 to 2.0 * 0.05.
  for (double p : {1.0, 2.0, 0.5}) {
    LrSchedule s({2.0, 4, 105, LrDecay::poly, 0.05, p});
    EXPECT_DOUBLE_EQ(s.at(0), 0.5);
    EXPECT_DOUBLE_EQ(s.at(4), 2.0);
    for (int k : {1, 30, 75, 99})
      EXPECT_NEAR(s.at(4 + k), 0.1 + 1.9 * std::pow(1.0 - k / 100.0, p), 1e-12) << p << " " << k;
    EXPECT_NEAR(s.at(104), 0.1, 1e-15);
    EXPECT_NEAR(s.at(500), 0.1, 1e-15);  // past the end: stays at the floor
  }
  // power 1 is linear: equal decrements.
  LrSchedule lin({1.0, 0, 11, LrDecay::poly, 0.0, 1.0});
  for (int t = 0; t <= 10; ++t) EXPECT_NEAR(lin.at(t), 1.0 - t / 10.0, 1e-15);
}

TEST(Schedule, PolyRejectsNonPositivePower) {
  EXPECT_THROW(LrSchedule({1.0, 0, 10, LrDecay::poly, 0.0, 0.0}), Error);
}

TEST(ScaleLr, LinearGoyal) {
  // Goyal et al. 2017: 0.1 at 256 -> 3.2 at 8192; warmup of 500 steps at 256 = 128000 examples
  // = 15.6 steps at 8192, rounded up to 16.
  const ScaledLr r = scale_lr(ScalingRule::linear, 0.1, 256, 8192, 500);
  EXPECT_DOUBLE_EQ(r.lr, 3.2);
  EXPECT_EQ(r.warmup_steps, 16);
  EXPECT_EQ(scale_lr(ScalingRule::linear, 0.1, 256, 8192, 512).warmup_steps, 16);  // exact
  EXPECT_EQ(scale_lr(ScalingRule::linear, 0.1, 256, 8192, 513).warmup_steps, 17);
  EXPECT_EQ(scale_lr(ScalingRule::linear, 0.1, 256, 8192, 1).warmup_steps, 1);  // never drops to 0
  EXPECT_EQ(scale_lr(ScalingRule::linear, 0.1, 256, 8192, 0).warmup_steps, 0);
}

TEST(ScaleLr, SqrtAndSmallerBatch) {
  const ScaledLr r = scale_lr(ScalingRule::sqrt, 1e-3, 512, 32768, 6400);
  EXPECT_NEAR(r.lr, 8e-3, 1e-15);  // sqrt(64) = 8
  EXPECT_EQ(r.warmup_steps, 100);
  const ScaledLr down = scale_lr(ScalingRule::sqrt, 0.4, 256, 64, 10);
  EXPECT_NEAR(down.lr, 0.2, 1e-15);
  EXPECT_EQ(down.warmup_steps, 40);  // 4x smaller batch, 4x the steps
  const ScaledLr lin_down = scale_lr(ScalingRule::linear, 0.4, 256, 64, 10);
  EXPECT_NEAR(lin_down.lr, 0.1, 1e-15);
}

TEST(ScaleLr, NoneScalesNothing) {
  const ScaledLr r = scale_lr(ScalingRule::none, 0.3, 256, 8192, 500);
  EXPECT_EQ(r.lr, 0.3);
  EXPECT_EQ(r.warmup_steps, 500);
}

TEST(ScaleLr, RejectsBadArguments) {
  EXPECT_THROW(scale_lr(ScalingRule::linear, 0.0, 256, 512, 0), Error);
  EXPECT_THROW(scale_lr(ScalingRule::linear, 0.1, 0, 512, 0), Error);
  EXPECT_THROW(scale_lr(ScalingRule::sqrt, 0.1, 256, 0, 0), Error);
  EXPECT_THROW(scale_lr(ScalingRule::sqrt, 0.1, 256, 512, -1), Error);
}

}  // namespace
}  // namespace laconic
