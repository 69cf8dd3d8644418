// Parameter-free elementwise activations over [rows, features]. They run on the device of the
// ParamStore given at construction (the model's), whose kernels they pick at each call.
#pragma once

#include <cstddef>

#include "core/device.h"
#include "core/params.h"

namespace laconic::nn {

// y = max(x, 0). backward uses the layer's own output, so the input may be overwritten after.
class Relu {
 public:
  Relu(const ParamStore& store, int features);
  const float* forward(const float* x, int rows);  // x: [rows, features] -> y (owned)
  const float* backward(const float* dy);          // dy -> dx (owned)
  // Grows every buffer for batches of up to `rows` rows now, so that later, smaller or equal
  // batches of varying size (e.g. the masked positions of MLM) allocate nothing.
  void reserve(int rows);

 private:
  const ParamStore* store_;  // whose device the layer runs on
  int features_;
  std::size_t n_ = 0;
  DeviceArray<float> y_;
  DeviceArray<float> dx_;
};

// Exact GELU, x * Phi(x) (Hendrycks & Gimpel 2016). backward needs x: it must stay valid.
class Gelu {
 public:
  Gelu(const ParamStore& store, int features);
  const float* forward(const float* x, int rows);
  const float* backward(const float* dy);
  // Grows every buffer for batches of up to `rows` rows now, so that later, smaller or equal
  // batches of varying size (e.g. the masked positions of MLM) allocate nothing.
  void reserve(int rows);

 private:
  const ParamStore* store_;
  int features_;
  std::size_t n_ = 0;
  const float* x_ = nullptr;
  DeviceArray<float> y_;
  DeviceArray<float> dx_;
};

}  // namespace laconic::nn
