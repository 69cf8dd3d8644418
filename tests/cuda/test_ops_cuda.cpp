// Parity of every CUDA kernel (ops/cuda) with the CPU reference (ops::cpu, the specification) on
// random inputs, including odd sizes (1, 33, 257) that do not fill a warp or a block. Each check
// prints the max abs difference. Tolerances: float rounding only (the GPU sums in a different
// order, and its erff/expf differ from libm by an ulp or two); dropout masks must match bit for
// bit. Every test skips (never passes silently) when there is no CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/rng.h"
#include "core/ops/cuda/cuda_check.h"
#include "core/ops/cuda/ops_cuda.h"
#include "core/ops/ops.h"

namespace laconic {
namespace {

namespace cpu = ops::cpu;
namespace gpu = ops::cuda;
#define LC_REQUIRE_DEVICE() \
  if (!::laconic::cuda_available()) GTEST_SKIP() << "no CUDA device"

// core's DeviceArray on the GPU, plus the whole-buffer download the comparisons below read.
template <typename T>
struct DeviceBuffer : DeviceArray<T> {
  explicit DeviceBuffer(std::size_t n) : DeviceArray<T>(Device::cuda, n) {}
  explicit DeviceBuffer(std::span<const T> host) : DeviceArray<T>(Device::cuda, host.size()) { this->upload(host); }
  using DeviceArray<T>::download;
  std::vector<T> download() const {
    std::vector<T> host(this->size());
    this->download(std::span<T>(host));
    return host;
  }
};

// N(0, sd^2) values from the counter-based generator: reproducible, distinct per `stream`.
std::vector<float> randn(std::size_t n, std::uint64_t stream, float sd = 1.0f) {
  const std::uint64_t key = rng::key({rng::kTest, stream});
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = sd * rng::normal(key, i);
  return v;
}

std::vector<std::int32_t> randint(std::size_t n, std::uint64_t stream, std::uint64_t hi) {
  const std::uint64_t key = rng::key({rng::kTest, stream});
  std::vector<std::int32_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::int32_t>(rng::below(key, i, hi));
  return v;
}

template <typename T>
DeviceBuffer<T> to_device(const std::vector<T>& host) {
  return DeviceBuffer<T>(std::span<const T>(host));
}

// Max |got - want| and max |want|; prints and records the former under `what`.
struct Diff {
  double max_abs = 0.0;
  double max_ref = 0.0;
};
Diff compare(const std::string& what, const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size()) << what;
  Diff d;
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const double g = got[i], w = want[i];
    if (std::isnan(w) != std::isnan(g)) d.max_abs = std::numeric_limits<double>::infinity();
    else if (!std::isnan(w)) d.max_abs = std::max(d.max_abs, std::abs(g - w));
    d.max_ref = std::max(d.max_ref, std::abs(w));
  }
  std::cout << "[ parity   ] " << what << " max_abs_diff=" << d.max_abs << " (max |ref|=" << d.max_ref
            << ")\n";
  ::testing::Test::RecordProperty(what, std::to_string(d.max_abs));
  return d;
}
// Elementwise kernels: ~1e-6 relative to the magnitude of the reference.
void expect_close(const std::string& what, const std::vector<float>& got,
                  const std::vector<float>& want, double rel = 1e-6) {
  const Diff d = compare(what, got, want);
  EXPECT_LE(d.max_abs, rel * std::max(1.0, d.max_ref)) << what;
}

const std::size_t kSizes[] = {0, 1, 33, 257, 100003};

// ---- gemm ---------------------------------------------------------------------------------------
struct GemmCase {
  int m, n, k;
};

