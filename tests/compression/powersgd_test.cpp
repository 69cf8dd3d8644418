// PowerSGD: the pure pieces (orthogonalization, the three GEMM passes) against naive loops, the
// reducer's algebra on thread ranks (exact low-rank recovery, full rank = exact average, error
// feedback conservation, byte counts, dense warm-up), and parity with PyTorch 1.13's
// powerSGD_hook (tests/fixtures/powersgd/torch_reference.txt, written by gen_fixtures.py there).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "collectives/threads/threads_communicator.h"
#include "compression/powersgd.h"
#include "core/check.h"
#include "core/rng.h"

namespace laconic {
namespace {

std::vector<float> normal_values(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(n);
  const auto key = rng::key({seed, rng::kTest});
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * rng::normal(key, i);
  return v;
}

// A bucket of row-major matrices (rows, cols), in order.
BucketLayout layout_of(const std::vector<std::pair<std::size_t, std::size_t>>& shapes, int id = 0) {
  BucketLayout b;
  b.id = id;
  for (const auto& [rows, cols] : shapes) {
    b.tensors.push_back(TensorShape{b.size, rows, cols});
    b.size += rows * cols;
  }
  return b;
}

std::span<float> state_named(PowerSgdReducer& r, const std::string& name) {
  for (const StateTensor& s : r.state())
    if (s.name == name) return s.data;
  ADD_FAILURE() << "no state " << name;
  return {};
}

double max_abs_diff(std::span<const float> a, std::span<const float> b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(static_cast<double>(a[i]) - b[i]));
  return d;
}

// ---- pure functions ------------------------------------------------------------------------

TEST(PowerSgdMath, CompressionDecisionMatchesTorch) {
  EXPECT_EQ(powersgd::tensor_rank(16, 12, 4), 4u);
  EXPECT_EQ(powersgd::tensor_rank(12, 1, 4), 1u);
  EXPECT_EQ(powersgd::tensor_rank(3, 50, 4), 3u);
  // (n + m) r min_rate < n m, strictly.
  EXPECT_FALSE(powersgd::should_compress(16, 12, 4, 2.0));  // 224 vs 192
  EXPECT_TRUE(powersgd::should_compress(16, 12, 4, 1.0));   // 112 vs 192
  EXPECT_FALSE(powersgd::should_compress(12, 1, 1, 1.0));   // 1-D (n x 1): never at rate >= 1...
  EXPECT_TRUE(powersgd::should_compress(12, 1, 1, 0.5));    // ...but torch has no special case
  EXPECT_FALSE(powersgd::should_compress(8, 8, 4, 1.0));    // 64 vs 64: equal is not enough
  EXPECT_TRUE(powersgd::should_compress(4096, 4096, 4, 2.0));
}

// Q^T Q = I and A = Q R with R upper triangular (Q^T A has nothing below the diagonal).
void expect_orthonormal_factor(const std::vector<float>& q, const std::vector<float>& a, std::size_t n,
                               std::size_t r) {
  for (std::size_t i = 0; i < r; ++i) {
    for (std::size_t j = 0; j < r; ++j) {
      double qq = 0, qa = 0;
      for (std::size_t l = 0; l < n; ++l) {
        qq += static_cast<double>(q[l * r + i]) * q[l * r + j];
        qa += static_cast<double>(q[l * r + i]) * a[l * r + j];
      }
      EXPECT_NEAR(qq, i == j ? 1.0 : 0.0, 2e-6) << "columns " << i << ", " << j;
      if (i > j) {
        EXPECT_NEAR(qa, 0.0, 1e-5) << "R(" << i << ", " << j << ")";
      }
    }
  }
}

TEST(PowerSgdMath, OrthogonalizeGivesOrthonormalColumns) {
  for (std::size_t r = 1; r <= 7; ++r) {
    for (std::size_t n : {r, r + 1, std::size_t{37}, std::size_t{300}}) {
      const auto a = normal_values(n * r, 10 * n + r);
      auto q = a;
      powersgd::orthogonalize(q, n, r, 0.0f);
      SCOPED_TRACE(testing::Message() << n << " x " << r);
      expect_orthonormal_factor(q, a, n, r);
      // Gram-Schmidt (r <= 2) makes R's diagonal positive; LAPACK's Householder QR gives it the
      // sign of -alpha, the pivot when its reflector is formed (the first one: a(0, 0)).
      double r00 = 0;
      for (std::size_t l = 0; l < n; ++l) r00 += static_cast<double>(q[l * r]) * a[l * r];
      if (r <= 2 || n == 1) {
        EXPECT_GT(r00, 0.0);
      } else {
        EXPECT_EQ(r00 > 0, a[0] < 0);
      }
    }
  }
}

TEST(PowerSgdMath, HouseholderMatchesTorchLinalgQr) {
  // torch.linalg.qr(A).Q from torch 1.13 (LAPACK sgeqrf + sorgqr), printed with %.9g, for
  // A = torch.tensor([[1., 2, 0], [2, -1, 1], [0, 1, 3], [1, 0, -2], [-1, 2, 1]]).
  std::vector<float> a = {1, 2, 0, 2, -1, 1, 0, 1, 3, 1, 0, -2, -1, 2, 1};
  const std::vector<float> expect = {-0.377964497, 0.744387448,  0.207000718, -0.755928993, -0.139572531,
                                     -0.397441357, -0.0f,        0.325669467, -0.712082446, -0.377964497,
                                     0.0930484533, 0.538201869,  0.377964497, 0.558290422,  -0.0496802293};
  powersgd::householder_qr(a, 5, 3);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], expect[i], 2e-6) << i;
}

