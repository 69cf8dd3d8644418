// Learning-rate schedule: linear warmup from 0 to the peak over `warmup_steps`, then constant,
// cosine (Loshchilov & Hutter 2017, without restarts) or polynomial decay (BERT, LAMB: You et al.
// 2020) to peak * min_ratio at the last step.
// Scaling rules give the peak learning rate and warmup for a global batch from a base batch.
#pragma once

#include <cstdint>

#include "core/enum_names.h"

namespace laconic {

enum class LrDecay { constant, cosine, poly };
inline constexpr std::array kLrDecayNames{"constant", "cosine", "poly"};
constexpr std::span<const char* const> names(LrDecay) { return kLrDecayNames; }
inline const char* name_of(LrDecay v) { return enum_name(v); }

struct ScheduleOptions {
  double peak_lr = 0.1;
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 1;
  LrDecay decay = LrDecay::constant;
  double min_ratio = 0.0;
  double power = 1.0;  // poly only: lr = floor + (peak - floor) * (1 - t)^power; 1 = linear decay
};

class LrSchedule {
 public:
  explicit LrSchedule(ScheduleOptions opts);
  // Learning rate for optimizer step `step` (0-based): warmup gives peak*(step+1)/warmup, so
  // the first step already moves and step warmup-1 reaches the peak. After warmup, t runs from 0
  // (first step after warmup: the peak) to 1 (the last step, total_steps - 1: the floor).
  double at(std::int64_t step) const;

 private:
  ScheduleOptions opts_;
};

// How the learning rate grows with the global batch B from a base batch B0 tuned at base_lr:
//   none:   lr = base_lr
//   linear: lr = base_lr * B / B0          (Goyal et al. 2017, SGD / LARS)
//   sqrt:   lr = base_lr * sqrt(B / B0)    (Hoffer et al. 2017; You et al. 2020 for LAMB)
enum class ScalingRule { none, linear, sqrt };
inline constexpr std::array kScalingRuleNames{"none", "linear", "sqrt"};
constexpr std::span<const char* const> names(ScalingRule) { return kScalingRuleNames; }
inline const char* name_of(ScalingRule v) { return enum_name(v); }

struct ScaledLr {
  double lr;
  std::int64_t warmup_steps;
};

// The scaled peak lr, and the warmup scaled with it (linear and sqrt): base_warmup_steps are
// steps at base_batch, and the warmup keeps the same number of examples, so at batch B it takes
//   warmup_steps = ceil(base_warmup_steps * B0 / B)
// steps. This is Goyal et al.'s choice (warmup fixed in epochs, 5 at any batch): a larger batch
// warms up in fewer, larger steps. With rule none nothing is scaled (warmup stays as given).
ScaledLr scale_lr(ScalingRule rule, double base_lr, std::int64_t base_batch, std::int64_t global_batch,
                  std::int64_t base_warmup_steps);

}  // namespace laconic
