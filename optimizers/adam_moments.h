// The state the Adam family (AdamW, LAMB) shares: first and second moments laid out like the
// parameters on the store's device, the bias-correction step count, and the fused layout their
// CUDA kernels walk. Checkpoint names: "exp_avg", "exp_avg_sq", "step".
#pragma once

#include <vector>

#include "optimizers/device_state.h"
#include "optimizers/fused_layout.h"
#include "optimizers/step_count.h"

namespace laconic {

struct AdamMoments {
  DeviceArray<float> exp_avg, exp_avg_sq;  // on the store's device
  StepCount steps;                         // on the host
  FusedLayout layout;                      // cuda stores only

  void prepare(const ParamStore& store) {
    prepare_state(exp_avg, store);
    prepare_state(exp_avg_sq, store);
    if (on_cuda(store)) layout.prepare(store);
  }
  std::vector<StateTensor> state() {
    return {{"exp_avg", exp_avg.span(), exp_avg.device()}, {"exp_avg_sq", exp_avg_sq.span(), exp_avg_sq.device()},
            steps.tensor()};
  }
};

}  // namespace laconic
