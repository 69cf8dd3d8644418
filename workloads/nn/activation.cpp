#include "workloads/nn/activation.h"

#include "core/check.h"
#include "workloads/nn/buffer.h"
#include "core/ops/dispatch.h"

namespace laconic::nn {

Relu::Relu(const ParamStore& store, int features) : store_(&store), features_(features) {
  LC_CHECK(features > 0, "Relu: features=", features);
}

const float* Relu::forward(const float* x, int rows) {
  const ops::Kernels& k = ops::kernels(store_->device());
  n_ = static_cast<std::size_t>(rows) * features_;
  float* y = grow(y_, k.device, n_);
  k.relu_forward(y, x, n_);
  return y;
}

const float* Relu::backward(const float* dy) {
  const ops::Kernels& k = ops::kernels(store_->device());
  float* dx = grow(dx_, k.device, n_);
  k.relu_backward(dx, dy, y_.data(), n_);
  return dx;
}

void Relu::reserve(int rows) {
  const auto n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(features_);
  grow(y_, store_->device(), n);
  grow(dx_, store_->device(), n);
}

Gelu::Gelu(const ParamStore& store, int features) : store_(&store), features_(features) {
  LC_CHECK(features > 0, "Gelu: features=", features);
}

const float* Gelu::forward(const float* x, int rows) {
  const ops::Kernels& k = ops::kernels(store_->device());
  n_ = static_cast<std::size_t>(rows) * features_;
  float* y = grow(y_, k.device, n_);
  k.gelu_forward(y, x, n_);
  x_ = x;
  return y;
}

const float* Gelu::backward(const float* dy) {
  LC_CHECK(x_ != nullptr, "Gelu::backward() without forward()");
  const ops::Kernels& k = ops::kernels(store_->device());
  float* dx = grow(dx_, k.device, n_);
  k.gelu_backward(dx, dy, x_, n_);
  return dx;
}

void Gelu::reserve(int rows) {
  const auto n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(features_);
  grow(y_, store_->device(), n);
  grow(dx_, store_->device(), n);
}

}  // namespace laconic::nn