TEST(CudaOps, GemmMatchesCpu) {
  LC_REQUIRE_DEVICE();
  const GemmCase cases[] = {{1, 1, 1}, {33, 17, 257}, {257, 33, 64}, {64, 64, 64}, {1, 257, 33},
                            {128, 1, 513}};
  const float coeffs[][2] = {{1.0f, 0.0f}, {0.5f, 1.0f}, {-2.0f, 0.25f}};
  std::uint64_t stream = 0;
  for (const auto& [m, n, k] : cases)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (const auto& ab : coeffs) {
          const auto a = randn(static_cast<std::size_t>(m) * k, ++stream);
          const auto b = randn(static_cast<std::size_t>(k) * n, ++stream);
          auto c = randn(static_cast<std::size_t>(m) * n, ++stream);
          auto da = to_device(a), db = to_device(b), dc = to_device(c);
          gpu::gemm(dc.data(), da.data(), db.data(), m, n, k, ta, tb, ab[0], ab[1]);
          cpu::gemm(c.data(), a.data(), b.data(), m, n, k, ta, tb, ab[0], ab[1]);
          const std::string what = "gemm m=" + std::to_string(m) + " n=" + std::to_string(n) +
                                   " k=" + std::to_string(k) + " ta=" + std::to_string(ta) +
                                   " tb=" + std::to_string(tb) + " alpha=" + std::to_string(ab[0]) +
                                   " beta=" + std::to_string(ab[1]);
          // ~1e-4 relative to the largest entry: plain FP32 (no TF32) on both sides.
          const Diff d = compare(what, dc.download(), c);
          EXPECT_LE(d.max_abs, 1e-4 * std::max(1.0, d.max_ref)) << what;
        }
}

TEST(CudaOps, GemmEmptyAndZeroAlpha) {
  LC_REQUIRE_DEVICE();
  // k == 0 and alpha == 0: C = beta C, A and B unread (null here); beta == 0 clears NaNs.
  std::vector<float> c = {1.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f, 4.0f};
  auto dc = to_device(c);
  gpu::gemm(dc.data(), nullptr, nullptr, 2, 2, 0, false, false, 1.0f, 0.0f);
  expect_close("gemm k=0 beta=0", dc.download(), {0.0f, 0.0f, 0.0f, 0.0f});
  dc.upload(std::span<const float>(c));
  gpu::gemm(dc.data(), nullptr, nullptr, 2, 2, 5, false, false, 0.0f, 2.0f);
  const auto got = dc.download();
  EXPECT_EQ(got[0], 2.0f);
  EXPECT_TRUE(std::isnan(got[1]));
  EXPECT_EQ(got[3], 8.0f);
  gpu::gemm(nullptr, nullptr, nullptr, 0, 3, 3, false, false, 1.0f, 0.0f);  // no-op
  LC_CUDA_CHECK(cudaDeviceSynchronize());
}

// ---- bias ---------------------------------------------------------------------------------------
TEST(CudaOps, AddBiasAndBiasGradMatchCpu) {
  LC_REQUIRE_DEVICE();
  const int shapes[][2] = {{1, 1}, {33, 1}, {1, 257}, {33, 257}, {1000, 33}, {4097, 64}};
  std::uint64_t stream = 100;
  for (const auto& [rows, cols] : shapes) {
    const std::string tag = " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols);
    auto y = randn(static_cast<std::size_t>(rows) * cols, ++stream);
    const auto bias = randn(cols, ++stream);
    auto dy = to_device(y), dbias = to_device(bias);
    gpu::add_bias(dy.data(), dbias.data(), rows, cols);
    cpu::add_bias(y.data(), bias.data(), rows, cols);
    expect_close("add_bias" + tag, dy.download(), y);

    // bias_grad accumulates into a non-zero dbias.
    auto db = randn(cols, ++stream);
    auto ddb = to_device(db);
    gpu::bias_grad(ddb.data(), dy.data(), rows, cols);
    cpu::bias_grad(db.data(), y.data(), rows, cols);
    // A sum over `rows` terms: rounding grows with the row count.
    const Diff d = compare("bias_grad" + tag, ddb.download(), db);
    EXPECT_LE(d.max_abs, 1e-6 * std::sqrt(static_cast<double>(rows)) * 8 * std::max(1.0, d.max_ref));
  }
}

// ---- activations ---------------------------------------------------------------------------------
TEST(CudaOps, ReluMatchesCpu) {
  LC_REQUIRE_DEVICE();
  std::uint64_t stream = 200;
  for (std::size_t n : kSizes) {
    const std::string tag = " n=" + std::to_string(n);
    const auto x = randn(n, ++stream), g = randn(n, ++stream);
    std::vector<float> y(n), dx(n);
    auto dxb = to_device(x), dyb = DeviceBuffer<float>(n), dg = to_device(g);
    gpu::relu_forward(dyb.data(), dxb.data(), n);
    cpu::relu_forward(y.data(), x.data(), n);
    expect_close("relu_forward" + tag, dyb.download(), y, 0.0);
    // Backward in place (dx aliases dy, as the contract allows).
    gpu::relu_backward(dg.data(), dg.data(), dyb.data(), n);
    cpu::relu_backward(dx.data(), g.data(), y.data(), n);
    expect_close("relu_backward (in place)" + tag, dg.download(), dx, 0.0);
  }
}

