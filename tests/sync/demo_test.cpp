// DeMo (framework/sync/demo.h) against references written in double for small cases:
//   the default, the reference implementation's algorithm (bloc97/DeMo demo.py, reimplemented
//     here from its definitions: delta = decay * delta + lr * grad; TransformDCT's 2-D blocks of
//     _get_smaller_split(dim, chunk) per dimension, orthonormal DCT-II along both; CompressDCT's
//     top-k of every flattened block; the transmitted part removed from delta; batch_decompress's
//     scatter mean over the ranks that sent each coefficient; decode; sign);
//   the earlier variant (1-D chunks, no learning rate in the momentum, average over all ranks).
// Plus closed forms: a block sent whole comes back whole; the DCTs are orthonormal; the bytes on
// the wire.
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

TEST(Demo, EarlierVariantMatchesADoubleReference) {
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
    Demo demo(DemoOptions{chunk, k, beta, Codec::fp32, DemoDct::one_d, DemoAverage::ranks, false, {}});
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
    Demo demo(DemoOptions{8, 2, 0.9, Codec::bf16, DemoDct::one_d, DemoAverage::ranks, false, {}});
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


// ---- the reference implementation (bloc97/DeMo demo.py), in double ----

// _get_smaller_split(n, close_to): walk n's divisors in ascending order; the one equal to
// close_to, else the one before the first above it (the first itself if it is the first), else n.
std::size_t smaller_split(std::size_t n, std::size_t close_to) {
  std::vector<std::size_t> divisors;
  for (std::size_t d = 1; d <= n; ++d)
    if (n % d == 0) divisors.push_back(d);
  for (std::size_t ix = 0; ix < divisors.size(); ++ix) {
    if (divisors[ix] == close_to) return divisors[ix];
    if (divisors[ix] > close_to) return ix == 0 ? divisors[ix] : divisors[ix - 1];
  }
  return n;
}

// _dct(eye(n), norm="ortho")[i][k]: the orthonormal DCT-II basis, k the frequency.
double f(std::size_t n, std::size_t i, std::size_t k) {
  const double nn = static_cast<double>(n);
  return std::sqrt((k == 0 ? 1.0 : 2.0) / nn) *
         std::cos(std::numbers::pi * (2.0 * static_cast<double>(i) + 1.0) * static_cast<double>(k) / (2.0 * nn));
}

// One tensor as TransformDCT sees it: a 2-D weight "(y h) (x w)" with h = n1, w = n2; a 1-D one
// "(x w)", here y = 1 and h = n1 = 1. Coefficients indexed [y][x][b][d] as "...ikbd", so that
// CompressDCT's "y x h w -> y x (h w)" is the last index b * n2 + d.
struct RefTensor {
  std::size_t offset, rows, cols, n1, n2;
  std::size_t ys() const { return rows / n1; }
  std::size_t xs() const { return cols / n2; }
  std::size_t coef(std::size_t y, std::size_t x, std::size_t b, std::size_t d) const {
    return ((y * xs() + x) * n1 + b) * n2 + d;
  }
};

// encode: einsum("...ijkl, jb, ld -> ...ikbd", x, f_n1, f_n2).
Vec encode(const Vec& m, const RefTensor& t) {
  Vec out(t.rows * t.cols, 0.0);
  for (std::size_t y = 0; y < t.ys(); ++y)
    for (std::size_t x = 0; x < t.xs(); ++x)
      for (std::size_t b = 0; b < t.n1; ++b)
        for (std::size_t d = 0; d < t.n2; ++d) {
          double acc = 0.0;
          for (std::size_t j = 0; j < t.n1; ++j)
            for (std::size_t l = 0; l < t.n2; ++l)
              acc += m[t.offset + (y * t.n1 + j) * t.cols + x * t.n2 + l] * f(t.n1, j, b) * f(t.n2, l, d);
          out[t.coef(y, x, b, d)] = acc;
        }
  return out;
}

// decode: einsum("...ijkl, kb, ld -> ...ibjd", X, b_n1, b_n2) with b = _idct(eye) = f's transpose.
Vec decode(const Vec& c, const RefTensor& t) {
  Vec out(t.rows * t.cols, 0.0);
  for (std::size_t y = 0; y < t.ys(); ++y)
    for (std::size_t x = 0; x < t.xs(); ++x)
      for (std::size_t j = 0; j < t.n1; ++j)
        for (std::size_t l = 0; l < t.n2; ++l) {
          double acc = 0.0;
          for (std::size_t b = 0; b < t.n1; ++b)
            for (std::size_t d = 0; d < t.n2; ++d) acc += c[t.coef(y, x, b, d)] * f(t.n1, j, b) * f(t.n2, l, d);
          out[(y * t.n1 + j) * t.cols + x * t.n2 + l] = acc;
        }
  return out;
}

// CompressDCT.compress: the indices of the topk largest |c| of every block (topk clamped to it).
std::vector<std::vector<std::size_t>> compress(const Vec& c, const RefTensor& t, std::size_t topk) {
  const std::size_t block = t.n1 * t.n2, k = std::min(topk, block);
  std::vector<std::vector<std::size_t>> idx;
  for (std::size_t first = 0; first < c.size(); first += block) {
    std::vector<std::size_t> order(block);
    std::iota(order.begin(), order.end(), first);
    std::sort(order.begin(), order.end(), [&](std::size_t i, std::size_t j) {
      return std::fabs(c[i]) > std::fabs(c[j]) || (std::fabs(c[i]) == std::fabs(c[j]) && i < j);
    });
    idx.emplace_back(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k));
  }
  return idx;
}

