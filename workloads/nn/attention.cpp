#include "workloads/nn/attention.h"

#include <cmath>
#include <cstdint>

#include "core/check.h"
#include "core/ops/dispatch.h"
#include "core/ops/ops.h"
#include "workloads/nn/buffer.h"

namespace laconic::nn {

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
    : store_(&store),
      opts_(validated(name, opts)),
      head_dim_(opts.dim / opts.heads),
      scale_(1.0f / std::sqrt(static_cast<float>(opts.dim / opts.heads))),
      qkv_(store, name + ".qkv", linear(opts.dim, 3 * opts.dim, opts.precision)),
      proj_(store, name + ".proj", linear(opts.dim, opts.dim, opts.precision)),
      drop_(store, DropoutOptions{1, opts.dropout, opts.layer_id}) {}

void MultiHeadSelfAttention::init(std::uint64_t seed) {
  qkv_.init(seed);
  proj_.init(seed);
}

const float* MultiHeadSelfAttention::forward(const float* x, int batch, int seq,
                                             const ForwardOptions& step) {
  LC_CHECK(batch >= 0 && seq > 0, "MultiHeadSelfAttention: batch=", batch, " seq=", seq);
  const ops::Kernels& k = ops::kernels(store_->device());
  const Device dev = k.device;
  const int dim = opts_.dim, heads = opts_.heads, d = head_dim_;
  const int rows = batch * seq, bh = batch * heads;
  const std::size_t n_heads = static_cast<std::size_t>(rows) * dim;            // [B, H, T, D]
  const std::int64_t tt = static_cast<std::int64_t>(seq) * seq;                // one [T, T]
  const std::int64_t td = static_cast<std::int64_t>(seq) * d;                  // one [T, D]
  const std::size_t n_probs = static_cast<std::size_t>(bh) * tt;               // [B, H, T, T]
  batch_ = batch;
  seq_ = seq;

  const float* qkv = qkv_.forward(x, rows);  // [B*T, 3*dim]
  float* q = grow(q_, dev, n_heads);
  float* kh = grow(k_, dev, n_heads);
  float* v = grow(v_, dev, n_heads);
  k.split_heads(q, qkv, batch, seq, heads, d, 3 * dim, 0);
  k.split_heads(kh, qkv, batch, seq, heads, d, 3 * dim, dim);
  k.split_heads(v, qkv, batch, seq, heads, d, 3 * dim, 2 * dim);

  float* ch = grow(ctx_h_, dev, n_heads);
  fused_ = dev == Device::cpu && !drop_.active(step) &&
           (opts_.kernel == AttentionKernel::fused || (opts_.kernel == AttentionKernel::auto_ && opts_.causal));
  dropped_ = nullptr;
  if (fused_) {
    const auto sh = fused_shape(bh, seq, d);
    ops::cpu::attention_forward(ch, grow(row_max_, dev, static_cast<std::size_t>(bh) * seq),
                                grow(row_inv_, dev, static_cast<std::size_t>(bh) * seq), q, kh, v, sh,
                                grow(scratch_, dev, ops::cpu::attention_scratch_floats(sh)));
    float* ctx = grow(ctx_, dev, n_heads);
    k.merge_heads(ctx, ch, batch, seq, heads, d, dim, 0);
    return proj_.forward(ctx, rows);
  }

  // S[T, T] = Q[T, D] K[T, D]^T / sqrt(D), for each (b, h)
  float* p = grow(probs_, dev, n_probs);
  k.gemm_strided_batched(p, q, kh, seq, seq, d, false, true, scale_, 0.0f, bh, tt, td, td);
  // Causal: the masked probabilities are exact zeros, so the backward below (softmax's, through
  // the saved P) gives their scores a zero gradient with no mask of its own.
  if (opts_.causal)
    k.softmax_causal_forward(p, p, bh * seq, seq);
  else
    k.softmax_rows_forward(p, p, bh * seq, seq);
  dropped_ = drop_.forward(p, static_cast<int>(n_probs), step);

  // C[T, D] = Drop(P)[T, T] V[T, D]
  k.gemm_strided_batched(ch, dropped_, v, seq, d, seq, false, false, 1.0f, 0.0f, bh, td, tt, td);
  float* ctx = grow(ctx_, dev, n_heads);
  k.merge_heads(ctx, ch, batch, seq, heads, d, dim, 0);
  return proj_.forward(ctx, rows);
}

ops::cpu::AttentionShape MultiHeadSelfAttention::fused_shape(int bh, int seq, int head_dim) const {
  return {bh, seq, head_dim, scale_, opts_.causal, ops::cpu::gemm_threads()};
}

const float* MultiHeadSelfAttention::probs() const {
  LC_CHECK(!fused_, "MultiHeadSelfAttention::probs(): the last forward was fused (options.kernel) and kept none");
  return probs_.data();
}

const float* MultiHeadSelfAttention::backward(const float* dy) {
  LC_CHECK(dropped_ != nullptr || fused_, "MultiHeadSelfAttention::backward() without forward()");
  const ops::Kernels& k = ops::kernels(store_->device());
  const Device dev = k.device;
  const int dim = opts_.dim, heads = opts_.heads, d = head_dim_, batch = batch_, seq = seq_;
  const int rows = batch * seq, bh = batch * heads;
  const std::size_t n_heads = static_cast<std::size_t>(rows) * dim;

  const float* dctx = proj_.backward(dy);  // [B*T, dim]
  float* dch = grow(dctx_h_, dev, n_heads);
  k.split_heads(dch, dctx, batch, seq, heads, d, dim, 0);

  float* dq = grow(dq_, dev, n_heads);
  float* dk = grow(dk_, dev, n_heads);
  float* dv = grow(dv_, dev, n_heads);
  if (fused_) {
    const auto sh = fused_shape(bh, seq, d);
    ops::cpu::attention_backward(dq, dk, dv, dch, q_.data(), k_.data(), v_.data(), row_max_.data(), row_inv_.data(),
                                 sh, grow(scratch_, Device::cpu, ops::cpu::attention_scratch_floats(sh)));
  } else {
    unfused_backward(dq, dk, dv, dch);
  }
  float* dqkv = grow(dqkv_, dev, static_cast<std::size_t>(rows) * 3 * dim);
  k.merge_heads(dqkv, dq, batch, seq, heads, d, 3 * dim, 0);
  k.merge_heads(dqkv, dk, batch, seq, heads, d, 3 * dim, dim);
  k.merge_heads(dqkv, dv, batch, seq, heads, d, 3 * dim, 2 * dim);
  return qkv_.backward(dqkv);
}

void MultiHeadSelfAttention::unfused_backward(float* dq, float* dk, float* dv, const float* dch) {
  const ops::Kernels& k = ops::kernels(store_->device());
  const int seq = seq_, bh = batch_ * opts_.heads, d = head_dim_;
  const std::int64_t tt = static_cast<std::int64_t>(seq) * seq;
  const std::int64_t td = static_cast<std::int64_t>(seq) * d;
  // dDrop(P)[T, T] = dC[T, D] V[T, D]^T;  dV[T, D] = Drop(P)[T, T]^T dC[T, D]
  float* dp = grow(dp_, k.device, static_cast<std::size_t>(bh) * tt);
  k.gemm_strided_batched(dp, dch, v_.data(), seq, seq, d, false, true, 1.0f, 0.0f, bh, tt, td, td);
  k.gemm_strided_batched(dv, dropped_, dch, seq, d, seq, true, false, 1.0f, 0.0f, bh, td, tt, td);
  const float* dprobs = drop_.backward(dp);  // dp itself when dropout was inactive
  k.softmax_rows_backward(dp, dprobs, probs_.data(), bh * seq, seq);  // dS, in dp

  // S = s Q K^T:  dQ[T, D] = s dS[T, T] K[T, D];  dK[T, D] = s dS[T, T]^T Q[T, D]
  k.gemm_strided_batched(dq, dp, k_.data(), seq, d, seq, false, false, scale_, 0.0f, bh, td, tt, td);
  k.gemm_strided_batched(dk, dp, q_.data(), seq, d, seq, true, false, scale_, 0.0f, bh, td, tt, td);
}

}  // namespace laconic::nn