// train.precision = "bf16"'s rounding: the same bits as the CPU's, specials included, in place.
TEST(CudaOps, RoundBf16MatchesCpuBitForBit) {
  LC_REQUIRE_DEVICE();
  std::uint64_t stream = 250;
  for (std::size_t n : kSizes) {
    auto x = randn(n, ++stream, 1e3f);
    const float specials[] = {std::numeric_limits<float>::infinity(), -0.0f, std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::max(), 1.0f + 0x1p-8f};
    for (std::size_t i = 0; i < std::min<std::size_t>(n, 5); ++i) x[i] = specials[i];
    std::vector<float> want(n);
    cpu::round_bf16(want.data(), x.data(), n);
    auto dx = to_device(x);
    gpu::round_bf16(dx.data(), dx.data(), n);
    const auto got = dx.download();
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i])) << "n=" << n << " i=" << i;
  }
}

TEST(CudaOps, GeluMatchesCpu) {
  LC_REQUIRE_DEVICE();
  std::uint64_t stream = 300;
  for (std::size_t n : kSizes) {
    const std::string tag = " n=" + std::to_string(n);
    const auto x = randn(n, ++stream, 3.0f), g = randn(n, ++stream);
    std::vector<float> y(n), dx(n);
    auto dxb = to_device(x), dyb = DeviceBuffer<float>(n), dg = to_device(g);
    gpu::gelu_forward(dyb.data(), dxb.data(), n);
    cpu::gelu_forward(y.data(), x.data(), n);
    expect_close("gelu_forward" + tag, dyb.download(), y, 2e-6);
    gpu::gelu_backward(dg.data(), dg.data(), dxb.data(), n);
    cpu::gelu_backward(dx.data(), g.data(), x.data(), n);
    expect_close("gelu_backward (in place)" + tag, dg.download(), dx, 2e-6);
  }
}

// ---- layernorm -----------------------------------------------------------------------------------
TEST(CudaOps, LayerNormMatchesCpu) {
  LC_REQUIRE_DEVICE();
  const int shapes[][2] = {{1, 1}, {1, 33}, {33, 257}, {257, 33}, {64, 768}, {3, 1025}};
  const float eps = 1e-5f;
  std::uint64_t stream = 400;
  for (const auto& [rows, cols] : shapes) {
    const std::string tag = " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols);
    const std::size_t n = static_cast<std::size_t>(rows) * cols;
    auto x = randn(n, ++stream, 2.0f);
    for (auto& v : x) v += 0.5f;  // a non-zero mean, so the centring matters
    const auto gamma = randn(cols, ++stream), beta = randn(cols, ++stream);
    const auto dy = randn(n, ++stream);
    std::vector<float> y(n), mean(rows), rstd(rows), dx(n);
    auto dgamma = randn(cols, ++stream), dbeta = randn(cols, ++stream);  // accumulated into

    auto d_x = to_device(x), d_gamma = to_device(gamma), d_beta = to_device(beta),
         d_dy = to_device(dy), d_dgamma = to_device(dgamma), d_dbeta = to_device(dbeta);
    DeviceBuffer<float> d_y(n), d_mean(rows), d_rstd(rows), d_dx(n);
    gpu::layernorm_forward(d_y.data(), d_mean.data(), d_rstd.data(), d_x.data(), d_gamma.data(),
                           d_beta.data(), rows, cols, eps);
    cpu::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), gamma.data(), beta.data(),
                           rows, cols, eps);
    expect_close("layernorm_forward y" + tag, d_y.download(), y, 1e-5);
    expect_close("layernorm_forward mean" + tag, d_mean.download(), mean, 1e-5);
    expect_close("layernorm_forward rstd" + tag, d_rstd.download(), rstd, 1e-5);

    // Backward from the CPU's saved statistics, so only the backward itself is compared.
    d_mean.upload(std::span<const float>(mean));
    d_rstd.upload(std::span<const float>(rstd));
    gpu::layernorm_backward(d_dx.data(), d_dgamma.data(), d_dbeta.data(), d_dy.data(), d_x.data(),
                            d_mean.data(), d_rstd.data(), d_gamma.data(), rows, cols);
    cpu::layernorm_backward(dx.data(), dgamma.data(), dbeta.data(), dy.data(), x.data(),
                            mean.data(), rstd.data(), gamma.data(), rows, cols);
    expect_close("layernorm_backward dx" + tag, d_dx.download(), dx, 1e-5);
    expect_close("layernorm_backward dgamma" + tag, d_dgamma.download(), dgamma, 1e-5);
    expect_close("layernorm_backward dbeta" + tag, d_dbeta.download(), dbeta, 1e-5);
  }
}

