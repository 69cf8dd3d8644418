// Muon (optimizers/muon.h): the fp32 Newton-Schulz iteration against the same iteration in double,
// its singular values against the iteration's polynomial, and whole steps against a double
// reference written here from the formulas of muon.h (Jordan et al.'s muon_update, Moonlight's
// scale, torch's AdamW for the rest).
#include "optimizers/muon.h"

#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace laconic {
namespace {

using MatrixD = Eigen::MatrixXd;

constexpr double kA = 3.4445, kB = -4.7750, kC = 2.0315;

// The reference's zeropower_via_newtonschulz5 in double: X = U / (||U||_F + 1e-7), on U^T when
// rows > cols, then `steps` times A = X X^T, X = a X + (b A + c A A) X.
MatrixD newton_schulz_double(const MatrixD& u, int steps) {
  const bool tall = u.rows() > u.cols();
  MatrixD x = tall ? MatrixD(u.transpose()) : u;
  x /= x.norm() + 1e-7;
  for (int k = 0; k < steps; ++k) {
    const MatrixD a = x * x.transpose();
    x = kA * x + (kB * a + kC * a * a) * x;
  }
  return tall ? MatrixD(x.transpose()) : x;
}

// The odd quintic the iteration applies to every singular value: p(s) = a s + b s^3 + c s^5.
double quintic(double s) { return kA * s + kB * s * s * s + kC * s * s * s * s * s; }
double quintic_n(double s, int steps) {
  for (int k = 0; k < steps; ++k) s = quintic(s);
  return s;
}

Eigen::VectorXd singular_values(const MatrixD& m) { return Eigen::JacobiSVD<MatrixD>(m).singularValues(); }

// A random [rows, cols] matrix with singular values `sigma` (min(rows, cols) of them): Q1 diag Q2^T
// with Q1, Q2 orthonormal columns from the QR of Gaussian matrices.
MatrixD with_singular_values(int rows, int cols, const std::vector<double>& sigma, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n(0.0, 1.0);
  auto orthonormal = [&](int r, int c) {
    MatrixD g(r, c);
    for (int i = 0; i < r; ++i)
      for (int j = 0; j < c; ++j) g(i, j) = n(rng);
    return MatrixD(Eigen::HouseholderQR<MatrixD>(g).householderQ() * MatrixD::Identity(r, c));
  };
  const int k = std::min(rows, cols);
  Eigen::VectorXd d(k);
  for (int i = 0; i < k; ++i) d(i) = sigma[static_cast<std::size_t>(i)];
  return orthonormal(rows, k) * d.asDiagonal() * orthonormal(cols, k).transpose();
}

MatrixD gaussian(int rows, int cols, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n(0.0, 1.0);
  MatrixD m(rows, cols);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) m(i, j) = n(rng);
  return m;
}

// newton_schulz (fp32, ops::cpu::gemm) on u [s, l], s <= l, as a double matrix.
MatrixD newton_schulz_fp32(const MatrixD& u, int steps) {
  const int s = static_cast<int>(u.rows()), l = static_cast<int>(u.cols());
  std::vector<float> x(static_cast<std::size_t>(s) * l), next(x.size()), a(static_cast<std::size_t>(s) * s), b(a.size());
  for (int i = 0; i < s; ++i)
    for (int j = 0; j < l; ++j) x[static_cast<std::size_t>(i) * l + j] = static_cast<float>(u(i, j));
  const float* o = newton_schulz(x.data(), next.data(), a.data(), b.data(), s, l, steps);
  MatrixD out(s, l);
  for (int i = 0; i < s; ++i)
    for (int j = 0; j < l; ++j) out(i, j) = o[static_cast<std::size_t>(i) * l + j];
  return out;
}