TEST(PowerSgdMath, GramSchmidtZeroColumnStaysZeroAndEpsilonDivides) {
  std::vector<float> a = {0, 3, 0, 4, 0, 0};  // 3 x 2, first column zero
  powersgd::gram_schmidt(a, 3, 2, 0.0f);
  for (std::size_t l = 0; l < 3; ++l) EXPECT_EQ(a[l * 2], 0.0f);  // torch 1.13 gives NaN here
  EXPECT_FLOAT_EQ(a[1], 0.6f);
  EXPECT_FLOAT_EQ(a[3], 0.8f);
  std::vector<float> b = {3, 4};  // 2 x 1: col / (|col| + eps)
  powersgd::gram_schmidt(b, 2, 1, 5.0f);
  EXPECT_FLOAT_EQ(b[0], 0.3f);
  EXPECT_FLOAT_EQ(b[1], 0.4f);
}

TEST(PowerSgdMath, KernelsMatchNaiveProducts) {
  for (std::size_t r : {1, 2, 3, 4, 5, 8}) {
    for (std::size_t cols : {1, 7, 8, 16, 37}) {
      const std::size_t rows = 13;
      SCOPED_TRACE(testing::Message() << rows << " x " << cols << " rank " << r);
      const auto m0 = normal_values(rows * cols, 1 + cols);
      const auto err = normal_values(rows * cols, 2 + cols, 0.1f);
      const auto q = normal_values(cols * r, 3 + r);  // cols x r
      std::vector<float> qt(r * cols), p(rows * r), qt2(r * cols), row(cols);
      powersgd::transpose(q, cols, r, qt);
      auto m = m0;
      powersgd::compute_p(m, err, rows, cols, qt, r, p);
      for (std::size_t i = 0; i < rows * cols; ++i) EXPECT_EQ(m[i], m0[i] + err[i]);
      for (std::size_t i = 0; i < rows; ++i) {
        for (std::size_t j = 0; j < r; ++j) {
          double s = 0;
          for (std::size_t k = 0; k < cols; ++k) s += static_cast<double>(m[i * cols + k]) * q[k * r + j];
          EXPECT_NEAR(p[i * r + j], s, 1e-5 * (1 + std::abs(s)));
        }
      }
      powersgd::compute_qt(m, rows, cols, p, r, qt2);
      for (std::size_t j = 0; j < r; ++j) {
        for (std::size_t k = 0; k < cols; ++k) {
          double s = 0;
          for (std::size_t i = 0; i < rows; ++i) s += static_cast<double>(m[i * cols + k]) * p[i * r + j];
          EXPECT_NEAR(qt2[j * cols + k], s, 1e-5 * (1 + std::abs(s)));
        }
      }
      auto out = m;
      std::vector<float> e(rows * cols);
      powersgd::decompress(out, e, rows, cols, p, qt, r, row);
      for (std::size_t i = 0; i < rows; ++i) {
        for (std::size_t k = 0; k < cols; ++k) {
          double s = 0;
          for (std::size_t j = 0; j < r; ++j) s += static_cast<double>(p[i * r + j]) * qt[j * cols + k];
          EXPECT_NEAR(out[i * cols + k], s, 1e-5 * (1 + std::abs(s)));
          EXPECT_EQ(e[i * cols + k], m[i * cols + k] - out[i * cols + k]);
        }
      }
    }
  }
}