// ---- embedding -----------------------------------------------------------------------------------
TEST(CudaOps, EmbeddingMatchesCpu) {
  LC_REQUIRE_DEVICE();
  const int shapes[][3] = {{1, 1, 1}, {33, 7, 33}, {257, 100, 64}, {4096, 257, 33}};  // n, vocab, dim
  std::uint64_t stream = 500;
  for (const auto& [n, vocab, dim] : shapes) {
    const std::string tag = " n=" + std::to_string(n) + " vocab=" + std::to_string(vocab) +
                            " dim=" + std::to_string(dim);
    const auto ids = randint(n, ++stream, vocab);  // n > vocab: ids repeat, atomics collide
    const auto table = randn(static_cast<std::size_t>(vocab) * dim, ++stream);
    const auto dy = randn(static_cast<std::size_t>(n) * dim, ++stream);
    auto dtable = randn(table.size(), ++stream);
    std::vector<float> y(static_cast<std::size_t>(n) * dim);

    auto d_ids = to_device(ids);
    auto d_table = to_device(table), d_dy = to_device(dy), d_dtable = to_device(dtable);
    DeviceBuffer<float> d_y(y.size());
    gpu::embedding_forward(d_y.data(), d_ids.data(), d_table.data(), n, dim);
    cpu::embedding_forward(y.data(), ids.data(), table.data(), n, dim);
    expect_close("embedding_forward" + tag, d_y.download(), y, 0.0);
    gpu::embedding_backward(d_dtable.data(), d_dy.data(), d_ids.data(), n, dim);
    cpu::embedding_backward(dtable.data(), dy.data(), ids.data(), n, dim);
    expect_close("embedding_backward" + tag, d_dtable.download(), dtable, 1e-5);
  }
}

// ---- dropout -------------------------------------------------------------------------------------
TEST(CudaOps, DropoutMaskIsBitwiseCpu) {
  LC_REQUIRE_DEVICE();
  const float ps[] = {0.0f, 0.1f, 0.5f, 0.9f};
  std::uint64_t stream = 600;
  for (std::size_t n : kSizes)
    for (float p : ps) {
      const std::string tag = " n=" + std::to_string(n) + " p=" + std::to_string(p);
      const std::uint64_t key = rng::key({42, 3, 17, rng::kDropout});
      // Inputs that are never zero, so a zero output means exactly "dropped".
      auto x = randn(n, ++stream);
      for (auto& v : x) v = v >= 0.0f ? v + 0.1f : v - 0.1f;
      std::vector<float> y(n), dx(n);
      auto d_x = to_device(x);
      DeviceBuffer<float> d_y(n), d_dx(n);
      gpu::dropout_forward(d_y.data(), d_x.data(), n, p, key);
      cpu::dropout_forward(y.data(), x.data(), n, p, key);
      const auto got = d_y.download();
      std::size_t mask_mismatch = 0, value_mismatch = 0;
      for (std::size_t i = 0; i < n; ++i) {
        mask_mismatch += (got[i] == 0.0f) != (y[i] == 0.0f);
        value_mismatch += got[i] != y[i];  // same float ops on both sides: bitwise
      }
      std::cout << "[ parity   ] dropout" << tag << " mask_mismatch=" << mask_mismatch
                << " value_mismatch=" << value_mismatch << "\n";
      EXPECT_EQ(mask_mismatch, 0u) << tag;
      EXPECT_EQ(value_mismatch, 0u) << tag;

      gpu::dropout_backward(d_dx.data(), d_x.data(), n, p, key);
      cpu::dropout_backward(dx.data(), x.data(), n, p, key);
      expect_close("dropout_backward" + tag, d_dx.download(), dx, 0.0);
    }
}

