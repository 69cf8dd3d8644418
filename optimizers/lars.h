// LARS: layer-wise adaptive rate scaling (You, Gitman & Ginsburg 2017), in the form of the MLPerf
// ResNet-50 reference. Per tensor in the decay group, with norms accumulated in double:
//   trust = eta * ||w|| / (||g|| + wd * ||w|| + eps)      (1 when ||w|| or ||g|| is 0)
//   g = g + wd * w
//   m = mu * m + lr * trust * g                           (the learning rate lives in m)
//   w = w - m
// no_decay tensors (biases, normalisation gains/shifts) are excluded from both: no decay and
// trust 1, i.e. plain heavy-ball momentum m = mu * m + lr * g (Goyal et al. 2017; MLPerf).
// State: "momentum", laid out like the parameters.
#pragma once

#include <vector>

#include "core/device.h"
#include "optimizers/fused_layout.h"
#include "optimizers/optimizer.h"

namespace laconic {

struct LarsOptions {
  double momentum = 0.9;
  double eta = 0.001;          // trust coefficient
  double weight_decay = 1e-4;  // decay group only
  double eps = 0.0;
};

class Lars final : public Optimizer {
 public:
  explicit Lars(LarsOptions opts);
  void step(ParamStore& store, double lr) override;
  std::string describe() const override;
  void prepare(const ParamStore& store) override;
  std::vector<StateTensor> state() override;

  // The trust ratio of one decay-group tensor (the formula above), exposed for logging and tests
  // (host spans).
  double trust_ratio(std::span<const float> w, std::span<const float> g) const;

 private:
  double trust_from(double w_norm, double g_norm) const;
  void apply(ParamStore& store, std::size_t view, double scale);

  LarsOptions opts_;
  DeviceArray<float> momentum_;  // on the store's device
  std::vector<double> norms_;    // sharded: (||w||^2, ||g||^2) per whole tensor, summed over ranks
  FusedLayout layout_;           // cuda stores only
};

}  // namespace laconic
