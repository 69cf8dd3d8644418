#include "core/stats.h"

#include <cmath>

namespace laconic {

Stat stat_of(std::span<const double> values) {
  Stat s;
  double sum = 0;
  for (const double v : values)
    if (!std::isnan(v)) {
      sum += v;
      ++s.n;
    }
  if (s.n == 0) return s;
  s.mean = sum / s.n;
  double sq = 0;
  for (const double v : values)
    if (!std::isnan(v)) sq += (v - s.mean) * (v - s.mean);
  s.std = s.n > 1 ? std::sqrt(sq / (s.n - 1)) : 0.0;
  return s;
}

}  // namespace laconic