// ---- the reducer on thread ranks -------------------------------------------------------------

TEST(PowerSgdReducer, RecoversAnExactlyLowRankMatrixInOneStep) {
  const std::size_t n = 40, m = 30, r = 3;
  const auto a = normal_values(n * r, 1), b = normal_values(m * r, 2);
  std::vector<float> mat(n * m);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < m; ++k)
      for (std::size_t j = 0; j < r; ++j) mat[i * m + k] += a[i * r + j] * b[k * r + j];
  PowerSgdReducer red({.rank = 3, .start_iter = 0});
  const auto layout = layout_of({{n, m}});
  red.prepare(std::span(&layout, 1));
  auto data = mat;
  run_threads(1, [&](Communicator& comm) { red.reduce(data, layout, 0, comm); });
  double scale = 0;
  for (float v : mat) scale = std::max(scale, std::abs(static_cast<double>(v)));
  EXPECT_LT(max_abs_diff(data, mat), 1e-5 * scale);
  EXPECT_LT(max_abs_diff(state_named(red, "powersgd.error.0"), std::vector<float>(n * m)), 1e-5 * scale);
}

// A bucket with a bit of everything: at rank 2 and rate 2, 20x12, 9x10 and a second 20x12 are
// compressed (the second 20x12's P and Q go before 9x10's), the bias (12) and 3x2 are not.
const std::vector<std::pair<std::size_t, std::size_t>> kShapes = {{20, 12}, {12, 1}, {9, 10}, {3, 2}, {20, 12}};

TEST(PowerSgdReducer, AllRanksIdenticalAndFullRankIsTheExactAverage) {
  for (int world : {1, 2, 3, 4, 8}) {
    SCOPED_TRACE(testing::Message() << "world size " << world);
    const auto layout = layout_of(kShapes);
    const std::size_t n = layout.size;
    std::vector<std::vector<float>> inputs, outputs(world), errors(world);
    std::vector<float> avg(n);
    for (int k = 0; k < world; ++k) {
      inputs.push_back(normal_values(n, 100 + k));
      for (std::size_t i = 0; i < n; ++i) avg[i] += inputs[k][i] / world;
    }
    // Rank >= min(n, m) for every tensor, and rate 0 compresses every tensor (the bias too).
    run_threads(world, [&](Communicator& comm) {
      PowerSgdReducer red({.rank = 20, .start_iter = 0, .min_compression_rate = 0.0});
      red.prepare(std::span(&layout, 1));
      auto data = inputs[comm.rank()];
      red.reduce(data, layout, 5, comm);
      outputs[comm.rank()] = data;
      auto e = state_named(red, "powersgd.error.0");
      errors[comm.rank()].assign(e.begin(), e.end());
    });
    for (int k = 0; k < world; ++k) {
      EXPECT_EQ(std::memcmp(outputs[k].data(), outputs[0].data(), n * sizeof(float)), 0) << "rank " << k;
      EXPECT_LT(max_abs_diff(outputs[k], avg), 2e-5);
      for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(errors[k][i], inputs[k][i] - outputs[k][i], 1e-6);
    }
    // Lossy (rank 2, the uncompressed tensors included): still bitwise identical on all ranks.
    run_threads(world, [&](Communicator& comm) {
      PowerSgdReducer red({.rank = 2, .start_iter = 0});
      red.prepare(std::span(&layout, 1));
      for (std::int64_t step = 0; step < 3; ++step) {
        auto data = inputs[comm.rank()];
        red.reduce(data, layout, step, comm);
        outputs[comm.rank()] = data;
      }
    });
    for (int k = 1; k < world; ++k)
      EXPECT_EQ(std::memcmp(outputs[k].data(), outputs[0].data(), n * sizeof(float)), 0) << "rank " << k;
  }
}

