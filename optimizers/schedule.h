// Learning-rate schedule: linear warmup from 0 to the peak over `warmup_steps`, then constant or
// cosine decay to peak * min_ratio at the last step (Loshchilov & Hutter 2017, without restarts).
// Scaling rules (lr from a base batch) arrive with the large-batch optimizers.
#pragma once

#include <cstdint>

namespace laconic {

enum class LrDecay { constant, cosine };

struct ScheduleOptions {
  double peak_lr = 0.1;
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 1;
  LrDecay decay = LrDecay::constant;
  double min_ratio = 0.0;
};

class LrSchedule {
 public:
  explicit LrSchedule(ScheduleOptions opts);
  // Learning rate for optimizer step `step` (0-based): warmup gives peak*(step+1)/warmup, so
  // the first step already moves and step warmup-1 reaches the peak.
  double at(std::int64_t step) const;

 private:
  ScheduleOptions opts_;
};

}  // namespace laconic
