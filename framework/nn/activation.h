// Parameter-free elementwise activations over [rows, features].
#pragma once

#include <cstddef>
#include <vector>

namespace laconic::nn {

// y = max(x, 0). backward uses the layer's own output, so the input may be overwritten after.
class Relu {
 public:
  explicit Relu(int features);
  const float* forward(const float* x, int rows);  // x: [rows, features] -> y (owned)
  const float* backward(const float* dy);          // dy -> dx (owned)
  // Grows every buffer for batches of up to `rows` rows now, so that later, smaller or equal
  // batches of varying size (e.g. the masked positions of MLM) allocate nothing.
  void reserve(int rows);

 private:
  int features_;
  std::size_t n_ = 0;
  std::vector<float> y_;
  std::vector<float> dx_;
};

// Exact GELU, x * Phi(x) (Hendrycks & Gimpel 2016). backward needs x: it must stay valid.
class Gelu {
 public:
  explicit Gelu(int features);
  const float* forward(const float* x, int rows);
  const float* backward(const float* dy);
  // Grows every buffer for batches of up to `rows` rows now, so that later, smaller or equal
  // batches of varying size (e.g. the masked positions of MLM) allocate nothing.
  void reserve(int rows);

 private:
  int features_;
  std::size_t n_ = 0;
  const float* x_ = nullptr;
  std::vector<float> y_;
  std::vector<float> dx_;
};

}  // namespace laconic::nn
