// Properties every Model must have, checked the same way for each model.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <vector>

#include "workloads/models/model.h"

namespace laconic::testing {

inline std::vector<float> snapshot(std::span<const float> s) { return {s.begin(), s.end()}; }

// backward() accumulates: a second call without zero_grad() doubles every gradient.
inline void expect_backward_accumulates(Model& model, const Batch& batch) {
  model.params().zero_grad();
  model.forward(batch, {true, 1, 0, 0});
  model.backward();
  const auto once = snapshot(model.params().grads());
  model.backward();
  const auto twice = snapshot(model.params().grads());
  double norm = 0.0;
  for (std::size_t i = 0; i < once.size(); ++i) {
    EXPECT_NEAR(twice[i], 2.0f * once[i], 1e-6f * (1.0f + std::abs(once[i]))) << i;
    norm += std::abs(once[i]);
  }
  EXPECT_GT(norm, 0.0);
}

// Two models of the same options: init is a pure function of the seed, and forward (with
// dropout) a pure function of parameters, batch and (seed, rank, step). Leaves both at seed 42.
inline void expect_deterministic_init_and_forward(Model& a, Model& b, const Batch& batch) {
  a.init(42);
  b.init(42);
  EXPECT_EQ(snapshot(a.params().params()), snapshot(b.params().params()));
  b.init(43);
  EXPECT_NE(snapshot(a.params().params()), snapshot(b.params().params()));
  b.init(42);
  const ForwardOptions step{true, 5, 0, 3};
  const float la = a.forward(batch, step).loss;
  EXPECT_EQ(la, b.forward(batch, step).loss);
  EXPECT_NE(la, b.forward(batch, {true, 5, 0, 4}).loss);  // another step, other dropout masks
  const float eval = a.forward(batch, {false, 5, 0, 3}).loss;
  EXPECT_EQ(eval, b.forward(batch, {false, 5, 0, 99}).loss);  // no dropout in evaluation
  EXPECT_EQ(eval, b.forward(batch, {false, 1, 2, 99}).loss);  // whatever the seed and rank
}

}  // namespace laconic::testing
