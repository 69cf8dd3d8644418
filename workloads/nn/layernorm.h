// Layer normalisation over the feature dimension (Ba et al. 2016), affine, PyTorch defaults.
#pragma once

#include <cstddef>
#include <string>

#include "core/params.h"

namespace laconic::nn {

struct LayerNormOptions {
  int features = 0;
  float eps = 1e-5f;  // torch.nn.LayerNorm's default
};

class LayerNorm {
 public:
  // Declares "<name>.weight" (gamma) and "<name>.bias" (beta), both [features], no_decay.
  LayerNorm(ParamStore& store, const std::string& name, const LayerNormOptions& opts);
  void init();  // gamma = 1, beta = 0 (deterministic, needs no seed)

  // x: [rows, features] -> y (owned). x must stay valid until backward().
  const float* forward(const float* x, int rows);
  // dy -> dx (owned); dgamma += sum_rows dy * xhat, dbeta += sum_rows dy.
  const float* backward(const float* dy);
  // Grows every buffer for batches of up to `rows` rows now, so that later, smaller or equal
  // batches of varying size (e.g. the masked positions of MLM) allocate nothing.
  void reserve(int rows);

  std::size_t gamma_view() const { return gamma_; }
  std::size_t beta_view() const { return beta_; }

 private:
  ParamStore* store_;
  LayerNormOptions opts_;
  std::size_t gamma_ = 0;
  std::size_t beta_ = 0;
  const float* x_ = nullptr;
  int rows_ = 0;
  DeviceArray<float> y_;
  DeviceArray<float> dx_;
  DeviceArray<float> mean_;  // [rows]
  DeviceArray<float> rstd_;  // [rows]
};

}  // namespace laconic::nn