TEST(PowerSgdReducer, ErrorFeedbackConservesTheGradientSum) {
  // error_t = (g_t + error_{t-1}) - out_t, so sum(out) + error_T = sum(g) on every rank.
  const int world = 3, steps = 6;
  const auto layout = layout_of(kShapes);
  const std::size_t n = layout.size;
  std::vector<double> worst(world);
  run_threads(world, [&](Communicator& comm) {
    PowerSgdReducer red({.rank = 1, .start_iter = 0, .min_compression_rate = 1.0});
    red.prepare(std::span(&layout, 1));
    std::vector<double> sum_in(n), sum_out(n);
    for (int t = 0; t < steps; ++t) {
      auto g = normal_values(n, 1000 * t + comm.rank());
      for (std::size_t i = 0; i < n; ++i) sum_in[i] += g[i];
      red.reduce(g, layout, t, comm);
      for (std::size_t i = 0; i < n; ++i) sum_out[i] += g[i];
    }
    const auto e = state_named(red, "powersgd.error.0");
    double d = 0;
    for (std::size_t i = 0; i < n; ++i) d = std::max(d, std::abs(sum_out[i] + e[i] - sum_in[i]));
    worst[comm.rank()] = d;
  });
  for (int k = 0; k < world; ++k) EXPECT_LT(worst[k], 1e-5) << "rank " << k;
}

TEST(PowerSgdReducer, ByteCountsMatchTheFormula) {
  const int world = 4;
  const auto layout = layout_of(kShapes);
  // rank 2: 20x12 -> P 40, Q 24 (twice); 9x10 -> P 18, Q 20; bias 12 and 3x2 (6) uncompressed.
  const std::size_t p = 40 + 40 + 18, q = 24 + 24 + 20, dense = 12 + 6, n = layout.size;
  std::vector<int> ok(world);
  run_threads(world, [&](Communicator& comm) {
    PowerSgdReducer red({.rank = 2, .start_iter = 1});
    red.prepare(std::span(&layout, 1));
    auto data = normal_values(n, comm.rank());
    const auto b0 = comm.bytes();
    red.reduce(data, layout, 0, comm);  // dense
    const auto b1 = comm.bytes();
    red.reduce(data, layout, 1, comm);  // compressed
    const auto b2 = comm.bytes();
    // The wire bytes are those of the plain all-reduces of the same sizes.
    std::vector<float> buf(n);
    comm.all_reduce(std::span(buf), ReduceOp::sum);
    const auto b3 = comm.bytes();
    for (std::size_t c : {dense, p, q}) comm.all_reduce(std::span(buf).first(c), ReduceOp::sum);
    const auto b4 = comm.bytes();
    const ReducerStats& s = red.stats();
    ok[comm.rank()] = s.calls == 2 && s.input_bytes == 2 * 4 * n && s.value_bytes == 4 * n + 4 * (p + q + dense) &&
                      s.index_bytes == 0 && b1.sent - b0.sent == b3.sent - b2.sent &&
                      b2.sent - b1.sent == b4.sent - b3.sent && b2.recv - b1.recv == b4.recv - b3.recv &&
                      b2.messages_sent - b1.messages_sent == b4.messages_sent - b3.messages_sent;
  });
  for (int k = 0; k < world; ++k) EXPECT_TRUE(ok[k]) << "rank " << k;
}

TEST(PowerSgdReducer, WarmUpStepsAreDenseAndExact) {
  const int world = 3;
  const auto layout = layout_of(kShapes);
  const std::size_t n = layout.size;
  std::vector<std::vector<float>> outputs(world);
  std::vector<float> avg(n);
  for (int k = 0; k < world; ++k) {
    const auto g = normal_values(n, 7 + k);
    for (std::size_t i = 0; i < n; ++i) avg[i] += g[i] / world;
  }
  std::vector<int> untouched(world);
  run_threads(world, [&](Communicator& comm) {
    PowerSgdReducer red({.rank = 1, .start_iter = 3});
    red.prepare(std::span(&layout, 1));
    const auto q0 = state_named(red, "powersgd.q.0");
    const std::vector<float> q_before(q0.begin(), q0.end());
    for (std::int64_t step = 0; step < 3; ++step) {
      auto g = normal_values(n, 7 + comm.rank());
      red.reduce(g, layout, step, comm);
      outputs[comm.rank()] = g;
    }
    const auto e = state_named(red, "powersgd.error.0");
    const auto q = state_named(red, "powersgd.q.0");
    untouched[comm.rank()] = std::all_of(e.begin(), e.end(), [](float v) { return v == 0.0f; }) &&
                             std::equal(q.begin(), q.end(), q_before.begin());
  });
  for (int k = 0; k < world; ++k) {
    EXPECT_TRUE(untouched[k]);
    EXPECT_EQ(std::memcmp(outputs[k].data(), outputs[0].data(), n * sizeof(float)), 0);
    EXPECT_LT(max_abs_diff(outputs[k], avg), 1e-6);
  }
}

