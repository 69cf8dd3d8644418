// Multi-head self-attention: input and parameter gradients against central differences (with and
// without dropout on the probabilities), the softmax kernels, and closed-form cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/ops/attention_cpu.h"
#include "core/ops/ops.h"
#include "workloads/nn/attention.h"
#include "tests/nn/gradcheck.h"

namespace laconic::nn {
namespace {

using laconic::testing::check_layer_gradients;
using laconic::testing::GradCheckOptions;
using laconic::testing::random_normal;
using laconic::testing::randomize_params;

constexpr int kB = 2, kT = 5, kDim = 8, kHeads = 2;

void check_attention_gradients(float dropout, const ForwardOptions& step, bool causal = false,
                               AttentionKernel kernel = AttentionKernel::fused) {
  ParamStore store;
  MultiHeadSelfAttention attn(store, "attn", {kDim, kHeads, dropout, 3, causal, kernel});
  store.finalize();
  randomize_params(store, 5, 0.4f);  // non-trivial attention patterns and non-zero biases
  // The K bias has an exactly zero gradient (softmax is shift invariant), so its numeric
  // differences are pure float noise: atol 2e-4 leaves them a margin.
  auto x = random_normal(kB * kT * kDim, 21);
  ASSERT_EQ(store.views().size(), 4u);  // qkv.{weight,bias}, proj.{weight,bias}
  check_layer_gradients(
      store, x, kB * kT * kDim, [&](const float* in) { return attn.forward(in, kB, kT, step); },
      [&](const float* dy) { return attn.backward(dy); }, GradCheckOptions{1e-2f, 1e-2, 2e-4, 64, 4});
}

// These ask for the fused kernel (core/ops/attention_cpu.h), which runs without active dropout;
// "Unfused" for the GEMMs.
TEST(AttentionGrad, NoDropout) { check_attention_gradients(0.0f, {true, 1, 0, 0}); }
TEST(AttentionGrad, NoDropoutUnfused) {
  check_attention_gradients(0.0f, {true, 1, 0, 0}, false, AttentionKernel::unfused);
}
TEST(AttentionGrad, CausalUnfused) { check_attention_gradients(0.0f, {true, 1, 0, 0}, true, AttentionKernel::unfused); }

TEST(AttentionGrad, DropoutOnProbabilitiesFixedKey) {
  // A fixed (seed, rank, step) fixes the mask, so the layer is a differentiable function of x.
  check_attention_gradients(0.3f, {true, 9, 1, 7});
}

TEST(AttentionGrad, Causal) { check_attention_gradients(0.0f, {true, 1, 0, 0}, true); }

TEST(AttentionGrad, CausalWithDropout) { check_attention_gradients(0.3f, {true, 9, 1, 7}, true); }

class FusedOrNot : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(Kernels, FusedOrNot, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "fused" : "unfused"; });

TEST_P(FusedOrNot, CausalOutputsDependOnNoLaterPosition) {
  ParamStore store;
  MultiHeadSelfAttention attn(store, "attn",
                              {kDim, kHeads, 0.0f, 3, true, GetParam() ? AttentionKernel::fused : AttentionKernel::unfused});
  store.finalize();
  randomize_params(store, 5, 0.4f);
  const auto x = random_normal(kB * kT * kDim, 8);
  const float* y0 = attn.forward(x.data(), kB, kT, {false, 1, 0, 0});
  const std::vector<float> base(y0, y0 + x.size());
  // Perturb position t of sequence 1: outputs of positions < t (both sequences) and of sequence
  // 0 entirely stay bit-identical; position t itself changes.
  for (int t = 0; t < kT; ++t) {
    auto moved = x;
    for (int c = 0; c < kDim; ++c) moved[(1 * kT + t) * kDim + c] += 1.0f;
    const float* y = attn.forward(moved.data(), kB, kT, {false, 1, 0, 0});
    for (int row = 0; row < kB * kT; ++row) {
      const bool may_change = row / kT == 1 && row % kT >= t;
      bool same = true;
      for (int c = 0; c < kDim; ++c) same = same && y[row * kDim + c] == base[row * kDim + c];
      if (!may_change) {
        EXPECT_TRUE(same) << "t=" << t << " row=" << row;
      }
      if (row == kT + t) {
        EXPECT_FALSE(same) << "t=" << t;
      }
    }
  }
  if (GetParam()) {  // the fused kernel keeps no probabilities
    EXPECT_THROW(attn.probs(), Error);
    return;
  }
  // Each causal probability row sums to 1 over its prefix and is 0 after it.
  const float* p = attn.probs();
  for (int r = 0; r < kB * kHeads * kT; ++r) {
    double sum = 0.0;
    for (int c = 0; c < kT; ++c) {
      if (c > r % kT) {
        EXPECT_EQ(p[r * kT + c], 0.0f);
      }
      sum += p[r * kT + c];
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
}

TEST(AttentionGrad, EvalModeIgnoresDropout) {
  ParamStore a_store, b_store;
  MultiHeadSelfAttention a(a_store, "attn", {kDim, kHeads, 0.5f, 3});
  MultiHeadSelfAttention b(b_store, "attn", {kDim, kHeads, 0.0f, 3});
  a_store.finalize();
  b_store.finalize();
  a.init(2);
  b.init(2);
  const auto x = random_normal(kB * kT * kDim, 3);
  const float* ya = a.forward(x.data(), kB, kT, {false, 1, 0, 0});
  const float* yb = b.forward(x.data(), kB, kT, {true, 1, 0, 0});
  EXPECT_EQ(std::vector<float>(ya, ya + x.size()), std::vector<float>(yb, yb + x.size()));
  // In training the mask changes the output, and differs between steps.
  const float* y1 = a.forward(x.data(), kB, kT, {true, 1, 0, 0});
  const std::vector<float> t1(y1, y1 + x.size());
  EXPECT_NE(t1, std::vector<float>(yb, yb + x.size()));
  const float* y2 = a.forward(x.data(), kB, kT, {true, 1, 0, 1});
  EXPECT_NE(t1, std::vector<float>(y2, y2 + x.size()));
}

TEST(Attention, ProbabilityRowsSumToOne) {
  ParamStore store;
  MultiHeadSelfAttention attn(store, "attn", {kDim, kHeads, 0.2f, 0});
  store.finalize();
  randomize_params(store, 8, 2.0f);  // large scores: exercises the max-subtraction
  const auto x = random_normal(kB * kT * kDim, 4, 3.0f);
  attn.forward(x.data(), kB, kT, {true, 0, 0, 0});
  const float* p = attn.probs();
  for (int r = 0; r < kB * kHeads * kT; ++r) {
    double sum = 0.0;
    for (int c = 0; c < kT; ++c) {
      const float v = p[r * kT + c];
      EXPECT_TRUE(std::isfinite(v) && v >= 0.0f && v <= 1.0f) << v;
      sum += v;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r;
  }
}

TEST(Attention, SoftmaxKernelsClosedForm) {
  // softmax(1000 + [0, 1, 2]) = [1, e, e^2] / (1 + e + e^2): would overflow without the max shift.
  const float x[] = {1000.0f, 1001.0f, 1002.0f};
  float y[3];
  ops::cpu::softmax_rows_forward(y, x, 1, 3);
  const double z = 1.0 + std::exp(1.0) + std::exp(2.0);
  EXPECT_NEAR(y[0], 1.0 / z, 1e-6);
  EXPECT_NEAR(y[1], std::exp(1.0) / z, 1e-6);
  EXPECT_NEAR(y[2], std::exp(2.0) / z, 1e-6);
  // dx = y * (dy - <dy, y>): a constant dy (shift invariance) gives dx = 0; dy = e_0 gives
  // dx = y0 * (e_0 - y).
  const float ones[] = {1, 1, 1}, e0[] = {1, 0, 0};
  float dx[3];
  ops::cpu::softmax_rows_backward(dx, ones, y, 1, 3);
  for (float v : dx) EXPECT_NEAR(v, 0.0f, 1e-7);
  ops::cpu::softmax_rows_backward(dx, e0, y, 1, 3);
  EXPECT_NEAR(dx[0], y[0] * (1 - y[0]), 1e-7);
  EXPECT_NEAR(dx[1], -y[0] * y[1], 1e-7);
  EXPECT_NEAR(dx[2], -y[0] * y[2], 1e-7);
}

TEST(Attention, SplitAndMergeHeadsAreInverse) {
  // [B*T, 3*dim] rows -> [B, H, T, D] for the K block, and back.
  const int b = 2, t = 3, h = 2, d = 2, dim = h * d, stride = 3 * dim;
  std::vector<float> rows(b * t * stride);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i);
  std::vector<float> heads(b * h * t * d);
  ops::cpu::split_heads(heads.data(), rows.data(), b, t, h, d, stride, dim);
  // heads[b=1, h=1, t=2, d=1] = rows[(1*3 + 2) * 12 + 4 + 1*2 + 1]
  EXPECT_EQ(heads[((1 * h + 1) * t + 2) * d + 1], static_cast<float>(5 * 12 + 4 + 2 + 1));
  std::vector<float> back(rows.size(), -1.0f);
  ops::cpu::merge_heads(back.data(), heads.data(), b, t, h, d, stride, dim);
  for (int r = 0; r < b * t; ++r)
    for (int c = 0; c < stride; ++c) {
      const bool k_block = c >= dim && c < 2 * dim;
      EXPECT_EQ(back[r * stride + c], k_block ? rows[r * stride + c] : -1.0f) << r << "," << c;
    }
}

TEST(Attention, EqualScoresGiveMeanOfValues) {
  // Wq = Wk = 0 and zero biases: all scores 0, uniform attention, so with Wv = Wo = I each output
  // row is the mean of its own sequence's input rows (and sequences do not mix).
  ParamStore store;
  MultiHeadSelfAttention attn(store, "attn", {kDim, kHeads, 0.0f, 0, false, AttentionKernel::unfused});  // probs()
  store.finalize();
  std::fill(store.params().begin(), store.params().end(), 0.0f);
  float* wqkv = store.param(attn.qkv().weight_view());  // [3*dim, dim]
  float* wo = store.param(attn.proj().weight_view());   // [dim, dim]
  for (int i = 0; i < kDim; ++i) {
    wqkv[(2 * kDim + i) * kDim + i] = 1.0f;
    wo[i * kDim + i] = 1.0f;
  }
  const auto x = random_normal(kB * kT * kDim, 6);
  const float* y = attn.forward(x.data(), kB, kT, {false, 0, 0, 0});
  for (int b = 0; b < kB; ++b)
    for (int c = 0; c < kDim; ++c) {
      double mean = 0.0;
      for (int t = 0; t < kT; ++t) mean += x[(b * kT + t) * kDim + c] / kT;
      for (int t = 0; t < kT; ++t) EXPECT_NEAR(y[(b * kT + t) * kDim + c], mean, 1e-5);
    }
  for (int i = 0; i < kB * kHeads * kT * kT; ++i) EXPECT_NEAR(attn.probs()[i], 1.0f / kT, 1e-7);
}

TEST(Attention, BackwardAccumulatesAndBatchSizesChange) {
  ParamStore store;
  MultiHeadSelfAttention attn(store, "attn", {kDim, kHeads, 0.1f, 0});
  store.finalize();
  attn.init(1);
  const auto big = random_normal(3 * kT * kDim, 7);
  const auto dy = random_normal(3 * kT * kDim, 8);
  attn.forward(big.data(), 3, kT, {true, 0, 0, 0});  // grow buffers for B=3 first
  // A smaller batch afterwards must give the same result as a fresh layer on it.
  ParamStore fresh_store;
  MultiHeadSelfAttention fresh(fresh_store, "attn", {kDim, kHeads, 0.1f, 0});
  fresh_store.finalize();
  fresh.init(1);
  const float* y = attn.forward(big.data(), 1, kT - 2, {true, 0, 0, 0});
  const float* yf = fresh.forward(big.data(), 1, kT - 2, {true, 0, 0, 0});
  const std::size_t n = (kT - 2) * kDim;
  EXPECT_EQ(std::vector<float>(y, y + n), std::vector<float>(yf, yf + n));

  store.zero_grad();
  attn.forward(big.data(), 3, kT, {true, 0, 0, 0});
  attn.backward(dy.data());
  const std::vector<float> once(store.grads().begin(), store.grads().end());
  attn.backward(dy.data());
  double norm = 0.0;
  for (std::size_t i = 0; i < once.size(); ++i) {
    EXPECT_NEAR(store.grads()[i], 2.0f * once[i], 1e-6f * (1.0f + std::abs(once[i])));
    norm += std::abs(once[i]);
  }
  EXPECT_GT(norm, 0.0);
}

// The fused kernel (scores, softmax and value product per four query rows, no [T, T] stored, the
// causal half skipped) against the unfused GEMMs and softmax kernels, forward and backward, causal and
// not, at head sizes with and without a compiled-in specialisation (32, 64; 4, 24) and sequence
// lengths that are and are not multiples of the kernel's blocks (8 lanes, 64 keys). Within 1e-5 of
// the largest magnitude; it prints whether they also agree bit for bit (they do where the GEMM
// library sums in index order, which keeps the goldens of the attention recipes unchanged).
struct FusedCase {
  int dim, heads, seq;
  bool causal;
};
class FusedAttention : public ::testing::TestWithParam<FusedCase> {};

TEST_P(FusedAttention, MatchesTheUnfusedKernels) {
  const FusedCase c = GetParam();
  constexpr int kBatch = 2;
  ParamStore fs, us;
  MultiHeadSelfAttention fused(fs, "attn", {c.dim, c.heads, 0.0f, 0, c.causal, AttentionKernel::fused});
  MultiHeadSelfAttention unfused(us, "attn", {c.dim, c.heads, 0.0f, 0, c.causal, AttentionKernel::unfused});
  fs.finalize();
  us.finalize();
  // Weights of std 2/sqrt(dim): scores of a few units, attention neither uniform nor one-hot.
  const float w = 2.0f / std::sqrt(static_cast<float>(c.dim));
  randomize_params(fs, 11, w);
  randomize_params(us, 11, w);
  const std::size_t n = static_cast<std::size_t>(kBatch) * c.seq * c.dim;
  const auto x = random_normal(n, 12), dy = random_normal(n, 13);
  const auto compare = [&](const char* what, const float* a, const float* b, std::size_t count) {
    float scale = 0.0f, worst = 0.0f;
    bool bitwise = true;
    for (std::size_t i = 0; i < count; ++i) {
      scale = std::max(scale, std::abs(b[i]));
      worst = std::max(worst, std::abs(a[i] - b[i]));
      bitwise = bitwise && a[i] == b[i];
    }
    EXPECT_LE(worst, 1e-5f * std::max(scale, 1.0f)) << what;
    std::printf("  %-12s max |fused - unfused| %.3g of max %.3g%s\n", what, worst, scale, bitwise ? " (bitwise)" : "");
  };
  for (const bool train : {false, true}) {
    const ForwardOptions step{train, 1, 0, 0};
    fs.zero_grad();
    us.zero_grad();
    const float* yf = fused.forward(x.data(), kBatch, c.seq, step);
    const float* yu = unfused.forward(x.data(), kBatch, c.seq, step);
    compare("output", yf, yu, n);
    compare("input grad", fused.backward(dy.data()), unfused.backward(dy.data()), n);
    compare("param grads", fs.grads().data(), us.grads().data(), fs.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, FusedAttention,
                         ::testing::Values(FusedCase{192, 6, 128, true}, FusedCase{192, 6, 128, false},
                                           FusedCase{128, 2, 70, true}, FusedCase{128, 2, 37, false},
                                           FusedCase{8, 2, 13, true}, FusedCase{48, 2, 9, false},
                                           FusedCase{96, 4, 1, true}),
                         [](const auto& info) {
                           const FusedCase& c = info.param;
                           return "d" + std::to_string(c.dim / c.heads) + "_t" + std::to_string(c.seq) +
                                  (c.causal ? "_causal" : "_full");
                         });

// The fused kernel splits heads over the rank's GEMM threads: each head is one thread's, in the
// same order of operations, so any thread count gives the same bits, also with more threads than
// heads (on a build without OpenMP this checks the serial path against itself).
TEST(FusedAttentionKernel, ThreadsDoNotChangeTheResult) {
  for (const bool causal : {true, false}) {
    ops::cpu::AttentionShape sh{5, 37, 32, 0.25f, causal, 1};
    const std::size_t n = static_cast<std::size_t>(sh.bh) * sh.seq * sh.head_dim, rows = sh.bh * sh.seq;
    const auto q = random_normal(n, 21), k = random_normal(n, 22), v = random_normal(n, 23), dout = random_normal(n, 24);
    const auto run = [&](int threads) {
      sh.threads = threads;
      std::vector<float> out(n), mx(rows), inv(rows), dq(n), dk(n), dv(n), scratch(ops::cpu::attention_scratch_floats(sh));
      ops::cpu::attention_forward(out.data(), mx.data(), inv.data(), q.data(), k.data(), v.data(), sh, scratch.data());
      ops::cpu::attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), mx.data(),
                                   inv.data(), sh, scratch.data());
      out.insert(out.end(), dq.begin(), dq.end());
      out.insert(out.end(), dk.begin(), dk.end());
      out.insert(out.end(), dv.begin(), dv.end());
      return out;
    };
    const auto one = run(1);
    EXPECT_EQ(one, run(2)) << causal;
    EXPECT_EQ(one, run(8)) << causal;  // more threads than heads
  }
}

// The default kernel: fused for causal attention without active dropout (it keeps no
// probabilities, so probs() is an error), the GEMMs for bidirectional attention or under dropout.
TEST(Attention, AutoKernelFusesCausalAttentionWithoutDropoutOnly) {
  const auto x = random_normal(kB * kT * kDim, 3);
  const auto kept_probs = [&](bool causal, float dropout, bool train) {
    ParamStore store;
    MultiHeadSelfAttention attn(store, "attn", {kDim, kHeads, dropout, 0, causal});
    store.finalize();
    attn.init(1);
    attn.forward(x.data(), kB, kT, {train, 1, 0, 0});
    try {
      attn.probs();
      return true;
    } catch (const Error&) {
      return false;
    }
  };
  EXPECT_FALSE(kept_probs(true, 0.0f, true));   // GPT without dropout: fused
  EXPECT_FALSE(kept_probs(true, 0.1f, false));  // evaluation: fused
  EXPECT_TRUE(kept_probs(true, 0.1f, true));    // dropout on the probabilities: GEMMs
  EXPECT_TRUE(kept_probs(false, 0.0f, true));   // bidirectional (BERT): GEMMs
}

TEST(Attention, RejectsBadOptions) {
  ParamStore store;
  EXPECT_THROW(MultiHeadSelfAttention(store, "a", {10, 3, 0.0f, 0}), Error);  // 3 does not divide 10
  EXPECT_THROW(MultiHeadSelfAttention(store, "b", {8, 2, 1.0f, 0}), Error);
  MultiHeadSelfAttention ok(store, "c", {8, 2, 0.0f, 0});
  store.finalize();
  const std::vector<float> dy(8, 1.0f);
  EXPECT_THROW(ok.backward(dy.data()), Error);
}

}  // namespace
}  // namespace laconic::nn
