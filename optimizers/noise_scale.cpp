#include "optimizers/noise_scale.h"

#include <cmath>
#include <limits>

#include "core/check.h"

namespace laconic {

NoiseScaleEstimator::NoiseScaleEstimator(NoiseScaleOptions opts) : opts_(opts) {
  LC_CHECK(opts_.local_batch > 0 && opts_.global_batch > opts_.local_batch, "local batch ",
           opts_.local_batch, " global batch ", opts_.global_batch, " (need 0 < b < B)");
  LC_CHECK(opts_.ema_decay >= 0.0 && opts_.ema_decay < 1.0, "ema_decay ", opts_.ema_decay);
}

void NoiseScaleEstimator::update(double local_sq, double global_sq) {
  const double b = static_cast<double>(opts_.local_batch), B = static_cast<double>(opts_.global_batch);
  const double grad_sq = (B * global_sq - b * local_sq) / (B - b);
  const double trace = (local_sq - global_sq) / (1.0 / b - 1.0 / B);
  const double a = opts_.ema_decay;
  state_.grad_sq_ema = a * state_.grad_sq_ema + (1.0 - a) * grad_sq;
  state_.trace_ema = a * state_.trace_ema + (1.0 - a) * trace;
  ++state_.steps;
}

double NoiseScaleEstimator::debias() const {
  return 1.0 - std::pow(opts_.ema_decay, static_cast<double>(state_.steps));
}

double NoiseScaleEstimator::grad_sq() const {
  if (state_.steps == 0) return std::numeric_limits<double>::quiet_NaN();
  return state_.grad_sq_ema / debias();
}

double NoiseScaleEstimator::trace_sigma() const {
  if (state_.steps == 0) return std::numeric_limits<double>::quiet_NaN();
  return state_.trace_ema / debias();
}

double NoiseScaleEstimator::simple_noise_scale() const {
  if (state_.steps == 0 || !(state_.grad_sq_ema > 0.0)) return std::numeric_limits<double>::quiet_NaN();
  return state_.trace_ema / state_.grad_sq_ema;  // the bias corrections cancel
}

}  // namespace laconic
