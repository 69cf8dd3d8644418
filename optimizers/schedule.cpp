#include "optimizers/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/check.h"

namespace laconic {

LrSchedule::LrSchedule(ScheduleOptions opts) : opts_(opts) {
  LC_CHECK(opts_.peak_lr > 0.0, "peak_lr ", opts_.peak_lr);
  LC_CHECK(opts_.warmup_steps >= 0 && opts_.total_steps >= 1, "warmup ", opts_.warmup_steps,
           " total ", opts_.total_steps);
  LC_CHECK(opts_.min_ratio >= 0.0 && opts_.min_ratio <= 1.0, "min_ratio ", opts_.min_ratio);
  LC_CHECK(opts_.power > 0.0, "power ", opts_.power);
}

double LrSchedule::at(std::int64_t step) const {
  if (step < opts_.warmup_steps)
    return opts_.peak_lr * static_cast<double>(step + 1) / static_cast<double>(opts_.warmup_steps);
  if (opts_.decay == LrDecay::constant) return opts_.peak_lr;
  // Decay over the steps after warmup: t = 0 gives the peak, the last step (t = 1) the floor.
  const double span = static_cast<double>(std::max<std::int64_t>(1, opts_.total_steps - 1 - opts_.warmup_steps));
  const double t = std::min(1.0, static_cast<double>(step - opts_.warmup_steps) / span);
  const double floor = opts_.peak_lr * opts_.min_ratio;
  const double shape = opts_.decay == LrDecay::cosine ? 0.5 * (1.0 + std::cos(std::numbers::pi * t))
                                                      : std::pow(1.0 - t, opts_.power);
  return floor + (opts_.peak_lr - floor) * shape;
}

ScaledLr scale_lr(ScalingRule rule, double base_lr, std::int64_t base_batch, std::int64_t global_batch,
                  std::int64_t base_warmup_steps) {
  LC_CHECK(base_lr > 0.0, "base_lr ", base_lr);
  LC_CHECK(base_batch > 0 && global_batch > 0, "base_batch ", base_batch, " global_batch ", global_batch);
  LC_CHECK(base_warmup_steps >= 0, "base_warmup_steps ", base_warmup_steps);
  if (rule == ScalingRule::none) return {base_lr, base_warmup_steps};
  const double ratio = static_cast<double>(global_batch) / static_cast<double>(base_batch);
  const double lr = rule == ScalingRule::linear ? base_lr * ratio : base_lr * std::sqrt(ratio);
  // ceil(w * B0 / B) in integers (exact; w * B0 stays far below 2^63 for real runs).
  const std::int64_t warmup = (base_warmup_steps * base_batch + global_batch - 1) / global_batch;
  return {lr, warmup};
}

}  // namespace laconic
