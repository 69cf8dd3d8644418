// SGD with momentum, Nesterov momentum and L2 weight decay, with PyTorch's torch.optim.SGD
// semantics (dampening 0), so results match it step for step:
//   g = grad + wd * w                       (decay group only)
//   b = mu * b + g                          (b starts at 0, so the first b is g, as in torch)
//   d = nesterov ? g + mu * b : b
//   w = w - lr * d
#pragma once

#include <cstdint>
#include <vector>

#include "core/device.h"
#include "optimizers/fused_layout.h"
#include "optimizers/optimizer.h"

namespace laconic {

struct SgdOptions {
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;  // applied to ParamGroup::decay tensors only
};

class Sgd final : public Optimizer {
 public:
  explicit Sgd(SgdOptions opts);
  void prepare(const ParamStore& store) override;
  void step(ParamStore& store, double lr) override;
  std::string describe() const override;
  std::vector<StateTensor> state() override;

 private:
  SgdOptions opts_;
  DeviceArray<float> momentum_;  // on the store's device; sized by prepare() (first step, or a loader)
  FusedLayout layout_;           // the store's segment table on the GPU (cuda stores only)
};

}  // namespace laconic
