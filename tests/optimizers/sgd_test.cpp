#include <gtest/gtest.h>

#include <cmath>

#include "core/check.h"
#include "optimizers/sgd.h"

namespace laconic {
namespace {

// Two tensors: a "weight" in the decay group and a "bias" in the no_decay group.
ParamStore two_tensor_store() {
  ParamStore s;
  s.add("w", {2}, ParamGroup::decay);
  s.add("b", {1}, ParamGroup::no_decay);
  s.finalize();
  return s;
}

TEST(Sgd, PlainStepIsWMinusLrG) {
  ParamStore s = two_tensor_store();
  s.params()[0] = 1.0f, s.params()[1] = -2.0f, s.params()[2] = 0.5f;
  s.grads()[0] = 0.5f, s.grads()[1] = 0.25f, s.grads()[2] = -1.0f;
  Sgd opt({});
  opt.step(s, 0.1);
  EXPECT_FLOAT_EQ(s.params()[0], 1.0f - 0.05f);
  EXPECT_FLOAT_EQ(s.params()[1], -2.0f - 0.025f);
  EXPECT_FLOAT_EQ(s.params()[2], 0.5f + 0.1f);
  EXPECT_TRUE(opt.state().empty());
}

// Momentum with a constant gradient g: b_t = g (1 + mu + ... + mu^(t-1)), so after T steps
// w = w0 - lr g sum_{t=1..T} (1 - mu^t) / (1 - mu).
TEST(Sgd, MomentumMatchesClosedForm) {
  ParamStore s = two_tensor_store();
  const double mu = 0.9, lr = 0.01, g = 0.5;
  Sgd opt({mu, false, 0.0});
  for (int t = 0; t < 10; ++t) {
    for (float& x : s.grads()) x = static_cast<float>(g);
    opt.step(s, lr);
  }
  double expect = 0;
  for (int t = 1; t <= 10; ++t) expect -= lr * g * (1 - std::pow(mu, t)) / (1 - mu);
  for (float w : s.params()) EXPECT_NEAR(w, expect, 1e-6);
  ASSERT_EQ(opt.state().size(), 1u);
  EXPECT_NEAR(opt.state()[0].data[0], g * (1 - std::pow(mu, 10)) / (1 - mu), 1e-5);
}

// Nesterov: d = g + mu * b. With constant g, first step b = g, d = g (1 + mu).
TEST(Sgd, NesterovFirstTwoSteps) {
  ParamStore s = two_tensor_store();
  Sgd opt({0.5, true, 0.0});
  for (float& x : s.grads()) x = 1.0f;
  opt.step(s, 1.0);
  EXPECT_FLOAT_EQ(s.params()[0], -1.5f);  // b = 1, d = 1 + 0.5
  opt.step(s, 1.0);
  EXPECT_FLOAT_EQ(s.params()[0], -1.5f - 1.75f);  // b = 0.5 * 1 + 1 = 1.5, d = 1 + 0.5 * 1.5
}

TEST(Sgd, WeightDecayOnlyOnDecayGroup) {
  ParamStore s = two_tensor_store();
  for (float& x : s.params()) x = 2.0f;
  Sgd opt({0.0, false, 0.1});
  opt.step(s, 0.5);  // grads are zero: only decay moves w
  EXPECT_FLOAT_EQ(s.params()[0], 2.0f - 0.5f * 0.1f * 2.0f);
  EXPECT_FLOAT_EQ(s.params()[1], 2.0f - 0.5f * 0.1f * 2.0f);
  EXPECT_FLOAT_EQ(s.params()[2], 2.0f);  // bias untouched
}

TEST(Sgd, RejectsNesterovWithoutMomentum) { EXPECT_THROW(Sgd({0.0, true, 0.0}), Error); }

}  // namespace
}  // namespace laconic
