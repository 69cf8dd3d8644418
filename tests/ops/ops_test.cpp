// Closed-form checks of the CPU reference kernels (the specification the CUDA kernels must match).
#include <gtest/gtest.h>

#include <pthread.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/check.h"
#include "core/device.h"
#include "core/rng.h"
#include "core/ops/dispatch.h"
#include "core/ops/ops.h"
#include "tests/support/model_gemm_shapes.h"

namespace laconic::ops::cpu {
namespace {

std::vector<float> random_vector(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  const std::uint64_t key = rng::key({seed, rng::kTest});
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * rng::normal(key, i);
  return v;
}

// Uniform in [-1, 1): cheaper than normal draws for the large shapes.
std::vector<float> uniform_vector(std::size_t n, std::uint64_t seed) {
  const std::uint64_t key = rng::key({seed, rng::kTest});
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = 2.0f * rng::uniform(key, i) - 1.0f;
  return v;
}

// The definition, in double: C = alpha * op(A) op(B) + beta * C.
std::vector<float> naive_gemm(const std::vector<float>& c0, const std::vector<float>& a,
                              const std::vector<float>& b, int m, int n, int k, bool ta, bool tb,
                              float alpha, float beta) {
  std::vector<float> c(c0.size());
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0.0;
      for (int p = 0; p < k; ++p) {
        const double av = ta ? a[static_cast<std::size_t>(p) * m + i] : a[static_cast<std::size_t>(i) * k + p];
        const double bv = tb ? b[static_cast<std::size_t>(j) * k + p] : b[static_cast<std::size_t>(p) * n + j];
        s += av * bv;
      }
      const std::size_t ij = static_cast<std::size_t>(i) * n + j;
      c[ij] = static_cast<float>(alpha * s + (beta == 0.0f ? 0.0 : beta * double(c0[ij])));
    }
  return c;
}

struct GemmCase {
  int m, n, k;
  float alpha, beta;
};

TEST(Gemm, MatchesNaiveForAllTransposesAndScalings) {
  const GemmCase cases[] = {{1, 1, 1, 1.0f, 0.0f},   {1, 7, 3, 1.0f, 1.0f},  {5, 1, 9, 0.5f, 2.0f},
                            {3, 4, 1, -1.0f, 0.0f},  {7, 5, 3, 2.0f, -0.5f}, {33, 17, 65, 1.0f, 1.0f},
                            {64, 130, 97, 1.0f, 0.0f}};
  int seed = 0;
  for (const auto& cs : cases)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const auto a = random_vector(static_cast<std::size_t>(cs.m) * cs.k, ++seed);
        const auto b = random_vector(static_cast<std::size_t>(cs.k) * cs.n, ++seed);
        const auto c0 = random_vector(static_cast<std::size_t>(cs.m) * cs.n, ++seed);
        auto c = c0;
        gemm(c.data(), a.data(), b.data(), cs.m, cs.n, cs.k, ta, tb, cs.alpha, cs.beta);
        const auto want = naive_gemm(c0, a, b, cs.m, cs.n, cs.k, ta, tb, cs.alpha, cs.beta);
        for (std::size_t i = 0; i < c.size(); ++i)
          ASSERT_NEAR(c[i], want[i], 1e-4f * (1.0f + std::abs(want[i])))
              << "m=" << cs.m << " n=" << cs.n << " k=" << cs.k << " ta=" << ta << " tb=" << tb
              << " alpha=" << cs.alpha << " beta=" << cs.beta << " at " << i;
      }
}

