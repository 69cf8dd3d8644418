#include "framework/nn/attention.h"

#include "framework/ops/vec_math.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "framework/core/check.h"
#include "framework/nn/buffer.h"
#include "framework/ops/ops.h"

namespace laconic::nn {

// ==== CPU kernels for attention (candidates for ops_decl.inc; see attention.h) ====================

namespace {

// Calls f(head_offset, row_offset) for each (b, h, t): the element offsets of the D-vector of head h
// at token t of sequence b in [B, H, T, D] and in the [B*T, stride] row layout (column offset +h*D).
template <typename F>
void for_each_head_vector(int batch, int seq, int heads, int head_dim, int stride, int offset, F f) {
  const std::size_t d = static_cast<std::size_t>(head_dim);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int t = 0; t < seq; ++t)
        f(((static_cast<std::size_t>(b) * heads + h) * seq + t) * d,
          (static_cast<std::size_t>(b) * seq + t) * stride + offset + h * d);
}

}  // namespace

void split_heads(float* out, const float* in, int batch, int seq, int heads, int head_dim,
                 int stride, int offset) {
  const std::size_t bytes = static_cast<std::size_t>(head_dim) * sizeof(float);
  for_each_head_vector(batch, seq, heads, head_dim, stride, offset,
                       [&](std::size_t ho, std::size_t ro) { std::memcpy(out + ho, in + ro, bytes); });
}

void merge_heads(float* out, const float* in, int batch, int seq, int heads, int head_dim,
                 int stride, int offset) {
  const std::size_t bytes = static_cast<std::size_t>(head_dim) * sizeof(float);
  for_each_head_vector(batch, seq, heads, head_dim, stride, offset,
                       [&](std::size_t ho, std::size_t ro) { std::memcpy(out + ro, in + ho, bytes); });
}

using ops::vec::exp_nonpositive;
using ops::vec::row_dot;
using ops::vec::row_max;
using ops::vec::row_sum;

void softmax_rows_forward(float* y, const float* x, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * cols;
    float* yr = y + static_cast<std::size_t>(r) * cols;
    const float mx = row_max(xr, cols);  // exp(x - max) <= 1: no overflow
    for (int c = 0; c < cols; ++c) yr[c] = exp_nonpositive(xr[c] - mx);
    const float inv = 1.0f / row_sum(yr, cols);
    for (int c = 0; c < cols; ++c) yr[c] *= inv;
  }
}

void softmax_rows_backward(float* dx, const float* dy, const float* y, int rows, int cols) {
  // Jacobian of softmax: dy_c/dx_c' = y_c (delta_cc' - y_c'), so dx = y * (dy - <dy, y>).
  for (int r = 0; r < rows; ++r) {
    const float* dyr = dy + static_cast<std::size_t>(r) * cols;
    const float* yr = y + static_cast<std::size_t>(r) * cols;
    float* dxr = dx + static_cast<std::size_t>(r) * cols;
    const float dot = row_dot(dyr, yr, cols);
    for (int c = 0; c < cols; ++c) dxr[c] = yr[c] * (dyr[c] - dot);
  }
}

// ==== the layer ===================================================================================

namespace {

const MultiHeadSelfAttentionOptions& validated(const std::string& name,
                                               const MultiHeadSelfAttentionOptions& o) {
  LC_CHECK(o.dim > 0 && o.heads > 0 && o.dim % o.heads == 0, "MultiHeadSelfAttention '", name,
           "': dim=", o.dim, " must be a positive multiple of heads=", o.heads);
  LC_CHECK(o.dropout >= 0.0f && o.dropout < 1.0f, "MultiHeadSelfAttention '", name,
           "': dropout=", o.dropout, " is outside [0, 1)");
  return o;
}

}  // namespace

MultiHeadSelfAttention::MultiHeadSelfAttention(ParamStore& store, const std::string& name,
                                               const MultiHeadSelfAttentionOptions& opts)
    : opts_(validated(name, opts)),
      head_dim_(opts.dim / opts.heads),
      scale_(1.0f / std::sqrt(static_cast<float>(opts.dim / opts.heads))),
      qkv_(store, name + ".qkv", {opts.dim, 3 * opts.dim}),
      proj_(store, name + ".proj", {opts.dim, opts.dim}),
      drop_(DropoutOptions{1, opts.dropout, opts.layer_id}) {}

void MultiHeadSelfAttention::init(std::uint64_t seed) {
  qkv_.init(seed);
  proj_.init(seed);
}

