// Student's t and the paired interval (core/stats.h) against closed forms and published tables.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "core/stats.h"

namespace laconic {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(StudentT, CdfMatchesTheClosedFormsOfOneAndTwoDegreesOfFreedom) {
  for (const double t : {-30.0, -2.5, -0.3, 0.0, 0.7, 1.0, 4.0, 250.0}) {
    // df 1 is Cauchy's; df 2 has 1/2 + t / (2 sqrt(2 + t^2)).
    EXPECT_NEAR(student_t_cdf(t, 1), 0.5 + std::atan(t) / std::numbers::pi, 1e-12) << t;
    EXPECT_NEAR(student_t_cdf(t, 2), 0.5 + t / (2 * std::sqrt(2 + t * t)), 1e-12) << t;
  }
  EXPECT_TRUE(std::isnan(student_t_cdf(1.0, 0)));
}

TEST(StudentT, QuantileMatchesThePublishedTable) {
  // t_{0.975, df}, as printed in the usual tables (four decimals).
  const std::vector<std::pair<int, double>> table = {{1, 12.7062}, {2, 4.3027}, {3, 3.1824}, {4, 2.7764},
                                                     {5, 2.5706},  {9, 2.2622}, {10, 2.2281}, {29, 2.0452},
                                                     {30, 2.0423}, {100, 1.9840}, {1000, 1.9623}};
  for (const auto& [df, t] : table) EXPECT_NEAR(student_t_975(df), t, 5e-5) << df;
  EXPECT_NEAR(student_t_975(1'000'000), 1.959964, 1e-5);  // the normal's
  EXPECT_TRUE(std::isnan(student_t_975(0)));
}

TEST(PairedDifference, IsTheTIntervalOfTheDifferences) {
  const std::vector<double> a = {1.0, 2.0, 3.0}, b = {1.5, 2.4, 3.7};
  const Interval d = paired_difference(a, b);
  // Differences 0.5, 0.4, 0.7: mean 0.5333, std 0.152753, half width t_{0.975,2} std / sqrt(3).
  const double mean = 1.6 / 3, sd = std::sqrt(((0.5 - mean) * (0.5 - mean) + (0.4 - mean) * (0.4 - mean) +
                                                (0.7 - mean) * (0.7 - mean)) / 2);
  const double half = 4.302653 * sd / std::sqrt(3.0);
  EXPECT_EQ(d.n, 3);
  EXPECT_NEAR(d.mean, mean, 1e-12);
  EXPECT_NEAR(d.lo, mean - half, 1e-5);
  EXPECT_NEAR(d.hi, mean + half, 1e-5);
  EXPECT_FALSE(d.contains_zero());
  // The pairing is what matters: a shift shared by both runs of a seed cancels.
  const std::vector<double> a2 = {1.0, 12.0, -3.0}, b2 = {1.5, 12.4, -2.3};
  const Interval d2 = paired_difference(a2, b2);
  EXPECT_NEAR(d2.lo, d.lo, 1e-9);
  EXPECT_NEAR(d2.hi, d.hi, 1e-9);
}

TEST(PairedDifference, SkipsIncompletePairsAndHasNoIntervalBelowTwo) {
  const std::vector<double> a = {1.0, kNaN, 3.0, 4.0}, b = {2.0, 5.0, kNaN, 4.5};
  const Interval d = paired_difference(a, b);
  EXPECT_EQ(d.n, 2);
  EXPECT_NEAR(d.mean, 0.75, 1e-12);
  EXPECT_TRUE(d.contains_zero());  // 1.0 and 0.5: t_{0.975,1} = 12.7 makes the interval wide
  const Interval one = paired_difference(std::vector<double>{1.0}, std::vector<double>{2.0});
  EXPECT_EQ(one.n, 1);
  EXPECT_TRUE(std::isnan(one.lo));
  EXPECT_TRUE(one.contains_zero());  // no interval: never claimed to differ
}

}  // namespace
}  // namespace laconic