// Every GEMM shape and transpose the models issue (tests/support/model_gemm_shapes.h), with beta 0
// and 1, against the product in double, on whichever library this build uses (oneDNN, OpenBLAS or
// Eigen: gemm_library()). Leading dimensions are the packed row lengths, as every caller passes.
TEST(Gemm, EveryModelShapeMatchesTheDoubleProduct) {
  std::uint64_t seed = 100;
  for (const auto* model : {&testing::kGpt, &testing::kBert, &testing::kMlp})
    for (testing::GemmShape s : *model)
      for (float beta : {0.0f, 1.0f}) {
        s.beta = beta;
        const auto a = uniform_vector(static_cast<std::size_t>(s.m) * s.k, ++seed);
        const auto b = uniform_vector(static_cast<std::size_t>(s.k) * s.n, ++seed);
        const auto c0 = uniform_vector(static_cast<std::size_t>(s.m) * s.n, ++seed);
        auto c = c0;
        gemm(c.data(), a.data(), b.data(), s.m, s.n, s.k, s.ta, s.tb, 1.0f, beta);
        EXPECT_LE(testing::gemm_error_against_double(s, a, b, c0, c), 1e-5)
            << gemm_library() << ": m=" << s.m << " n=" << s.n << " k=" << s.k << " ta=" << s.ta << " tb=" << s.tb
            << " beta=" << beta;
      }
}

// Signals handled while GEMMs run must not touch memory: oneDNN's JIT kernels had a signal's frame
// written over the heap (SIGTERM to an elastic replica aborted it with "corrupted size vs.
// prev_size"). A thread runs the GPT's GEMM shapes for a second, with small heap blocks allocated
// and freed around each, while this thread signals it every 50 us; the results stay exact (inputs
// of 0.5 and 0.25: every output is k / 8) and the heap stays intact (glibc aborts otherwise).
std::atomic<long> g_gemm_signals{0};
void count_signal(int) { g_gemm_signals.fetch_add(1, std::memory_order_relaxed); }

TEST(Gemm, SignalsDuringGemmsLeaveTheHeapIntact) {
  struct sigaction sa {}, previous {};
  sa.sa_handler = count_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ASSERT_EQ(sigaction(SIGUSR2, &sa, &previous), 0);
  std::atomic<bool> done{false};
  std::atomic<long> wrong{0}, products{0};
  std::thread worker([&] {
    const std::vector<float> a(4000 * 2048, 0.5f), b(4000 * 2048, 0.25f);
    std::vector<float> c(2048 * 4000);
    const auto start = std::chrono::steady_clock::now();
    for (int round = 0; std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1500); ++round)
      for (const auto& s : testing::kGpt) {
        auto* around = new std::vector<float>(64 + round % 64, 1.0f);  // heap blocks for a stray write to hit
        gemm(c.data(), a.data(), b.data(), s.m, s.n, s.k, s.ta, s.tb, 1.0f, 0.0f);
        for (std::size_t i = 0; i < static_cast<std::size_t>(s.m) * s.n; i += 4099)
          if (c[i] != 0.125f * static_cast<float>(s.k)) wrong.fetch_add(1);
        delete around;
        products.fetch_add(1);
      }
    done = true;
  });
  long sent = 0;
  while (!done.load()) {
    pthread_kill(worker.native_handle(), SIGUSR2);
    ++sent;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  worker.join();
  sigaction(SIGUSR2, &previous, nullptr);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(g_gemm_signals.load(), 0) << "no signal was handled: the test tested nothing";
  std::printf("%ld products, %ld signals sent, %ld handled (%s)\n", products.load(), sent, g_gemm_signals.load(),
              gemm_library().c_str());
}