struct RefStep {
  std::vector<Vec> delta;  // per rank, after the step
  Vec q;                   // the decoded average (its sign is every rank's gradient)
  std::size_t partial = 0;  // coefficients sent by some ranks but not all
};

// One DeMo.step of `world` ranks over `tensors`: grads[r] laid out like the parameters.
RefStep reference_step(std::vector<Vec> delta, const std::vector<Vec>& grads, const std::vector<RefTensor>& tensors,
                       double lr, double decay, std::size_t topk) {
  const std::size_t world = delta.size(), n = delta[0].size();
  RefStep out;
  out.q.assign(n, 0.0);
  for (const RefTensor& t : tensors) {
    Vec sum(t.rows * t.cols, 0.0), count(t.rows * t.cols, 0.0);
    for (std::size_t r = 0; r < world; ++r) {
      for (std::size_t i = 0; i < t.rows * t.cols; ++i)
        delta[r][t.offset + i] = decay * delta[r][t.offset + i] + lr * grads[r][t.offset + i];
      const Vec c = encode(delta[r], t);
      Vec sent(c.size(), 0.0);
      for (const auto& block : compress(c, t, topk))
        for (const std::size_t i : block) {
          sent[i] = c[i];
          sum[i] += c[i];  // scatter_reduce "mean", include_self = False, over every rank's indices
          count[i] += 1.0;
        }
      const Vec transmit = decode(sent, t);
      for (std::size_t i = 0; i < transmit.size(); ++i) delta[r][t.offset + i] -= transmit[i];
    }
    for (std::size_t i = 0; i < sum.size(); ++i) {
      out.partial += count[i] > 0 && count[i] < static_cast<double>(world);
      sum[i] = count[i] > 0 ? sum[i] / count[i] : 0.0;
    }
    const Vec q = decode(sum, t);
    for (std::size_t i = 0; i < q.size(); ++i) out.q[t.offset + i] = q[i];
  }
  out.delta = std::move(delta);
  return out;
}

// A 2-D weight of 12 x 10 (blocks of 4 x 2 at chunk 4), a vector of 9 (chunks of 3), one of 7
// (prime above the chunk: chunks of 1, sent whole), a 3-D weight 4 x 3 x 2 (the matrix 4 x 6:
// blocks 4 x 3), a vector of 2 (shorter than the chunk: one chunk of 2).
ParamStore reference_store() {
  ParamStore s;
  s.add("w", {12, 10}, ParamGroup::decay);
  s.add("b", {9}, ParamGroup::no_decay);
  s.add("c", {7}, ParamGroup::no_decay);
  s.add("v", {4, 3, 2}, ParamGroup::decay);
  s.add("e", {2}, ParamGroup::no_decay);
  s.finalize();
  return s;
}

TEST(Demo, BlockSidesAreTheReferencesSplit) {
  for (const std::size_t target : {4u, 8u, 64u})
    for (std::size_t n = 1; n <= 300; ++n) EXPECT_EQ(dct_block_side(n, target), smaller_split(n, target)) << n << " " << target;
  EXPECT_EQ(dct_block_side(4000, 64), 50u);  // the BERT recipes' vocabulary: blocks of 50 rows
  EXPECT_EQ(dct_block_side(784, 64), 56u);
  EXPECT_EQ(dct_block_side(67, 64), 1u);
}

