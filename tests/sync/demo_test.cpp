// DeMo (framework/sync/demo.h) against a reference written in double for a small case: the
// orthonormal DCT-II per tensor chunk, the top-k coefficients, their removal from the momentum,
// the average over ranks and its sign. Plus: the DCT is orthonormal, and the bytes on the wire.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <vector>

#include "collectives/threads/threads_communicator.h"
#include "framework/sync/demo.h"
#include "tests/sync/small_store.h"

namespace laconic {
namespace {

using Vec = std::vector<double>;

// Orthonormal DCT-II of chunks of `chunk` (the last shorter), in double.
Vec dct(const Vec& x, std::size_t chunk, bool inverse) {
  Vec out(x.size(), 0.0);
  for (std::size_t b = 0; b < x.size(); b += chunk) {
    const std::size_t len = std::min(chunk, x.size() - b);
    for (std::size_t k = 0; k < len; ++k)
      for (std::size_t i = 0; i < len; ++i) {
        const double basis = std::sqrt((k == 0 ? 1.0 : 2.0) / static_cast<double>(len)) *
                             std::cos(std::numbers::pi * (static_cast<double>(i) + 0.5) * static_cast<double>(k) /
                                      static_cast<double>(len));
        if (inverse) out[b + i] += basis * x[b + k]; else out[b + k] += basis * x[b + i];
      }
  }
  return out;
}

// The top-k of every chunk kept, the rest zero.
Vec topk(const Vec& x, std::size_t chunk, std::size_t k) {
  Vec out(x.size(), 0.0);
  for (std::size_t b = 0; b < x.size(); b += chunk) {
    const std::size_t len = std::min(chunk, x.size() - b);
    std::vector<std::size_t> order(len);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::size_t i, std::size_t j) {
      const double a = std::fabs(x[b + i]), c = std::fabs(x[b + j]);
      return a > c || (a == c && i < j);
    });
    for (std::size_t i = 0; i < std::min(k, len); ++i) out[b + order[i]] = x[b + order[i]];
  }
  return out;
}

double grad(int rank, int step, std::size_t i) {
  return std::sin(0.37 * static_cast<double>(i) + 1.1 * rank + 0.5 * step) + 0.3 * std::cos(0.05 * static_cast<double>(i * i));
}

TEST(Demo, MatchesADoubleReference) {
  const int world = 2, steps = 3;
  const std::size_t chunk = 8, k = 2;
  const double beta = 0.9;
  const ParamStore layout = small_store();  // tensors of 30, 5, 24, 4, 7: chunk tails 6, 5, 0, 4, 7
  // The reference: per rank, momentum, fast components, the shared sign.
  std::vector<Vec> m(world, Vec(kSmallStoreSize, 0.0));
  std::vector<Vec> want(steps);
  std::vector<std::vector<Vec>> want_m(steps);
  for (int t = 0; t < steps; ++t) {
    Vec avg(kSmallStoreSize, 0.0);
    for (int r = 0; r < world; ++r) {
      for (std::size_t i = 0; i < kSmallStoreSize; ++i) m[r][i] = beta * m[r][i] + grad(r, t, i);
      for (const ParamView& v : layout.views()) {
        const Vec part(m[r].begin() + static_cast<std::ptrdiff_t>(v.offset),
                       m[r].begin() + static_cast<std::ptrdiff_t>(v.offset + v.numel));
        const Vec q = topk(dct(part, chunk, false), chunk, k);
        const Vec fast = dct(q, chunk, true);
        for (std::size_t i = 0; i < v.numel; ++i) {
          m[r][v.offset + i] -= fast[i];
          avg[v.offset + i] += q[i] / world;
        }
      }
    }
    Vec sign(kSmallStoreSize, 0.0);
    for (const ParamView& v : layout.views()) {
      const Vec part(avg.begin() + static_cast<std::ptrdiff_t>(v.offset),
                     avg.begin() + static_cast<std::ptrdiff_t>(v.offset + v.numel));
      const Vec spatial = dct(part, chunk, true);
      for (std::size_t i = 0; i < v.numel; ++i) sign[v.offset + i] = spatial[i];
    }
    want[t] = sign;
    want_m[t] = m;
  }
  std::vector<std::vector<std::vector<float>>> got(world), got_m(world);
  run_threads(world, [&](Communicator& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    ParamStore s = small_store();
    Demo demo(DemoOptions{chunk, k, beta, Codec::fp32});
    demo.start(s, comm);
    for (int t = 0; t < steps; ++t) {
      for (std::size_t i = 0; i < kSmallStoreSize; ++i) s.grads()[i] = static_cast<float>(grad(comm.rank(), t, i));
      demo.after_backward(t);
      got[r].emplace_back(s.grads().begin(), s.grads().end());
      const std::span<float> mom = demo.state().at(0).data;
      got_m[r].emplace_back(mom.begin(), mom.end());
    }
  });
  for (int t = 0; t < steps; ++t)
    for (int r = 0; r < world; ++r)
      for (std::size_t i = 0; i < kSmallStoreSize; ++i) {
        const double q = want[t][i];
        const float sign = q > 1e-6 ? 1.0f : q < -1e-6 ? -1.0f : got[r][t][i];  // near 0: either
        EXPECT_EQ(got[r][t][i], sign) << "step " << t << ", rank " << r << ", element " << i << " (Q = " << q << ")";
        EXPECT_NEAR(got_m[r][t][i], want_m[t][r][i], 1e-5) << "step " << t << ", rank " << r << ", element " << i;
      }
}

TEST(Demo, DctIsOrthonormalAndTheWireCarriesEveryRanksCoefficients) {
  ChunkDct d(8);
  d.prepare(21);  // chunks of 8, 8, 5
  std::vector<float> x(21), c(21), y(21);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i));
  d.forward(x, c);
  d.inverse(c, y);
  double nx = 0, nc = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(y[i], x[i], 1e-6);
    nx += x[i] * x[i];
    nc += c[i] * c[i];
  }
  EXPECT_NEAR(nc, nx, 1e-5);  // norms kept
  std::vector<std::uint64_t> sent(3);
  run_threads(3, [&](Communicator& comm) {
    ParamStore s = small_store();
    Demo demo(DemoOptions{8, 2, 0.9, Codec::bf16});
    demo.start(s, comm);
    const std::uint64_t before = comm.bytes().sent;
    demo.after_backward(0);
    sent[static_cast<std::size_t>(comm.rank())] = comm.bytes().sent - before;
  });
  const ChunkTopK wire{8, 2, Codec::bf16};
  std::uint64_t payload = 0;
  for (const std::size_t n : {30u, 5u, 24u, 4u, 7u}) payload += wire.bytes(n);
  for (const std::uint64_t b : sent) EXPECT_EQ(b, 2 * payload);  // a ring all-gather: N - 1 blocks
}

}  // namespace
}  // namespace laconic
