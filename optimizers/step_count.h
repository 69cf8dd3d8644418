// The step count of an optimizer with bias correction (AdamW, LAMB), kept as a one-element float
// tensor so that a checkpoint saves and restores it with the moment buffers through state().
// A float holds every integer up to 2^24 (16.7M steps) exactly; past that, next() throws.
#pragma once

#include <array>
#include <cstdint>

#include "core/check.h"
#include "optimizers/optimizer.h"

namespace laconic {

class StepCount {
 public:
  // Counts one more step and returns the new count (1 on the first step).
  std::int64_t next() {
    const auto t = value() + 1;
    LC_CHECK(t <= (std::int64_t{1} << 24), "step count ", t, " beyond exact float range");
    data_[0] = static_cast<float>(t);
    return t;
  }
  std::int64_t value() const { return static_cast<std::int64_t>(data_[0]); }
  StateTensor tensor() { return {"step", data_}; }

 private:
  std::array<float, 1> data_{};
};

}  // namespace laconic
