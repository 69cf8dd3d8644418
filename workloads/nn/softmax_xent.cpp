#include "workloads/nn/softmax_xent.h"

#include <span>

#include "core/check.h"
#include "workloads/nn/buffer.h"
#include "core/ops/dispatch.h"

namespace laconic::nn {

SoftmaxCrossEntropy::SoftmaxCrossEntropy(const ParamStore& store,
                                         const SoftmaxCrossEntropyOptions& opts)
    : store_(&store), opts_(opts) {
  LC_CHECK(opts.classes > 0, "SoftmaxCrossEntropy: classes=", opts.classes);
}

LossResult SoftmaxCrossEntropy::forward(const float* logits, const std::int32_t* targets, int rows) {
  const ops::Kernels& k = ops::kernels(store_->device());
  const int classes = opts_.classes;
  float* probs = grow(probs_, k.device, static_cast<std::size_t>(rows) * classes);
  float* losses = grow(losses_, k.device, rows);
  std::int32_t* argmax = grow(argmax_, k.device, rows);
  double* stats = grow(stats_, k.device, 3);
  k.softmax_xent_forward(losses, probs, logits, targets, rows, classes, opts_.ignore_index);
  k.argmax_rows(argmax, logits, rows, classes);
  k.xent_stats(stats, losses, argmax, targets, rows, opts_.ignore_index);
  double host[3];
  stats_.download(std::span<double>(host, 3));
  LossResult r;
  r.counted = static_cast<std::int64_t>(host[1]);
  r.correct = static_cast<std::int64_t>(host[2]);
  r.loss = r.counted > 0 ? host[0] / static_cast<double>(r.counted) : 0.0;
  targets_ = targets;
  rows_ = rows;
  counted_ = r.counted;
  return r;
}

const float* SoftmaxCrossEntropy::backward() {
  LC_CHECK(targets_ != nullptr, "SoftmaxCrossEntropy::backward() without forward()");
  const ops::Kernels& k = ops::kernels(store_->device());
  float* d = grow(dlogits_, k.device, static_cast<std::size_t>(rows_) * opts_.classes);
  const float scale = counted_ > 0 ? 1.0f / static_cast<float>(counted_) : 0.0f;
  k.softmax_xent_backward(d, probs_.data(), targets_, rows_, opts_.classes, opts_.ignore_index, scale);
  return d;
}

void SoftmaxCrossEntropy::reserve(int rows) {
  const Device d = store_->device();
  const std::size_t n = static_cast<std::size_t>(rows) * opts_.classes;
  grow(probs_, d, n);
  grow(losses_, d, static_cast<std::size_t>(rows));
  grow(argmax_, d, static_cast<std::size_t>(rows));
  grow(dlogits_, d, n);
  grow(stats_, d, 3);
}

}  // namespace laconic::nn
