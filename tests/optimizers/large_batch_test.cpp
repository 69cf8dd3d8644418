// LARS and LAMB against their formulas written out independently here in double precision
// (docs/references.md "Large batch"), over a few steps, on tensors that exercise every branch:
//   "w"   decay, ordinary values            -> trust ratio adaptation and weight decay
//   "w0"  decay, w = 0 at the start         -> ||w|| = 0: trust 1 on the first step
//   "g0"  decay, gradient always 0          -> LARS: ||g|| = 0, trust 1; LAMB: u = wd * w
//   "z"   decay, w = 0 and g = 0 always     -> LAMB: ||u|| = 0 and ||w|| = 0, trust 1, w stays 0
//   "b"   no_decay (bias)                   -> no decay, trust 1
//   "big" decay, 1031 elements              -> spans several of LAMB's 512-element blocks
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "optimizers/lamb.h"
#include "optimizers/lars.h"

namespace laconic {
namespace {

constexpr int kSteps = 4;

ParamStore make_store() {
  ParamStore s;
  s.add("w", {3, 5}, ParamGroup::decay);
  s.add("w0", {4}, ParamGroup::decay);
  s.add("g0", {6}, ParamGroup::decay);
  s.add("z", {3}, ParamGroup::decay);
  s.add("b", {5}, ParamGroup::no_decay);
  s.add("big", {1031}, ParamGroup::decay);
  s.finalize();
  for (std::size_t i = 0; i < s.view(0).numel; ++i) s.param(0)[i] = 0.8f * std::cos(0.9f * i) + 0.05f;
  for (std::size_t i = 0; i < s.view(2).numel; ++i) s.param(2)[i] = 0.3f - 0.1f * i;
  for (std::size_t i = 0; i < s.view(4).numel; ++i) s.param(4)[i] = 0.2f * i - 0.3f;
  for (std::size_t i = 0; i < s.view(5).numel; ++i) s.param(5)[i] = 0.1f * std::cos(0.01f * i * i);
  return s;
}

// Gradients of step t: sin-based for w, w0, b and big; zero for g0 and z.
void set_grads(ParamStore& s, int t) {
  s.zero_grad();
  for (std::size_t v : {0u, 1u, 4u, 5u})
    for (std::size_t i = 0; i < s.view(v).numel; ++i)
      s.grad(v)[i] = std::sin(0.7f * i + 1.1f * t + v) * (0.5f + 0.1f * t);
}

double lr_at(int t) { return 0.5 / (1 + t); }

double norm(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v * v;
  return std::sqrt(s);
}

// Per-tensor double copies of the store's values.
struct Tensors {
  std::vector<std::vector<double>> x;
  explicit Tensors(const ParamStore& s, bool grads) {
    for (std::size_t v = 0; v < s.views().size(); ++v) {
      const float* p = grads ? s.grad(v) : s.param(v);
      x.emplace_back(p, p + s.view(v).numel);
    }
  }
};

void expect_close(const ParamStore& s, const Tensors& ref, double tol, const char* what, int step) {
  for (std::size_t v = 0; v < s.views().size(); ++v)
    for (std::size_t i = 0; i < s.view(v).numel; ++i)
      ASSERT_NEAR(s.param(v)[i], ref.x[v][i], tol * std::max(1.0, std::abs(ref.x[v][i])))
          << what << " step " << step << " tensor " << s.view(v).name << " i " << i;
}

// ---- LARS -------------------------------------------------------------------------------------

TEST(Lars, MatchesDoublePrecisionFormula) {
  const LarsOptions o{0.9, 0.02, 0.01, 1e-9};  // eta larger than 1e-3 so the adaptation shows
  ParamStore s = make_store();
  Lars opt(o);
  Tensors w(s, false), m = w;
  for (auto& x : m.x) std::fill(x.begin(), x.end(), 0.0);
  for (int t = 1; t <= kSteps; ++t) {
    set_grads(s, t);
    const Tensors g(s, true);
    for (std::size_t v = 0; v < w.x.size(); ++v) {
      const bool decay = s.view(v).group == ParamGroup::decay;
      const double wn = norm(w.x[v]), gn = norm(g.x[v]), wd = decay ? o.weight_decay : 0.0;
      const double trust = decay && wn > 0 && gn > 0 ? o.eta * wn / (gn + wd * wn + o.eps) : 1.0;
      if (s.view(v).name == "g0" || (s.view(v).name == "w0" && t == 1)) {
        EXPECT_EQ(trust, 1.0);
      }
      for (std::size_t i = 0; i < w.x[v].size(); ++i) {
        m.x[v][i] = o.momentum * m.x[v][i] + lr_at(t) * trust * (g.x[v][i] + wd * w.x[v][i]);
        w.x[v][i] -= m.x[v][i];
      }
    }
    opt.step(s, lr_at(t));
    expect_close(s, w, 2e-6, "lars", t);
  }
  // The momentum buffer in state() is the formula's m.
  const auto st = opt.state();
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].name, "momentum");
  EXPECT_NEAR(st[0].data[s.view(4).offset + 2], m.x[4][2], 1e-6);
}

