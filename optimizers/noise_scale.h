// Gradient noise scale (McCandlish, Kaplan, Amodei et al. 2018, "An Empirical Model of
// Large-Batch Training", section 2.2 and appendix A.1): the "simple" noise scale
//   B_simple = tr(Sigma) / |G|^2
// (Sigma: per-example gradient covariance, G: true gradient) is the batch size beyond which
// larger batches stop paying off. Data-parallel training gets it almost for free: each of N
// workers has a gradient g_b of batch b and the all-reduce gives G_B of batch B = N * b, and
//   E|g_b|^2 = |G|^2 + tr(Sigma) / b,   E|G_B|^2 = |G|^2 + tr(Sigma) / B,
// so the unbiased per-step estimates are
//   |G|^2     ~ (B * |G_B|^2 - b * |g_b|^2) / (B - b)
//   tr(Sigma) ~ (|g_b|^2 - |G_B|^2) / (1/b - 1/B).
// Each is noisy (and may be negative) at one step; as in the paper's appendix, both are smoothed
// by exponential moving averages and B_simple is the ratio of the two averages (not the average
// of ratios, which is biased).
#pragma once

#include <cstdint>

namespace laconic {

struct NoiseScaleOptions {
  std::int64_t local_batch = 1;   // b: examples behind one worker's gradient
  std::int64_t global_batch = 2;  // B: examples behind the averaged gradient (> b)
  double ema_decay = 0.99;        // weight of the past in both moving averages
};

// The estimator's whole state (for checkpoints): the two raw (not bias-corrected) averages.
struct NoiseScaleState {
  double grad_sq_ema = 0.0;
  double trace_ema = 0.0;
  std::int64_t steps = 0;
};

class NoiseScaleEstimator {
 public:
  explicit NoiseScaleEstimator(NoiseScaleOptions opts);

  // One step: local_sq = |g_b|^2 averaged over the workers (each worker's squared norm before
  // the all-reduce), global_sq = |G_B|^2 (the squared norm of the averaged gradient).
  void update(double local_sq, double global_sq);

  // Bias-corrected averages (divided by 1 - decay^steps, as in Adam); NaN before any update.
  double grad_sq() const;      // |G|^2
  double trace_sigma() const;  // tr(Sigma)
  // tr(Sigma) / |G|^2 from the averages; NaN before any update or while the |G|^2 average <= 0.
  double simple_noise_scale() const;

  const NoiseScaleState& state() const { return state_; }
  void load(const NoiseScaleState& state) { state_ = state; }

 private:
  double debias() const;  // 1 - decay^steps

  NoiseScaleOptions opts_;
  NoiseScaleState state_;
};

}  // namespace laconic