const float* MultiHeadSelfAttention::forward(const float* x, int batch, int seq,
                                             const ForwardOptions& step) {
  LC_CHECK(batch >= 0 && seq > 0, "MultiHeadSelfAttention: batch=", batch, " seq=", seq);
  const int dim = opts_.dim, heads = opts_.heads, d = head_dim_;
  const int rows = batch * seq;
  const std::size_t n_heads = static_cast<std::size_t>(rows) * dim;            // [B, H, T, D]
  const std::size_t tt = static_cast<std::size_t>(seq) * seq;
  const std::size_t n_probs = static_cast<std::size_t>(batch) * heads * tt;  // [B, H, T, T]
  batch_ = batch;
  seq_ = seq;

  const float* qkv = qkv_.forward(x, rows);  // [B*T, 3*dim]
  float* q = grow(q_, n_heads);
  float* k = grow(k_, n_heads);
  float* v = grow(v_, n_heads);
  split_heads(q, qkv, batch, seq, heads, d, 3 * dim, 0);
  split_heads(k, qkv, batch, seq, heads, d, 3 * dim, dim);
  split_heads(v, qkv, batch, seq, heads, d, 3 * dim, 2 * dim);

  float* p = grow(probs_, n_probs);
  for (int bh = 0; bh < batch * heads; ++bh) {
    const std::size_t m = static_cast<std::size_t>(bh) * seq * d;
    // S[T, T] = Q[T, D] K[T, D]^T / sqrt(D)
    ops::cpu::gemm(p + bh * tt, q + m, k + m, seq, seq, d, false, true, scale_, 0.0f);
  }
  softmax_rows_forward(p, p, batch * heads * seq, seq);
  dropped_ = drop_.forward(p, static_cast<int>(n_probs), step);

  float* ch = grow(ctx_h_, n_heads);
  for (int bh = 0; bh < batch * heads; ++bh) {
    const std::size_t m = static_cast<std::size_t>(bh) * seq * d;
    // C[T, D] = Drop(P)[T, T] V[T, D]
    ops::cpu::gemm(ch + m, dropped_ + bh * tt, v + m, seq, d, seq, false, false, 1.0f, 0.0f);
  }
  float* ctx = grow(ctx_, n_heads);
  merge_heads(ctx, ch, batch, seq, heads, d, dim, 0);
  return proj_.forward(ctx, rows);
}

const float* MultiHeadSelfAttention::backward(const float* dy) {
  LC_CHECK(dropped_ != nullptr, "MultiHeadSelfAttention::backward() without forward()");
  const int dim = opts_.dim, heads = opts_.heads, d = head_dim_, batch = batch_, seq = seq_;
  const int rows = batch * seq;
  const std::size_t n_heads = static_cast<std::size_t>(rows) * dim;
  const std::size_t tt = static_cast<std::size_t>(seq) * seq;
  const std::size_t n_probs = static_cast<std::size_t>(batch) * heads * tt;

  const float* dctx = proj_.backward(dy);  // [B*T, dim]
  float* dch = grow(dctx_h_, n_heads);
  split_heads(dch, dctx, batch, seq, heads, d, dim, 0);

  float* dp = grow(dp_, n_probs);
  float* dv = grow(dv_, n_heads);
  for (int bh = 0; bh < batch * heads; ++bh) {
    const std::size_t m = static_cast<std::size_t>(bh) * seq * d;
    // dDrop(P)[T, T] = dC[T, D] V[T, D]^T;  dV[T, D] = Drop(P)[T, T]^T dC[T, D]
    ops::cpu::gemm(dp + bh * tt, dch + m, v_.data() + m, seq, seq, d, false, true, 1.0f, 0.0f);
    ops::cpu::gemm(dv + m, dropped_ + bh * tt, dch + m, seq, d, seq, true, false, 1.0f, 0.0f);
  }
  const float* dprobs = drop_.backward(dp);  // dp itself when dropout was inactive
  softmax_rows_backward(dp, dprobs, probs_.data(), batch * heads * seq, seq);  // dS, in dp

  float* dq = grow(dq_, n_heads);
  float* dk = grow(dk_, n_heads);
  for (int bh = 0; bh < batch * heads; ++bh) {
    const std::size_t m = static_cast<std::size_t>(bh) * seq * d;
    // S = s Q K^T:  dQ[T, D] = s dS[T, T] K[T, D];  dK[T, D] = s dS[T, T]^T Q[T, D]
    ops::cpu::gemm(dq + m, dp + bh * tt, k_.data() + m, seq, d, seq, false, false, scale_, 0.0f);
    ops::cpu::gemm(dk + m, dp + bh * tt, q_.data() + m, seq, d, seq, true, false, scale_, 0.0f);
  }
  float* dqkv = grow(dqkv_, static_cast<std::size_t>(rows) * 3 * dim);
  merge_heads(dqkv, dq, batch, seq, heads, d, 3 * dim, 0);
  merge_heads(dqkv, dk, batch, seq, heads, d, 3 * dim, dim);
  merge_heads(dqkv, dv, batch, seq, heads, d, 3 * dim, 2 * dim);
  return qkv_.backward(dqkv);
}

}  // namespace laconic::nn
