// Finite-difference gradient checks, shared by the layer tests (tests/nn) and the model tests
// (tests/models).
//
// expect_gradients_match(): for a scalar objective L (evaluated in double, forward only) and
// tensors whose analytic dL/dv were computed beforehand, compares each checked element with the
// central difference (L(v + eps) - L(v - eps)) / (2 eps), perturbing the float in place.
// Pass iff |numeric - analytic| <= atol + rtol * max(|numeric|, |analytic|).
//
// check_layer_gradients(): the same for a layer y = f(x; params) with L = sum_i w_i y_i for random
// fixed w (so dL/dy = w exercises every output), checking dL/dx and every parameter in the store.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/params.h"
#include "core/rng.h"

namespace laconic::testing {

struct GradCheckOptions {
  float eps = 1e-2f;
  double rtol = 1e-2;
  double atol = 1e-4;
  std::size_t max_checks = 64;  // per tensor: larger tensors are sampled at random positions
  std::uint64_t seed = 1;
};

struct GradTensor {
  std::string name;
  float* values;                // perturbed in place (restored after each probe)
  std::vector<float> analytic;  // dL/dvalues, same length
};

inline std::vector<float> random_normal(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  const std::uint64_t key = rng::key({seed, rng::kTest, 0x6772616463ULL});
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * rng::normal(key, i);
  return v;
}

inline void expect_gradients_match(const std::function<double()>& objective,
                                   std::vector<GradTensor>& tensors, const GradCheckOptions& o) {
  const std::uint64_t key = rng::key({o.seed, rng::kTest, 0x7069636bULL});
  std::uint64_t counter = 0;
  for (auto& t : tensors) {
    const std::size_t n = t.analytic.size();
    const std::size_t checks = std::min(n, o.max_checks);
    int failures = 0;
    double worst = 0.0;
    for (std::size_t c = 0; c < checks; ++c) {
      const std::size_t i = checks == n ? c : rng::below(key, counter++, n);
      const float saved = t.values[i];
      t.values[i] = saved + o.eps;
      const double up = objective();
      t.values[i] = saved - o.eps;
      const double down = objective();
      t.values[i] = saved;
      // Divide by the step actually taken: saved +- eps is rounded to float.
      const double h = static_cast<double>(saved + o.eps) - static_cast<double>(saved - o.eps);
      const double numeric = (up - down) / h;
      const double analytic = t.analytic[i];
      const double err = std::abs(numeric - analytic);
      const double tol = o.atol + o.rtol * std::max(std::abs(numeric), std::abs(analytic));
      worst = std::max(worst, err / tol);
      if (err > tol && ++failures <= 5)
        ADD_FAILURE() << t.name << "[" << i << "]: analytic " << analytic << " vs numeric " << numeric
                      << " (|diff| " << err << " > tol " << tol << ")";
    }
    EXPECT_EQ(failures, 0) << t.name << ": " << failures << " of " << checks << " elements differ";
    EXPECT_GT(checks, 0u) << t.name << " has nothing to check";
    // Visible in test logs: how close to the tolerance the worst element came.
    ::testing::Test::RecordProperty(t.name + "_worst_err_over_tol", std::to_string(worst));
  }
}

// Layer adapter: forward(x) returns y (out_n floats) for the current x and parameters;
// backward(dy) runs the layer's backward and returns dx (or nullptr when there is none).
// `x` may be empty (e.g. embedding ids are not differentiable). Every view of `store` is checked.
inline void check_layer_gradients(ParamStore& store, std::vector<float>& x, std::size_t out_n,
                                  const std::function<const float*(const float*)>& forward,
                                  const std::function<const float*(const float*)>& backward,
                                  const GradCheckOptions& o = {}) {
  const std::vector<float> w = random_normal(out_n, o.seed + 1000);
  auto objective = [&] {
    const float* y = forward(x.data());
    double s = 0.0;
    for (std::size_t i = 0; i < out_n; ++i) s += static_cast<double>(w[i]) * y[i];
    return s;
  };
  store.zero_grad();
  forward(x.data());
  const float* dx = backward(w.data());
  std::vector<GradTensor> tensors;
  if (!x.empty()) {
    EXPECT_NE(dx, nullptr) << "layer returned no input gradient";
    if (dx != nullptr) tensors.push_back({"input", x.data(), std::vector<float>(dx, dx + x.size())});
  }
  for (std::size_t v = 0; v < store.views().size(); ++v) {
    const float* g = store.grad(v);
    tensors.push_back({store.view(v).name, store.param(v), std::vector<float>(g, g + store.view(v).numel)});
  }
  expect_gradients_match(objective, tensors, o);
}

// Sets every parameter to a random value (so e.g. LayerNorm's gamma != 1 and beta != 0 matter).
inline void randomize_params(ParamStore& store, std::uint64_t seed, float scale = 0.5f) {
  const auto r = random_normal(store.size(), seed, scale);
  std::copy(r.begin(), r.end(), store.params().begin());
}

}  // namespace laconic::testing