TEST(PowerSgdReducer, WithoutWarmStartOrErrorFeedbackAStepDependsOnlyOnItsInput) {
  // Q is redrawn from (seed, bucket, step) each step: a fresh reducer reproduces step 4 alone.
  const auto layout = layout_of(kShapes);
  const std::size_t n = layout.size;
  const PowerSgdOptions opts{.rank = 2, .start_iter = 0, .error_feedback = false, .warm_start = false, .seed = 9};
  std::vector<float> a, b;
  run_threads(2, [&](Communicator& comm) {
    PowerSgdReducer red(opts), fresh(opts);
    red.prepare(std::span(&layout, 1));
    fresh.prepare(std::span(&layout, 1));
    std::vector<float> g;
    for (std::int64_t step = 0; step < 5; ++step) {
      g = normal_values(n, 50 * step + comm.rank());
      red.reduce(g, layout, step, comm);
    }
    auto h = normal_values(n, 50 * 4 + comm.rank());
    fresh.reduce(h, layout, 4, comm);
    if (comm.rank() == 0) a = g, b = h;
  });
  EXPECT_EQ(a, b);
  PowerSgdReducer red(opts);
  red.prepare(std::span(&layout, 1));
  for (const StateTensor& s : red.state()) EXPECT_EQ(s.name.find("error"), std::string::npos);
}

TEST(PowerSgdReducer, BucketsKeepSeparateState) {
  // Interleaving bucket 0 changes nothing for bucket 1 (the scratch is shared, the state is not).
  const std::vector<BucketLayout> buckets = {layout_of({{30, 20}, {7, 1}}, 0), layout_of(kShapes, 1)};
  std::vector<float> both, alone;
  run_threads(2, [&](Communicator& comm) {
    PowerSgdReducer a({.rank = 2, .start_iter = 1}), b({.rank = 2, .start_iter = 1});
    a.prepare(buckets);
    b.prepare(buckets);
    std::vector<float> x, y;
    for (std::int64_t step = 0; step < 4; ++step) {
      auto g0 = normal_values(buckets[0].size, 70 + step + 10 * comm.rank());
      a.reduce(g0, buckets[0], step, comm);
      x = normal_values(buckets[1].size, 80 + step + 10 * comm.rank());
      y = x;
      a.reduce(x, buckets[1], step, comm);
      b.reduce(y, buckets[1], step, comm);
    }
    if (comm.rank() == 1) both = x, alone = y;
  });
  EXPECT_EQ(both, alone);
}

TEST(PowerSgdReducer, StateNamesArePerBucketAndUnique) {
  std::vector<BucketLayout> buckets = {layout_of(kShapes, 0), layout_of({{12, 1}}, 1), layout_of({{64, 64}}, 2)};
  PowerSgdReducer red(PowerSgdOptions{});
  red.prepare(buckets);
  std::vector<std::string> names;
  for (const StateTensor& s : red.state()) names.push_back(s.name + ":" + std::to_string(s.data.size()));
  // Bucket 1 has no compressed tensor, so no Q. Default rank 4, rate 2: only 64x64 compresses.
  const std::vector<std::string> expect = {"powersgd.error.0:" + std::to_string(buckets[0].size),
                                           "powersgd.error.1:12", "powersgd.error.2:4096", "powersgd.q.2:256"};
  EXPECT_EQ(names, expect);
}

// ---- parity with torch 1.13's powerSGD_hook --------------------------------------------------

struct TorchStep {
  std::vector<std::vector<float>> input, error;  // per rank
  std::vector<float> output, q;
};

struct TorchCase {
  std::string name;
  int rank = 0, world = 0;
  double min_rate = 0;
  std::int64_t start_iter = 0;
  BucketLayout layout;
  std::vector<float> q0;
  std::vector<TorchStep> steps;
};

std::vector<float> read_floats(std::istringstream& in) {
  std::vector<float> out;
  for (double x; in >> x;) out.push_back(static_cast<float>(x));
  return out;
}