// ---- softmax cross-entropy -----------------------------------------------------------------------
TEST(CudaOps, SoftmaxXentMatchesCpu) {
  LC_REQUIRE_DEVICE();
  const int shapes[][2] = {{1, 1}, {1, 33}, {33, 257}, {257, 33}, {16, 30522}, {5, 1}};
  const int ignore_index = -100;
  std::uint64_t stream = 700;
  for (const auto& [rows, classes] : shapes)
    for (float sd : {1.0f, 40.0f}) {  // sd 40: exp overflows unless the max is subtracted
      const std::string tag = " rows=" + std::to_string(rows) +
                              " classes=" + std::to_string(classes) + " sd=" + std::to_string(sd);
      const std::size_t n = static_cast<std::size_t>(rows) * classes;
      const auto logits = randn(n, ++stream, sd);
      auto targets = randint(rows, ++stream, classes);
      for (int r = 0; r < rows; r += 3) targets[r] = ignore_index;  // every third row ignored
      int kept = 0;
      for (auto t : targets) kept += t != ignore_index;
      const float scale = kept > 0 ? 1.0f / kept : 0.0f;

      std::vector<float> losses(rows), probs(n), dlogits(n);
      auto d_logits = to_device(logits);
      auto d_targets = to_device(targets);
      DeviceBuffer<float> d_losses(rows), d_probs(n), d_dlogits(n);
      gpu::softmax_xent_forward(d_losses.data(), d_probs.data(), d_logits.data(), d_targets.data(),
                                rows, classes, ignore_index);
      cpu::softmax_xent_forward(losses.data(), probs.data(), logits.data(), targets.data(), rows,
                                classes, ignore_index);
      expect_close("softmax_xent_forward probs" + tag, d_probs.download(), probs, 1e-5);
      expect_close("softmax_xent_forward losses" + tag, d_losses.download(), losses, 1e-5);
      for (float l : d_losses.download()) EXPECT_TRUE(std::isfinite(l)) << tag;

      d_probs.upload(std::span<const float>(probs));  // backward on identical inputs
      gpu::softmax_xent_backward(d_dlogits.data(), d_probs.data(), d_targets.data(), rows, classes,
                                 ignore_index, scale);
      cpu::softmax_xent_backward(dlogits.data(), probs.data(), targets.data(), rows, classes,
                                 ignore_index, scale);
      expect_close("softmax_xent_backward" + tag, d_dlogits.download(), dlogits, 0.0);
    }
}

// ---- argmax --------------------------------------------------------------------------------------
TEST(CudaOps, ArgmaxRowsMatchesCpuWithTies) {
  LC_REQUIRE_DEVICE();
  const int shapes[][2] = {{1, 1}, {33, 1}, {33, 257}, {257, 33}, {4, 30522}};
  std::uint64_t stream = 800;
  for (const auto& [rows, cols] : shapes) {
    const std::string tag = " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols);
    // Small integers: many ties, so "first maximum" is exercised.
    const auto ints = randint(static_cast<std::size_t>(rows) * cols, ++stream, 5);
    std::vector<float> x(ints.begin(), ints.end());
    if (rows > 2 && cols > 2) {
      x[static_cast<std::size_t>(1) * cols + 0] = std::numeric_limits<float>::quiet_NaN();
      x[static_cast<std::size_t>(2) * cols + 1] = std::numeric_limits<float>::quiet_NaN();
    }
    std::vector<std::int32_t> out(rows);
    auto d_x = to_device(x);
    DeviceBuffer<std::int32_t> d_out(rows);
    gpu::argmax_rows(d_out.data(), d_x.data(), rows, cols);
    cpu::argmax_rows(out.data(), x.data(), rows, cols);
    const auto got = d_out.download();
    std::size_t wrong = 0;
    for (int r = 0; r < rows; ++r) wrong += got[r] != out[r];
    std::cout << "[ parity   ] argmax_rows" << tag << " wrong=" << wrong << "\n";
    EXPECT_EQ(got, out) << tag;
  }
}

