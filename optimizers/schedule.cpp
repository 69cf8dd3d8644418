#include "optimizers/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "framework/core/check.h"

namespace laconic {

LrSchedule::LrSchedule(ScheduleOptions opts) : opts_(opts) {
  LC_CHECK(opts_.peak_lr > 0.0, "peak_lr ", opts_.peak_lr);
  LC_CHECK(opts_.warmup_steps >= 0 && opts_.total_steps >= 1, "warmup ", opts_.warmup_steps,
           " total ", opts_.total_steps);
  LC_CHECK(opts_.min_ratio >= 0.0 && opts_.min_ratio <= 1.0, "min_ratio ", opts_.min_ratio);
}

double LrSchedule::at(std::int64_t step) const {
  if (step < opts_.warmup_steps)
    return opts_.peak_lr * static_cast<double>(step + 1) / static_cast<double>(opts_.warmup_steps);
  if (opts_.decay == LrDecay::constant) return opts_.peak_lr;
  // Cosine over the steps after warmup: t = 0 gives the peak, the last step (t = span) the floor.
  const double span = static_cast<double>(std::max<std::int64_t>(1, opts_.total_steps - 1 - opts_.warmup_steps));
  const double t = std::min(1.0, static_cast<double>(step - opts_.warmup_steps) / span);
  const double floor = opts_.peak_lr * opts_.min_ratio;
  return floor + (opts_.peak_lr - floor) * 0.5 * (1.0 + std::cos(std::numbers::pi * t));
}

}  // namespace laconic