// round_bf16: ties to even, specials kept, and every value the nearer of the two bf16 neighbours.
TEST(RoundBf16, ClosedFormsAndNearest) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {1.0f,
                                1.0f + 0x1p-8f,              // a tie: to 1 (even)
                                1.0f + 0x1p-7f + 0x1p-8f,    // a tie: to 1 + 2^-6 (even)
                                1.0f + 0x1p-8f + 0x1p-20f,   // past the tie: up
                                -(1.0f + 0x1p-8f + 0x1p-20f),
                                0.0f, -0.0f, inf, -inf,
                                std::numeric_limits<float>::max()};  // past bf16's largest: inf
  const std::vector<float> want = {1.0f, 1.0f, 1.0f + 0x1p-6f, 1.0f + 0x1p-7f, -(1.0f + 0x1p-7f), 0.0f, -0.0f, inf, -inf,
                                   inf};
  std::vector<float> y(x.size());
  round_bf16(y.data(), x.data(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(y[i], want[i]) << "x = " << x[i];
    EXPECT_EQ(std::signbit(y[i]), std::signbit(want[i])) << "x = " << x[i];
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  round_bf16(y.data(), &nan, 1);
  EXPECT_TRUE(std::isnan(y[0]));
  const float snan = std::bit_cast<float>(0x7f800001u);  // a payload in the low bits only: still NaN
  round_bf16(y.data(), &snan, 1);
  EXPECT_TRUE(std::isnan(y[0]));

  // Random normals over many scales, rounded in place: 8 significant bits, and no farther from x
  // than the other neighbour.
  std::vector<float> r(4096);
  const std::uint64_t key = rng::key({7, 7});
  for (std::size_t i = 0; i < r.size(); ++i) r[i] = rng::normal(key, i) * std::ldexp(1.0f, static_cast<int>(i % 61) - 30);
  std::vector<float> rounded = r;
  round_bf16(rounded.data(), rounded.data(), rounded.size());
  for (std::size_t i = 0; i < r.size(); ++i) {
    const std::uint32_t b = std::bit_cast<std::uint32_t>(rounded[i]);
    ASSERT_EQ(b & 0xffffu, 0u) << r[i];
    const float down = std::bit_cast<float>(std::bit_cast<std::uint32_t>(r[i]) & 0xffff0000u);
    const float up = std::bit_cast<float>((std::bit_cast<std::uint32_t>(r[i]) & 0xffff0000u) + 0x10000u);
    EXPECT_TRUE(rounded[i] == down || rounded[i] == up) << r[i];
    EXPECT_LE(std::abs(rounded[i] - r[i]), std::min(std::abs(down - r[i]), std::abs(up - r[i]))) << r[i];
  }
}

TEST(Gemm, BetaZeroOverwritesNaN) {
  const int m = 9, n = 11, k = 5;  // covers Eigen's small (coefficient-wise) product path
  for (int big : {1, 8}) {
    const int mm = m * big, nn = n * big, kk = k * big;  // and its blocked GEMM path
    const auto a = random_vector(static_cast<std::size_t>(mm) * kk, 1);
    const auto b = random_vector(static_cast<std::size_t>(kk) * nn, 2);
    std::vector<float> c(static_cast<std::size_t>(mm) * nn, std::numeric_limits<float>::quiet_NaN());
    gemm(c.data(), a.data(), b.data(), mm, nn, kk, false, false, 1.0f, 0.0f);
    for (float v : c) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST(Gemm, AlphaZeroOrEmptyKScalesCOnly) {
  std::vector<float> a(6, std::numeric_limits<float>::quiet_NaN());  // must not be read
  std::vector<float> c = {1, 2, 3, 4};
  gemm(c.data(), a.data(), a.data(), 2, 2, 3, false, false, 0.0f, 3.0f);
  EXPECT_EQ(c, (std::vector<float>{3, 6, 9, 12}));
  gemm(c.data(), nullptr, nullptr, 2, 2, 0, false, false, 1.0f, 0.0f);
  EXPECT_EQ(c, (std::vector<float>{0, 0, 0, 0}));
}

TEST(Bias, AddAndGradient) {
  std::vector<float> y = {1, 2, 3, 4, 5, 6};  // [2, 3]
  const std::vector<float> bias = {10, 20, 30};
  add_bias(y.data(), bias.data(), 2, 3);
  EXPECT_EQ(y, (std::vector<float>{11, 22, 33, 14, 25, 36}));
  std::vector<float> db = {1, 1, 1};
  bias_grad(db.data(), y.data(), 2, 3);  // accumulates column sums
  EXPECT_EQ(db, (std::vector<float>{26, 48, 70}));
}

TEST(Relu, ForwardAndBackward) {
  const std::vector<float> x = {-2, -0.0f, 0.5f, 3};
  std::vector<float> y(4), dx(4);
  relu_forward(y.data(), x.data(), 4);
  EXPECT_EQ(y, (std::vector<float>{0, 0, 0.5f, 3}));
  const std::vector<float> dy = {1, 2, 3, 4};
  relu_backward(dx.data(), dy.data(), y.data(), 4);
  EXPECT_EQ(dx, (std::vector<float>{0, 0, 3, 4}));
  // dx may alias dy.
  std::vector<float> d = dy;
  relu_backward(d.data(), d.data(), y.data(), 4);
  EXPECT_EQ(d, dx);
}

TEST(Gelu, KnownValuesAndDerivative) {
  // GELU(x) = x Phi(x): Phi(0) = 1/2, Phi(1) = 0.841344746, Phi(-1) = 0.158655254.
  const std::vector<float> x = {0.0f, 1.0f, -1.0f, 6.0f, -6.0f};
  std::vector<float> y(x.size());
  gelu_forward(y.data(), x.data(), x.size());
  EXPECT_FLOAT_EQ(y[0], 0.0f);
  EXPECT_NEAR(y[1], 0.841344746f, 1e-6f);
  EXPECT_NEAR(y[2], -0.158655254f, 1e-6f);
  EXPECT_NEAR(y[3], 6.0f, 1e-6f);
  EXPECT_NEAR(y[4], 0.0f, 1e-6f);
  // d/dx GELU = Phi(x) + x phi(x): at 0 it is 1/2; at 1, 0.841344746 + 0.241970725.
  std::vector<float> dy(x.size(), 2.0f), dx(x.size());
  gelu_backward(dx.data(), dy.data(), x.data(), x.size());
  EXPECT_NEAR(dx[0], 2 * 0.5f, 1e-6f);
  EXPECT_NEAR(dx[1], 2 * (0.841344746f + 0.241970725f), 1e-5f);
  EXPECT_NEAR(dx[2], 2 * (0.158655254f - 0.241970725f), 1e-5f);
}

TEST(LayerNorm, UnitGainGivesZeroMeanUnitVariance) {
  const int rows = 5, cols = 37;
  auto x = random_vector(static_cast<std::size_t>(rows) * cols, 7, 3.0f);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) x[static_cast<std::size_t>(r) * cols + c] += 100.0f * r;  // offsets
  const std::vector<float> gamma(cols, 1.0f), beta(cols, 0.0f);
  std::vector<float> y(x.size()), mean(rows), rstd(rows);
  layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(), beta.data(), rows, cols,
                    1e-5f);
  for (int r = 0; r < rows; ++r) {
    double m = 0.0, v = 0.0, xm = 0.0;
    for (int c = 0; c < cols; ++c) {
      m += y[static_cast<std::size_t>(r) * cols + c];
      xm += x[static_cast<std::size_t>(r) * cols + c];
    }
    m /= cols;
    for (int c = 0; c < cols; ++c) v += std::pow(y[static_cast<std::size_t>(r) * cols + c] - m, 2);
    v /= cols;
    EXPECT_NEAR(m, 0.0, 1e-5) << "row " << r;
    EXPECT_NEAR(v, 1.0, 1e-3) << "row " << r;  // var/(var+eps) with var ~ 9
    EXPECT_NEAR(mean[r], xm / cols, 1e-3 * (1 + std::abs(xm / cols)));
  }
}

TEST(LayerNorm, GammaBetaAffineAndBackwardAccumulates) {
  // One row [1, 3]: mean 2, var 1, xhat = [-1, 1] (eps 0). y = xhat * gamma + beta.
  const std::vector<float> x = {1, 3}, gamma = {2, 3}, beta = {10, 20};
  std::vector<float> y(2), mean(1), rstd(1);
  layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(), beta.data(), 1, 2, 0.0f);
  EXPECT_FLOAT_EQ(y[0], 8.0f);
  EXPECT_FLOAT_EQ(y[1], 23.0f);
  EXPECT_FLOAT_EQ(rstd[0], 1.0f);
  const std::vector<float> dy = {1, 1};
  std::vector<float> dx(2, 123.0f), dgamma = {1, 1}, dbeta = {1, 1};
  layernorm_backward(dx.data(), dgamma.data(), dbeta.data(), dy.data(), x.data(), mean.data(),
                     rstd.data(), gamma.data(), 1, 2);
  EXPECT_EQ(dgamma, (std::vector<float>{0, 2}));  // 1 + dy * xhat
  EXPECT_EQ(dbeta, (std::vector<float>{2, 2}));   // 1 + dy
  // With two features xhat is +-1 whatever x is, so y does not depend on x: dx = 0.
  EXPECT_NEAR(dx[0], 0.0f, 1e-6f);
  EXPECT_NEAR(dx[1], 0.0f, 1e-6f);
}