// ---- elementwise helpers --------------------------------------------------------------------------
TEST(CudaOps, FillScaleAxpyMatchCpu) {
  LC_REQUIRE_DEVICE();
  std::uint64_t stream = 900;
  for (std::size_t n : kSizes) {
    const std::string tag = " n=" + std::to_string(n);
    auto y = randn(n, ++stream);
    const auto x = randn(n, ++stream);
    auto d_y = to_device(y), d_x = to_device(x);
    gpu::scale(d_y.data(), -1.75f, n);
    cpu::scale(y.data(), -1.75f, n);
    expect_close("scale" + tag, d_y.download(), y, 0.0);
    gpu::axpy(d_y.data(), 0.3f, d_x.data(), n);
    cpu::axpy(y.data(), 0.3f, x.data(), n);
    // The GPU may contract y + a*x into one fma (one rounding instead of two).
    expect_close("axpy" + tag, d_y.download(), y, 1e-6);
    gpu::fill(d_y.data(), 2.5f, n);
    cpu::fill(y.data(), 2.5f, n);
    expect_close("fill" + tag, d_y.download(), y, 0.0);
  }
}

// ---- attention: strided-batched GEMM, heads, row softmax ------------------------------------------
TEST(CudaOps, GemmStridedBatchedMatchesCpu) {
  LC_REQUIRE_DEVICE();
  // (m, n, k, batch): attention's shapes (T x T x D and T x D x T over B*H) and odd ones.
  const int cases[][4] = {{1, 1, 1, 1}, {33, 33, 16, 8}, {33, 16, 33, 8}, {128, 128, 32, 5},
                          {7, 257, 3, 3}};
  const float coeffs[][2] = {{1.0f, 0.0f}, {0.25f, 1.0f}};
  std::uint64_t stream = 1000;
  for (const auto& [m, n, k, batch] : cases)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (const auto& ab : coeffs) {
          // Strides larger than one matrix (a gap of 5 floats), so a wrong stride shows.
          const std::int64_t sa = static_cast<std::int64_t>(m) * k + 5;
          const std::int64_t sb = static_cast<std::int64_t>(k) * n + 5;
          const std::int64_t sc = static_cast<std::int64_t>(m) * n + 5;
          const auto a = randn(static_cast<std::size_t>(sa * batch), ++stream);
          const auto b = randn(static_cast<std::size_t>(sb * batch), ++stream);
          auto c = randn(static_cast<std::size_t>(sc * batch), ++stream);
          auto da = to_device(a), db = to_device(b), dc = to_device(c);
          gpu::gemm_strided_batched(dc.data(), da.data(), db.data(), m, n, k, ta, tb, ab[0], ab[1],
                                    batch, sc, sa, sb);
          cpu::gemm_strided_batched(c.data(), a.data(), b.data(), m, n, k, ta, tb, ab[0], ab[1],
                                    batch, sc, sa, sb);
          const std::string what = "gemm_strided_batched m=" + std::to_string(m) +
                                   " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                                   " batch=" + std::to_string(batch) + " ta=" + std::to_string(ta) +
                                   " tb=" + std::to_string(tb) + " beta=" + std::to_string(ab[1]);
          // The gaps between the matrices must come back untouched (compared like the rest).
          const Diff d = compare(what, dc.download(), c);
          EXPECT_LE(d.max_abs, 1e-4 * std::max(1.0, d.max_ref)) << what;
        }
  // k == 0: C_i = beta C_i, A and B unread; batch == 0: nothing.
  std::vector<float> c = {1, 2, 3, 4, 5, 6};
  auto dc = to_device(c);
  gpu::gemm_strided_batched(dc.data(), nullptr, nullptr, 1, 2, 0, false, false, 1.0f, 0.5f, 3, 2, 0, 0);
  expect_close("gemm_strided_batched k=0", dc.download(), {0.5f, 1, 1.5f, 2, 2.5f, 3}, 0.0);
  gpu::gemm_strided_batched(dc.data(), nullptr, nullptr, 1, 2, 4, false, false, 1.0f, 0.0f, 0, 2, 4, 8);
  LC_CUDA_CHECK(cudaDeviceSynchronize());
}