TEST(Demo, MatchesTheReferenceImplementation) {
  const int world = 3, steps = 4;
  const std::size_t chunk = 4, topk = 3, n = 120 + 9 + 7 + 24 + 2;
  const double beta = 0.9;
  const auto lr = [](std::int64_t t) { return 0.05 * static_cast<double>(t + 1); };  // a warm-up: lr changes
  const ParamStore layout = reference_store();
  std::vector<RefTensor> tensors;
  for (const ParamView& v : layout.views()) {
    const std::size_t rows = v.shape.size() >= 2 ? static_cast<std::size_t>(v.shape[0]) : 1, cols = v.numel / rows;
    tensors.push_back({v.offset, rows, cols, v.shape.size() >= 2 ? smaller_split(rows, chunk) : 1,
                       smaller_split(cols, chunk)});
  }
  EXPECT_EQ(tensors[0].n1, 4u);
  EXPECT_EQ(tensors[0].n2, 2u);
  EXPECT_EQ(tensors[2].n2, 1u);
  std::vector<RefStep> want;
  std::vector<Vec> delta(world, Vec(n, 0.0));
  for (int t = 0; t < steps; ++t) {
    std::vector<Vec> g(world, Vec(n));
    for (int r = 0; r < world; ++r)
      for (std::size_t i = 0; i < n; ++i) g[r][i] = grad(r, t, i);
    want.push_back(reference_step(delta, g, tensors, lr(t), beta, topk));
    delta = want.back().delta;
  }
  std::vector<std::vector<std::vector<float>>> got(world), got_m(world);
  run_threads(world, [&](Communicator& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    ParamStore s = reference_store();
    Demo demo(DemoOptions{.chunk = chunk, .topk = topk, .beta = beta, .lr = lr});  // the defaults otherwise
    demo.start(s, comm);
    for (int t = 0; t < steps; ++t) {
      for (std::size_t i = 0; i < n; ++i) s.grads()[i] = static_cast<float>(grad(comm.rank(), t, i));
      demo.after_backward(t);
      got[r].emplace_back(s.grads().begin(), s.grads().end());
      const std::span<float> mom = demo.state().at(0).data;
      got_m[r].emplace_back(mom.begin(), mom.end());
    }
  });
  std::size_t signs = 0;
  for (int t = 0; t < steps; ++t)
    for (int r = 0; r < world; ++r)
      for (std::size_t i = 0; i < n; ++i) {
        const double q = want[t].q[i];
        const float sign = q > 1e-6 ? 1.0f : q < -1e-6 ? -1.0f : got[r][t][i];  // near 0: either
        signs += sign != 0.0f;
        EXPECT_EQ(got[r][t][i], sign) << "step " << t << ", rank " << r << ", element " << i << " (Q = " << q << ")";
        EXPECT_NEAR(got_m[r][t][i], want[t].delta[r][i], 1e-5) << "step " << t << ", rank " << r << ", element " << i;
      }
  EXPECT_GT(signs, steps * world * n * 9 / 10);  // the comparison is not vacuous
  // Coefficients some ranks sent and others did not, where the average over senders and the one
  // over all ranks differ: the comparison can tell them apart.
  std::size_t partial = 0;
  for (const RefStep& w : want) partial += w.partial;
  EXPECT_GT(partial, 0u);
}

TEST(Demo, ABlockSentWholeComesBackWhole) {
  // topk = the whole block: every coefficient is sent, the momentum returns to 0 and the gradient
  // is the sign of the average of lr * g over the ranks (every rank sent every coefficient).
  const int world = 2;
  std::vector<std::vector<float>> got(world), mom(world);
  run_threads(world, [&](Communicator& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    ParamStore s = reference_store();
    Demo demo(DemoOptions{.chunk = 4, .topk = 16, .beta = 0.5, .lr = [](std::int64_t) { return 0.3; }});
    demo.start(s, comm);
    for (std::size_t i = 0; i < s.size(); ++i) s.grads()[i] = static_cast<float>(grad(comm.rank(), 0, i));
    demo.after_backward(0);
    got[r].assign(s.grads().begin(), s.grads().end());
    const std::span<float> m = demo.state().at(0).data;
    mom[r].assign(m.begin(), m.end());
  });
  for (std::size_t i = 0; i < got[0].size(); ++i) {
    const double avg = 0.5 * (grad(0, 0, i) + grad(1, 0, i));
    if (std::fabs(avg) > 1e-5) {
      EXPECT_EQ(got[0][i], avg > 0 ? 1.0f : -1.0f) << i;
    }
    EXPECT_EQ(got[1][i], got[0][i]) << i;
    EXPECT_NEAR(mom[0][i], 0.0f, 1e-6) << i;
    EXPECT_NEAR(mom[1][i], 0.0f, 1e-6) << i;
  }
}

TEST(Demo, TwoDimensionalDctIsOrthonormal) {
  ChunkDct d(4);
  const DctBlocks b = d.prepare_2d(12, 10);  // blocks of 4 x 2
  EXPECT_EQ(b.h, 4u);
  EXPECT_EQ(b.w, 2u);
  std::vector<float> x(120), c(120), y(120), tmp(b.block());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * static_cast<float>(i));
  d.forward_2d(x, b, c, tmp);
  d.inverse_2d(c, b, y, tmp);
  double nx = 0, nc = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(y[i], x[i], 1e-6);
    nx += x[i] * x[i];
    nc += c[i] * c[i];
  }
  EXPECT_NEAR(nc, nx, 1e-4);
  // The first block's DC coefficient: the block's sum / sqrt(h w) (rows 0..3, columns 0..1).
  double dc = 0;
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 2; ++j) dc += x[i * 10 + j];
  EXPECT_NEAR(c[0], dc / std::sqrt(8.0), 1e-6);
}

}  // namespace
}  // namespace laconic
