// Multi-head self-attention (Vaswani et al. 2017, "Attention is all you need", section 3.2),
// bidirectional (BERT) or causal (GPT: query t attends to keys 0..t only), without a padding
// mask: sequences are packed full.
//
//   [Q | K | V] = x Wqkv^T + bqkv                 x: [B*T, dim] -> [B*T, 3*dim] (one fused GEMM)
//   per (b, h):  S = Q_bh K_bh^T / sqrt(D)        Q_bh, K_bh, V_bh: [T, D], D = dim / heads
//                P = softmax_rows(S)              [T, T]  (causal: P[t, u] = 0 for u > t)
//                C_bh = Drop(P) V_bh              [T, D]  (dropout on the probabilities, as BERT)
//   y = C Wo^T + bo                               C: heads merged back to [B*T, dim]
//
// Q, K, V are rearranged once per forward into contiguous [B, H, T, D] buffers (ops::split_heads)
// so the B*H per-(b, h) products are one strided-batched GEMM (ops::gemm_strided_batched).
// Runs on the device of its ParamStore, through ops::kernels. On CPU, causal attention without
// dropout on the probabilities (inference, or dropout = 0) runs the middle of that (scores,
// softmax, value product, and their backward) as one fused kernel instead
// (core/ops/attention_cpu.h): no [T, T] matrix stored, the masked half skipped. Bidirectional
// attention stays on the GEMMs, which are faster there (tests/bench/attention_bench.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/ops/attention_cpu.h"
#include "core/params.h"
#include "core/step.h"
#include "workloads/nn/dropout.h"
#include "workloads/nn/linear.h"

namespace laconic::nn {

// auto_: fused for causal attention on CPU without active dropout, else the GEMMs. fused: the
// fused kernel wherever it can run (CPU, no active dropout). unfused: always the GEMMs.
enum class AttentionKernel { auto_, fused, unfused };

struct MultiHeadSelfAttentionOptions {
  int dim = 0;
  int heads = 1;               // must divide dim
  float dropout = 0.0f;        // on the attention probabilities, in [0, 1)
  std::uint64_t layer_id = 0;  // the probability dropout's mask key (as nn::Dropout's layer_id)
  bool causal = false;         // mask the scores of later positions (decoder self-attention)
  AttentionKernel kernel = AttentionKernel::auto_;
  Precision precision = Precision::fp32;  // of the qkv and output projections (nn::Linear)
};

class MultiHeadSelfAttention {
 public:
  // Declares "<name>.qkv.{weight,bias}" ([3*dim, dim], [3*dim]; rows 0..dim-1 make Q, then K, then
  // V) and "<name>.proj.{weight,bias}" ([dim, dim], [dim]).
  MultiHeadSelfAttention(ParamStore& store, const std::string& name,
                         const MultiHeadSelfAttentionOptions& opts);

  void init(std::uint64_t seed);  // both projections with nn::Linear's default

  // x: [batch*seq, dim], seq tokens per sequence -> y: [batch*seq, dim] (owned).
  // x must stay valid until backward().
  const float* forward(const float* x, int batch, int seq, const ForwardOptions& step);
  // dy: [batch*seq, dim] -> dx (owned); accumulates the projections' parameter gradients.
  const float* backward(const float* dy);

  // Attention probabilities of the last forward, before dropout: [batch, heads, seq, seq]. An
  // unfused forward's only: a fused one keeps none (an error; options.kernel chooses).
  const float* probs() const;
  nn::Linear& qkv() { return qkv_; }
  const nn::Linear& qkv() const { return qkv_; }
  nn::Linear& proj() { return proj_; }
  const MultiHeadSelfAttentionOptions& options() const { return opts_; }

 private:
  // dC [B, H, T, D] -> dQ, dK, dV through the stored probabilities (the forward was not fused).
  void unfused_backward(float* dq, float* dk, float* dv, const float* dch);
  // The fused kernel's shape: heads over the rank's GEMM threads (ops::cpu::gemm_threads()).
  ops::cpu::AttentionShape fused_shape(int bh, int seq, int head_dim) const;

  const ParamStore* store_;
  MultiHeadSelfAttentionOptions opts_;
  int head_dim_ = 0;
  float scale_ = 1.0f;  // 1 / sqrt(head_dim)
  Linear qkv_;
  Linear proj_;
  Dropout drop_;  // features = 1: masks the flat [B, H, T, T] probability tensor
  int batch_ = 0, seq_ = 0;
  const float* dropped_ = nullptr;  // Drop(P) from the last unfused forward (probs_ itself when inactive)
  bool fused_ = false;              // the last forward ran the fused kernel

  // Forward state, [B, H, T, D] unless noted.
  DeviceArray<float> q_, k_, v_;
  DeviceArray<float> probs_;  // [B, H, T, T]
  DeviceArray<float> ctx_h_;
  DeviceArray<float> ctx_;    // [B*T, dim], the input of proj_
  DeviceArray<float> row_max_, row_inv_, scratch_;  // fused only: [B*H*T] each, and the kernel's
  // Backward scratch.
  DeviceArray<float> dctx_h_, dq_, dk_, dv_;
  DeviceArray<float> dp_;     // [B, H, T, T]: dL/dDrop(P), then dL/dS in place
  DeviceArray<float> dqkv_;   // [B*T, 3*dim]
};

}  // namespace laconic::nn
