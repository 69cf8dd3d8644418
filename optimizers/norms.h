// Norms over float tensors, accumulated in double (a 25M-element sum of squares in float keeps
// only about 4 of its 7 digits). Shared by gradient clipping and the trust ratios of LARS and LAMB.
#pragma once

#include <cmath>
#include <cstddef>
#include <span>

namespace laconic {

// sum_i x_i^2 in double. Eight partial sums keep the adds independent (they pipeline and
// vectorise) while the order stays fixed, so the result is deterministic.
inline double sum_squares(std::span<const float> x) {
  constexpr std::size_t kLanes = 8;
  double acc[kLanes] = {};
  const std::size_t n = x.size(), body = n - n % kLanes;
  for (std::size_t i = 0; i < body; i += kLanes)
    for (std::size_t k = 0; k < kLanes; ++k) {
      const double v = x[i + k];
      acc[k] += v * v;
    }
  for (std::size_t i = body; i < n; ++i) {
    const double v = x[i];
    acc[i - body] += v * v;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// ||x||_2 in double.
inline double l2_norm(std::span<const float> x) { return std::sqrt(sum_squares(x)); }

}  // namespace laconic
