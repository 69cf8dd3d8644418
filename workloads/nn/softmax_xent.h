// Softmax cross-entropy loss, averaged over the rows whose target is not ignore_index.
#pragma once

#include <cstdint>

#include "core/device.h"
#include "core/params.h"

namespace laconic::nn {

struct SoftmaxCrossEntropyOptions {
  int classes = 0;
  int ignore_index = -1;  // rows with this target count for nothing (padding, unmasked tokens)
};

struct LossResult {
  double loss = 0.0;         // mean over counted rows (0 when none)
  std::int64_t counted = 0;  // rows with target != ignore_index
  std::int64_t correct = 0;  // counted rows whose argmax logit is the target
};

class SoftmaxCrossEntropy {
 public:
  // Runs on the device of `store` (the model's; the loss has no parameters of its own).
  SoftmaxCrossEntropy(const ParamStore& store, const SoftmaxCrossEntropyOptions& opts);

  // logits: [rows, classes], targets: [rows] in [0, classes) or ignore_index, both on the store's
  // device; targets must stay valid until backward(). On cpu a bad target throws; on cuda it
  // gives a NaN loss, so callers check targets on the host before uploading them.
  // The statistics are reduced on the device and brought back in one small copy (on cuda the
  // only point where forward waits for the device).
  LossResult forward(const float* logits, const std::int32_t* targets, int rows);
  // Gradient of the mean loss: dlogits = (softmax - onehot) / counted; 0 on ignored rows. Owned.
  const float* backward();
  // Grows every buffer for batches of up to `rows` rows now, so that later, smaller or equal
  // batches of varying size (e.g. the masked positions of MLM) allocate nothing.
  void reserve(int rows);

  const float* probs() const { return probs_.data(); }

 private:
  const ParamStore* store_;
  SoftmaxCrossEntropyOptions opts_;
  const std::int32_t* targets_ = nullptr;
  int rows_ = 0;
  std::int64_t counted_ = 0;
  DeviceArray<float> probs_;   // [rows, classes]
  DeviceArray<float> losses_;  // [rows]
  DeviceArray<std::int32_t> argmax_;
  DeviceArray<float> dlogits_;
  DeviceArray<double> stats_;  // [3]: ops::xent_stats
};

}  // namespace laconic::nn
