#include "workloads/nn/tied_projection.h"

#include "core/check.h"
#include "core/ops/dispatch.h"
#include "workloads/nn/buffer.h"

namespace laconic::nn {

void TiedProjection::forward(float* logits, const float* h, int rows) {
  const ops::Kernels& k = ops::kernels(store_->device());
  h_ = operands_(0, h, static_cast<std::size_t>(rows) * dim_, k);
  e_ = operands_(1, store_->param(table_), static_cast<std::size_t>(vocab_) * dim_, k);
  k.gemm(logits, h_, e_, rows, vocab_, dim_, false, true, 1.0f, 0.0f);
  rows_ = rows;
}

const float* TiedProjection::backward(const float* dlogits) {
  LC_CHECK(h_ != nullptr, "TiedProjection::backward() without forward()");
  const ops::Kernels& k = ops::kernels(store_->device());
  const float* dl = operands_(2, dlogits, static_cast<std::size_t>(rows_) * vocab_, k);
  k.gemm(store_->grad(table_), dl, h_, vocab_, dim_, rows_, true, false, 1.0f, 1.0f);
  float* dh = grow(dh_, k.device, static_cast<std::size_t>(rows_) * dim_);
  k.gemm(dh, dl, e_, rows_, dim_, vocab_, false, false, 1.0f, 0.0f);
  return dh;
}

void TiedProjection::reserve(int rows) {
  const Device d = store_->device();
  grow(dh_, d, static_cast<std::size_t>(rows) * dim_);
  operands_.reserve(0, static_cast<std::size_t>(rows) * dim_, d);
  operands_.reserve(1, static_cast<std::size_t>(vocab_) * dim_, d);
  operands_.reserve(2, static_cast<std::size_t>(rows) * vocab_, d);
}

}  // namespace laconic::nn