TEST(Embedding, GatherAndScatterAdd) {
  const std::vector<float> table = {0, 1, 10, 11, 20, 21};  // [3, 2]
  const std::vector<std::int32_t> ids = {2, 0, 2};
  std::vector<float> y(6);
  embedding_forward(y.data(), ids.data(), table.data(), 3, 2);
  EXPECT_EQ(y, (std::vector<float>{20, 21, 0, 1, 20, 21}));
  std::vector<float> dtable(6, 1.0f);
  const std::vector<float> dy = {1, 2, 3, 4, 5, 6};
  embedding_backward(dtable.data(), dy.data(), ids.data(), 3, 2);
  EXPECT_EQ(dtable, (std::vector<float>{4, 5, 1, 1, 7, 9}));  // repeated id 2 sums both rows
}

TEST(Dropout, KeepsAboutOneMinusPScaledAndReproducible) {
  const std::size_t n = 100000;
  const float p = 0.3f;
  const std::vector<float> x(n, 1.0f);
  std::vector<float> y(n), y2(n), y3(n);
  const std::uint64_t key = rng::key({42, 0, 7, rng::kDropout, 1});
  dropout_forward(y.data(), x.data(), n, p, key);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (y[i] != 0.0f) {
      ++kept;
      ASSERT_FLOAT_EQ(y[i], 1.0f / (1.0f - p));
    }
    ASSERT_EQ(y[i] != 0.0f, rng::uniform(key, i) >= p) << i;
  }
  // Binomial(n, 0.7): sd = sqrt(n * 0.21) ~ 145; allow 5 sd.
  EXPECT_NEAR(static_cast<double>(kept), 0.7 * n, 5 * 145.0);
  dropout_forward(y2.data(), x.data(), n, p, key);
  EXPECT_EQ(y, y2);
  dropout_forward(y3.data(), x.data(), n, p, rng::key({42, 0, 8, rng::kDropout, 1}));
  EXPECT_NE(y, y3);
  // backward applies the same mask and scale to dy.
  std::vector<float> dy(n, 2.0f), dx(n);
  dropout_backward(dx.data(), dy.data(), n, p, key);
  for (std::size_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(dx[i], 2.0f * y[i]);
  // p = 0 is the identity.
  dropout_forward(y2.data(), x.data(), n, 0.0f, key);
  EXPECT_EQ(y2, x);
}