TEST(CudaOps, SplitAndMergeHeadsAreBitwiseCpu) {
  LC_REQUIRE_DEVICE();
  const int shapes[][4] = {{1, 1, 1, 1}, {2, 33, 4, 8}, {3, 7, 3, 5}, {32, 128, 4, 32}};  // B T H D
  std::uint64_t stream = 1100;
  for (const auto& [b, t, h, d] : shapes) {
    const int dim = h * d, stride = 3 * dim;
    const std::size_t rows_n = static_cast<std::size_t>(b) * t * stride;
    const std::size_t heads_n = static_cast<std::size_t>(b) * t * dim;
    const auto rows = randn(rows_n, ++stream);
    const auto back_init = randn(rows_n, ++stream);  // merge must leave other columns alone
    auto d_rows = to_device(rows);
    for (int offset : {0, dim, 2 * dim}) {
      const std::string tag = " B=" + std::to_string(b) + " T=" + std::to_string(t) + " H=" +
                              std::to_string(h) + " D=" + std::to_string(d) +
                              " offset=" + std::to_string(offset);
      std::vector<float> heads(heads_n), back = back_init;
      DeviceBuffer<float> d_heads(heads_n);
      auto d_back = to_device(back);
      gpu::split_heads(d_heads.data(), d_rows.data(), b, t, h, d, stride, offset);
      cpu::split_heads(heads.data(), rows.data(), b, t, h, d, stride, offset);
      expect_close("split_heads" + tag, d_heads.download(), heads, 0.0);
      gpu::merge_heads(d_back.data(), d_heads.data(), b, t, h, d, stride, offset);
      cpu::merge_heads(back.data(), heads.data(), b, t, h, d, stride, offset);
      expect_close("merge_heads" + tag, d_back.download(), back, 0.0);
    }
  }
}

TEST(CudaOps, SoftmaxRowsMatchesCpu) {
  LC_REQUIRE_DEVICE();
  const int shapes[][2] = {{1, 1}, {5, 33}, {33, 257}, {4096, 128}, {3, 1000}};
  std::uint64_t stream = 1200;
  for (const auto& [rows, cols] : shapes)
    for (float sd : {1.0f, 40.0f}) {  // sd 40: exp overflows unless the max is subtracted
      const std::string tag = " rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
                              " sd=" + std::to_string(sd);
      const std::size_t n = static_cast<std::size_t>(rows) * cols;
      const auto x = randn(n, ++stream, sd), dy = randn(n, ++stream);
      std::vector<float> y(n), dx(n);
      // In place on the device (y aliases x), out of place on the host: both allowed.
      auto d_y = to_device(x), d_dx = to_device(dy);
      gpu::softmax_rows_forward(d_y.data(), d_y.data(), rows, cols);
      cpu::softmax_rows_forward(y.data(), x.data(), rows, cols);
      const auto got = d_y.download();
      expect_close("softmax_rows_forward (in place)" + tag, got, y, 1e-5);
      for (float v : got) EXPECT_TRUE(std::isfinite(v)) << tag;
      d_y.upload(std::span<const float>(y));  // backward on identical inputs
      gpu::softmax_rows_backward(d_dx.data(), d_dx.data(), d_y.data(), rows, cols);
      cpu::softmax_rows_backward(dx.data(), dy.data(), y.data(), rows, cols);
      expect_close("softmax_rows_backward (in place)" + tag, d_dx.download(), dx, 1e-5);
      // Causal rows (query t = r % cols keeps columns <= t), in place too; the masked entries
      // are exact zeros on both.
      d_y.upload(std::span<const float>(x));
      gpu::softmax_causal_forward(d_y.data(), d_y.data(), rows, cols);
      cpu::softmax_causal_forward(y.data(), x.data(), rows, cols);
      expect_close("softmax_causal_forward (in place)" + tag, d_y.download(), y, 1e-5);
    }
}

