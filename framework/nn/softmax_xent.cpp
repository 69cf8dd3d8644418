#include "framework/nn/softmax_xent.h"

#include "framework/core/check.h"
#include "framework/nn/buffer.h"
#include "framework/ops/ops.h"

namespace laconic::nn {

SoftmaxCrossEntropy::SoftmaxCrossEntropy(const SoftmaxCrossEntropyOptions& opts) : opts_(opts) {
  LC_CHECK(opts.classes > 0, "SoftmaxCrossEntropy: classes=", opts.classes);
}

LossResult SoftmaxCrossEntropy::forward(const float* logits, const std::int32_t* targets, int rows) {
  const int classes = opts_.classes;
  float* probs = grow(probs_, static_cast<std::size_t>(rows) * classes);
  float* losses = grow(losses_, rows);
  std::int32_t* argmax = grow(argmax_, rows);
  ops::cpu::softmax_xent_forward(losses, probs, logits, targets, rows, classes, opts_.ignore_index);
  ops::cpu::argmax_rows(argmax, logits, rows, classes);
  LossResult r;
  double sum = 0.0;  // in double: a mean over many tokens should not depend on summation order much
  for (int i = 0; i < rows; ++i) {
    if (targets[i] == opts_.ignore_index) continue;
    ++r.counted;
    sum += losses[i];
    if (argmax[i] == targets[i]) ++r.correct;
  }
  r.loss = r.counted > 0 ? sum / static_cast<double>(r.counted) : 0.0;
  targets_ = targets;
  rows_ = rows;
  counted_ = r.counted;
  return r;
}

const float* SoftmaxCrossEntropy::backward() {
  LC_CHECK(targets_ != nullptr, "SoftmaxCrossEntropy::backward() without forward()");
  float* d = grow(dlogits_, static_cast<std::size_t>(rows_) * opts_.classes);
  const float scale = counted_ > 0 ? 1.0f / static_cast<float>(counted_) : 0.0f;
  ops::cpu::softmax_xent_backward(d, probs_.data(), targets_, rows_, opts_.classes,
                                  opts_.ignore_index, scale);
  return d;
}

void SoftmaxCrossEntropy::reserve(int rows) {
  const std::size_t n = static_cast<std::size_t>(rows) * opts_.classes;
  grow(probs_, n);
  grow(losses_, static_cast<std::size_t>(rows));
  grow(argmax_, static_cast<std::size_t>(rows));
  grow(dlogits_, n);
}

}  // namespace laconic::nn
