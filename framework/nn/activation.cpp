#include "framework/nn/activation.h"

#include "framework/core/check.h"
#include "framework/nn/buffer.h"
#include "framework/ops/ops.h"

namespace laconic::nn {

Relu::Relu(int features) : features_(features) {
  LC_CHECK(features > 0, "Relu: features=", features);
}

const float* Relu::forward(const float* x, int rows) {
  n_ = static_cast<std::size_t>(rows) * features_;
  float* y = grow(y_, n_);
  ops::cpu::relu_forward(y, x, n_);
  return y;
}

const float* Relu::backward(const float* dy) {
  float* dx = grow(dx_, n_);
  ops::cpu::relu_backward(dx, dy, y_.data(), n_);
  return dx;
}

Gelu::Gelu(int features) : features_(features) {
  LC_CHECK(features > 0, "Gelu: features=", features);
}

const float* Gelu::forward(const float* x, int rows) {
  n_ = static_cast<std::size_t>(rows) * features_;
  float* y = grow(y_, n_);
  ops::cpu::gelu_forward(y, x, n_);
  x_ = x;
  return y;
}

const float* Gelu::backward(const float* dy) {
  LC_CHECK(x_ != nullptr, "Gelu::backward() without forward()");
  float* dx = grow(dx_, n_);
  ops::cpu::gelu_backward(dx, dy, x_, n_);
  return dx;
}

void Relu::reserve(int rows) {
  const auto n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(features_);
  grow(y_, n);
  grow(dx_, n);
}

void Gelu::reserve(int rows) {
  const auto n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(features_);
  grow(y_, n);
  grow(dx_, n);
}

}  // namespace laconic::nn
