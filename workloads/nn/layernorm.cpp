#include "workloads/nn/layernorm.h"

#include "core/check.h"
#include "workloads/nn/buffer.h"
#include "workloads/nn/init.h"
#include "core/ops/dispatch.h"

namespace laconic::nn {

LayerNorm::LayerNorm(ParamStore& store, const std::string& name, const LayerNormOptions& opts)
    : store_(&store), opts_(opts) {
  LC_CHECK(opts.features > 0, "LayerNorm '", name, "': features=", opts.features);
  LC_CHECK(opts.eps > 0.0f, "LayerNorm '", name, "': eps=", opts.eps);
  gamma_ = store.add(name + ".weight", {opts.features}, ParamGroup::no_decay);
  beta_ = store.add(name + ".bias", {opts.features}, ParamGroup::no_decay);
}

void LayerNorm::init() {
  init_constant(*store_, gamma_, 1.0f);
  init_constant(*store_, beta_, 0.0f);
}

const float* LayerNorm::forward(const float* x, int rows) {
  const ops::Kernels& k = ops::kernels(store_->device());
  const std::size_t n = static_cast<std::size_t>(rows) * opts_.features;
  float* y = grow(y_, k.device, n);
  k.layernorm_forward(y, grow(mean_, k.device, rows), grow(rstd_, k.device, rows), x,
                      store_->param(gamma_), store_->param(beta_), rows, opts_.features, opts_.eps);
  x_ = x;
  rows_ = rows;
  return y;
}

const float* LayerNorm::backward(const float* dy) {
  LC_CHECK(x_ != nullptr, "LayerNorm::backward() without forward()");
  const ops::Kernels& k = ops::kernels(store_->device());
  float* dx = grow(dx_, k.device, static_cast<std::size_t>(rows_) * opts_.features);
  k.layernorm_backward(dx, store_->grad(gamma_), store_->grad(beta_), dy, x_, mean_.data(),
                       rstd_.data(), store_->param(gamma_), rows_, opts_.features);
  return dx;
}

void LayerNorm::reserve(int rows) {
  const Device d = store_->device();
  const std::size_t n = static_cast<std::size_t>(rows) * opts_.features;
  grow(y_, d, n);
  grow(dx_, d, n);
  grow(mean_, d, static_cast<std::size_t>(rows));
  grow(rstd_, d, static_cast<std::size_t>(rows));
}

}  // namespace laconic::nn