// The fp32 iteration matches the double one, and every output singular value is the quintic
// applied 5 times to the input's (normalised) singular value: X X^T shares X's singular vectors.
void expect_matches_double(const MatrixD& u, double tol) {
  const MatrixD got = newton_schulz_fp32(u, 5), want = newton_schulz_double(u, 5);
  EXPECT_LT((got - want).cwiseAbs().maxCoeff(), tol);
  const Eigen::VectorXd in = singular_values(u), out = singular_values(got);
  const double norm = u.norm() + 1e-7;
  std::vector<double> expect;  // p^5 is not monotone: sorted like the SVD's output
  for (Eigen::Index i = 0; i < in.size(); ++i) expect.push_back(quintic_n(in(i) / norm, 5));
  std::sort(expect.begin(), expect.end(), std::greater<>());
  for (Eigen::Index i = 0; i < out.size(); ++i) EXPECT_NEAR(out(i), expect[static_cast<std::size_t>(i)], tol) << i;
}

TEST(NewtonSchulz, Fp32MatchesTheDoubleIteration) {
  expect_matches_double(gaussian(16, 16, 1), 2e-5);
  expect_matches_double(gaussian(8, 24, 2), 2e-5);
  expect_matches_double(gaussian(1, 7, 3), 2e-5);  // a row vector: O = u / ||u|| * p^5(1)
}

TEST(NewtonSchulz, IllConditionedInput) {
  // Condition number 1e3: singular values log-spaced over [1e-3, 1]. The small ones grow by at most
  // a = 3.4445 per step and stay below the band; the iteration still matches the double one.
  std::vector<double> sigma;
  for (int i = 0; i < 12; ++i) sigma.push_back(std::pow(10.0, -3.0 * i / 11.0));
  expect_matches_double(with_singular_values(12, 20, sigma, 4), 2e-5);
}

TEST(NewtonSchulz, WellConditionedOutputIsInTheBand) {
  // Inputs with singular values in [1, 3] (normalised: each >= 1 / (3 sqrt(k))): the band is the
  // range of p^5 over those normalised values, computed from the polynomial on a fine grid.
  constexpr int k = 10;
  std::vector<double> sigma;
  for (int i = 0; i < k; ++i) sigma.push_back(1.0 + 2.0 * i / (k - 1));
  double sum_sq = 0.0;
  for (double s : sigma) sum_sq += s * s;
  const double lo_in = 1.0 / std::sqrt(sum_sq), hi_in = 3.0 / std::sqrt(sum_sq);
  double band_lo = 1e9, band_hi = -1e9;
  for (int i = 0; i <= 10000; ++i) {
    const double y = quintic_n(lo_in + (hi_in - lo_in) * i / 10000.0, 5);
    band_lo = std::min(band_lo, y), band_hi = std::max(band_hi, y);
  }
  EXPECT_GE(band_lo, 0.6);  // the iteration's known band, roughly [0.68, 1.13]
  EXPECT_LE(band_hi, 1.2);
  for (const auto& [rows, cols] : {std::pair{k, k}, std::pair{k, 25}}) {
    const Eigen::VectorXd out = singular_values(newton_schulz_fp32(with_singular_values(rows, cols, sigma, 5), 5));
    for (Eigen::Index i = 0; i < out.size(); ++i) {
      EXPECT_GE(out(i), band_lo - 1e-5) << rows << "x" << cols;
      EXPECT_LE(out(i), band_hi + 1e-5) << rows << "x" << cols;
    }
  }
}

// ---- whole steps ----

struct RefTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  ParamGroup group;
  ParamKind kind;
  std::vector<double> w, m, v;
};

