// Fully connected layer, PyTorch layout: weight [out, in], y = x W^T + b.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/params.h"
#include "workloads/nn/precision.h"

namespace laconic::nn {

struct LinearOptions {
  int in = 0;
  int out = 0;
  bool bias = true;
  // Off for a first layer whose input is data: backward() then skips the dX GEMM (a third of
  // the layer's backward work) and returns nullptr.
  bool input_grad = true;
  // The model's output head (classifier): its weight is not a hidden matrix (ParamKind), so Muon
  // leaves it to AdamW.
  bool output = false;
  // Its GEMMs' operands (x, W, dy) in bf16 or fp32 (workloads/nn/precision.h); W and its gradient
  // stay fp32.
  Precision precision = Precision::fp32;
};

// A hidden layer's options: in -> out with bias and input gradient, in `precision`.
inline LinearOptions linear(int in, int out, Precision precision) {
  LinearOptions o;
  o.in = in;
  o.out = out;
  o.precision = precision;
  return o;
}

class Linear {
 public:
  // Declares "<name>.weight" [out, in] (decay) and "<name>.bias" [out] (no_decay) in `store`.
  Linear(ParamStore& store, const std::string& name, const LinearOptions& opts);

  // PyTorch's default (kaiming_uniform with a = sqrt 5): weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)).
  void init(std::uint64_t seed);

  // x: [rows, in] -> y: [rows, out] (owned by the layer). x must stay valid until backward().
  const float* forward(const float* x, int rows);
  // dy: [rows, out] -> dx: [rows, in] (owned; nullptr without input_grad).
  // Accumulates dW += dy^T x and db += sum_rows dy.
  const float* backward(const float* dy);
  // Grows every buffer for batches of up to `rows` rows now, so that later, smaller or equal
  // batches of varying size (e.g. the masked positions of MLM) allocate nothing.
  void reserve(int rows);

  const LinearOptions& options() const { return opts_; }
  std::size_t weight_view() const { return weight_; }
  std::size_t bias_view() const { return bias_; }

 private:
  ParamStore* store_;
  LinearOptions opts_;
  std::size_t weight_ = 0;
  std::size_t bias_ = 0;
  GemmOperands<3> operands_;  // slots: x, W, dy
  const float* x_ = nullptr;  // input of the last forward, as its GEMM read it
  const float* w_ = nullptr;  // the weight, likewise
  int rows_ = 0;
  DeviceArray<float> y_;
  DeviceArray<float> dx_;
};

}  // namespace laconic::nn
