// The arithmetic of a model's GEMMs (recipe train.precision):
//   fp32  fp32 operands and sums.
//   bf16  operands rounded to bfloat16, products summed in fp32, as torch.autocast's bf16 matmuls;
//         the weights, their gradients, the optimizer and the reductions stay fp32 (the master
//         copy), as do every other kernel's inputs and outputs.
// The rounded operands are kept as floats and multiplied by the fp32 GEMM: the product of two bf16
// values is exact in fp32, so that is a bf16 GEMM with fp32 accumulation, whatever the GEMM
// library's order of sums. On this project's CPUs it is also the fastest way: oneDNN's fp32 GEMM
// runs at ~88% of the fp32 FMA peak, and AVX512-BF16's dot product peaks at half of it
// (docs/benchmarks.md, "CPU GEMM library"). What bf16 buys here is its numerics, for studies of
// methods trained in bf16, not speed.
//
// Applies to nn::Linear (every projection, FFN and classifier) and the tied output heads (BERT,
// GPT); the attention's per-head score and value products stay fp32.
#pragma once

#include <array>
#include <cstddef>
#include <span>

#include "core/device.h"
#include "core/ops/dispatch.h"
#include "workloads/nn/buffer.h"

namespace laconic::nn {

enum class Precision { fp32, bf16 };
inline constexpr std::array kPrecisionNames{"fp32", "bf16"};
constexpr std::span<const char* const> names(Precision) { return kPrecisionNames; }

// A layer's GEMM operands in its precision, Slots of them (one buffer each, grown as activation
// buffers are: allocation on the first, largest batch only).
template <int Slots>
class GemmOperands {
 public:
  explicit GemmOperands(Precision p) : precision_(p) {}

  // x itself in fp32; in bf16 x's n values rounded into slot's buffer (valid until that slot is
  // used again).
  const float* operator()(int slot, const float* x, std::size_t n, const ops::Kernels& k) {
    if (precision_ == Precision::fp32) return x;
    float* r = grow(rounded_[slot], k.device, n);
    k.round_bf16(r, x, n);
    return r;
  }
  // Grows slot's buffer for n values now (no-op in fp32).
  void reserve(int slot, std::size_t n, Device d) {
    if (precision_ != Precision::fp32) grow(rounded_[slot], d, n);
  }
  Precision precision() const { return precision_; }

 private:
  Precision precision_;
  std::array<DeviceArray<float>, Slots> rounded_;
};

}  // namespace laconic::nn
