// AdamW (Loshchilov & Hutter 2019, decoupled weight decay) with torch.optim.AdamW 1.13 semantics
// (amsgrad off, maximize off), so results match it step for step. With t the step count (from 1):
//   w = w * (1 - lr * wd)                          (decay group only; first, as torch does)
//   m = b1 * m + (1 - b1) * g                      (exp_avg)
//   v = b2 * v + (1 - b2) * g * g                  (exp_avg_sq)
//   denom = sqrt(v) / sqrt(1 - b2^t) + eps         (eps outside the square root)
//   w = w - lr / (1 - b1^t) * m / denom
// State: "exp_avg", "exp_avg_sq" (laid out like the parameters) and "step" (one element).
#pragma once

#include <cstddef>
#include <cstdint>
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

// Throws unless the options are in range (betas in [0, 1), eps > 0, weight_decay >= 0).
void check(const AdamWOptions& o);

// The scalars of step t (from 1), formed in double and rounded to float once (as torch does with
// Python scalars), and the update of one tensor on the host with them: AdamW::step applies it to
// every tensor, Muon (muon.h) to the tensors it leaves to AdamW.
struct AdamWStep {
  AdamWStep(const AdamWOptions& o, double lr, std::int64_t t);
  // w, m, v: [n] in place; g: [n]; decays: the tensor is in ParamGroup::decay.
  void update(float* w, const float* g, float* m, float* v, std::size_t n, bool decays) const;

  float b1, one_minus_b1, b2, one_minus_b2, step_size, bc2_sqrt, eps, decay;
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
