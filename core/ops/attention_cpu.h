// Fused scaled dot-product attention on CPU (issue 32 item 4): per (batch, head), four query rows
// at a time, the scores, their softmax and the value product in one pass over the keys those rows
// see, in the manner of FlashAttention (Dao et al. 2022) with 4-row query blocks and all keys in
// one: the [T, T] score and probability matrices are never stored, and a causal row t touches keys
// 0..t only, so the masked half is neither computed nor written. Backward recomputes the rows'
// probabilities from the two floats per row the forward keeps (its max and 1/sum).
//
// It computes what nn::MultiHeadSelfAttention's unfused kernels compute (two strided-batched
// GEMMs around ops::softmax_{rows,causal}_forward), in the same order of operations: every dot
// product a chain of fused multiply-adds in index order, the softmax with the same vec_math.h
// helpers, the scale applied after the sum as a GEMM's alpha. Against oneDNN 2.6 (this build's
// GEMM) that is bit for bit on most shapes; at 128x128x32 (gpt_fortunes' scores) oneDNN's kernel
// folds alpha into the packed K instead, and the two differ in the last bits (1e-6 relative).
//
// Measured (tests/bench/attention_bench.cpp, docs/benchmarks.md), causal, one thread: about as
// fast as the unfused kernels at T = 128, 1.2-1.4x faster at T = 512 and 1.5x at T = 1024, with no
// [B, H, T, T] buffers; bidirectional it is slower (0.7-0.9x), so nn::MultiHeadSelfAttention uses
// it for causal attention only by default.
//
// Shapes: q, k, v, out and their gradients [bh, T, D] contiguous (ops::split_heads' layout).
#pragma once

#include <cstddef>

namespace laconic::ops::cpu {

struct AttentionShape {
  int bh = 0;          // batch * heads
  int seq = 0;         // T
  int head_dim = 0;    // D
  float scale = 1.0f;  // on the scores: 1/sqrt(D)
  bool causal = false;
  // Heads are split over this many OpenMP threads (a rank's gemm_threads(), as its GEMMs); the
  // result does not depend on it (each head is one thread's, in the same order of operations).
  // One thread where this build has no OpenMP (LACONIC_GEMM other than onednn).
  int threads = 1;
};

// Floats of the scratch buffer both calls take (threads slices of one head's).
std::size_t attention_scratch_floats(const AttentionShape& s);

// out = softmax(scale q k^T [causal]) v; row_max, row_inv: [bh * T], what backward needs.
void attention_forward(float* out, float* row_max, float* row_inv, const float* q, const float* k, const float* v,
                       const AttentionShape& s, float* scratch);

// dq, dk, dv (overwritten) from dout and the forward's inputs, row_max and row_inv.
void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                        const float* v, const float* row_max, const float* row_inv, const AttentionShape& s,
                        float* scratch);

}  // namespace laconic::ops::cpu