TEST(SoftmaxXent, ProbabilitiesLossAndGradient) {
  const int rows = 4, classes = 5;
  auto logits = random_vector(rows * classes, 3, 2.0f);
  logits[7] = 1000.0f;  // large logits must not overflow
  const std::vector<std::int32_t> targets = {3, 2, -1, 0};
  std::vector<float> probs(logits.size()), losses(rows, 99.0f);
  softmax_xent_forward(losses.data(), probs.data(), logits.data(), targets.data(), rows, classes, -1);
  for (int r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int c = 0; c < classes; ++c) sum += probs[r * classes + c];
    EXPECT_NEAR(sum, 1.0, 1e-6) << r;
    if (targets[r] == -1) {
      EXPECT_EQ(losses[r], 0.0f);
    } else {
      // -log softmax computed in double from the logits.
      double zmax = -1e30, s = 0.0;
      for (int c = 0; c < classes; ++c) zmax = std::max(zmax, double(logits[r * classes + c]));
      for (int c = 0; c < classes; ++c) s += std::exp(logits[r * classes + c] - zmax);
      const double want = std::log(s) - (logits[r * classes + targets[r]] - zmax);
      EXPECT_NEAR(losses[r], want, 1e-5) << r;
      EXPECT_NEAR(losses[r], -std::log(std::max(1e-30, double(probs[r * classes + targets[r]]))), 1e-4)
          << r;
    }
  }
  // Row 1 has target 2 and logit 1000 there: p = 1, loss = 0.
  EXPECT_NEAR(losses[1], 0.0f, 1e-6f);
  std::vector<float> d(logits.size(), 7.0f);
  const float scale = 1.0f / 3.0f;
  softmax_xent_backward(d.data(), probs.data(), targets.data(), rows, classes, -1, scale);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < classes; ++c) {
      const float want = targets[r] == -1 ? 0.0f : scale * (probs[r * classes + c] - (c == targets[r]));
      EXPECT_NEAR(d[r * classes + c], want, 1e-7f) << r << "," << c;
    }
}

