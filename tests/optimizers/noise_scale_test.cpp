// Gradient noise scale (McCandlish et al. 2018) on synthetic gradients of known statistics.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "optimizers/noise_scale.h"

namespace laconic {
namespace {

TEST(NoiseScale, ExactExpectationsGiveTheExactRatio) {
  // Feeding E|g_b|^2 = |G|^2 + tr/b and E|G_B|^2 = |G|^2 + tr/B recovers |G|^2 and tr exactly.
  const double G2 = 2.5, tr = 400.0, b = 16, B = 128;
  NoiseScaleEstimator est({16, 128, 0.9});
  for (int i = 0; i < 5; ++i) est.update(G2 + tr / b, G2 + tr / B);
  EXPECT_NEAR(est.grad_sq(), G2, 1e-12);
  EXPECT_NEAR(est.trace_sigma(), tr, 1e-9);
  EXPECT_NEAR(est.simple_noise_scale(), tr / G2, 1e-9);
  EXPECT_EQ(est.state().steps, 5);
}

TEST(NoiseScale, NanBeforeAnyUpdate) {
  NoiseScaleEstimator est({1, 4, 0.99});
  EXPECT_TRUE(std::isnan(est.simple_noise_scale()));
  EXPECT_TRUE(std::isnan(est.grad_sq()));
}

// Per-example gradients G + e, e ~ N(0, diag(s)): a worker's batch-b mean is G + N(0, diag(s)/b),
// the average over N workers the batch-B (= N b) mean. True B_simple = sum(s) / |G|^2 = 64.
TEST(NoiseScale, ConvergesOnSyntheticGradients) {
  constexpr int D = 256, N = 8, b = 8, B = N * b, kSteps = 3000;
  std::vector<double> G(D), sd(D);
  double G2 = 0, tr = 0;
  for (int j = 0; j < D; ++j) {
    G[j] = std::cos(0.3 * j) * 0.1;
    const double s = 0.1 + 0.4 * (j % 5);  // per-example variance of coordinate j
    sd[j] = std::sqrt(s / b);
    G2 += G[j] * G[j];
    tr += s;
  }
  // Rescale the noise so that the true noise scale is exactly 64.
  const double k = std::sqrt(64.0 * G2 / tr);
  for (double& x : sd) x *= k;
  tr *= k * k;
  const double truth = tr / G2;
  ASSERT_NEAR(truth, 64.0, 1e-9);

  NoiseScaleEstimator est({b, B, 0.995});
  const auto key = rng::key({7, rng::kTest});
  std::vector<double> sum(D);
  std::uint64_t counter = 0;
  for (int step = 0; step < kSteps; ++step) {
    std::fill(sum.begin(), sum.end(), 0.0);
    double local_sq = 0;
    for (int w = 0; w < N; ++w) {
      double sq = 0;
      for (int j = 0; j < D; ++j) {
        const double g = G[j] + sd[j] * rng::normal(key, counter++);
        sq += g * g;
        sum[j] += g;
      }
      local_sq += sq / N;
    }
    double global_sq = 0;
    for (double s : sum) global_sq += (s / N) * (s / N);
    est.update(local_sq, global_sq);
  }
  std::printf("[noise scale] estimate %.3f, truth %.3f; |G|^2 %.4g vs %.4g; tr %.4g vs %.4g\n",
              est.simple_noise_scale(), truth, est.grad_sq(), G2, est.trace_sigma(), tr);
  EXPECT_NEAR(est.simple_noise_scale(), truth, 0.04 * truth);
  EXPECT_NEAR(est.grad_sq(), G2, 0.04 * G2);
  EXPECT_NEAR(est.trace_sigma(), tr, 0.02 * tr);
}

TEST(NoiseScale, StateRoundTripContinuesIdentically) {
  NoiseScaleEstimator a({4, 32, 0.9}), b({4, 32, 0.9});
  for (int i = 0; i < 7; ++i) a.update(3.0 + i, 1.0 + 0.1 * i);
  b.load(a.state());
  a.update(5.0, 2.0);
  b.update(5.0, 2.0);
  EXPECT_EQ(a.simple_noise_scale(), b.simple_noise_scale());
  EXPECT_EQ(a.grad_sq(), b.grad_sq());
}

TEST(NoiseScale, RejectsBadOptions) {
  EXPECT_THROW(NoiseScaleEstimator({8, 8, 0.9}), Error);
  EXPECT_THROW(NoiseScaleEstimator({0, 8, 0.9}), Error);
  EXPECT_THROW(NoiseScaleEstimator({1, 8, 1.0}), Error);
}

}  // namespace
}  // namespace laconic