// muon.h's formulas in double: hidden matrices B = mu B + (1 - mu) G, U = (1 - mu) G + mu B,
// (U = B without Nesterov), W = W (1 - lr wd) - lr 0.2 sqrt(max(r, c)) NS5(U); the rest torch's AdamW.
void reference_step(std::vector<RefTensor>& ts, const std::vector<std::vector<double>>& grads, double lr, int t,
                    const MuonOptions& mo, const AdamWOptions& ao) {
  for (std::size_t k = 0; k < ts.size(); ++k) {
    RefTensor& x = ts[k];
    const auto& g = grads[k];
    const double decay = x.group == ParamGroup::decay ? 1.0 - lr * ao.weight_decay : 1.0;
    if (x.kind == ParamKind::hidden_matrix) {
      const int r = static_cast<int>(x.shape[0]), c = static_cast<int>(x.shape[1]);
      MatrixD u(r, c);
      for (int i = 0; i < r * c; ++i) {
        x.m[i] = mo.momentum * x.m[i] + (1.0 - mo.momentum) * g[i];
        u(i / c, i % c) = mo.nesterov ? (1.0 - mo.momentum) * g[i] + mo.momentum * x.m[i] : x.m[i];
      }
      const MatrixD o = newton_schulz_double(u, mo.ns_steps);
      const double scale = 0.2 * std::sqrt(static_cast<double>(std::max(r, c)));
      for (int i = 0; i < r * c; ++i) x.w[i] = x.w[i] * decay - lr * scale * o(i / c, i % c);
      continue;
    }
    for (std::size_t i = 0; i < x.w.size(); ++i) {
      x.w[i] *= decay;
      x.m[i] = ao.beta1 * x.m[i] + (1.0 - ao.beta1) * g[i];
      x.v[i] = ao.beta2 * x.v[i] + (1.0 - ao.beta2) * g[i] * g[i];
      const double denom = std::sqrt(x.v[i]) / std::sqrt(1.0 - std::pow(ao.beta2, t)) + ao.eps;
      x.w[i] -= lr / (1.0 - std::pow(ao.beta1, t)) * x.m[i] / denom;
    }
  }
}

// Two steps (the second exercises the momentum buffer) of Muon with `mo` against reference_step.
void expect_two_steps_match(const MuonOptions& mo) {
  // A tall and a wide hidden matrix (both transposition cases), a 2-D tensor that is not one (an
  // embedding table or output head: AdamW), and a bias (AdamW, no decay).
  std::vector<RefTensor> ts = {{"tall", {6, 4}, ParamGroup::decay, ParamKind::hidden_matrix, {}, {}, {}},
                               {"wide", {3, 5}, ParamGroup::decay, ParamKind::hidden_matrix, {}, {}, {}},
                               {"embed", {4, 3}, ParamGroup::decay, ParamKind::other, {}, {}, {}},
                               {"bias", {4}, ParamGroup::no_decay, ParamKind::other, {}, {}, {}}};
  ParamStore store;
  for (std::size_t k = 0; k < ts.size(); ++k) store.add(ts[k].name, ts[k].shape, ts[k].group, ts[k].kind);
  store.finalize();
  std::mt19937_64 rng(7);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (std::size_t k = 0; k < ts.size(); ++k) {
    const ParamView& view = store.view(k);
    for (std::size_t i = 0; i < view.numel; ++i) {
      store.params()[view.offset + i] = 0.5f * n(rng);
      ts[k].w.push_back(store.params()[view.offset + i]);
    }
    ts[k].m.assign(view.numel, 0.0), ts[k].v.assign(view.numel, 0.0);
  }
  const AdamWOptions ao{0.9, 0.95, 1e-8, 0.1};
  Muon muon(mo, ao);
  const double lrs[] = {0.02, 0.01};
  for (int t = 1; t <= 2; ++t) {
    std::vector<std::vector<double>> grads(ts.size());
    for (std::size_t k = 0; k < ts.size(); ++k) {
      const ParamView& view = store.view(k);
      for (std::size_t i = 0; i < view.numel; ++i) {
        store.grads()[view.offset + i] = n(rng);
        grads[k].push_back(store.grads()[view.offset + i]);
      }
    }
    muon.step(store, lrs[t - 1]);
    reference_step(ts, grads, lrs[t - 1], t, mo, ao);
    for (std::size_t k = 0; k < ts.size(); ++k)
      for (std::size_t i = 0; i < ts[k].w.size(); ++i)
        EXPECT_NEAR(store.params()[store.view(k).offset + i], ts[k].w[i], 2e-6) << "step " << t << " " << ts[k].name;
  }
}

TEST(Muon, TwoStepsMatchTheFormulas) {
  expect_two_steps_match({0.95, true, 5});
  expect_two_steps_match({0.9, false, 5});  // U = B: differs from Nesterov's U from the second step on
  expect_two_steps_match({0.95, true, 3});
}

}  // namespace
}  // namespace laconic
