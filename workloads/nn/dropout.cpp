#include "workloads/nn/dropout.h"

#include "core/check.h"
#include "core/rng.h"
#include "workloads/nn/buffer.h"
#include "core/ops/dispatch.h"

namespace laconic::nn {

Dropout::Dropout(const ParamStore& store, const DropoutOptions& opts) : store_(&store), opts_(opts) {
  LC_CHECK(opts.features > 0, "Dropout: features=", opts.features);
  LC_CHECK(opts.p >= 0.0f && opts.p < 1.0f, "Dropout: p=", opts.p, " is outside [0, 1)");
}

std::uint64_t Dropout::key(const ForwardOptions& step) const {
  return rng::key({step.seed, static_cast<std::uint64_t>(step.rank),
                   static_cast<std::uint64_t>(step.step), rng::kDropout, opts_.layer_id});
}

const float* Dropout::forward(const float* x, int rows, const ForwardOptions& step) {
  n_ = static_cast<std::size_t>(rows) * opts_.features;
  active_ = active(step);
  if (!active_) return x;
  key_ = key(step);
  const ops::Kernels& k = ops::kernels(store_->device());
  float* y = grow(y_, k.device, n_);
  k.dropout_forward(y, x, n_, opts_.p, key_);
  return y;
}

const float* Dropout::backward(const float* dy) {
  if (!active_) return dy;
  const ops::Kernels& k = ops::kernels(store_->device());
  float* dx = grow(dx_, k.device, n_);
  k.dropout_backward(dx, dy, n_, opts_.p, key_);
  return dx;
}

}  // namespace laconic::nn
