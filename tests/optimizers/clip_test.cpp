#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"
#include "optimizers/clip.h"
#include "optimizers/norms.h"

namespace laconic {
namespace {

TEST(Norms, SumSquaresEveryLengthAroundTheLanes) {
  for (std::size_t n : {0u, 1u, 7u, 8u, 9u, 15u, 16u, 17u, 101u}) {
    std::vector<float> x(n);
    long double expect = 0;
    for (std::size_t i = 0; i < n; ++i) {
      x[i] = 0.5f + static_cast<float>(i);
      expect += static_cast<long double>(x[i]) * x[i];
    }
    EXPECT_EQ(sum_squares(x), static_cast<double>(expect)) << n;  // small integers/4: exact
  }
}

TEST(Norms, DoubleAccumulationKeepsLargeSumsAccurate) {
  // 4M values of 0.1f: a float accumulator would be off by ~1e-3 relative; double is exact to ~1e-12.
  const std::size_t n = std::size_t{1} << 22;
  std::vector<float> x(n, 0.1f);
  const double v = 0.1f;
  EXPECT_NEAR(l2_norm(x), std::sqrt(static_cast<double>(n)) * v, 1e-11 * std::sqrt(n * v * v));
}

TEST(Clip, ScalesToMaxNormLikeTorch) {
  std::vector<float> g = {3.0f, 0.0f, -4.0f};
  EXPECT_EQ(global_grad_norm(g), 5.0);
  const double before = clip_grad_norm(g, 1.0);
  EXPECT_EQ(before, 5.0);
  const float c = static_cast<float>(1.0 / (5.0 + 1e-6));  // torch: max_norm / (norm + 1e-6)
  EXPECT_EQ(g[0], 3.0f * c);
  EXPECT_EQ(g[1], 0.0f);
  EXPECT_EQ(g[2], -4.0f * c);
  EXPECT_NEAR(global_grad_norm(g), 1.0, 1e-6);
}

TEST(Clip, BelowTheLimitIsUntouched) {
  std::vector<float> g = {3.0f, -4.0f};
  EXPECT_EQ(clip_grad_norm(g, 5.5), 5.0);
  EXPECT_EQ(g, (std::vector<float>{3.0f, -4.0f}));
  std::vector<float> empty;
  EXPECT_EQ(clip_grad_norm(empty, 1.0), 0.0);
}

TEST(Clip, NonFiniteNormLeavesGradientsForTheGuard) {
  std::vector<float> g = {1.0f, std::numeric_limits<float>::infinity()};
  EXPECT_TRUE(std::isinf(clip_grad_norm(g, 1.0)));
  EXPECT_EQ(g[0], 1.0f);
  g[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(clip_grad_norm(g, 1.0)));
  EXPECT_EQ(g[0], 1.0f);
}

TEST(Clip, RejectsNonPositiveMaxNorm) {
  std::vector<float> g = {1.0f};
  EXPECT_THROW(clip_grad_norm(g, 0.0), Error);
}

}  // namespace
}  // namespace laconic