TEST(SoftmaxXent, UniformLogitsGiveLogClasses) {
  const std::vector<float> logits(10, 0.25f);
  const std::vector<std::int32_t> t = {4};
  std::vector<float> probs(10), loss(1);
  softmax_xent_forward(loss.data(), probs.data(), logits.data(), t.data(), 1, 10, -1);
  EXPECT_NEAR(loss[0], std::log(10.0f), 1e-6f);
  for (float p : probs) EXPECT_NEAR(p, 0.1f, 1e-7f);
}

TEST(ArgmaxRows, FirstMaximum) {
  const std::vector<float> x = {1, 3, 3, 0, /**/ -5, -6, -7, -8, /**/ 0, 0, 0, 1};
  std::vector<std::int32_t> out(3);
  argmax_rows(out.data(), x.data(), 3, 4);
  EXPECT_EQ(out, (std::vector<std::int32_t>{1, 0, 3}));
}

TEST(Elementwise, FillScaleAxpy) {
  std::vector<float> x(5), y = {1, 2, 3, 4, 5};
  fill(x.data(), 2.0f, 5);
  EXPECT_EQ(x, (std::vector<float>(5, 2.0f)));
  scale(y.data(), -2.0f, 5);
  EXPECT_EQ(y, (std::vector<float>{-2, -4, -6, -8, -10}));
  axpy(y.data(), 0.5f, x.data(), 5);
  EXPECT_EQ(y, (std::vector<float>{-1, -3, -5, -7, -9}));
}

// Bitwise reproducibility needs kernels whose results do not depend on where a buffer sits in
// memory (malloc's placement varies between runs and processes). The same rows at every offset
// modulo a cache line must give the same bits. (Eigen's packet exp and sum peel to alignment and
// failed this: a threads run and an MPI run of one recipe then drifted apart.)
TEST(GemmStridedBatched, EachMatrixIsOneGemm) {
  // Strides with gaps between the matrices: the gaps of C stay untouched.
  const int m = 3, n = 4, k = 5, batch = 3;
  const std::int64_t sa = m * k + 2, sb = k * n + 1, sc = m * n + 3;
  const auto a = random_vector(sa * batch, 61), b = random_vector(sb * batch, 62);
  const auto c0 = random_vector(sc * batch, 63);
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      std::vector<float> c = c0, want = c0;
      gemm_strided_batched(c.data(), a.data(), b.data(), m, n, k, ta, tb, 0.5f, 0.25f, batch, sc, sa, sb);
      for (int i = 0; i < batch; ++i)
        gemm(want.data() + i * sc, a.data() + i * sa, b.data() + i * sb, m, n, k, ta, tb, 0.5f, 0.25f);
      EXPECT_EQ(c, want) << "ta=" << ta << " tb=" << tb;
    }
}

