// AdamW (Loshchilov & Hutter 2019, decoupled weight decay) with torch.optim.AdamW 1.13 semantics
// (amsgrad off, maximize off), so results match it step for step. With t the step count (from 1):
//   w = w * (1 - lr * wd)                          (decay group only; first, as torch does)
//   m = b1 * m + (1 - b1) * g                      (exp_avg)
//   v = b2 * v + (1 - b2) * g * g                  (exp_avg_sq)
//   denom = sqrt(v) / sqrt(1 - b2^t) + eps         (eps outside the square root)
//   w = w - lr / (1 - b1^t) * m / denom
// State: "exp_avg", "exp_avg_sq" (laid out like the parameters) and "step" (one element).
#pragma once

#include <vector>

#include "core/device.h"
#include "optimizers/adam_moments.h"
#include "optimizers/optimizer.h"

namespace laconic {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // applied to ParamGroup::decay tensors only
};

class AdamW final : public Optimizer {
 public:
  explicit AdamW(AdamWOptions opts);
  void step(ParamStore& store, double lr) override;
  std::string describe() const override;
  void prepare(const ParamStore& store) override;
  std::vector<StateTensor> state() override;

 private:
  AdamWOptions opts_;
  AdamMoments m_;
};

}  // namespace laconic
