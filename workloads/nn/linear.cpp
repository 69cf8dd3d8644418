#include "workloads/nn/linear.h"

#include <cmath>

#include "core/check.h"
#include "workloads/nn/buffer.h"
#include "workloads/nn/init.h"
#include "core/ops/dispatch.h"

namespace laconic::nn {

Linear::Linear(ParamStore& store, const std::string& name, const LinearOptions& opts)
    : store_(&store), opts_(opts), operands_(opts.precision) {
  LC_CHECK(opts.in > 0 && opts.out > 0, "Linear '", name, "': sizes in=", opts.in, " out=", opts.out);
  weight_ = store.add(name + ".weight", {opts.out, opts.in}, ParamGroup::decay,
                      opts.output ? ParamKind::other : ParamKind::hidden_matrix);
  if (opts.bias) bias_ = store.add(name + ".bias", {opts.out}, ParamGroup::no_decay);
}

void Linear::init(std::uint64_t seed) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(opts_.in));
  init_uniform(*store_, weight_, bound, seed);
  if (opts_.bias) init_uniform(*store_, bias_, bound, seed);
}

const float* Linear::forward(const float* x, int rows) {
  const ops::Kernels& k = ops::kernels(store_->device());
  float* y = grow(y_, k.device, static_cast<std::size_t>(rows) * opts_.out);
  x_ = operands_(0, x, static_cast<std::size_t>(rows) * opts_.in, k);
  w_ = operands_(1, store_->param(weight_), static_cast<std::size_t>(opts_.out) * opts_.in, k);
  // y[rows, out] = x[rows, in] * W[out, in]^T
  k.gemm(y, x_, w_, rows, opts_.out, opts_.in, false, true, 1.0f, 0.0f);
  if (opts_.bias) k.add_bias(y, store_->param(bias_), rows, opts_.out);
  rows_ = rows;
  return y;
}

const float* Linear::backward(const float* dy) {
  LC_CHECK(x_ != nullptr, "Linear::backward() without forward()");
  const ops::Kernels& k = ops::kernels(store_->device());
  const float* dyr = operands_(2, dy, static_cast<std::size_t>(rows_) * opts_.out, k);
  // dW[out, in] += dy[rows, out]^T * x[rows, in]
  k.gemm(store_->grad(weight_), dyr, x_, opts_.out, opts_.in, rows_, true, false, 1.0f, 1.0f);
  if (opts_.bias) k.bias_grad(store_->grad(bias_), dy, rows_, opts_.out);
  if (!opts_.input_grad) return nullptr;
  // dx[rows, in] = dy[rows, out] * W[out, in]
  float* dx = grow(dx_, k.device, static_cast<std::size_t>(rows_) * opts_.in);
  k.gemm(dx, dyr, w_, rows_, opts_.in, opts_.out, false, false, 1.0f, 0.0f);
  return dx;
}

void Linear::reserve(int rows) {
  const Device d = store_->device();
  grow(y_, d, static_cast<std::size_t>(rows) * opts_.out);
  if (opts_.input_grad) grow(dx_, d, static_cast<std::size_t>(rows) * opts_.in);
  operands_.reserve(0, static_cast<std::size_t>(rows) * opts_.in, d);
  operands_.reserve(1, static_cast<std::size_t>(opts_.out) * opts_.in, d);
  operands_.reserve(2, static_cast<std::size_t>(rows) * opts_.out, d);
}

}  // namespace laconic::nn