TEST(Lars, FirstStepClosedForms) {
  ParamStore s = make_store();
  set_grads(s, 1);
  const Tensors w(s, false), g(s, true);
  Lars opt({0.9, 0.001, 1e-4, 0.0});
  // w: the step is eta * ||w|| / (||g|| + wd ||w||) times plain SGD's.
  const double trust = 0.001 * norm(w.x[0]) / (norm(g.x[0]) + 1e-4 * norm(w.x[0]));
  EXPECT_NEAR(opt.trust_ratio({s.param(0), 15}, {s.grad(0), 15}), trust, 1e-12);
  EXPECT_EQ(opt.trust_ratio({s.param(1), 4}, {s.grad(1), 4}), 1.0);  // ||w|| = 0
  EXPECT_EQ(opt.trust_ratio({s.param(2), 6}, {s.grad(2), 6}), 1.0);  // ||g|| = 0
  opt.step(s, 2.0);
  // w0 = 0: trust 1 and no decay contribution, so w = -lr * g.
  for (std::size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(s.param(1)[i], static_cast<float>(-2.0 * g.x[1][i]));
  // g0: ||g|| = 0, trust 1: only decay moves it, w = w - lr * wd * w.
  for (std::size_t i = 0; i < 6; ++i)
    EXPECT_FLOAT_EQ(s.param(2)[i], static_cast<float>(w.x[2][i] * (1 - 2.0 * 1e-4)));
  // Bias: excluded, w = w - lr * g.
  for (std::size_t i = 0; i < 5; ++i)
    EXPECT_FLOAT_EQ(s.param(4)[i], static_cast<float>(w.x[4][i] - 2.0 * g.x[4][i]));
  for (std::size_t i = 0; i < 15; ++i)
    EXPECT_NEAR(s.param(0)[i], w.x[0][i] - 2.0 * trust * (g.x[0][i] + 1e-4 * w.x[0][i]), 1e-7);
}

TEST(Lars, RejectsBadOptions) {
  EXPECT_THROW(Lars({1.0, 0.001, 1e-4, 0.0}), Error);
  EXPECT_THROW(Lars({0.9, 0.0, 1e-4, 0.0}), Error);
  EXPECT_THROW(Lars({0.9, 0.001, -1.0, 0.0}), Error);
}

// ---- LAMB -------------------------------------------------------------------------------------

// Runs LAMB on make_store() for kSteps against the formula; returns the unclamped trust ratios
// the reference saw on the decay tensors with both norms non-zero.
std::vector<double> check_lamb(const LambOptions& o) {
  ParamStore s = make_store();
  Lamb opt(o);
  Tensors w(s, false), m = w, v = w;
  for (auto* b : {&m, &v})
    for (auto& x : b->x) std::fill(x.begin(), x.end(), 0.0);
  std::vector<double> raw_trusts;
  for (int t = 1; t <= kSteps; ++t) {
    set_grads(s, t);
    const Tensors g(s, true);
    const double bc1 = o.bias_correction ? 1 - std::pow(o.beta1, t) : 1.0;
    const double bc2 = o.bias_correction ? 1 - std::pow(o.beta2, t) : 1.0;
    for (std::size_t k = 0; k < w.x.size(); ++k) {
      const bool decay = s.view(k).group == ParamGroup::decay;
      const double wd = decay ? o.weight_decay : 0.0;
      std::vector<double> u(w.x[k].size());
      for (std::size_t i = 0; i < u.size(); ++i) {
        m.x[k][i] = o.beta1 * m.x[k][i] + (1 - o.beta1) * g.x[k][i];
        v.x[k][i] = o.beta2 * v.x[k][i] + (1 - o.beta2) * g.x[k][i] * g.x[k][i];
        u[i] = (m.x[k][i] / bc1) / (std::sqrt(v.x[k][i] / bc2) + o.eps) + wd * w.x[k][i];
      }
      // Adapted: decay tensors when weight_decay > 0 (apex's FusedLAMB without use_nvlamb), or
      // whatever the decay with trust_without_decay (the paper).
      const bool adapt = decay && (o.weight_decay != 0.0 || o.trust_without_decay);
      double trust = 1.0;
      const double wn = norm(w.x[k]), un = norm(u);
      if (adapt && wn > 0 && un > 0) {
        trust = wn / un;
        raw_trusts.push_back(trust);
        if (o.clamp_min > 0) trust = std::max(trust, o.clamp_min);
        if (o.clamp_max > 0) trust = std::min(trust, o.clamp_max);
      }
      for (std::size_t i = 0; i < u.size(); ++i) w.x[k][i] -= lr_at(t) * trust * u[i];
    }
    opt.step(s, lr_at(t));
    expect_close(s, w, 2e-6, opt.describe().c_str(), t);
  }
  // z (w = 0, g = 0): both norms zero, nothing moves it.
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(s.param(3)[i], 0.0f);
  return raw_trusts;
}

TEST(Lamb, MatchesDoublePrecisionFormula) { check_lamb({}); }

TEST(Lamb, WithoutBiasCorrectionAndOtherHyperparameters) {
  check_lamb({0.8, 0.95, 1e-3, 0.1, false, 0.0, 0.0, false});
}

TEST(Lamb, ClampBoundsTheTrustRatio) {
  const LambOptions o{0.9, 0.999, 1e-6, 0.01, true, 0.4, 1.5, false};
  const auto raw = check_lamb(o);
  // The clamp was active both ways in this run (otherwise this test would prove nothing).
  EXPECT_TRUE(std::any_of(raw.begin(), raw.end(), [&](double r) { return r < o.clamp_min; }));
  EXPECT_TRUE(std::any_of(raw.begin(), raw.end(), [&](double r) { return r > o.clamp_max; }));
}

TEST(Lamb, FirstStepOfExcludedBiasIsSignLikeAdam) {
  // Step 1 with bias correction: m_hat = g, v_hat = g^2, so a no_decay tensor moves by
  // lr * g / (|g| + eps): almost lr * sign(g), whatever the gradient's scale.
  ParamStore s = make_store();
  set_grads(s, 1);
  for (std::size_t i = 0; i < 5; ++i) s.grad(4)[i] *= 1000.0f;
  const Tensors w(s, false), g(s, true);
  Lamb opt({});
  opt.step(s, 0.01);
  for (std::size_t i = 0; i < 5; ++i)
    EXPECT_NEAR(s.param(4)[i], w.x[4][i] - 0.01 * g.x[4][i] / (std::abs(g.x[4][i]) + 1e-6), 1e-8);
}

TEST(Lamb, AtZeroWeightDecayTheStepIsAdams) {
  // apex's rule: no tensor is adapted, so every tensor takes Adam's step
  //   w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
  // over several steps (the formula), and at step 1 each element moves by lr * g / (|g| + eps):
  // the decay tensor "w" too, which the trust ratio ||w|| / ||u|| would otherwise rescale.
  LambOptions o;
  o.weight_decay = 0.0;
  EXPECT_TRUE(check_lamb(o).empty());
  ParamStore s = make_store();
  set_grads(s, 1);
  const Tensors w(s, false), g(s, true);
  Lamb opt(o);
  opt.step(s, 0.01);
  for (std::size_t i = 0; i < 15; ++i)
    EXPECT_NEAR(s.param(0)[i], w.x[0][i] - 0.01 * g.x[0][i] / (std::abs(g.x[0][i]) + 1e-6), 1e-7) << i;
}

TEST(Lamb, TrustWithoutDecayAdaptsAtZeroWeightDecay) {
  // The paper's rule: decay tensors keep their trust ratio at weight_decay = 0 (no_decay ones do not).
  LambOptions o;
  o.weight_decay = 0.0;
  o.trust_without_decay = true;
  const auto raw = check_lamb(o);
  EXPECT_FALSE(raw.empty());
  EXPECT_TRUE(std::any_of(raw.begin(), raw.end(), [](double r) { return std::abs(r - 1.0) > 0.1; }));  // it scales
}

TEST(Lamb, RejectsBadOptions) {
  EXPECT_THROW(Lamb({0.9, 1.0, 1e-6, 0.01, true, 0.0, 0.0, false}), Error);
  EXPECT_THROW(Lamb({0.9, 0.999, 0.0, 0.01, true, 0.0, 0.0, false}), Error);
  EXPECT_THROW(Lamb({0.9, 0.999, 1e-6, 0.01, true, 2.0, 1.0, false}), Error);  // min > max
}

}  // namespace
}  // namespace laconic
