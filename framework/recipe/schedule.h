// The learning-rate schedule a recipe's [optimizer] and [schedule] describe, at a global batch.
#pragma once

#include <cstdint>

#include "framework/recipe/recipe.h"
#include "optimizers/schedule.h"

namespace laconic {

// The learning rate and warmup actually used: optimizer.lr and schedule.warmup_steps scaled
// from schedule.base_batch to the global batch by schedule.scaling_rule.
ScaledLr resolve_lr(const Recipe& r, std::int64_t global_batch);
LrSchedule make_schedule(const Recipe& r, std::int64_t global_batch, std::int64_t steps);

}  // namespace laconic