TEST(Rows, AddScatterAndPositionIds) {
  const std::vector<float> a = {1, 2, 3}, b = {0.5f, -2, 4};
  std::vector<float> y(3);
  add(y.data(), a.data(), b.data(), 3);
  EXPECT_EQ(y, (std::vector<float>{1.5f, 0, 7}));
  // Rows 2 and 0 of a [3, 2] buffer get x's rows 0 and 1; row 1 keeps its value.
  std::vector<float> out = {9, 9, 9, 9, 9, 9};
  const std::vector<float> x = {1, 2, 3, 4};
  const std::int32_t idx[] = {2, 0};
  scatter_rows(out.data(), x.data(), idx, 2, 2);
  EXPECT_EQ(out, (std::vector<float>{3, 4, 9, 9, 1, 2}));
  std::int32_t pos[7];
  iota_mod(pos, 7, 3);
  EXPECT_EQ(std::vector<std::int32_t>(pos, pos + 7), (std::vector<std::int32_t>{0, 1, 2, 0, 1, 2, 0}));
}

TEST(XentStats, SumCountedAndCorrectOverKeptRows) {
  const float losses[] = {0.5f, 100.0f, 0.25f, 2.0f};
  const std::int32_t argmax[] = {1, 1, 0, 2}, targets[] = {1, -1, 3, 2};
  double stats[3];
  xent_stats(stats, losses, argmax, targets, 4, -1);
  EXPECT_EQ(stats[0], 2.75);  // the ignored row's loss is not counted
  EXPECT_EQ(stats[1], 3.0);
  EXPECT_EQ(stats[2], 2.0);
  xent_stats(stats, losses, argmax, targets, 0, -1);
  EXPECT_EQ(stats[0], 0.0);
  EXPECT_EQ(stats[1], 0.0);
}

TEST(Dispatch, CpuTableIsTheReferenceAndCudaNeedsACudaBuild) {
  const Kernels& k = kernels(Device::cpu);
  EXPECT_EQ(k.device, Device::cpu);
  EXPECT_EQ(k.gemm, &gemm);
  EXPECT_EQ(k.xent_stats, &xent_stats);
  if (built_with_cuda())
    EXPECT_EQ(kernels(Device::cuda).device, Device::cuda);
  else
    EXPECT_THROW(kernels(Device::cuda), Error);
}

TEST(Kernels, ResultsDoNotDependOnBufferAlignment) {
  constexpr int rows = 3, classes = 37;
  constexpr std::size_t n = rows * classes;
  std::vector<float> logits(n);
  for (std::size_t i = 0; i < n; ++i) logits[i] = 3.0f * std::sin(0.7f * static_cast<float>(i)) + 0.01f * i;
  const std::vector<std::int32_t> targets = {0, 36, 5};
  std::vector<float> ref_probs, ref_loss, ref_gelu, ref_dgelu;
  for (int shift = 0; shift < 16; ++shift) {
    std::vector<float> buf(n + 16), probs(n + 16), losses(rows + 16), y(n + 16), dx(n + 16);
    std::copy(logits.begin(), logits.end(), buf.begin() + shift);
    softmax_xent_forward(losses.data() + shift, probs.data() + shift, buf.data() + shift, targets.data(), rows,
                         classes, -1);
    gelu_forward(y.data() + shift, buf.data() + shift, n);
    gelu_backward(dx.data() + shift, buf.data() + shift, buf.data() + shift, n);
    const std::vector<float> p(probs.begin() + shift, probs.begin() + shift + n);
    const std::vector<float> l(losses.begin() + shift, losses.begin() + shift + rows);
    const std::vector<float> g(y.begin() + shift, y.begin() + shift + n);
    const std::vector<float> dg(dx.begin() + shift, dx.begin() + shift + n);
    if (shift == 0) {
      ref_probs = p, ref_loss = l, ref_gelu = g, ref_dgelu = dg;
      continue;
    }
    EXPECT_EQ(std::memcmp(p.data(), ref_probs.data(), n * 4), 0) << "softmax probs, shift " << shift;
    EXPECT_EQ(std::memcmp(l.data(), ref_loss.data(), rows * 4), 0) << "softmax loss, shift " << shift;
    EXPECT_EQ(std::memcmp(g.data(), ref_gelu.data(), n * 4), 0) << "gelu, shift " << shift;
    EXPECT_EQ(std::memcmp(dg.data(), ref_dgelu.data(), n * 4), 0) << "gelu backward, shift " << shift;
  }
}

}  // namespace
}  // namespace laconic::ops::cpu
