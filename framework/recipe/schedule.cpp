#include "framework/recipe/schedule.h"

namespace laconic {

ScaledLr resolve_lr(const Recipe& r, std::int64_t global_batch) {
  const ScalingRule rule = r.schedule.scaling_rule;
  const std::int64_t base = r.schedule.base_batch > 0 ? r.schedule.base_batch : global_batch;
  return scale_lr(rule, r.optimizer.lr, base, global_batch, r.schedule.warmup_steps);
}

LrSchedule make_schedule(const Recipe& r, std::int64_t global_batch, std::int64_t steps) {
  const ScaledLr lr = resolve_lr(r, global_batch);
  ScheduleOptions s;
  s.peak_lr = lr.lr;
  s.warmup_steps = lr.warmup_steps;
  s.total_steps = steps;
  s.decay = r.schedule.decay;
  s.min_ratio = r.schedule.min_lr_ratio;
  s.power = r.schedule.power;
  return LrSchedule(s);
}

}  // namespace laconic