std::vector<TorchCase> load_torch_cases() {
  const std::string path = std::string(LACONIC_SOURCE_DIR) + "/tests/fixtures/powersgd/torch_reference.txt";
  std::ifstream file(path);
  EXPECT_TRUE(file.good()) << path;
  std::vector<TorchCase> cases;
  for (std::string line; std::getline(file, line);) {
    std::istringstream in(line);
    std::string kind;
    in >> kind;
    if (kind == "case") {
      TorchCase c;
      in >> c.name;
      for (std::string kv; in >> kv;) {
        const auto eq = kv.find('=');
        const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
        if (key == "rank") c.rank = std::stoi(value);
        if (key == "world_size") c.world = std::stoi(value);
        if (key == "min_compression_rate") c.min_rate = std::stod(value);
        if (key == "start_iter") c.start_iter = std::stoll(value);
      }
      cases.push_back(std::move(c));
    } else if (kind == "tensor") {
      std::vector<std::size_t> dims;
      for (std::size_t d; in >> d;) dims.push_back(d);
      const std::size_t numel = std::accumulate(dims.begin(), dims.end(), std::size_t{1}, std::multiplies<>());
      BucketLayout& b = cases.back().layout;
      b.tensors.push_back(TensorShape{b.size, dims[0], numel / dims[0]});  // torch's (shape[0], -1) view
      b.size += numel;
    } else if (kind == "q0") {
      cases.back().q0 = read_floats(in);
    } else if (kind == "step") {
      cases.back().steps.emplace_back();
    } else if (kind == "input" || kind == "error") {
      int k;
      in >> k;
      auto& per_rank = kind == "input" ? cases.back().steps.back().input : cases.back().steps.back().error;
      per_rank.resize(std::max<std::size_t>(per_rank.size(), k + 1));
      per_rank[k] = read_floats(in);
    } else if (kind == "output") {
      cases.back().steps.back().output = read_floats(in);
    } else if (kind == "q") {
      cases.back().steps.back().q = read_floats(in);
    }
  }
  return cases;
}

TEST(PowerSgdTorchParity, MatchesPowerSgdHookStepByStep) {
  const auto cases = load_torch_cases();
  ASSERT_EQ(cases.size(), 8u);
  for (const TorchCase& c : cases) {
    SCOPED_TRACE(testing::Message() << c.name << " world size " << c.world);
    ASSERT_EQ(c.steps.size(), 4u);
    // |ours - torch| relative to the magnitude of each compared buffer (its max |value|), the
    // largest over ranks and steps, per compared quantity.
    struct Diffs {
      double output = 0, error = 0, q = 0;
    };
    std::vector<Diffs> diffs(c.world);
    run_threads(c.world, [&](Communicator& comm) {
      const int k = comm.rank();
      PowerSgdReducer red({.rank = c.rank, .start_iter = c.start_iter, .min_compression_rate = c.min_rate});
      red.prepare(std::span(&c.layout, 1));
      auto q = state_named(red, "powersgd.q.0");
      LC_CHECK(q.size() == c.q0.size(), "Q size ", q.size(), " vs torch ", c.q0.size());
      std::copy(c.q0.begin(), c.q0.end(), q.begin());
      auto rel = [](std::span<const float> ours, const std::vector<float>& ref) {
        LC_CHECK(ours.size() == ref.size(), "size ", ours.size(), " vs torch ", ref.size());
        double scale = 0;
        for (float v : ref) scale = std::max(scale, std::abs(static_cast<double>(v)));
        return max_abs_diff(ours, ref) / std::max(scale, 1e-30);
      };
      for (std::size_t t = 0; t < c.steps.size(); ++t) {
        const TorchStep& s = c.steps[t];
        auto data = s.input[k];
        red.reduce(data, c.layout, static_cast<std::int64_t>(t), comm);
        Diffs& d = diffs[k];
        d.output = std::max(d.output, rel(data, s.output));
        if (!s.q.empty()) {
          d.error = std::max(d.error, rel(state_named(red, "powersgd.error.0"), s.error[k]));
          d.q = std::max(d.q, rel(q, s.q));
        }
      }
    });
    Diffs worst;
    for (const Diffs& d : diffs) {
      worst.output = std::max(worst.output, d.output);
      worst.error = std::max(worst.error, d.error);
      worst.q = std::max(worst.q, d.q);
    }
    // float32 with different summation orders (BLAS, LAPACK, gloo's ring): a few ulps, amplified
    // a little by the orthogonalization.
    EXPECT_LT(worst.output, 1e-5);
    EXPECT_LT(worst.error, 1e-5);
    EXPECT_LT(worst.q, 1e-5);
    std::printf("[torch parity] %-12s rank %d world %d: max rel diff output %.2g, error %.2g, Q %.2g\n",
                c.name.c_str(), c.rank, c.world, worst.output, worst.error, worst.q);
  }
}

}  // namespace
}  // namespace laconic