// ---- residuals, MLM rows, positions, loss statistics ----------------------------------------------
TEST(CudaOps, AddScatterRowsIotaModAreBitwiseCpu) {
  LC_REQUIRE_DEVICE();
  std::uint64_t stream = 1300;
  for (std::size_t n : kSizes) {
    const std::string tag = " n=" + std::to_string(n);
    auto a = randn(n, ++stream);
    const auto b = randn(n, ++stream);
    auto d_a = to_device(a), d_b = to_device(b);
    gpu::add(d_a.data(), d_a.data(), d_b.data(), n);  // y aliases a
    cpu::add(a.data(), a.data(), b.data(), n);
    expect_close("add (in place)" + tag, d_a.download(), a, 0.0);
  }
  const int shapes[][3] = {{1, 1, 1}, {0, 5, 8}, {7, 33, 5}, {608, 4096, 128}};  // n, rows, dim
  for (const auto& [n, rows, dim] : shapes) {
    const std::string tag = " n=" + std::to_string(n) + " rows=" + std::to_string(rows) +
                            " dim=" + std::to_string(dim);
    // n distinct rows out of `rows`, in a scrambled order (every 7th, wrapping; rows % 7 != 0).
    std::vector<std::int32_t> idx(n);
    for (int i = 0; i < n; ++i) idx[i] = static_cast<std::int32_t>((7LL * i + 3) % rows);
    const auto x = randn(static_cast<std::size_t>(n) * dim, ++stream);
    auto out = randn(static_cast<std::size_t>(rows) * dim, ++stream);  // rows not picked stay
    auto d_idx = to_device(idx);
    auto d_x = to_device(x), d_out = to_device(out);
    gpu::scatter_rows(d_out.data(), d_x.data(), d_idx.data(), n, dim);
    cpu::scatter_rows(out.data(), x.data(), idx.data(), n, dim);
    expect_close("scatter_rows" + tag, d_out.download(), out, 0.0);
  }
  const int iotas[][2] = {{1, 1}, {0, 3}, {4096, 128}, {1000, 33}};  // n, period
  for (const auto& [n, period] : iotas) {
    std::vector<std::int32_t> ids(n);
    DeviceBuffer<std::int32_t> d_ids(n);
    gpu::iota_mod(d_ids.data(), n, period);
    cpu::iota_mod(ids.data(), n, period);
    EXPECT_EQ(d_ids.download(), ids) << "iota_mod n=" << n << " period=" << period;
  }
}

TEST(CudaOps, XentStatsMatchCpu) {
  LC_REQUIRE_DEVICE();
  const int ignore_index = -1;
  std::uint64_t stream = 1400;
  for (int rows : {0, 1, 33, 608, 100003}) {
    const std::string tag = " rows=" + std::to_string(rows);
    auto losses = randn(rows, ++stream);
    for (auto& l : losses) l = std::abs(l) * 3.0f;
    auto targets = randint(rows, ++stream, 4);
    const auto argmax = randint(rows, ++stream, 4);
    for (int r = 0; r < rows; r += 5) targets[r] = ignore_index;
    double stats[3];
    cpu::xent_stats(stats, losses.data(), argmax.data(), targets.data(), rows, ignore_index);
    auto d_losses = to_device(losses);
    auto d_targets = to_device(targets), d_argmax = to_device(argmax);
    DeviceBuffer<double> d_stats(3);
    gpu::xent_stats(d_stats.data(), d_losses.data(), d_argmax.data(), d_targets.data(), rows,
                    ignore_index);
    const auto got = d_stats.download();
    // Both sum in double (in another order): far below float rounding of the mean loss.
    const double diff = std::abs(got[0] - stats[0]);
    std::cout << "[ parity   ] xent_stats" << tag << " sum_diff=" << diff << " counted=" << got[1]
              << "/" << stats[1] << " correct=" << got[2] << "/" << stats[2] << "\n";
    EXPECT_LE(diff, 1e-10 * std::max(1.0, std::abs(stats[0]))) << tag;
    EXPECT_EQ(got[1], stats[1]) << tag;
    EXPECT_EQ(got[2], stats[2]) << tag;
  }
}

TEST(CudaOps, ErrorsAreThrownNotIgnored) {
  LC_REQUIRE_DEVICE();
  EXPECT_THROW(gpu::dropout_forward(nullptr, nullptr, 1, 1.0f, 0), Error);
  EXPECT_THROW(gpu::gemm(nullptr, nullptr, nullptr, -1, 1, 1, false, false, 1.0f, 0.0f), Error);
  // A runtime failure surfaces as laconic::Error with the CUDA error name.
  try {
    LC_CUDA_CHECK(cudaSetDevice(1 << 20));  // cudaErrorInvalidDevice: not sticky
    ADD_FAILURE() << "expected a CUDA error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cudaErrorInvalidDevice"), std::string::npos) << e.what();
  }
  (void)cudaGetLastError();
}

}  // namespace
}  // namespace laconic
